"""`proofgate prove` end to end: real git repositories, the real Docker daemon, cli.main.

Every test asserts what a user sees (exit code, stderr, receipt fields) and that the
user's repository is byte-identical afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest

from gate import receipt
from gate.cli import main
from tests.gitutil import EXEC, commit, make_repo, repo_dir, snapshot

pytestmark = pytest.mark.docker

IMAGE = "proofgate/cleanroom:latest"


def _config(checks: str, policy: str = "") -> bytes:
    return (
        f"version: 1\nimage: {IMAGE}\ndefaults: {{timeout: 60, memory: 256m, pids: 64}}\n"
        f"checks:\n{checks}{policy}"
    ).encode()


PYTEST_CHECK = """  - name: unit
    test: [["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=out/junit.xml"]]
    junit: out/junit.xml
"""

CALC = b"def add(a, b):\n    return a + b\n"
TEST = b"from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    return tmp_path / "keys" / "proofgate.key", tmp_path / "keys" / "proofgate.pub"


def _repo(
    tmp_path: Path, base: dict[bytes, object], head: dict[bytes, object]
) -> tuple[pygit2.Repository, Path]:
    repo = make_repo(tmp_path)
    base_id = commit(repo, base, message="base")  # type: ignore[arg-type]
    commit(repo, head, branch="pr", parent=base_id, message="pr")  # type: ignore[arg-type]
    return repo, repo_dir(repo)


def _prove(path: Path, out: Path, *extra: str) -> int:
    return main(
        ["prove", "--repo", str(path), "--base", "main", "--head", "pr", "--out", str(out), *extra]
    )


def _predicate(out: Path) -> dict[str, object]:
    envelope = json.loads((out / "receipt.json").read_bytes())
    import base64

    statement = json.loads(base64.b64decode(envelope["payload"]))
    return statement["predicate"]  # type: ignore[no-any-return]


def test_honest_pr_is_proven_and_receipt_verifies(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    repo, path = _repo(
        tmp_path,
        {b".github/proofgate.yml": _config(PYTEST_CHECK), b"calc.py": CALC, b"test_calc.py": TEST},
        {
            b"calc.py": CALC + b"\n\ndef mul(a, b):\n    return a * b\n",
            b"test_mul.py": b"from calc import mul\n\n\ndef test_mul():\n"
            b"    assert mul(2, 3) == 6\n",
            b"run.sh": (b"#!/bin/sh\necho hi\n", EXEC),
        },
    )
    before = snapshot(path)
    out = tmp_path / "out"
    assert _prove(path, out, "--key", str(keys[0])) == 0
    assert snapshot(path) == before
    predicate = _predicate(out)
    assert predicate["verdict"] == "PROVEN"
    head = str(repo.revparse_single("pr").id)
    assert predicate["head"]["commit"] == head  # type: ignore[index]
    assert predicate["proven_tree"] == str(repo.revparse_single("pr").peel(pygit2.Tree).id)
    (check,) = predicate["checks"]  # type: ignore[misc]
    assert check["image_digest"].startswith("sha256:")
    assert (out / "receipt.md").read_text().startswith("#")
    assert (
        main(
            [
                "verify",
                str(out / "receipt.json"),
                "--key",
                str(keys[1]),
                "--commit",
                head,
                "--patch",
                str(out / "patch.diff"),
                "--require",
                "PROVEN",
            ]
        )
        == 0
    )
    # replayed on another commit: refused
    base = str(repo.revparse_single("main").id)
    assert main(["verify", str(out / "receipt.json"), "--key", str(keys[1]), "--commit", base]) == 1


def test_false_pass_fixture_is_failed(tmp_path: Path) -> None:
    """The post-mortem: check one deletes the flag, check two must still see it."""
    checks = (
        '  - {name: remove, test: "rm broken.flag"}\n'
        '  - {name: absent, test: "test ! -e broken.flag"}\n'
    )
    _, path = _repo(
        tmp_path,
        {b".github/proofgate.yml": _config(checks), b"empty": b""},
        {b"broken.flag": b"x\n"},
    )
    out = tmp_path / "out"
    assert _prove(path, out) == 10
    predicate = _predicate(out)
    assert predicate["verdict"] == "FAILED"
    assert [r["check"] for r in predicate["reasons"]] == ["absent"]  # type: ignore[union-attr]


def test_check_corrupting_its_copy_does_not_affect_the_next(tmp_path: Path) -> None:
    checks = (
        '  - {name: vandal, test: "rm -rf ./* && echo junk > data.txt"}\n'
        '  - {name: reader, test: "grep -q original data.txt && test -f keep.txt"}\n'
    )
    _, path = _repo(
        tmp_path,
        {b".github/proofgate.yml": _config(checks), b"data.txt": b"original\n"},
        {b"keep.txt": b"k\n"},
    )
    assert _prove(path, tmp_path / "out") == 0


def test_pr_editing_config_is_held(tmp_path: Path) -> None:
    """The PR weakens the test command; it is judged by the base's config, and HELD."""
    strict = '  - {name: unit, test: "test -f must-exist"}\n'
    lax = '  - {name: unit, test: "true"}\n'
    _, path = _repo(
        tmp_path,
        {b".github/proofgate.yml": _config(strict), b"must-exist": b"1"},
        {b".github/proofgate.yml": _config(lax), b"must-exist": None},
    )
    out = tmp_path / "out"
    code = _prove(path, out)
    predicate = _predicate(out)
    assert code == 10  # FAILED (base rule still applies) is worse than HELD
    assert predicate["policy"]["decision"] == "HOLD"  # type: ignore[index]
    assert "gate-config-changed" in {f["rule"] for f in predicate["policy"]["findings"]}  # type: ignore[index]


