"""The orchestrator without a container: real git repositories, the Sandbox stand-in.

Policy DENY and HOLD paths, a missing or broken configuration, approvals, an unavailable
clean room and the mapping from check results to verdicts. Two levels: `cli.main` with
the stand-in in place of `DockerSandbox` (what a user sees: exit code, stderr, receipt),
and `gate.proof.prove.prove` wired directly (what the orchestrator hands the sandbox). What a
check can and cannot do inside the clean room is tested with real Docker in
tests/integration/test_prove.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from gate.faces.cli import main
from gate.git.repo import GitRepository
from gate.model import Verdict
from gate.proof.prove import ProofRun, ProveRequest, prove
from gate.sandbox.interface import SandboxError
from gate.util.journal import verify_chain
from tests.gitutil import snapshot
from tests.provecli import cli_prove, config_yaml, pr_repo, receipt_predicate
from tests.sandbox_standin import (
    JUNIT_FAILED,
    JUNIT_PASSED,
    SandboxStandIn,
    Script,
    StandInFactory,
)

CFG = ".github/proofgate.yml"


TRUE_CHECK = '  - {name: u, test: "true"}\n'
JUNIT_CHECK = '  - {name: u, test: "pytest --junitxml=out/junit.xml", junit: out/junit.xml}\n'


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> SandboxStandIn:
    """`cli.main` builds its sandbox from `gate.sandbox.docker.DockerSandbox`: replace it."""
    sandbox = SandboxStandIn()

    def factory(**_options: object) -> SandboxStandIn:
        return sandbox

    monkeypatch.setattr("gate.sandbox.docker.DockerSandbox", factory)
    return sandbox


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    return tmp_path / "keys" / "proofgate.key", tmp_path / "keys" / "proofgate.pub"


def _prove(path: Path, factory: StandInFactory, **request: object) -> ProofRun:
    with GitRepository(path) as evidence:
        return prove(
            ProveRequest(base="main", head="pr", **request),  # type: ignore[arg-type]
            evidence=evidence,
            sandbox=factory,
        )


def _codes(run: ProofRun) -> list[str]:
    return [r.code.value for r in run.reasons]


# --- policy -----------------------------------------------------------------------------


def test_denied_path_is_blocked_and_no_sandbox_is_created(tmp_path: Path) -> None:
    cfg = config_yaml(TRUE_CHECK, 'policy:\n  deny: ["**/*.pem"]\n')
    _, path = pr_repo(tmp_path, {CFG.encode(): cfg}, {b"certs/server.pem": b"x"})
    factory = StandInFactory()
    run = _prove(path, factory)
    assert run.verdict is Verdict.BLOCKED
    assert factory.calls == 0
    assert run.predicate["checks"] == []


def test_denied_path_exits_12_and_runs_nothing(tmp_path: Path, standin: SandboxStandIn) -> None:
    cfg = config_yaml(TRUE_CHECK, 'policy:\n  deny: ["**/*.pem"]\n')
    _, path = pr_repo(tmp_path, {CFG.encode(): cfg}, {b"certs/server.pem": b"x"})
    assert cli_prove(path, tmp_path / "out") == 12
    assert standin.images == []
    assert standin.ran == []
    predicate = receipt_predicate(tmp_path / "out")
    kinds = [e["kind"] for e in predicate["journal"]["events"]]  # type: ignore[index]
    assert not any(k.startswith("container") or k.startswith("image") for k in kinds)


def test_pr_editing_config_is_judged_by_the_base_config_and_held(
    tmp_path: Path, standin: SandboxStandIn
) -> None:
    """The PR weakens the test command; the base's command is what runs, and it is HELD."""
    strict = '  - {name: unit, test: "test -f must-exist"}\n'
    lax = '  - {name: unit, test: "true"}\n'
    _, path = pr_repo(
        tmp_path,
        {CFG.encode(): config_yaml(strict), b"must-exist": b"1"},
        {CFG.encode(): config_yaml(lax), b"must-exist": None},
    )
    standin.scripts = {"unit": Script(exit_codes=(1,))}  # what `test -f` does without the file
    out = tmp_path / "out"
    assert cli_prove(path, out) == 10  # FAILED (base rule still applies) is worse than HELD
    (spec,) = standin.ran
    assert [c.argv for _, cmds in spec.phases for c in cmds] == [
        ("/bin/sh", "-c", "test -f must-exist")
    ]
    assert "must-exist" not in standin.trees["unit"]
    predicate = receipt_predicate(out)
    assert predicate["policy"]["decision"] == "HOLD"  # type: ignore[index]
    assert "gate-config-changed" in {f["rule"] for f in predicate["policy"]["findings"]}  # type: ignore[index]


