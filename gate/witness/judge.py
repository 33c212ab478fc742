"""What the witness says of one run (SPEC §3.2; the plugin: gate/witness/plugin.py).

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

A finding the *base* run shows with the very same detail is the project's own harness at
work (the base's code is already trusted) and is waived, unless its detail names a file
the change's non-test code touches; gate/proof/runs.py does that, and
`witness-missing` (pytest ran under the witness on the base, not against the change).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gate.differential import junitpath
from gate.differential.paths import WORKSPACE
from gate.model import CheckResult, CheckSpec, Phase, WitnessSession

__all__ = [
    "WORKSPACE",
    "Assessment",
    "assess",
    "foreign_conftest",
    "test_files",
    "test_inputs",
    "tree_path",
    "waive",
]

_TEST_STATUSES_FAILED = (1, 2, 3, 4)  # pytest: failed, interrupted, internal, usage error


@dataclass(frozen=True, slots=True)
class Assessment:
    sessions: int  # pytest sessions the witness saw in the test phase
    findings: tuple[tuple[str, str], ...]  # (kind, detail)


_NAMED_PATH = re.compile(re.escape(WORKSPACE) + r"/[^\s()'\",]+")


def waive(
    findings: Iterable[tuple[str, str]],
    base: frozenset[tuple[str, str]],
    changed_code: Callable[[bytes], bool],
) -> tuple[tuple[str, str], ...]:
    """`findings` less those the base run shows with the very same detail (kind and the
    plugin's defining file, or the patched name and where its replacement is defined),
    never one whose detail names a file `changed_code` says the change's non-test code
    touches: the same plugin file with the change's content is not the base's plugin."""
    out: list[tuple[str, str]] = []
    for kind, detail in findings:
        named = (tree_path(m) for m in _NAMED_PATH.findall(detail))
        if (kind, detail) in base and not any(p is not None and changed_code(p) for p in named):
            continue
        out.append((kind, detail))
    return tuple(out)


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


def tree_path(path: str) -> bytes | None:
    """A path the witness reported, as a path of the tree (None: outside the workspace)."""
    prefix = WORKSPACE + "/"
    if not path.startswith(prefix) or "/../" in path + "/" or "/./" in path + "/":
        return None
    return path[len(prefix) :].encode("utf-8", "surrogateescape")


def test_files(sessions: Iterable[WitnessSession]) -> tuple[bytes, ...]:
    """The tree's files that the sessions' collected tests are in (SPEC §3.2)."""
    found = {t for s in sessions for p in s.test_files if (t := tree_path(p)) is not None}
    return tuple(sorted(found))


def test_inputs(
    sessions: Iterable[WitnessSession], is_test: Callable[[bytes], bool]
) -> tuple[bytes, ...]:
    """The tree's files that test code read (SPEC §3.2): reads whose reader is a test file
    of the check or a file the sessions' tests are in. What the code under test reads for
    itself is the change's to decide, and is not listed."""
    sessions = tuple(sessions)
    tests = set(test_files(sessions))
    found: set[bytes] = set()
    for s in sessions:
        for reader, path in s.reads:
            who, what = tree_path(reader), tree_path(path)
            if who is None or what is None or what == who:
                continue
            if who in tests or is_test(who):
                found.add(what)
    return tuple(sorted(found))


def _counts(s: WitnessSession) -> str:
    c = s.counts
    return ", ".join(f"{c.get(k, 0)} {k}" for k in ("passed", "failed", "error", "skipped"))
