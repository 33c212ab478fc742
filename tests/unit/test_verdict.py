"""SPEC §3: each PROVEN condition violated on its own gives the right verdict and reason."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.model import Approval as ApprovalValue
from gate.model import (
    CheckResult,
    CheckSpec,
    Command,
    CommandResult,
    CommitId,
    Coverage,
    Decision,
    Evidence,
    Finding,
    ImageRef,
    Limits,
    PatchCapture,
    Phase,
    PhaseResult,
    PolicyResult,
    Reason,
    ReasonCode,
    Revision,
    Sha256,
    TreeId,
    Verdict,
    worst,
)
from gate.proof.verdict import RunEvidence, decide, parse_junit, preflight, verdict_for

PATCH_SHA = Sha256("a" * 64)
FINGERPRINT = Sha256("f" * 64)
IMAGE = ImageRef(name="img", id="sha256:" + "1" * 64)
JUNIT_OK = b'<testsuite><testcase name="a"/><testcase name="b"/></testsuite>'


def _evidence(**over: object) -> Evidence:
    fields: dict[str, object] = {
        "repository": "demo",
        "base": Revision(spec="main", commit=CommitId("1" * 40), tree=TreeId("2" * 40)),
        "head": Revision(spec="pr", commit=CommitId("3" * 40), tree=TreeId("4" * 40)),
        "merge_base": CommitId("1" * 40),
        "patch": PatchCapture(data=b"diff", sha256=PATCH_SHA, files=1),
        "inventory": (),
        "coverage": Coverage(complete=True),
        "proven_tree": TreeId("4" * 40),
    }
    fields.update(over)
    return Evidence(**fields)  # type: ignore[arg-type]


def _cmd(exit_code: int | None = 0, **over: object) -> CommandResult:
    fields: dict[str, object] = {
        "argv": ("pytest",),
        "exit_code": exit_code,
        "duration_s": 0.5,
        "log_sha256": Sha256("0" * 64),
        "log_bytes": 0,
        "log_tail": "",
    }
    fields.update(over)
    return CommandResult(**fields)  # type: ignore[arg-type]


SPEC = CheckSpec(
    name="unit",
    phases=((Phase.BUILD, (Command(argv=("make",)),)), (Phase.TEST, (Command(argv=("pytest",)),))),
    limits=Limits(),
    junit="junit.xml",
)


def _result(
    build: CommandResult | None = None, test: CommandResult | None = None, **over: object
) -> CheckResult:
    fields: dict[str, object] = {
        "name": "unit",
        "image": IMAGE,
        "started": True,
        "phases": (
            PhaseResult(phase=Phase.BUILD, commands=(build or _cmd(),)),
            PhaseResult(phase=Phase.TEST, commands=(test or _cmd(),)),
        ),
        "junit_report": JUNIT_OK,
    }
    fields.update(over)
    return CheckResult(**fields)  # type: ignore[arg-type]


def _policy(decision: Decision = Decision.ALLOW) -> PolicyResult:
    findings = (
        ()
        if decision is Decision.ALLOW
        else (Finding(rule="r", decision=decision, path=b"x", message="touches x"),)
    )
    return PolicyResult(decision=decision, findings=findings, fingerprint=FINGERPRINT)


def _run(**over: object) -> RunEvidence:
    fields: dict[str, object] = {
        "evidence": _evidence(),
        "config_found": True,
        "config_trusted": True,
        "checks": (SPEC,),
        "policy": _policy(),
        "image": IMAGE,
        "results": (_result(),),
    }
    fields.update(over)
    return RunEvidence(**fields)  # type: ignore[arg-type]


def test_all_conditions_hold_is_proven() -> None:
    outcome = decide(_run())
    assert outcome.verdict is Verdict.PROVEN
    assert outcome.reasons == ()


APPROVAL = ApprovalValue(
    approver="alice",
    method="file",
    approved_at="2026-01-01T00:00:00Z",
    patch_sha256=PATCH_SHA,
    policy_fingerprint=FINGERPRINT,
)

CASES: list[tuple[str, dict[str, object], Verdict, ReasonCode]] = [
    (
        "coverage-incomplete",
        {"evidence": _evidence(coverage=Coverage(complete=False, notes=("cut",)))},
        Verdict.INCONCLUSIVE,
        ReasonCode.COVERAGE_INCOMPLETE,
    ),
    (
        "patch-mismatch",
        {
            "evidence": _evidence(
                proven_tree=None,
                reasons=(Reason(code=ReasonCode.PATCH_MISMATCH, message="differs"),),
            )
        },
        Verdict.INCONCLUSIVE,
        ReasonCode.PATCH_MISMATCH,
    ),
    (
        "no-config",
        {"config_found": False, "checks": (), "results": ()},
        Verdict.INCONCLUSIVE,
        ReasonCode.NO_CONFIG,
    ),
    (
        "untrusted-config",
        {"config_trusted": False},
        Verdict.INCONCLUSIVE,
        ReasonCode.UNTRUSTED_CONFIG,
    ),
    (
        "hold-without-approval",
        {"policy": _policy(Decision.HOLD)},
        Verdict.HELD,
        ReasonCode.POLICY_HOLD,
    ),
    (
        "hold-approval-for-other-patch",
        {
            "policy": _policy(Decision.HOLD),
            "approval": dataclasses.replace(APPROVAL, patch_sha256=Sha256("b" * 64)),
        },
        Verdict.HELD,
        ReasonCode.POLICY_HOLD,
    ),
    (
        "hold-approval-for-other-policy",
        {
            "policy": _policy(Decision.HOLD),
            "approval": dataclasses.replace(APPROVAL, policy_fingerprint=Sha256("e" * 64)),
        },
        Verdict.HELD,
        ReasonCode.POLICY_HOLD,
    ),
    (
        "deny",
        {"policy": _policy(Decision.DENY), "results": ()},
        Verdict.BLOCKED,
        ReasonCode.POLICY_DENY,
    ),
    (
        "docker-unavailable",
        {"sandbox_error": "no daemon", "image": None, "results": ()},
        Verdict.INCONCLUSIVE,
        ReasonCode.DOCKER_UNAVAILABLE,
    ),
    (
        "image-unresolved",
        {"image": None, "image_error": "missing", "results": ()},
        Verdict.INCONCLUSIVE,
        ReasonCode.IMAGE_UNRESOLVED,
    ),
    (
        "container-failed",
        {"results": (CheckResult(name="unit", image=IMAGE, started=False, error="oci"),)},
        Verdict.INCONCLUSIVE,
        ReasonCode.CONTAINER_FAILED,
    ),
    ("check-not-run", {"results": ()}, Verdict.INCONCLUSIVE, ReasonCode.CHECK_NOT_RUN),
    (
        "command-failed",
        {"results": (_result(build=_cmd(1)),)},
        Verdict.FAILED,
        ReasonCode.CHECK_FAILED,
    ),
    (
        "timed-out",
        {"results": (_result(test=_cmd(None, timed_out=True)),)},
        Verdict.FAILED,
        ReasonCode.CHECK_TIMED_OUT,
    ),
    (
        "oom-killed",
        {"results": (_result(test=_cmd(137, oom_killed=True)),)},
        Verdict.FAILED,
        ReasonCode.CHECK_OOM_KILLED,
    ),
    (
        "no-test-phase",
        {
            "checks": (dataclasses.replace(SPEC, phases=SPEC.phases[:1], junit=None),),
            "results": (_result(phases=(PhaseResult(phase=Phase.BUILD, commands=(_cmd(),)),)),),
        },
        Verdict.INCONCLUSIVE,
        ReasonCode.NO_TEST_PHASE,
    ),
    (
        "junit-missing",
        {"results": (_result(junit_report=None),)},
        Verdict.INCONCLUSIVE,
        ReasonCode.JUNIT_MISSING,
    ),
    (
        "junit-zero-tests",
        {"results": (_result(junit_report=b"<testsuite tests='5'></testsuite>"),)},
        Verdict.INCONCLUSIVE,
        ReasonCode.JUNIT_NO_TESTS,
    ),
    (
        "junit-all-skipped",
        {
            "results": (
                _result(junit_report=b"<testsuite><testcase><skipped/></testcase></testsuite>"),
            )
        },
        Verdict.INCONCLUSIVE,
        ReasonCode.JUNIT_NO_TESTS,
    ),
    (
        "junit-failure",
        {
            "results": (
                _result(
                    junit_report=b"<testsuites><testsuite><testcase/><testcase><failure/></testcase></testsuite></testsuites>"
                ),
            )
        },
        Verdict.FAILED,
        ReasonCode.JUNIT_FAILURES,
    ),
    (
        "junit-garbage",
        {"results": (_result(junit_report=b"PASSED 100 tests"),)},
        Verdict.INCONCLUSIVE,
        ReasonCode.JUNIT_INVALID,
    ),
    (
        "junit-entity-bomb",
        {"results": (_result(junit_report=b'<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuite/>'),)},
        Verdict.INCONCLUSIVE,
        ReasonCode.JUNIT_INVALID,
    ),
    (
        "junit-forged-in-patch",
        {"forged_reports": ("junit.xml",)},
        Verdict.INCONCLUSIVE,
        ReasonCode.JUNIT_INVALID,
    ),
    ("unsafe-tree", {"unsafe_tree": "entry ../x"}, Verdict.INCONCLUSIVE, ReasonCode.UNSAFE_TREE),
    ("interrupted", {"interrupted": True}, Verdict.INCONCLUSIVE, ReasonCode.INTERRUPTED),
    (
        "approval-invalid",
        {"approval_error": "signed by an unknown key"},
        Verdict.HELD,
        ReasonCode.APPROVAL_INVALID,
    ),
]


@pytest.mark.parametrize(
    ("over", "verdict", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_condition_violated_alone(
    over: dict[str, object], verdict: Verdict, code: ReasonCode
) -> None:
    outcome = decide(_run(**over))
    assert outcome.verdict is verdict
    assert code in {r.code for r in outcome.reasons}


def test_hold_with_bound_approval_is_proven() -> None:
    outcome = decide(_run(policy=_policy(Decision.HOLD), approval=APPROVAL))
    assert outcome.verdict is Verdict.PROVEN


def test_junit_counts_testcases_not_summary_attributes() -> None:
    forged = (
        b'<testsuite tests="100" failures="0"><testcase name="x"><failure/></testcase></testsuite>'
    )
    counts = parse_junit(forged)
    assert (counts.tests, counts.failures) == (1, 1)


def test_deny_and_failure_report_both_and_blocked_wins() -> None:
    outcome = decide(
        _run(policy=_policy(Decision.DENY), evidence=_evidence(coverage=Coverage(complete=False)))
    )
    assert outcome.verdict is Verdict.BLOCKED
    assert {ReasonCode.POLICY_DENY, ReasonCode.COVERAGE_INCOMPLETE} <= {
        r.code for r in outcome.reasons
    }


def test_preflight_ignores_the_clean_room() -> None:
    assert preflight(_run(results=(), image=None)).verdict is Verdict.PROVEN
    assert preflight(_run(policy=_policy(Decision.HOLD))).verdict is Verdict.HELD


def test_exit_codes_and_conclusions_per_spec() -> None:
    assert {v: (v.exit_code, v.conclusion) for v in Verdict} == {
        Verdict.PROVEN: (0, "success"),
        Verdict.FAILED: (10, "failure"),
        Verdict.HELD: (11, "action_required"),
        Verdict.BLOCKED: (12, "failure"),
        Verdict.INCONCLUSIVE: (13, "failure"),
    }


@given(st.lists(st.sampled_from(list(ReasonCode)), max_size=8), st.sampled_from(list(ReasonCode)))
def test_adding_a_reason_never_improves_the_verdict(
    codes: list[ReasonCode], extra: ReasonCode
) -> None:
    before = worst([verdict_for(c) for c in codes])
    after = worst([verdict_for(c) for c in [*codes, extra]])
    assert after.severity >= before.severity
    assert after is not Verdict.PROVEN  # every reason blocks PROVEN


@given(st.permutations(list(Verdict)))
def test_worst_wins_order(order: list[Verdict]) -> None:
    assert worst(order) is Verdict.BLOCKED
    ranked = sorted(order, key=lambda v: v.severity)
    assert ranked == [
        Verdict.PROVEN,
        Verdict.HELD,
        Verdict.FAILED,
        Verdict.INCONCLUSIVE,
        Verdict.BLOCKED,
    ]
