"""Wall time of a proof with `differential: trusted` against one without (issue 14).

    python -m benchmarks.differential [--files 200] [--suite-seconds 4] [--runs 3] [--cpus 1]
                                      [--touch-tests]

Builds a git repository holding the project of benchmarks/overhead.py (a pytest suite
burning about `--suite-seconds` of CPU) with a pull-request branch that changes a source
file, and proves it through `gate.proof.prove.prove` with an operator `--config` file, three
ways, median of `--runs` each, in one run (the machine is noisy: only ratios mean much):

a. `differential: off` (the head run only);
b. `differential: trusted`, base run uncached (an empty $XDG_CACHE_HOME per proof);
c. `differential: trusted`, base run cached (one warm-up proof first).

Prints b/a and c/a. Goals on a 2-core machine: c/a <= 1.3, b/a <= 2.2. With `--cpus 1`
the trusted (and base) run proceed beside the head run; with `--cpus 2` on two cores they
run after it.

Needs Docker and the local image proofgate/cleanroom:latest (make image).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import pygit2

from benchmarks.overhead import project_files
from gate.git.repo import GitRepository
from gate.model import Verdict
from gate.proof.prove import ProveRequest, prove
from gate.sandbox.docker import DockerSandbox

IMAGE = "proofgate/cleanroom:latest"
SIG = pygit2.Signature("bench", "bench@example.invalid", 1_700_000_000, 0)


def _config(mode: str, cpus: int) -> bytes:
    return (
        f"version: 1\nimage: {IMAGE}\ndefaults: {{timeout: 600, memory: 1g, cpus: {cpus}}}\n"
        "checks:\n  - name: unit\n"
        '    test: [["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", '
        '"--junitxml=reports/junit.xml", "tests"]]\n'
        f"    junit: reports/junit.xml\n    differential: '{mode}'\n"
        "    env: {PYTHONDONTWRITEBYTECODE: '1'}\n"
    ).encode()


def make_repo(root: Path, files: int, suite_seconds: float, touch_tests: bool) -> Path:
    entries = project_files(files, suite_seconds)
    repo = pygit2.init_repository(str(root), initial_head="main")

    def tree(items: dict[str, bytes]) -> pygit2.Oid:
        index = pygit2.Index()
        for path, data in items.items():
            index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
        return index.write_tree(repo)

    base = repo.create_commit("refs/heads/main", SIG, SIG, "base", tree(entries), [])
    init = "src/bench/__init__.py"
    changed = dict(entries, **{init: entries[init] + b"\n\ndef more():\n    return 1\n"})
    if touch_tests:  # a new test file: the trusted tree differs, so the trusted run runs
        changed["tests/test_more.py"] = (
            b"from bench import more\n\ndef test_more():\n    assert more()\n"
        )
    repo.create_commit("refs/heads/pr", SIG, SIG, "pr", tree(changed), [base])
    return root


def one_proof(repo: Path, config: Path, cache: Path) -> float:
    os.environ["XDG_CACHE_HOME"] = str(cache)
    t0 = time.perf_counter()
    with GitRepository(repo) as evidence:
        run = prove(
            ProveRequest(base="main", head="pr", config_file=config),
            evidence=evidence,
            sandbox=lambda proof: DockerSandbox(proof=proof),
        )
    elapsed = time.perf_counter() - t0
    if run.verdict is not Verdict.PROVEN:
        raise SystemExit(f"expected PROVEN, got {run.verdict.value}: {run.reasons}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--suite-seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cpus", type=int, default=1)
    ap.add_argument("--touch-tests", action="store_true", help="the change adds a test file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-differential-") as tmp:
        root = Path(tmp)
        repo = make_repo(root / "repo", args.files, args.suite_seconds, args.touch_tests)
        configs = {}
        for mode in ("off", "trusted"):
            configs[mode] = root / f"{mode}.yml"
            configs[mode].write_bytes(_config(mode, args.cpus))
        warm = root / "warm-cache"
        one_proof(repo, configs["trusted"], warm)  # warms the image and the base-run cache
        off, uncached, cached = [], [], []
        for i in range(args.runs):
            off.append(one_proof(repo, configs["off"], root / f"empty-{i}-a"))
            uncached.append(one_proof(repo, configs["trusted"], root / f"empty-{i}-b"))
            cached.append(one_proof(repo, configs["trusted"], warm))
    a, b, c = (statistics.median(x) for x in (off, uncached, cached))
    print(f"cores {os.cpu_count()}, cpus per check {args.cpus}, runs {args.runs}")  # noqa: T201
    print(f"a. differential off:               {a:6.2f} s")  # noqa: T201
    print(f"b. trusted, base run uncached:     {b:6.2f} s  ({b / a:.2f}x, goal <= 2.2)")  # noqa: T201
    print(f"c. trusted, base run cached:       {c:6.2f} s  ({c / a:.2f}x, goal <= 1.3)")  # noqa: T201


if __name__ == "__main__":
    main()
