"""How often the judge by construction holds honest real commits (issue 42).

    python -m benchmarks.runtime_holds --clone DIR --wheels DIR [--commits 60]
        [--name NAME] [--build CMD] [--test CMD] [--record FILE]
    python -m benchmarks.runtime_holds --table FILE...   # the docs table from records

Each of the last `--commits` first-parent commits of a real project (a local clone, only
read) is proven against its parent, as a pull request would be, with the configuration
docs/performance.md gives: the clean-room image with the project's test dependencies
from a wheelhouse prepared beforehand (`build_image` of benchmarks/realworld.py: nothing
is fetched at run time), the project installed editable in the build phase, its pytest
suite with a JUnit report (so the differential runs: head, base and, where the change
touches a test or an input, trusted). Per commit it prints the verdict and the runtime
rules that held it: `environment-changed` (what setup and build left differs from the
base's), `test-input-changed` (a base test failed with the base's copy of a file the
change edits), `plugin-loaded` (the trusted run loaded a plugin the base run did not),
`differential-incomplete`; and whether the change's own tests passed. The summary counts
each rule over the commits (goal: <= 2% each) and lists the commits, so each can be read.
Policy holds are counted apart: they are the policy's, not the runtime's.
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

from benchmarks.realworld import DEFAULT_BUILD, build_image
from gate.git.repo import GitRepository
from gate.proof.prove import ProveRequest, prove
from gate.sandbox.docker import DockerSandbox

RUNTIME = ("environment-changed", "test-input-changed", "plugin-loaded", "differential-incomplete")
HEAD_FAILED = {"check-failed", "junit-failures", "junit-missing", "check-timed-out"}
DEFAULT_TEST = "python3 -m pytest -q -p no:cacheprovider --junitxml=reports/junit.xml tests"


def _config(image: str, build: str, test: str) -> bytes:
    return (
        f"version: 1\nimage: {json.dumps(image)}\n"
        "defaults: {timeout: 900, memory: 2g, cpus: 2, pids: 512}\n"
        "checks:\n  - name: tests\n"
        f"    build: [{json.dumps(build)}]\n"
        f"    test: [{json.dumps(test)}]\n"
        "    junit: reports/junit.xml\n"
    ).encode()


def _commits(repo: Path, n: int) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", f"-{n + 1}", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return list(reversed(out))[1:]


def replay(clone: Path, config: Path, commits: list[str]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for commit in commits:
        t0 = time.perf_counter()
        with GitRepository(clone) as evidence:
            run = prove(
                ProveRequest(base=f"{commit}~1", head=commit, config_file=config),
                evidence=evidence,
                sandbox=lambda proof: DockerSandbox(proof=proof),
            )
        codes = sorted({r.code.value for r in run.reasons})
        checks = run.predicate.get("checks")
        tests = checks[0].get("tests", {}) if isinstance(checks, list) and checks else {}
        row: dict[str, object] = {
            "commit": commit[:12],
            "verdict": run.verdict.value,
            "codes": codes,
            "head_passes": not HEAD_FAILED & set(codes),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        for key in ("environment_changed", "test_inputs_changed", "plugins_loaded"):
            if isinstance(tests, dict) and tests.get(key):
                row[key] = tests[key][:10]
        incomplete = [r.message for r in run.reasons if r.code.value == "differential-incomplete"]
        if incomplete:
            row["incomplete"] = incomplete[:2]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def summarize(name: str, rows: list[dict[str, object]]) -> dict[str, object]:
    n = len(rows)
    held: dict[str, list[str]] = {rule: [] for rule in RUNTIME}
    for row in rows:
        codes = row["codes"]
        assert isinstance(codes, list)
        for rule in RUNTIME:
            if rule in codes:
                held[rule].append(str(row["commit"]))
    verdicts = Counter(str(r["verdict"]) for r in rows)
    failed_own = sum(1 for r in rows if not r["head_passes"])
    return {
        "name": name,
        "commits": n,
        "verdicts": dict(verdicts),
        "head_fails": failed_own,
        "held": held,
        "percent": {rule: round(100 * len(c) / n, 1) if n else 0.0 for rule, c in held.items()},
    }


def table(records: list[dict[str, object]]) -> str:
    head = "| project | commits | " + " | ".join(f"`{r}`" for r in RUNTIME) + " | verdicts |"
    lines = [head, "|" + " --- |" * (len(RUNTIME) + 3)]
    for rec in records:
        percent = rec["percent"]
        held = rec["held"]
        assert isinstance(percent, dict)
        assert isinstance(held, dict)
        cells = [f"{percent[r]}% ({len(held[r])})" for r in RUNTIME]
        verdicts = rec["verdicts"]
        assert isinstance(verdicts, dict)
        shown = ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
        lines.append(f"| {rec['name']} | {rec['commits']} | " + " | ".join(cells) + f" | {shown} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clone", type=Path)
    ap.add_argument("--wheels", type=Path)
    ap.add_argument("--commits", type=int, default=60)
    ap.add_argument("--name", default="")
    ap.add_argument("--build", default=DEFAULT_BUILD)
    ap.add_argument("--test", default=DEFAULT_TEST)
    ap.add_argument("--record", type=Path)
    ap.add_argument("--table", nargs="+", type=Path)
    args = ap.parse_args(argv)
    if args.table:
        print(table([json.loads(p.read_text()) for p in args.table]))
        return 0
    if args.clone is None or args.wheels is None:
        ap.error("--clone and --wheels are required (or --table)")
    image = build_image(args.wheels, "proofgate/cleanroom:latest")
    with tempfile.TemporaryDirectory(prefix="proofgate-runtime-holds-") as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        config = Path(tmp) / "proofgate.yml"
        config.write_bytes(_config(image, args.build, args.test))
        rows = replay(args.clone, config, _commits(args.clone, args.commits))
    summary = summarize(args.name or args.clone.name, rows)
    summary["rows"] = rows
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if args.record is not None:
        args.record.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