def test_pr_editing_config_alone_is_held(tmp_path: Path, standin: SandboxStandIn) -> None:
    cfg = config_yaml(TRUE_CHECK)
    _, path = pr_repo(tmp_path, {CFG.encode(): cfg}, {CFG.encode(): cfg + b"# x\n"})
    assert cli_prove(path, tmp_path / "out") == 11
    assert [s.name for s in standin.ran] == ["u"]  # HOLD still runs the checks


def test_policy_preflight_runs_nothing(tmp_path: Path, standin: SandboxStandIn) -> None:
    cfg = config_yaml('  - {name: u, test: "exit 1"}\n', 'policy:\n  protected: ["infra/**"]\n')
    _, path = pr_repo(tmp_path, {CFG.encode(): cfg}, {b"infra/x": b"1"})
    assert main(["policy", "--repo", str(path), "--base", "main", "--head", "pr"]) == 11
    assert standin.images == []
    assert standin.ran == []


# --- configuration ----------------------------------------------------------------------


def test_no_config_in_base_is_inconclusive_and_no_sandbox_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], standin: SandboxStandIn
) -> None:
    _, path = pr_repo(tmp_path, {b"a": b"1"}, {b"a": b"2", CFG.encode(): config_yaml(TRUE_CHECK)})
    assert cli_prove(path, tmp_path / "out") == 13
    assert "no-config" in capsys.readouterr().err
    assert receipt_predicate(tmp_path / "out")["checks"] == []
    assert standin.images == []


def test_local_config_file_is_trusted_and_checks_see_the_head(tmp_path: Path) -> None:
    _, path = pr_repo(tmp_path, {b"a": b"1"}, {b"a": b"2"})
    cfg = tmp_path / "local.yml"
    cfg.write_bytes(config_yaml('  - {name: u, test: "grep -q 2 a"}\n'))
    factory = StandInFactory()
    run = _prove(path, factory, config_file=cfg)
    assert run.verdict is Verdict.PROVEN
    assert run.predicate["config"]["source"] == "file"  # type: ignore[index]
    assert factory.sandbox.trees["u"]["a"] == b"2"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--base", "nope", "--head", "pr"], "nope"),
        (["--base", "main", "--head", "pr", "--config", "/nonexistent.yml"], "/nonexistent.yml"),
    ],
    ids=["unknown-revision", "missing-config-file"],
)
def test_usage_errors_exit_2(
    tmp_path: Path, args: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = pr_repo(tmp_path, {b"a": b"1"}, {b"a": b"2"})
    assert main(["prove", "--repo", str(path), *args]) == 2
    assert fragment in capsys.readouterr().err


def test_bad_base_config_exits_2_naming_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], standin: SandboxStandIn
) -> None:
    bad = b"version: 1\nchecks: [{name: u, test: x, timeout: 15m}]\n"
    _, path = pr_repo(tmp_path, {CFG.encode(): bad}, {b"a": b"2"})
    before = snapshot(path)
    assert cli_prove(path, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert ".github/proofgate.yml" in err
    assert "checks[0].timeout" in err
    assert standin.images == []
    assert snapshot(path) == before


def test_not_a_repository_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--repo", str(tmp_path), "--base", "a", "--head", "b"]) == 2
    assert "repository" in capsys.readouterr().err


# --- approvals --------------------------------------------------------------------------


def test_held_change_with_signed_approval_is_proven(
    tmp_path: Path, keys: tuple[Path, Path], standin: SandboxStandIn
) -> None:
    cfg = config_yaml(TRUE_CHECK, 'policy:\n  protected: ["infra/**"]\n')
    _, path = pr_repo(tmp_path, {CFG.encode(): cfg}, {b"infra/main.tf": b"x"})
    out = tmp_path / "out"
    assert cli_prove(path, out, "--key", str(keys[0])) == 11
    approval = tmp_path / "approval.json"
    approve = ["approve", "--key", str(keys[0]), "--receipt", str(out / "receipt.json")]
    assert main([*approve, "--approver", "alice", "--out", str(approval)]) == 0
    out2 = tmp_path / "out2"
    assert cli_prove(path, out2, "--key", str(keys[0]), "--approval", str(approval)) == 0
    assert receipt_predicate(out2)["approval"]["approver"] == "alice"  # type: ignore[index]


def test_approval_for_another_patch_leaves_the_change_held(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str], standin: object
) -> None:
    cfg = config_yaml(TRUE_CHECK, 'policy:\n  protected: ["infra/**"]\n')
    _, path = pr_repo(tmp_path, {CFG.encode(): cfg}, {b"infra/main.tf": b"x"})
    approval = tmp_path / "approval.json"
    assert (
        main(
            [
                "approve",
                "--key",
                str(keys[0]),
                "--approver",
                "mallory",
                "--patch-sha256",
                "0" * 64,
                "--policy-fingerprint",
                "f" * 64,
                "--out",
                str(approval),
            ]
        )  # fmt: skip
        == 0
    )
    out = tmp_path / "out"
    assert cli_prove(path, out, "--key", str(keys[0]), "--approval", str(approval)) == 11
    predicate = receipt_predicate(out)
    assert "approval" not in predicate
    assert "approval-invalid" in {r["code"] for r in predicate["reasons"]}  # type: ignore[union-attr]


