"""What the witness says of one run (SPEC §3.2; the plugin: gate/sandbox/witness_plugin.py).

A run's evidence is its exit statuses and its JUnit report, both read by proofgate
through the daemon. The witness, loaded into every pytest session before the tree's
code, says what pytest itself saw; `assess` compares the two and lists every way they
disagree as a *tamper finding* (kind, detail):

- `report-rewritten`: the report read back is not the one pytest wrote;
- `exit-status`: a check without `junit` is judged by exit status, and a command exited
  0 although a pytest session in it ended with failures (an `atexit` hook, `os._exit`);
- `conftest-not-in-tree`: pytest loaded a conftest.py that is not the tree's, as
  committed (written while the tests ran);
- `witness-garbled`: a witness line the plugin did not write;
- `exit-forced`: a command exited 0, but a pytest process in it never reached its normal
  end after its session (no closing line: `os._exit` or a signal after the witness wrote
  its line, e.g. from an `atexit` hook of the code under test);
- the plugin's own tripwires (`outcome-rewritten`, `pytest-patched`, `plugin-registered`,
  `trace-function`, `import-hook`, `test-code-replaced`, `tests-unaccounted`).

A finding of a kind the *base* run shows too is the project's own harness at work (the
base's code is already trusted) and is waived; gate/differential/runs.py does that, and
`witness-missing` (pytest ran under the witness on the base, not against the change).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gate.differential import junitpath
from gate.differential.paths import WORKSPACE
from gate.model import CheckResult, CheckSpec, Phase, WitnessSession

__all__ = ["WORKSPACE", "Assessment", "assess", "foreign_conftest", "waive"]

_TEST_STATUSES_FAILED = (1, 2, 3, 4)  # pytest: failed, interrupted, internal, usage error


@dataclass(frozen=True, slots=True)
class Assessment:
    sessions: int  # pytest sessions the witness saw in the test phase
    findings: tuple[tuple[str, str], ...]  # (kind, detail)


def waive(
    findings: Iterable[tuple[str, str]], kinds: frozenset[str]
) -> tuple[tuple[str, str], ...]:
    """`findings` less those of `kinds` (what the base run shows too)."""
    return tuple(f for f in findings if f[0] not in kinds)


def _report_path(spec: CheckSpec) -> str | None:
    if spec.junit is None:
        return None
    try:
        return f"{WORKSPACE}/{junitpath.normalize(spec.junit)}"
    except ValueError:
        return None


def assess(
    result: CheckResult, spec: CheckSpec, blob_of: Callable[[bytes], str | None] | None
) -> Assessment:
    """Compare what the witness saw with what proofgate read; `blob_of(path)` is the git
    blob id of the run's tree at `path` (None: no such file), or None to skip that."""
    findings: list[tuple[str, str]] = []
    sessions: list[WitnessSession] = []
    report = _report_path(spec)
    last_for_report: WitnessSession | None = None
    for phase in result.phases:
        if phase.phase is not Phase.TEST:
            continue
        for cmd in phase.commands:
            findings.extend(("witness-garbled", problem) for problem in cmd.witness_problems)
            sessions.extend(cmd.witness)
            writers = [s for s in cmd.witness if s.junit_path == report]
            if len(writers) > 1:
                findings.append(
                    ("report-rewritten", f"{len(writers)} pytest sessions wrote {spec.junit}")
                )
            if writers:
                last_for_report = writers[-1]
            if cmd.exit_code == 0:
                findings.extend(
                    (
                        "exit-forced",
                        f"`{' '.join(cmd.argv)}` exited 0, but its pytest process (status "
                        f"{s.exitstatus}) ended without its normal shutdown after the session",
                    )
                    for s in cmd.witness
                    if not s.ended
                )
            if spec.junit is None and cmd.exit_code == 0:
                findings.extend(
                    (
                        "exit-status",
                        f"`{' '.join(cmd.argv)}` exited 0, but pytest ended with "
                        f"status {s.exitstatus} ({_counts(s)})",
                    )
                    for s in cmd.witness
                    if s.exitstatus in _TEST_STATUSES_FAILED
                )
    for s in sessions:
        findings.extend(s.tampered)
        if blob_of is not None:
            for path, blob in s.conftests:
                findings.extend(foreign_conftest(path, blob, blob_of))
    if report is not None and result.junit_report is not None and last_for_report is not None:
        got = hashlib.sha256(result.junit_report).hexdigest()
        if got != last_for_report.junit_sha256:
            findings.append(
                (
                    "report-rewritten",
                    f"{spec.junit} is not the report pytest wrote (it counted "
                    f"{_counts(last_for_report)}): it was changed after pytest wrote it",
                )
            )
    unique = tuple(dict.fromkeys(findings))
    return Assessment(sessions=len(sessions), findings=unique)


def foreign_conftest(
    path: str, blob: str | None, blob_of: Callable[[bytes], str | None]
) -> list[tuple[str, str]]:
    prefix = WORKSPACE + "/"
    if not path.startswith(prefix):
        return [("conftest-not-in-tree", f"{path} (outside the workspace)")]
    rel = path[len(prefix) :]
    want = blob_of(rel.encode())
    if want is None:
        return [("conftest-not-in-tree", f"{rel} is not a file of the tree")]
    if blob != want:
        return [("conftest-not-in-tree", f"{rel} is not the tree's (changed while tests ran)")]
    return []


def _counts(s: WitnessSession) -> str:
    c = s.counts
    return ", ".join(f"{c.get(k, 0)} {k}" for k in ("passed", "failed", "error", "skipped"))
