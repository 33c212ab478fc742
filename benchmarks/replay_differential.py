"""Replay the differential over consecutive commits of a real project (issue 14).

    python -m benchmarks.replay_differential REPO [-n 40] [--rev HEAD] [--pytest-args ...]

Each first-parent commit is proven against its parent, as a pull request would be, with
an operator configuration running the project's pytest suite in the clean-room image with
`differential: trusted`. A false failure is a commit whose own (head) run passes while
the verdict is not PROVEN for a reason other than a policy HOLD; commits held
`expectation-changed` / `tests-lost` are listed with their tests so each can be read.
The base-run cache makes each commit's base run the previous commit's head run.

REPO is only read (the proof works in a private object store).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from gate.git.repo import GitRepository
from gate.proof.prove import ProveRequest, prove
from gate.sandbox.docker import DockerSandbox

IMAGE = "proofgate/cleanroom:latest"
# the image has no build backend: metadata for `importlib.metadata.version(<pkg>)`, outside
# /tmp (each test command gets a fresh one; /var/tmp is committed with the build)
BUILD = (
    "mkdir -p /var/tmp/meta/{pkg}-0.dist-info && "
    "printf 'Metadata-Version: 2.1\\nName: {pkg}\\nVersion: 99.0.0\\n' "
    "> /var/tmp/meta/{pkg}-0.dist-info/METADATA"
)


def _config(pkg: str, pytest_args: list[str]) -> bytes:
    test = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    test += ["--junitxml=reports/junit.xml", *pytest_args]
    return (
        f"version: 1\nimage: {IMAGE}\n"
        "defaults: {timeout: 600, memory: 1g, cpus: 1, pids: 256}\n"
        "checks:\n  - name: unit\n"
        f"    build: [{json.dumps(BUILD.format(pkg=pkg))}]\n"
        f"    test: [{json.dumps(test)}]\n"
        "    junit: reports/junit.xml\n    differential: trusted\n"
        "    env: {PYTHONPATH: 'src:/var/tmp/meta', PYTHONDONTWRITEBYTECODE: '1'}\n"
    ).encode()


def _commits(repo: Path, rev: str, n: int) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", f"-{n}", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return list(reversed(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", type=Path)
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--package", default="click")
    ap.add_argument("--pytest-args", nargs=argparse.REMAINDER, default=["tests"])
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="replay-differential-"))
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
    config = tmp / "proofgate.yml"
    config.write_bytes(_config(args.package, args.pytest_args))
    tally: Counter[str] = Counter()
    false_failures: list[str] = []
    held: list[str] = []
    for commit in _commits(args.repo, args.rev, args.n + 1)[1:]:
        t0 = time.perf_counter()
        with GitRepository(args.repo) as evidence:
            run = prove(
                ProveRequest(base=f"{commit}~1", head=commit, config_file=config),
                evidence=evidence,
                sandbox=lambda proof: DockerSandbox(proof=proof),
            )
        codes = sorted({r.code.value for r in run.reasons})
        head_ok = not {"check-failed", "junit-failures", "junit-missing"} & set(codes)
        checks = run.predicate["checks"]
        tests = checks[0].get("tests", {}) if isinstance(checks, list) and checks else {}
        line = {
            "commit": commit[:12],
            "verdict": run.verdict.value,
            "codes": codes,
            "head_passes": head_ok,
            "runs": tests.get("runs"),
            "run_notes": tests.get("run_notes"),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        for key in ("regressions", "expectation_changed", "lost", "survived"):
            if tests.get(key):
                line[key] = tests[key][:5]
        print(json.dumps(line), flush=True)  # noqa: T201
        tally[run.verdict.value] += 1
        other = set(codes) - {"policy-hold", "expectation-changed", "tests-lost"}
        if head_ok and run.verdict.value != "PROVEN":
            if other:
                false_failures.append(commit[:12])
            if {"expectation-changed", "tests-lost"} & set(codes):
                held.append(commit[:12])
    print(json.dumps({"verdicts": tally, "false_failures": false_failures, "held": held}))  # noqa: T201
    sys.exit(0)


if __name__ == "__main__":
    main()
