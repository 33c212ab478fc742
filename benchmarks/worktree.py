"""Benchmark: `--worktree` capture vs `git add -A && git write-tree` on the same checkout.

Generates a checkout of `--files` committed files, edits `--changed` of them and adds
`--untracked` new files, then times in the same run:

- `GitRepository.capture_worktree()` (lstat, read, lstat again, hash every file; the
  repository untouched),
- the baseline: `git add -A && git write-tree` with a throwaway copy of the index.

Prints medians and the ratio.

    python -m benchmarks.worktree [--files 5000] [--changed 100] [--untracked 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gate.git.repo import GitRepository


def generate(path: Path, files: int, changed: int, untracked: int) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)  # noqa: S607
    for i in range(files):
        d = path / f"pkg{i % 50}"
        d.mkdir(exist_ok=True)
        (d / f"m{i}.py").write_bytes(b"value = %d\n" % i * 30)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    for args in (["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)  # noqa: S603, S607
    for i in range(0, files, max(1, files // changed))[:changed]:
        with (path / f"pkg{i % 50}" / f"m{i}.py").open("ab") as f:
            f.write(b"# edited\n")
    for i in range(untracked):
        (path / f"new{i}.txt").write_bytes(b"new %d\n" % i)


def _baseline(path: Path, tmp: Path) -> str:
    index = tmp / "index"
    shutil.copyfile(path / ".git" / "index", index)
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "add", "-A"], cwd=path, env=env, check=True)  # noqa: S607
    out = subprocess.run(  # noqa: S603
        ["git", "write-tree"],  # noqa: S607
        cwd=path,
        env=env,
        check=True,
        capture_output=True,
    )
    return out.stdout.decode().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--changed", type=int, default=100)
    parser.add_argument("--untracked", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-worktree-") as tmp:
        path = Path(tmp) / "repo"
        generate(path, args.files, args.changed, args.untracked)
        ours: list[float] = []
        base: list[float] = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            with GitRepository(path) as repo:
                tree = repo.capture_worktree().tree
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            expected = _baseline(path, Path(tmp))
            base.append(time.perf_counter() - start)
            assert tree == expected, (tree, expected)  # noqa: S101 - a wrong tree is no result
        a, b = statistics.median(ours), statistics.median(base)
        print(f"files {args.files}, changed {args.changed}, untracked {args.untracked}")
        print(f"capture_worktree   median {a:.3f} s")
        print(f"git add -A + write-tree median {b:.3f} s")
        print(f"ratio {a / b:.2f}x")


if __name__ == "__main__":
    main()