def test_pr_editing_config_alone_is_held(tmp_path: Path) -> None:
    cfg = _config('  - {name: unit, test: "true"}\n')
    _, path = _repo(
        tmp_path, {b".github/proofgate.yml": cfg}, {b".github/proofgate.yml": cfg + b"# x\n"}
    )
    assert _prove(path, tmp_path / "out") == 11


def test_no_config_in_base_is_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _repo(
        tmp_path,
        {b"a": b"1"},
        {b"a": b"2", b".github/proofgate.yml": _config('  - {name: u, test: "true"}\n')},
    )
    assert _prove(path, tmp_path / "out") == 13
    assert "no-config" in capsys.readouterr().err
    assert _predicate(tmp_path / "out")["checks"] == []


def test_local_config_file_is_trusted(tmp_path: Path) -> None:
    _, path = _repo(tmp_path, {b"a": b"1"}, {b"a": b"2"})
    cfg = tmp_path / "local.yml"
    cfg.write_bytes(_config('  - {name: u, test: "grep -q 2 a"}\n'))
    assert _prove(path, tmp_path / "out", "--config", str(cfg)) == 0
    assert _predicate(tmp_path / "out")["config"]["source"] == "file"  # type: ignore[index]


def test_denied_path_is_blocked_and_runs_nothing(tmp_path: Path) -> None:
    cfg = _config('  - {name: u, test: "true"}\n', 'policy:\n  deny: ["**/*.pem"]\n')
    _, path = _repo(tmp_path, {b".github/proofgate.yml": cfg}, {b"certs/server.pem": b"x"})
    assert _prove(path, tmp_path / "out") == 12
    predicate = _predicate(tmp_path / "out")
    assert predicate["checks"] == []
    kinds = [e["kind"] for e in predicate["journal"]["events"]]  # type: ignore[index]
    assert not any(k.startswith("container") for k in kinds)


def test_host_secrets_never_reach_the_clean_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROOFGATE_TEST_SECRET", "hunter2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_notreally")
    checks = "  - {name: u, test: \"env | grep -E 'hunter2|ghs_' && exit 1 || exit 0\"}\n"
    _, path = _repo(tmp_path, {b".github/proofgate.yml": _config(checks)}, {b"a": b"1"})
    assert _prove(path, tmp_path / "out") == 0


def test_network_is_unreachable_from_checks(tmp_path: Path) -> None:
    probe = (
        "import socket, sys; s = socket.socket(); s.settimeout(3); "
        "sys.exit(0 if s.connect_ex(('1.1.1.1', 53)) == 0 else 1)"
    )
    checks = f"  - name: u\n    test: [{json.dumps(['python3', '-c', probe])}]\n"
    _, path = _repo(tmp_path, {b".github/proofgate.yml": _config(checks)}, {b"a": b"1"})
    assert _prove(path, tmp_path / "out") == 10


def test_timeout_is_failed(tmp_path: Path) -> None:
    checks = '  - {name: slow, test: "sleep 600", timeout: 2}\n'
    _, path = _repo(tmp_path, {b".github/proofgate.yml": _config(checks)}, {b"a": b"1"})
    assert _prove(path, tmp_path / "out") == 10
    (reason,) = _predicate(tmp_path / "out")["reasons"]  # type: ignore[misc]
    assert reason["code"] == "check-timed-out"


