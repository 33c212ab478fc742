"""Concurrent checks: the wall time of a proof with 3 independent checks against the
proof of the longest one alone.

    python -m benchmarks.concurrent_checks [--seconds 10] [--cpus 1] [--work sleep|spin]

Builds a small git repository whose configuration has three independent checks of about
`--seconds` each (`sleep`, or `spin`: a CPU-bound loop of that much CPU time), each
asking for `--cpus`, and measures in one run (only the ratio means something on a noisy
machine):

1. `proofgate prove` of the longest check alone;
2. `proofgate prove` of all three, which run concurrently while their `cpus` fit in
   `os.cpu_count()`.

Prints the ratio 2/1. Goal: <= 1.25 on 4 cores with `--cpus 1`. On 2 cores two checks of
one core fit at a time, so the third waits: about 2x (with `--cpus 0.5`, or any `cpus`
summing to <= 2, all three overlap again).

Needs Docker and the local image proofgate/cleanroom:latest (make image).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import pygit2

from benchmarks.prove_overhead import proofgate

IMAGE = "proofgate/cleanroom:latest"
SIG = pygit2.Signature("bench", "bench@example.invalid", 1_700_000_000, 0)


def _command(work: str, seconds: float) -> str:
    if work == "sleep":
        return f'"sleep {seconds:g}"'
    spin = f"import time\\nt = time.process_time() + {seconds:g}\\n"
    spin += "while time.process_time() < t: pass"
    return f'["python3", "-c", "{spin}"]'


def make_repo(root: Path, checks: int, seconds: float, cpus: float, work: str) -> Path:
    lines = [
        f"  - {{name: c{i}, test: [{_command(work, seconds)}], cpus: {cpus:g}}}\n"
        for i in range(checks)
    ]
    config = (
        f"version: 1\nimage: {IMAGE}\ndefaults: {{timeout: 600, memory: 256m}}\n"
        f"checks:\n{''.join(lines)}"
    ).encode()
    repo = pygit2.init_repository(str(root), initial_head="main")
    index = pygit2.Index()
    blob = repo.create_blob(config)
    index.add(pygit2.IndexEntry(".github/proofgate.yml", blob, pygit2.enums.FileMode.BLOB))
    base = repo.create_commit("refs/heads/main", SIG, SIG, "base", index.write_tree(repo), [])
    change = repo.create_blob(b"a change\n")
    index.add(pygit2.IndexEntry("CHANGES.md", change, pygit2.enums.FileMode.BLOB))
    repo.create_commit("refs/heads/pr", SIG, SIG, "pr", index.write_tree(repo), [base])
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--cpus", type=float, default=1.0)
    parser.add_argument("--work", choices=("sleep", "spin"), default="sleep")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-concurrent-"))
    try:
        one = proofgate(make_repo(root / "one", 1, args.seconds, args.cpus, args.work))
        three = proofgate(make_repo(root / "three", 3, args.seconds, args.cpus, args.work))
        print(
            f"{os.cpu_count()} cores, 3 checks of {args.seconds:g} s ({args.work}, cpus "
            f"{args.cpus:g}): longest alone {one:.2f} s, all three {three:.2f} s, "
            f"ratio {three / one:.3f} (goal <= 1.25 on 4 cores)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
