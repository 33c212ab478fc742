"""SPEC §3: collected evidence -> one verdict and its reasons. Pure and total.

Every PROVEN condition is checked independently and contributes reasons; the verdict is
the worst verdict any reason implies (BLOCKED > INCONCLUSIVE > FAILED > HELD > PROVEN).
Nothing stops early: a run that is both DENY'd and incomplete reports both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from gate.differential import HELD_CODES, DifferentialReport, junit
from gate.model import (
    Approval,
    CheckResult,
    CheckSpec,
    Decision,
    Evidence,
    Finding,
    ImageRef,
    JunitCounts,
    Phase,
    PolicyResult,
    Reason,
    ReasonCode,
    Verdict,
    worst,
)

MAX_JUNIT_BYTES = junit.MAX_REPORT_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvidence:
    """Everything a run collected, successful or not."""

    evidence: Evidence
    config_found: bool
    config_trusted: bool
    checks: tuple[CheckSpec, ...]
    policy: PolicyResult
    approval: Approval | None = None
    approval_error: str | None = None
    sandbox_error: str | None = None  # daemon unreachable / lost mid-run
    image: ImageRef | None = None
    image_error: str | None = None
    results: tuple[CheckResult, ...] = ()
    unsafe_tree: str | None = None
    interrupted: bool = False
    forged_reports: tuple[str, ...] = ()  # junit paths the patch itself supplies
    # check -> the witness's findings in checks no differential judged
    # (gate/witness/judge.py)
    tampered: tuple[tuple[str, str], ...] = ()
    differentials: tuple[DifferentialReport, ...] = ()  # SPEC §3.1, one per check with junit


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    verdict: Verdict
    reasons: tuple[Reason, ...]


def verdict_for(code: ReasonCode) -> Verdict:
    """The verdict a reason implies on its own."""
    match code:
        case ReasonCode.POLICY_DENY:
            return Verdict.BLOCKED
        case ReasonCode.POLICY_HOLD | ReasonCode.APPROVAL_INVALID:
            # SPEC §3: HELD is "HOLD and no valid approval exists"; an approval that does
            # not count is exactly that (the reason says why it did not count).
            return Verdict.HELD
        case (
            ReasonCode.CHECK_FAILED
            | ReasonCode.CHECK_TIMED_OUT
            | ReasonCode.CHECK_OOM_KILLED
            | ReasonCode.JUNIT_FAILURES
            | ReasonCode.REGRESSION
            | ReasonCode.EVIDENCE_TAMPERED
        ):
            return Verdict.FAILED
        case (
            ReasonCode.EXPECTATION_CHANGED
            | ReasonCode.TESTS_LOST
            | ReasonCode.ENVIRONMENT_CHANGED
            | ReasonCode.TEST_INPUT_CHANGED
            | ReasonCode.PLUGIN_LOADED
        ):
            return Verdict.HELD
        case (
            ReasonCode.COVERAGE_INCOMPLETE
            | ReasonCode.PATCH_MISMATCH
            | ReasonCode.MERGE_CONFLICT
            | ReasonCode.UNSAFE_TREE
            | ReasonCode.NO_CONFIG
            | ReasonCode.UNTRUSTED_CONFIG
            | ReasonCode.DOCKER_UNAVAILABLE
            | ReasonCode.IMAGE_UNRESOLVED
            | ReasonCode.CONTAINER_FAILED
            | ReasonCode.CHECK_NOT_RUN
            | ReasonCode.NO_TEST_PHASE
            | ReasonCode.JUNIT_MISSING
            | ReasonCode.JUNIT_INVALID
            | ReasonCode.JUNIT_NO_TESTS
            | ReasonCode.INTERRUPTED
            | ReasonCode.EGRESS_UNRECORDED
            | ReasonCode.SHARD_PARTIAL
            | ReasonCode.SHARDS_DISAGREE
            | ReasonCode.SHARDS_INCOMPLETE
            | ReasonCode.DIFFERENTIAL_INCOMPLETE
        ):
            return Verdict.INCONCLUSIVE
        case _:
            assert_never(code)


def parse_junit(report: bytes) -> JunitCounts:
    """Count tests in a JUnit XML report (pytest, Maven Surefire, ...).

    Counts `<testcase>` elements, so a forged summary attribute on `<testsuite>` cannot
    inflate the numbers; a testcase with a `<failure>`/`<error>` child counts as such.

    Raises:
        ValueError: not a JUnit report.
    """
    root = junit.parse_root(report)
    tests = failures = errors = skipped = 0
    for case in root.iter("testcase"):
        tests += 1
        outcome = junit.case_outcome(case)
        failures += outcome is junit.TestOutcome.FAIL
        errors += outcome is junit.TestOutcome.ERROR
        skipped += outcome is junit.TestOutcome.SKIP
    return JunitCounts(tests=tests, failures=failures, errors=errors, skipped=skipped)


def _check_reasons(spec: CheckSpec, result: CheckResult | None) -> list[Reason]:
    name = spec.name
    if result is None:
        return [Reason(code=ReasonCode.CHECK_NOT_RUN, message="the check did not run", check=name)]
    if not result.started:
        return [
            Reason(
                code=ReasonCode.CONTAINER_FAILED,
                message=f"the clean-room container did not start: {result.error or 'unknown'}",
                check=name,
            )
        ]
    reasons: list[Reason] = []
    if result.egress is not None and not result.egress.complete:
        reasons.append(
            Reason(
                code=ReasonCode.EGRESS_UNRECORDED,
                message=(
                    "not every connection attempt of setup is in the egress record: the "
                    "broker's log reached its bound or could not be read whole"
                ),
                check=name,
            )
        )
    ran = {p.phase: p for p in result.phases}
    for phase, commands in spec.phases:
        got = ran.get(phase)
        if got is None:
            if not reasons:
                reasons.append(
                    Reason(
                        code=ReasonCode.CHECK_NOT_RUN,
                        message=f"phase {phase.value} did not run",
                        check=name,
                    )
                )
            break
        for cmd in got.commands:
            shown = " ".join(cmd.argv)
            if cmd.timed_out:
                reasons.append(
                    Reason(
                        code=ReasonCode.CHECK_TIMED_OUT,
                        message=f"{phase.value}: `{shown}` timed out after {cmd.duration_s:.1f}s",
                        check=name,
                    )
                )
            elif cmd.oom_killed:
                reasons.append(
                    Reason(
                        code=ReasonCode.CHECK_OOM_KILLED,
                        message=f"{phase.value}: `{shown}` was killed for exceeding memory",
                        check=name,
                    )
                )
            elif cmd.exit_code != 0:
                reasons.append(
                    Reason(
                        code=ReasonCode.CHECK_FAILED,
                        message=f"{phase.value}: `{shown}` exited {cmd.exit_code}",
                        check=name,
                    )
                )
        if len(got.commands) < len(commands) and not reasons:
            reasons.append(
                Reason(
                    code=ReasonCode.CHECK_NOT_RUN,
                    message=f"phase {phase.value} ran {len(got.commands)} of "
                    f"{len(commands)} commands",
                    check=name,
                )
            )
        if reasons:
            break
    if reasons or spec.junit is None:
        return reasons
    # SPEC §3 (7): where junit is set, the report exists and counts >= 1 executed test and
    # no failures or errors.
    if result.junit_report is None:
        return [
            Reason(
                code=ReasonCode.JUNIT_MISSING,
                message=f"the JUnit report {spec.junit} was not written",
                check=name,
            )
        ]
    try:
        counts = parse_junit(result.junit_report)
    except ValueError as e:
        return [
            Reason(
                code=ReasonCode.JUNIT_INVALID,
                message=f"the JUnit report {spec.junit} is unusable: {e}",
                check=name,
            )
        ]
    if counts.failures or counts.errors:
        return [
            Reason(
                code=ReasonCode.JUNIT_FAILURES,
                message=f"the JUnit report counts {counts.failures} failure(s) and "
                f"{counts.errors} error(s)",
                check=name,
            )
        ]
    if counts.executed < 1:
        return [
            Reason(
                code=ReasonCode.JUNIT_NO_TESTS,
                message=f"the JUnit report counts no executed test ({counts.tests} collected, "
                f"{counts.skipped} skipped)",
                check=name,
            )
        ]
    return []


def _evidence_reasons(run: RunEvidence) -> list[Reason]:
    """SPEC §3 (1)-(3): revisions, patch, proven tree, trusted configuration."""
    reasons: list[Reason] = []
    ev = run.evidence
    # (1) revisions resolved, patch captured whole
    already = {r.code for r in ev.reasons}
    if (not ev.patch.sha256 or not ev.coverage.complete) and (
        ReasonCode.COVERAGE_INCOMPLETE not in already
    ):
        notes = "; ".join(ev.coverage.notes) or "the patch was not captured whole"
        reasons.append(Reason(code=ReasonCode.COVERAGE_INCOMPLETE, message=notes))
    # (2) the patch reproduces the expected tree
    reasons.extend(ev.reasons)
    if ev.proven_tree is None and not ev.reasons:
        reasons.append(
            Reason(code=ReasonCode.PATCH_MISMATCH, message="no proven tree was computed")
        )
    if run.unsafe_tree is not None:
        reasons.append(Reason(code=ReasonCode.UNSAFE_TREE, message=run.unsafe_tree))
    # (3) trusted configuration
    if not run.config_found:
        reasons.append(
            Reason(
                code=ReasonCode.NO_CONFIG,
                message="the base commit has no proofgate configuration. Merge a "
                ".github/proofgate.yml into the base branch first, or prove locally with "
                "--config FILE",
            )
        )
    elif not run.config_trusted:
        reasons.append(
            Reason(
                code=ReasonCode.UNTRUSTED_CONFIG,
                message="--config names a file of this repository that the patch changes: "
                "the change would be judged by rules it wrote. Pass a copy from outside the "
                "repository, or prove against the base's configuration",
            )
        )
    return reasons


def _policy_reasons(run: RunEvidence) -> list[Reason]:
    """SPEC §3 (4): ALLOW, or HOLD with a valid approval bound to this digest + policy."""
    reasons: list[Reason] = []
    decision = run.policy.decision
    if decision is Decision.DENY:
        denied = [f for f in run.policy.findings if f.decision is Decision.DENY]
        reasons.append(
            Reason(
                code=ReasonCode.POLICY_DENY,
                message="policy denies this change: " + _summarize(denied),
            )
        )
    elif decision is Decision.HOLD:
        approved = (
            run.approval is not None
            and run.approval.patch_sha256 == run.evidence.patch.sha256
            and run.approval.policy_fingerprint == run.policy.fingerprint
        )
        if not approved:
            held = [f for f in run.policy.findings if f.decision is Decision.HOLD]
            reasons.append(
                Reason(
                    code=ReasonCode.POLICY_HOLD,
                    message="policy wants a person to approve: " + _summarize(held),
                )
            )
    if run.approval_error is not None:
        reasons.append(Reason(code=ReasonCode.APPROVAL_INVALID, message=run.approval_error))
    return reasons


def _summarize(findings: list[Finding]) -> str:
    shown = "; ".join(f.message for f in findings[:5])
    return shown + (f" (+{len(findings) - 5} more)" if len(findings) > 5 else "")


def _outcome(reasons: list[Reason]) -> Outcome:
    unique: list[Reason] = []
    for r in reasons:
        if r not in unique:
            unique.append(r)
    return Outcome(verdict=worst([verdict_for(r.code) for r in unique]), reasons=tuple(unique))


def preflight(run: RunEvidence) -> Outcome:
    """`proofgate policy`: evidence, configuration and policy only; runs nothing. Pure."""
    return _outcome(_evidence_reasons(run) + _policy_reasons(run))


def decide(run: RunEvidence) -> Outcome:
    """Apply SPEC §3 to collected evidence. Pure; total over all inputs."""
    ev = run.evidence
    decision = run.policy.decision
    reasons = _evidence_reasons(run) + _policy_reasons(run)

    # (5)-(7) only mean something when checks were meant to run.
    checks_expected = (
        run.config_found
        and run.config_trusted
        and decision is not Decision.DENY
        and ev.proven_tree is not None
    )
    if checks_expected and run.unsafe_tree is None:
        if run.sandbox_error is not None:
            reasons.append(Reason(code=ReasonCode.DOCKER_UNAVAILABLE, message=run.sandbox_error))
        elif run.image is None:
            reasons.append(
                Reason(
                    code=ReasonCode.IMAGE_UNRESOLVED,
                    message=run.image_error or "the clean-room image was not resolved",
                )
            )
        if run.interrupted:
            reasons.append(Reason(code=ReasonCode.INTERRUPTED, message="the run was interrupted"))
        if run.sandbox_error is None and run.image is not None:
            by_name = {r.name: r for r in run.results}
            for spec in run.checks:
                reasons.extend(_check_reasons(spec, by_name.get(spec.name)))
        approved = run.approval is not None and (
            (run.approval.patch_sha256, run.approval.policy_fingerprint)
            == (run.evidence.patch.sha256, run.policy.fingerprint)
        )
        for report in run.differentials:  # (9): the base's tests judge the change
            # a person confirmed the changed expectations / lost tests of this very patch
            reasons.extend(r for r in report.reasons if not (approved and r.code in HELD_CODES))
        for check, finding in run.tampered:
            reasons.append(
                Reason(
                    code=ReasonCode.EVIDENCE_TAMPERED,
                    message="proofgate's witness inside pytest contradicts what was read "
                    f"back: {finding}",
                    check=check,
                )
            )
        for path in run.forged_reports:
            reasons.append(
                Reason(
                    code=ReasonCode.JUNIT_INVALID,
                    message=f"the patch supplies the JUnit report {path} itself; a report "
                    "must be written by the test phase",
                )
            )
    if run.config_found and not any(
        phase is Phase.TEST for spec in run.checks for phase, _ in spec.phases
    ):
        reasons.append(
            Reason(
                code=ReasonCode.NO_TEST_PHASE,
                message="no check has a test phase; PROVEN needs at least one test phase",
            )
        )

    return _outcome(reasons)