def test_approval_needs_a_trusted_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], standin: SandboxStandIn
) -> None:
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(TRUE_CHECK)}, {b"a": b"1"})
    approval = tmp_path / "approval.json"
    approval.write_text("{}")
    assert cli_prove(path, tmp_path / "out", "--approval", str(approval)) == 2
    assert "--approver-key" in capsys.readouterr().err
    assert standin.images == []


# --- receipts ---------------------------------------------------------------------------


def test_unsigned_receipt_warns_and_never_verifies(
    tmp_path: Path,
    keys: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    standin: SandboxStandIn,
) -> None:
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(TRUE_CHECK)}, {b"a": b"1"})
    assert cli_prove(path, tmp_path / "out") == 0
    assert "UNSIGNED" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "out" / "receipt.json"), "--key", str(keys[1])]) == 1


def test_signed_receipt_verifies_and_its_keyid_is_the_spki_sha256(
    tmp_path: Path, keys: tuple[Path, Path], standin: SandboxStandIn
) -> None:
    repo, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(TRUE_CHECK)}, {b"a": b"1"})
    out = tmp_path / "out"
    assert cli_prove(path, out, "--key", str(keys[0])) == 0
    head = str(repo.revparse_single("pr").id)
    verify = ["verify", str(out / "receipt.json"), "--key", str(keys[1]), "--commit", head]
    assert main([*verify, "--patch", str(out / "patch.diff"), "--require", "PROVEN"]) == 0
    (signature,) = json.loads((out / "receipt.json").read_bytes())["signatures"]
    pub = serialization.load_pem_public_key(keys[1].read_bytes())
    spki = pub.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    assert signature["keyid"] == hashlib.sha256(spki).hexdigest()
    assert main(["keygen", "--out", str(tmp_path / "other")]) == 0
    assert main([*verify[:2], "--key", str(tmp_path / "other" / "proofgate.pub")]) == 1


# --- the clean room unavailable ---------------------------------------------------------


def test_no_daemon_is_inconclusive_docker_unavailable(tmp_path: Path) -> None:
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(TRUE_CHECK)}, {b"a": b"1"})
    before = snapshot(path)
    run = _prove(path, StandInFactory(unavailable="no Docker daemon answers"))
    assert run.verdict is Verdict.INCONCLUSIVE
    assert _codes(run) == ["docker-unavailable"]
    assert snapshot(path) == before


def test_image_that_does_not_resolve_is_inconclusive(tmp_path: Path) -> None:
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(TRUE_CHECK)}, {b"a": b"1"})
    factory = StandInFactory(SandboxStandIn(image_error="no such image"))
    run = _prove(path, factory)
    assert run.verdict is Verdict.INCONCLUSIVE
    assert _codes(run) == ["image-unresolved"]
    assert factory.sandbox.ran == []


def test_daemon_lost_during_the_second_check_keeps_the_first(tmp_path: Path) -> None:
    checks = '  - {name: one, test: "true"}\n  - {name: two, test: "true"}\n'
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(checks)}, {b"a": b"1"})
    sandbox = SandboxStandIn(scripts={"two": Script(raises=SandboxError("daemon went away"))})
    run = _prove(path, StandInFactory(sandbox))
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "docker-unavailable" in _codes(run)
    assert [c["name"] for c in run.predicate["checks"]] == ["one"]  # type: ignore[union-attr]


def test_ctrl_c_while_a_check_runs_writes_an_interrupted_receipt(
    tmp_path: Path, standin: SandboxStandIn
) -> None:
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(TRUE_CHECK)}, {b"a": b"1"})
    standin.scripts = {"u": Script(raises=KeyboardInterrupt())}
    assert cli_prove(path, tmp_path / "out") == 13
    predicate = receipt_predicate(tmp_path / "out")
    assert "interrupted" in {r["code"] for r in predicate["reasons"]}  # type: ignore[union-attr]


