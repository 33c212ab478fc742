"""Benchmark: patch capture + inventory on a >= 5,000-file diff vs `git diff --numstat`.

Generates a repository whose head changes >= 5,000 files of the base (edits, additions,
deletions, a few renames and mode changes), then times in the same run:

- patch + inventory (`capture_patch`, what `git diff --numstat` is compared with),
- the re-application (`git apply --cached` in the private store) and the three-way merge,
- the whole `GitRepository.capture()`,

against `git diff --numstat -M base head`. Prints medians and the ratio (goal <= 2x).

    python -m benchmarks.capture [--files 6000] [--changed 5000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

from gate.git.patch import apply_patch, capture_patch
from gate.git.repo import GitRepository
from gate.git.store import PrivateStore, objects_dir

SIG = pygit2.Signature("bench", "bench@example.invalid", 1_700_000_000, 0)


def _body(rng: random.Random, i: int) -> bytes:
    return b"".join(b"line %d of file %d: %d\n" % (n, i, rng.randrange(10**6)) for n in range(60))


def generate(path: Path, files: int, changed: int, seed: int = 2) -> None:
    rng = random.Random(seed)  # noqa: S311 (test data, not secrets)
    repo = pygit2.init_repository(str(path), initial_head="main")
    index = pygit2.Index()
    bodies = {}
    for i in range(files):
        bodies[i] = _body(rng, i)
        blob = repo.create_blob(bodies[i])
        index.add(pygit2.IndexEntry(f"src/d{i % 60}/f{i}.txt", blob, FileMode.BLOB))
    base_tree = index.write_tree(repo)
    base = repo.create_commit("refs/heads/main", SIG, SIG, "base", base_tree, [])
    for i in range(changed):
        name = f"src/d{i % 60}/f{i}.txt"
        kind = i % 100
        if kind == 0:
            index.remove(name)
        elif kind == 1:
            index.remove(name)
            blob = repo.create_blob(bodies[i])
            index.add(pygit2.IndexEntry(f"moved/f{i}.txt", blob, FileMode.BLOB))
        elif kind == 2:
            index.add(
                pygit2.IndexEntry(name, repo.create_blob(bodies[i]), FileMode.BLOB_EXECUTABLE)
            )
        else:
            lines = bodies[i].splitlines(keepends=True)
            lines[rng.randrange(len(lines))] = b"changed %d\n" % rng.randrange(10**6)
            lines.append(b"appended\n")
            index.add(pygit2.IndexEntry(name, repo.create_blob(b"".join(lines)), FileMode.BLOB))
    for i in range(changed // 20):
        index.add(
            pygit2.IndexEntry(f"new/n{i}.txt", repo.create_blob(_body(rng, -i)), FileMode.BLOB)
        )
    head_tree = index.write_tree(repo)
    repo.create_commit("refs/heads/pr", SIG, SIG, "head", head_tree, [base])
    subprocess.run(["git", "repack", "-adq"], cwd=path, check=True)
    subprocess.run(["git", "prune-packed"], cwd=path, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=6000)
    ap.add_argument("--changed", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="proofgate-bench-") as tmp:
        path = Path(tmp) / "repo"
        generate(path, args.files, args.changed)
        user = pygit2.Repository(str(path))
        base = user.revparse_single("main").peel(pygit2.Commit)
        head = user.revparse_single("pr").peel(pygit2.Commit)
        patch_t: list[float] = []
        apply_t: list[float] = []
        full_t: list[float] = []
        numstat_t: list[float] = []
        files = size = 0
        for _ in range(args.repeats):
            store = PrivateStore(objects_dir(user))
            try:
                git = store.git
                t0 = time.perf_counter()
                cap = capture_patch(
                    git, git[base.tree_id].peel(pygit2.Tree), git[head.tree_id].peel(pygit2.Tree)
                )
                patch_t.append(time.perf_counter() - t0)
                files, size = len(cap.inventory), len(cap.data)
                t0 = time.perf_counter()
                apply_patch(store.path, str(base.tree_id), cap.data)
                git.merge_trees(base.tree_id, base.tree_id, head.tree_id).write_tree(git)
                apply_t.append(time.perf_counter() - t0)
            finally:
                store.dispose()
            t0 = time.perf_counter()
            with GitRepository(path) as repo:
                ev = repo.capture("main", "pr")
            full_t.append(time.perf_counter() - t0)
            assert ev.proven_tree == str(head.tree_id), ev.reasons
            t0 = time.perf_counter()
            subprocess.run(
                ["git", "diff", "--numstat", "-M", "main", "pr"],
                cwd=path,
                stdout=subprocess.DEVNULL,
                check=True,
            )
            numstat_t.append(time.perf_counter() - t0)
        mp, ma, mf, mn = (statistics.median(x) for x in (patch_t, apply_t, full_t, numstat_t))

        def runs(xs: list[float]) -> str:
            return ", ".join(f"{x * 1000:.0f}" for x in xs)

        print(f"diff: {files} files, {size / 1e6:.1f} MB of patch")
        print(f"patch + inventory:    median {mp * 1000:7.1f} ms  ({runs(patch_t)})")
        print(f"re-apply + merge:     median {ma * 1000:7.1f} ms  ({runs(apply_t)})")
        print(f"capture() in full:    median {mf * 1000:7.1f} ms  ({runs(full_t)})")
        print(f"git diff --numstat:   median {mn * 1000:7.1f} ms  ({runs(numstat_t)})")
        print(f"ratio patch+inventory / numstat = {mp / mn:.2f}x (goal <= 2x)")
        print(f"ratio capture() in full / numstat = {mf / mn:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
