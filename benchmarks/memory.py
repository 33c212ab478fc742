"""Peak RSS of the proofgate process under the three loads of issue 19.

    python -m benchmarks.memory [--flood-mb 1024] [--junit-mb 16] [--files 5000]

Each scenario runs in a fresh interpreter and prints its own peak RSS
(`ru_maxrss`); the baseline is the same interpreter that imported the same modules and
did nothing else, measured in the same run:

1. log flood: one check whose test command writes `--flood-mb` of output
   (`yes | head -c ...`) in the clean room; proofgate hashes all of it and keeps a tail;
2. JUnit report: a check that writes a report of `--junit-mb` (about 60k test cases),
   read back by the daemon and parsed by the verdict and the differential's parser;
3. a patch of `--files` changed files: capture, inventory and policy (`proofgate
   policy`: no container), on the repository `benchmarks/capture.py` generates.

Needs Docker and the clean-room image for 1 and 2 (make image).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

IMAGE = "proofgate/cleanroom:latest"

_PRELUDE = """
import resource, sys
import gate.proof.prove, gate.sandbox.docker, gate.proof.verdict
import gate.differential.junit, gate.proof.policy_run
def peak():
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, flush=True)
"""

_BASELINE = _PRELUDE + "peak()\n"

_CHECK = (
    _PRELUDE
    + """
import io, tarfile
from gate.util.journal import Journal
from gate.model import CheckSpec, Command, Limits, Phase
from gate.sandbox.docker import DockerSandbox
from gate.proof.verdict import parse_junit
from gate.differential.junit import parse_outcomes

def tree():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        data = SCRIPT.encode()
        info = tarfile.TarInfo("make.py"); info.size = len(data); info.mode = 0o644
        t.addfile(info, io.BytesIO(data))
    yield buf.getvalue()

limits = Limits(timeout=600, memory=1024 * 1024**2, cpus=1.0, pids=128)
spec = CheckSpec(name="m", phases=((Phase.TEST, (Command.shell(COMMAND),)),),
                 limits=limits, junit=JUNIT)
sandbox = DockerSandbox()
result = sandbox.run_check(spec, sandbox.resolve_image(IMAGE), tree, Journal())
cmd = result.phases[-1].commands[-1]
assert cmd.exit_code == 0, cmd.log_tail
if JUNIT:
    assert result.junit_report is not None
    parse_junit(result.junit_report); parse_outcomes(result.junit_report)
    print(len(result.junit_report) // 2**20, "MiB report", file=sys.stderr)
else:
    print(cmd.log_bytes // 2**20, "MiB of output", file=sys.stderr)
peak()
"""
)

_JUNIT_SCRIPT = """
import os
n = {cases}
os.makedirs("reports", exist_ok=True)
with open("reports/junit.xml", "w") as f:
    f.write('<?xml version="1.0"?><testsuites><testsuite name="s" tests="%d">' % n)
    for i in range(n):
        f.write('<testcase classname="tests.test_m%d" name="test_case_%d_with_a_long_name" '
                'time="0.001"/>' % (i // 100, i))
    f.write('</testsuite></testsuites>')
"""

_POLICY = (
    _PRELUDE
    + """
from gate.faces import cli
argv = ["policy", "--repo", REPO, "--base", "main", "--head", "pr", "--config", CONFIG]
code = cli.main([*argv, "--json"])
assert code in (0, 11, 12, 13), code
peak()
"""
)


def _run(code: str, **values: object) -> int:
    head = "".join(f"{k} = {v!r}\n" for k, v in values.items())
    out = subprocess.run(
        [sys.executable, "-c", head + code],
        check=True,
        capture_output=True,
        text=True,
    )
    sys.stderr.write(out.stderr)
    return int(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flood-mb", type=int, default=1024)
    ap.add_argument("--junit-mb", type=int, default=16)
    ap.add_argument("--files", type=int, default=5000)
    args = ap.parse_args()
    base = _run(_BASELINE)
    rows = [("baseline (modules imported, nothing done)", base)]
    flood = f"yes | head -c {args.flood_mb * 2**20}"
    rows.append(
        (
            f"log flood, {args.flood_mb} MiB of output",
            _run(_CHECK, IMAGE=IMAGE, SCRIPT="", COMMAND=flood, JUNIT=None),
        )
    )
    cases = args.junit_mb * 2**20 // 110  # bytes per test case in the generated report
    rows.append(
        (
            f"JUnit report of {args.junit_mb} MiB",
            _run(
                _CHECK,
                IMAGE=IMAGE,
                SCRIPT=_JUNIT_SCRIPT.format(cases=cases),
                COMMAND="python3 make.py",
                JUNIT="reports/junit.xml",
            ),
        )
    )
    from benchmarks.capture import generate

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        generate(repo, max(args.files + 1000, 6000), args.files)
        config = Path(tmp) / "proofgate.yml"
        config.write_text(f"version: 1\nimage: {IMAGE}\nchecks:\n  - {{name: t, test: 'true'}}\n")
        rows.append(
            (
                f"policy of a {args.files}-file patch",
                _run(_POLICY, REPO=str(repo), CONFIG=str(config)),
            )
        )
    print(f"{'scenario':<46} {'peak RSS':>10} {'vs baseline':>12}")
    for name, mib in rows:
        print(f"{name:<46} {mib:>7} MiB {mib / base:>11.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