# --- check results -> verdicts ----------------------------------------------------------


FAILED, INCONCLUSIVE = Verdict.FAILED, Verdict.INCONCLUSIVE


VERDICT_CASES = [
    (TRUE_CHECK, Script(exit_codes=(1,)), FAILED, "check-failed"),
    (TRUE_CHECK, Script(exit_codes=(137,), timed_out=True), FAILED, "check-timed-out"),
    (TRUE_CHECK, Script(exit_codes=(137,), oom_killed=True), FAILED, "check-oom-killed"),
    (TRUE_CHECK, Script(error="cannot create"), INCONCLUSIVE, "container-failed"),
    (JUNIT_CHECK, Script(junit=JUNIT_FAILED), FAILED, "junit-failures"),
    (JUNIT_CHECK, Script(), INCONCLUSIVE, "junit-missing"),
    (JUNIT_CHECK, Script(junit=b"<not xml"), INCONCLUSIVE, "junit-invalid"),
    (JUNIT_CHECK, Script(junit=b"<testsuite/>"), INCONCLUSIVE, "junit-no-tests"),
    ('  - {name: u, build: "true"}\n', Script(), INCONCLUSIVE, "no-test-phase"),
]


@pytest.mark.parametrize(
    ("check", "script", "verdict", "code"), VERDICT_CASES, ids=[c[3] for c in VERDICT_CASES]
)
def test_check_result_maps_to_verdict(
    tmp_path: Path, check: str, script: Script, verdict: Verdict, code: str
) -> None:
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(check)}, {b"a": b"1"})
    run = _prove(path, StandInFactory(SandboxStandIn(scripts={"u": script})))
    assert run.verdict is verdict
    assert code in _codes(run)


def test_passing_junit_report_is_proven(tmp_path: Path) -> None:
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(JUNIT_CHECK)}, {b"a": b"1"})
    run = _prove(path, StandInFactory(SandboxStandIn(scripts={"u": Script(junit=JUNIT_PASSED)})))
    assert run.verdict is Verdict.PROVEN
    assert run.reasons == ()


def test_a_failing_setup_stops_the_check_before_build_and_test(tmp_path: Path) -> None:
    check = '  - {name: u, setup: "false", build: "true", test: "true"}\n'
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(check)}, {b"a": b"1"})
    run = _prove(path, StandInFactory(SandboxStandIn(scripts={"u": Script(exit_codes=(2,))})))
    assert run.verdict is Verdict.FAILED
    (result,) = run.predicate["checks"]  # type: ignore[misc]
    assert [p["phase"] for p in result["phases"]] == ["setup"]


def test_every_check_gets_the_same_fresh_tree(tmp_path: Path) -> None:
    checks = '  - {name: one, test: "true"}\n  - {name: two, test: "true"}\n'
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(checks), b"a": b"1"}, {b"b": b"2"})
    factory = StandInFactory()
    run = _prove(path, factory)
    assert run.verdict is Verdict.PROVEN
    trees = factory.sandbox.trees
    assert trees["one"] == trees["two"]
    assert trees["one"]["a"] == b"1"
    assert trees["one"]["b"] == b"2"
    assert factory.calls == 1


# --- concurrent checks ------------------------------------------------------------------


def _events(run: ProofRun, kind: str) -> list[dict[str, object]]:
    events = run.predicate["journal"]["events"]  # type: ignore[index]
    return [e for e in events if e["kind"] == kind]  # type: ignore[union-attr]


def _names(run: ProofRun, kind: str) -> list[str]:
    return [e["data"]["check"] for e in _events(run, kind)]  # type: ignore[index]


THREE_CHECKS = (
    '  - {name: one, test: "true", cpus: 1}\n'
    '  - {name: two, test: "true", cpus: 1}\n'
    '  - {name: three, test: "true", cpus: 1}\n'
)