def test_missing_junit_report_is_inconclusive(tmp_path: Path) -> None:
    checks = '  - {name: u, test: "true", junit: out/junit.xml}\n'
    _, path = _repo(tmp_path, {b".github/proofgate.yml": _config(checks)}, {b"a": b"1"})
    assert _prove(path, tmp_path / "out") == 13


def test_forged_junit_report_in_patch_is_not_proven(tmp_path: Path) -> None:
    checks = '  - {name: u, test: "true", junit: out/junit.xml}\n'
    forged = b'<testsuite><testcase name="fake"/></testsuite>'
    _, path = _repo(
        tmp_path, {b".github/proofgate.yml": _config(checks)}, {b"out/junit.xml": forged}
    )
    assert _prove(path, tmp_path / "out") == 13


def test_missing_image_is_inconclusive(tmp_path: Path) -> None:
    cfg = _config('  - {name: u, test: "true"}\n').replace(
        IMAGE.encode(), b"proofgate/no-such-image:1"
    )
    _, path = _repo(tmp_path, {b".github/proofgate.yml": cfg}, {b"a": b"1"})
    assert _prove(path, tmp_path / "out") == 13
    assert _predicate(tmp_path / "out")["reasons"][0]["code"] == "image-unresolved"  # type: ignore[index]


def test_docker_unreachable_is_inconclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    _, path = _repo(
        tmp_path, {b".github/proofgate.yml": _config('  - {name: u, test: "true"}\n')}, {b"a": b"1"}
    )
    before = snapshot(path)
    assert _prove(path, tmp_path / "out") == 13
    reasons = _predicate(tmp_path / "out")["reasons"]
    assert [r["code"] for r in reasons] == ["docker-unavailable"]  # type: ignore[union-attr]
    assert snapshot(path) == before


def test_unsigned_receipt_warns_and_never_verifies(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _repo(
        tmp_path, {b".github/proofgate.yml": _config('  - {name: u, test: "true"}\n')}, {b"a": b"1"}
    )
    assert _prove(path, tmp_path / "out") == 0
    assert "UNSIGNED" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "out" / "receipt.json"), "--key", str(keys[1])]) == 1


def test_held_change_with_signed_approval_is_proven(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    cfg = _config('  - {name: u, test: "true"}\n', 'policy:\n  protected: ["infra/**"]\n')
    _, path = _repo(tmp_path, {b".github/proofgate.yml": cfg}, {b"infra/main.tf": b"x"})
    out = tmp_path / "out"
    assert _prove(path, out, "--key", str(keys[0])) == 11
    approval = tmp_path / "approval.json"
    assert (
        main(
            [
                "approve",
                "--key",
                str(keys[0]),
                "--receipt",
                str(out / "receipt.json"),
                "--approver",
                "alice",
                "--out",
                str(approval),
            ]
        )
        == 0
    )
    assert _prove(path, tmp_path / "out2", "--key", str(keys[0]), "--approval", str(approval)) == 0
    assert _predicate(tmp_path / "out2")["approval"]["approver"] == "alice"  # type: ignore[index]


def test_policy_preflight_runs_nothing(tmp_path: Path) -> None:
    cfg = _config('  - {name: u, test: "exit 1"}\n', 'policy:\n  protected: ["infra/**"]\n')
    _, path = _repo(tmp_path, {b".github/proofgate.yml": cfg}, {b"infra/x": b"1"})
    assert main(["policy", "--repo", str(path), "--base", "main", "--head", "pr"]) == 11


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
    _, path = _repo(tmp_path, {b"a": b"1"}, {b"a": b"2"})
    assert main(["prove", "--repo", str(path), *args]) == 2
    assert fragment in capsys.readouterr().err


def test_bad_base_config_exits_2_naming_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = b"version: 1\nchecks: [{name: u, test: x, timeout: 15m}]\n"
    _, path = _repo(tmp_path, {b".github/proofgate.yml": bad}, {b"a": b"2"})
    assert _prove(path, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert ".github/proofgate.yml" in err
    assert "checks[0].timeout" in err


def test_not_a_repository_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--repo", str(tmp_path), "--base", "a", "--head", "b"]) == 2
    assert "repository" in capsys.readouterr().err


def test_receipt_keyid_is_spki_sha256(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    _, path = _repo(
        tmp_path, {b".github/proofgate.yml": _config('  - {name: u, test: "true"}\n')}, {b"a": b"1"}
    )
    assert _prove(path, tmp_path / "out", "--key", str(keys[0])) == 0
    envelope = json.loads((tmp_path / "out" / "receipt.json").read_bytes())
    pub = receipt.load_public_key(keys[1].read_bytes(), source="pub")
    assert envelope["signatures"][0]["keyid"] == receipt.keyid(pub)
