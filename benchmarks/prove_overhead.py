"""End-to-end overhead of `proofgate prove` against running the same checks natively.

    python -m benchmarks.prove_overhead [--files 2000] [--suite-seconds 20] [--runs 5]

Builds a git repository holding a Python project of `--files` files whose pytest suite
burns about `--suite-seconds` of CPU, with a pull-request branch, and measures in one run
(the machine is noisy: only the ratios mean something):

1. the suite: (a) native — `git worktree add` of the head into a fresh directory and
   `python3 -m pytest` there on the host; (b) `proofgate prove` (capture, policy, a fresh
   clean-room container, the same pytest). Prints the ratio b/a. Goal: <= 1.10 for a
   suite of >= 20 s.
2. per-check overhead on the same 2k-file tree: the same two paths with a trivial test
   command (`true`), median of `--runs`; prints b - a. Goal: median <= 0.4 s.

Needs Docker and the local image proofgate/cleanroom:latest (make image).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pygit2

from benchmarks.overhead import project_files
from gate.git.repo import GitRepository
from gate.proof.prove import ProveRequest, prove
from gate.sandbox.docker import DockerSandbox

IMAGE = "proofgate/cleanroom:latest"
SIG = pygit2.Signature("bench", "bench@example.invalid", 1_700_000_000, 0)


def _config(test: str) -> bytes:
    return (
        f"version: 1\nimage: {IMAGE}\ndefaults: {{timeout: 600, memory: 1g}}\n"
        f"checks:\n  - name: unit\n    test: [{test}]\n"
        "    env: {PYTHONDONTWRITEBYTECODE: '1'}\n"
    ).encode()


def make_repo(root: Path, files: int, suite_seconds: float, test: str) -> Path:
    # the same project as benchmarks/overhead.py, plus the configuration in its base
    entries = project_files(files - 1, suite_seconds)
    entries[".github/proofgate.yml"] = _config(test)
    repo = pygit2.init_repository(str(root), initial_head="main")
    index = pygit2.Index()
    for path, data in entries.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    base = repo.create_commit("refs/heads/main", SIG, SIG, "base", index.write_tree(repo), [])
    index.add(
        pygit2.IndexEntry("CHANGES.md", repo.create_blob(b"a change\n"), pygit2.enums.FileMode.BLOB)
    )
    repo.create_commit("refs/heads/pr", SIG, SIG, "pr", index.write_tree(repo), [base])
    return root


def native(repo: Path, argv: list[str]) -> float:
    """`git worktree add` the head into a fresh directory, run the command, clean up."""
    work = Path(tempfile.mkdtemp(prefix="bench-native-"))
    t0 = time.perf_counter()
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(work / "wt"), "pr"],
        check=True,
    )
    subprocess.run(argv, cwd=work / "wt", check=True, capture_output=True)
    elapsed = time.perf_counter() - t0
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "remove", "--force", str(work / "wt")], check=True
    )
    shutil.rmtree(work, ignore_errors=True)
    return elapsed


def proofgate(repo: Path) -> float:
    t0 = time.perf_counter()
    with GitRepository(repo) as evidence:
        run = prove(
            ProveRequest(base="main", head="pr"),
            evidence=evidence,
            sandbox=lambda proof: DockerSandbox(proof=proof),
        )
    elapsed = time.perf_counter() - t0
    if run.verdict.value != "PROVEN":
        raise SystemExit(f"benchmark run was {run.verdict.value}: {run.reasons}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--suite-seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-prove-"))
    try:
        suite = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        big = make_repo(
            root / "suite", args.files, args.suite_seconds, str(suite).replace("'", '"')
        )
        a = native(big, suite)
        b = proofgate(big)
        print(
            f"suite ({args.files} files): native {a:.2f} s, proofgate prove {b:.2f} s, "
            f"ratio {b / a:.3f} (goal <= 1.10)"
        )

        small = make_repo(root / "trivial", args.files, 0.0, '"true"')
        na = [native(small, ["true"]) for _ in range(args.runs)]
        pg = [proofgate(small) for _ in range(args.runs)]
        over = statistics.median(pg) - statistics.median(na)
        print(
            f"per-check overhead ({args.files} files, `true`): native median "
            f"{statistics.median(na):.3f} s, proofgate median {statistics.median(pg):.3f} s, "
            f"overhead {over:.3f} s (goal <= 0.4 s)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