def test_checks_that_fit_in_the_cores_run_concurrently_and_keep_config_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`one` runs on only once `three` has started and `three` once `two` has: run one
    after another, `one` would never get past its wait. The receipt keeps config order."""
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(THREE_CHECKS)}, {b"a": b"1"})
    sandbox = SandboxStandIn(
        scripts={"one": Script(wait_for="three"), "three": Script(wait_for="two")}
    )
    run = _prove(path, StandInFactory(sandbox))
    assert run.verdict is Verdict.PROVEN, _codes(run)
    assert [c["name"] for c in run.predicate["checks"]] == ["one", "two", "three"]  # type: ignore[union-attr]
    assert _names(run, "check-started") == ["one", "two", "three"]
    assert sorted(_names(run, "check-finished")) == ["one", "three", "two"]
    assert journal_chain_holds(run)


def test_checks_wait_for_free_cores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cores, checks of one core each: the third starts only when one has finished."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(THREE_CHECKS)}, {b"a": b"1"})
    run = _prove(path, StandInFactory())
    assert run.verdict is Verdict.PROVEN
    kinds = [
        (e["kind"], e["data"]["check"])  # type: ignore[index]
        for e in _events(run, "check-started") + _events(run, "check-finished")
    ]
    events = sorted(kinds, key=lambda k: _seq(run, *k))
    third = events.index(("check-started", "three"))
    assert [k for k, _ in events[:third]].count("check-finished") >= 1
    assert [k for k, _ in events[:2]] == ["check-started", "check-started"]


def test_a_check_asking_for_more_cores_than_there_are_runs_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    checks = '  - {name: one, test: "true", cpus: 8}\n  - {name: two, test: "true", cpus: 1}\n'
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(checks)}, {b"a": b"1"})
    run = _prove(path, StandInFactory())
    assert run.verdict is Verdict.PROVEN
    assert _seq(run, "check-finished", "one") < _seq(run, "check-started", "two")


def test_ctrl_c_while_checks_run_concurrently_stops_every_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, standin: SandboxStandIn
) -> None:
    """The Ctrl-C reaches the main thread while `one` runs on in a worker: it is told to
    stop, removes its container, and the receipt says interrupted."""
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    checks = '  - {name: one, test: "true", cpus: 1}\n  - {name: two, test: "true", cpus: 1}\n'
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(checks)}, {b"a": b"1"})
    standin.scripts = {
        "one": Script(until_stopped=True),
        "two": Script(wait_for="one", interrupt_main=True),
    }
    assert cli_prove(path, tmp_path / "out") == 13
    predicate = receipt_predicate(tmp_path / "out")
    assert "interrupted" in {r["code"] for r in predicate["reasons"]}  # type: ignore[union-attr]
    events = predicate["journal"]["events"]  # type: ignore[index]
    removed = [e["data"]["check"] for e in events if e["kind"] == "container-removed"]  # type: ignore[index]
    assert "one" in removed
    ended = [e["data"]["check"] for e in events if e["kind"] == "check-ended"]  # type: ignore[index]
    assert "one" in ended
    assert [e["kind"] for e in events].index("interrupted") > max(
        i
        for i, e in enumerate(events)
        if e["kind"] == "container-removed"  # type: ignore[index]
    )


def test_a_failure_in_one_concurrent_check_stops_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    checks = '  - {name: one, test: "true", cpus: 1}\n  - {name: two, test: "true", cpus: 1}\n'
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(checks)}, {b"a": b"1"})
    sandbox = SandboxStandIn(
        scripts={
            "one": Script(until_stopped=True),
            "two": Script(wait_for="one", raises=SandboxError("daemon went away")),
        }
    )
    run = _prove(path, StandInFactory(sandbox))
    assert run.verdict is Verdict.INCONCLUSIVE
    assert "docker-unavailable" in _codes(run)
    assert sorted(_names(run, "check-ended")) == ["one", "two"]


def _seq(run: ProofRun, kind: str, check: str) -> int:
    (event,) = [e for e in _events(run, kind) if e["data"]["check"] == check]  # type: ignore[index]
    return int(event["seq"])  # type: ignore[call-overload]


def journal_chain_holds(run: ProofRun) -> bool:
    journal = run.predicate["journal"]
    return verify_chain(journal["events"], journal["head"]) is None  # type: ignore[index]


def test_ctrl_c_during_a_check_also_stops_the_differential_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, standin: SandboxStandIn
) -> None:
    """The base run runs beside the head run until told to stop; without the stop it
    would run on (here: its KeyboardInterrupt would escape)."""
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    _, path = pr_repo(tmp_path, {CFG.encode(): config_yaml(JUNIT_CHECK)}, {b"a": b"1"})
    standin.scripts = {
        "u": Script(wait_for="u@base", raises=KeyboardInterrupt()),
        "u@base": Script(until_stopped=True),
    }
    assert cli_prove(path, tmp_path / "out") == 13
    predicate = receipt_predicate(tmp_path / "out")
    assert "interrupted" in {r["code"] for r in predicate["reasons"]}  # type: ignore[union-attr]
    events = predicate["journal"]["events"]  # type: ignore[index]
    finished = [e["data"] for e in events if e["kind"] == "differential-run-finished"]  # type: ignore[index]
    assert finished == [{"check": "u", "run": "base", "tests": 0, "problem": "interrupted"}]
