"""Benchmark: stream a large tree as tar (GitRepository.archive) vs `git archive`.

Generates a repository with >= 50,000 files (packed, like a real clone), then times, in
the same run, `archive(tree)` consumed in full against `git archive --format=tar <tree>`
written to /dev/null. Prints the medians and the ratio (goal: <= 1.0x). A small tree
(`--small`, 2,000 files) is timed the same way: the cost one check pays for a typical
repository.

    python -m benchmarks.materialize [--files 50000] [--small 2000] [--repeats 5]
                                     [--repo PATH --tree REV] [--extract]

`--extract` times the whole materialization instead (needs Docker and the local image
proofgate/cleanroom:latest): the tree streamed and extracted by the daemon into a fresh
tmpfs volume through a started container (what a check does; the container's start is
not timed), against `git archive | tar -x` into a fresh directory of a tmpfs (/dev/shm).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

from gate.git.repo import GitRepository
from gate.model import TreeId

SIG = pygit2.Signature("bench", "bench@example.invalid", 1_700_000_000, 0)


def generate(path: Path, files: int, seed: int = 1) -> str:
    """A repository of `files` files in nested directories; returns its tree id."""
    rng = random.Random(seed)  # noqa: S311 (test data, not secrets)
    repo = pygit2.init_repository(str(path), initial_head="main")
    index = pygit2.Index()
    words = [b"alpha", b"beta", b"gamma", b"delta", b"import os", b"return x", b"\n"]
    for i in range(files):
        depth = f"pkg{i % 40}/mod{i % 400}/sub{i % 1300}"
        size = int(rng.lognormvariate(7, 1.2))  # median ~1 KiB, long tail
        body = b" ".join(rng.choice(words) for _ in range(max(1, size // 6)))
        mode = FileMode.BLOB_EXECUTABLE if i % 50 == 0 else FileMode.BLOB
        index.add(pygit2.IndexEntry(f"{depth}/file_{i}.py", repo.create_blob(body), mode))
    tree = index.write_tree(repo)
    repo.create_commit("refs/heads/main", SIG, SIG, "bench", tree, [])
    subprocess.run(["git", "repack", "-adq"], cwd=path, check=True)
    subprocess.run(["git", "prune-packed"], cwd=path, check=True)
    return str(tree)


def time_ours(git: GitRepository, tree: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    total = sum(len(chunk) for chunk in git.archive(TreeId(tree)))
    return time.perf_counter() - t0, total


def time_cold(repo_path: Path, tree: str) -> float:
    """A fresh GitRepository: opening it and the safety walk of every entry included."""
    t0 = time.perf_counter()
    with GitRepository(repo_path) as git:
        sum(len(chunk) for chunk in git.archive(TreeId(tree)))
    return time.perf_counter() - t0


def time_git(repo_path: Path, tree: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        ["git", "archive", "--format=tar", tree],
        cwd=repo_path,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - t0


def measure(repo_path: Path, tree: str, repeats: int) -> None:
    """Time archive() (first call and per check) against git archive, interleaved."""
    cold: list[float] = []
    warm: list[float] = []
    theirs: list[float] = []
    size = 0
    with GitRepository(repo_path) as git:
        time_ours(git, tree)  # warm the page cache for both
        time_git(repo_path, tree)
        for _ in range(repeats):
            cold.append(time_cold(repo_path, tree))
            t, size = time_ours(git, tree)
            warm.append(t)
            theirs.append(time_git(repo_path, tree))
    mc, mw, mg = (statistics.median(x) for x in (cold, warm, theirs))

    def runs(xs: list[float]) -> str:
        return ", ".join(f"{x * 1000:.1f}" for x in xs)

    print(f"tree {tree}: {size / 1e6:.1f} MB of tar, {os.cpu_count()} CPUs")
    print(f"archive() first call: median {mc * 1000:7.1f} ms  ({runs(cold)})")
    print(f"archive() per check:  median {mw * 1000:7.1f} ms  ({runs(warm)})")
    print(f"git archive:          median {mg * 1000:7.1f} ms  ({runs(theirs)})")
    print(f"ratio first call / git archive = {mc / mg:.2f}x")
    print(f"ratio per check  / git archive = {mw / mg:.2f}x (goal <= 1.0x)")


def time_extract_ours(git: GitRepository, tree: str) -> float:
    """archive() extracted by the daemon into a fresh tmpfs volume, as copy-in does."""
    import docker  # only for --extract

    api = docker.APIClient()
    labels = {"proofgate.benchmark": "materialize"}
    volume = api.create_volume(
        driver="local",
        driver_opts={"type": "tmpfs", "device": "tmpfs", "o": "size=2g,mode=0777"},
        labels=labels,
    )["Name"]
    mounts = [docker.types.Mount("/workspace", volume, type="volume", no_copy=True)]
    cid = api.create_container(
        "proofgate/cleanroom:latest",
        entrypoint=["sleep", "infinity"],
        labels=labels,
        host_config=api.create_host_config(network_mode="none", mounts=mounts),
    )["Id"]
    try:
        api.start(cid)
        t0 = time.perf_counter()
        api.put_archive(cid, "/workspace", git.archive(TreeId(tree), umask=0))
        return time.perf_counter() - t0
    finally:
        api.remove_container(cid, force=True)
        api.remove_volume(volume, force=True)


def time_extract_git(repo_path: Path, tree: str) -> float:
    """`git archive | tar -x` into a fresh directory of a tmpfs."""
    target = Path(tempfile.mkdtemp(prefix="bench-extract-", dir="/dev/shm"))
    try:
        t0 = time.perf_counter()
        git = subprocess.Popen(
            ["git", "archive", "--format=tar", tree], cwd=repo_path, stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-x", "-C", str(target)], stdin=git.stdout, check=True)
        if git.stdout is not None:
            git.stdout.close()
        if git.wait() != 0:
            raise SystemExit("git archive failed")
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(target, ignore_errors=True)


def measure_extract(repo_path: Path, tree: str, repeats: int) -> None:
    ours: list[float] = []
    theirs: list[float] = []
    with GitRepository(repo_path) as git:
        time_ours(git, tree)  # the safety walk and the page cache, for both
        time_extract_git(repo_path, tree)
        for _ in range(repeats):
            ours.append(time_extract_ours(git, tree))
            theirs.append(time_extract_git(repo_path, tree))
    mo, mg = statistics.median(ours), statistics.median(theirs)
    print(f"tree {tree}: {os.cpu_count()} CPUs")
    print(f"archive() -> daemon -> tmpfs volume: median {mo * 1000:7.1f} ms")
    print(f"git archive | tar -x -> tmpfs:      median {mg * 1000:7.1f} ms")
    print(f"ratio = {mo / mg:.2f}x (goal <= 1.0x)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--small", type=int, default=2_000, help="files in the small tree (0: skip)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--repo", type=Path, help="use an existing repository instead")
    ap.add_argument("--tree", default="HEAD", help="revision whose tree to stream (--repo)")
    ap.add_argument("--extract", action="store_true", help="time extraction into a tmpfs too")
    args = ap.parse_args()
    run = measure_extract if args.extract else measure
    with tempfile.TemporaryDirectory(prefix="proofgate-bench-") as tmp:
        if args.repo:
            repo_path = args.repo
            tree = str(
                pygit2.Repository(str(repo_path)).revparse_single(args.tree).peel(pygit2.Tree).id
            )
        else:
            repo_path = Path(tmp) / "repo"
            t0 = time.perf_counter()
            tree = generate(repo_path, args.files)
            print(
                f"generated {args.files} files in {time.perf_counter() - t0:.1f}s", file=sys.stderr
            )
        run(repo_path, tree, args.repeats)
        if args.small:
            small_path = Path(tmp) / "small"
            small = generate(small_path, args.small, seed=2)
            print(f"-- small tree, {args.small} files")
            run(small_path, small, max(args.repeats, 11))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
