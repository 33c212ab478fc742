"""`proofgate prove` end to end: real git repositories, the real Docker daemon, cli.main.

Every test asserts what a user sees (exit code, stderr, receipt fields) and that the
user's repository is byte-identical afterwards. The cases that never need a container
(policy paths, configuration, approvals, verdict mapping) are in
tests/unit/test_prove_orchestration.py, against the Sandbox stand-in.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from pathlib import Path

import docker
import pygit2
import pytest

from gate.faces.cli import main
from tests.gitutil import EXEC, snapshot
from tests.provecli import IMAGE, cli_prove, config_yaml, pr_repo, receipt_predicate

pytestmark = pytest.mark.docker


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


def test_honest_pr_is_proven_and_receipt_verifies(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    repo, path = pr_repo(
        tmp_path,
        {
            b".github/proofgate.yml": config_yaml(PYTEST_CHECK),
            b"calc.py": CALC,
            b"test_calc.py": TEST,
        },
        {
            b"calc.py": CALC + b"\n\ndef mul(a, b):\n    return a * b\n",
            b"test_mul.py": b"from calc import mul\n\n\ndef test_mul():\n"
            b"    assert mul(2, 3) == 6\n",
            b"run.sh": (b"#!/bin/sh\necho hi\n", EXEC),
        },
    )
    before = snapshot(path)
    out = tmp_path / "out"
    assert cli_prove(path, out, "--key", str(keys[0])) == 0
    assert snapshot(path) == before
    predicate = receipt_predicate(out)
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
    _, path = pr_repo(
        tmp_path,
        {b".github/proofgate.yml": config_yaml(checks), b"empty": b""},
        {b"broken.flag": b"x\n"},
    )
    out = tmp_path / "out"
    assert cli_prove(path, out) == 10
    predicate = receipt_predicate(out)
    assert predicate["verdict"] == "FAILED"
    assert [r["check"] for r in predicate["reasons"]] == ["absent"]  # type: ignore[union-attr]


def test_check_corrupting_its_copy_does_not_affect_the_next(tmp_path: Path) -> None:
    checks = (
        '  - {name: vandal, test: "rm -rf ./* && echo junk > data.txt"}\n'
        '  - {name: reader, test: "grep -q original data.txt && test -f keep.txt"}\n'
    )
    _, path = pr_repo(
        tmp_path,
        {b".github/proofgate.yml": config_yaml(checks), b"data.txt": b"original\n"},
        {b"keep.txt": b"k\n"},
    )
    assert cli_prove(path, tmp_path / "out") == 0


def test_host_secrets_never_reach_the_clean_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROOFGATE_TEST_SECRET", "hunter2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_notreally")
    checks = "  - {name: u, test: \"env | grep -E 'hunter2|ghs_' && exit 1 || exit 0\"}\n"
    _, path = pr_repo(tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"a": b"1"})
    assert cli_prove(path, tmp_path / "out") == 0


def test_network_is_unreachable_from_checks(tmp_path: Path) -> None:
    probe = (
        "import socket, sys; s = socket.socket(); s.settimeout(3); "
        "sys.exit(0 if s.connect_ex(('1.1.1.1', 53)) == 0 else 1)"
    )
    checks = f"  - name: u\n    test: [{json.dumps(['python3', '-c', probe])}]\n"
    _, path = pr_repo(tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"a": b"1"})
    assert cli_prove(path, tmp_path / "out") == 10


def test_timeout_is_failed(tmp_path: Path) -> None:
    checks = '  - {name: slow, test: "sleep 600", timeout: 2}\n'
    _, path = pr_repo(tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"a": b"1"})
    assert cli_prove(path, tmp_path / "out") == 10
    (reason,) = receipt_predicate(tmp_path / "out")["reasons"]  # type: ignore[misc]
    assert reason["code"] == "check-timed-out"


def test_missing_junit_report_is_inconclusive(tmp_path: Path) -> None:
    checks = '  - {name: u, test: "true", junit: out/junit.xml}\n'
    _, path = pr_repo(tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"a": b"1"})
    assert cli_prove(path, tmp_path / "out") == 13


def test_forged_junit_report_in_patch_is_not_proven(tmp_path: Path) -> None:
    checks = '  - {name: u, test: "true", junit: out/junit.xml}\n'
    forged = b'<testsuite><testcase name="fake"/></testsuite>'
    _, path = pr_repo(
        tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"out/junit.xml": forged}
    )
    assert cli_prove(path, tmp_path / "out") == 13


def test_missing_image_is_inconclusive(tmp_path: Path) -> None:
    cfg = config_yaml('  - {name: u, test: "true"}\n').replace(
        IMAGE.encode(), b"proofgate/no-such-image:1"
    )
    _, path = pr_repo(tmp_path, {b".github/proofgate.yml": cfg}, {b"a": b"1"})
    assert cli_prove(path, tmp_path / "out") == 13
    assert receipt_predicate(tmp_path / "out")["reasons"][0]["code"] == "image-unresolved"  # type: ignore[index]


def test_docker_unreachable_is_inconclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    _, path = pr_repo(
        tmp_path,
        {b".github/proofgate.yml": config_yaml('  - {name: u, test: "true"}\n')},
        {b"a": b"1"},
    )
    before = snapshot(path)
    assert cli_prove(path, tmp_path / "out") == 13
    reasons = receipt_predicate(tmp_path / "out")["reasons"]
    assert [r["code"] for r in reasons] == ["docker-unavailable"]  # type: ignore[union-attr]
    assert snapshot(path) == before


def test_checks_that_fit_in_the_cores_overlap_in_time(tmp_path: Path) -> None:
    """Two half-core checks: the second one's command starts before the first one's has
    ended (the journal's offsets), so they ran concurrently, each in its own containers."""
    checks = (
        '  - {name: one, test: "sleep 4", cpus: 0.5}\n  - {name: two, test: "sleep 4", cpus: 0.5}\n'
    )
    _, path = pr_repo(tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"a": b"1"})
    out = tmp_path / "out"
    assert cli_prove(path, out) == 0
    predicate = receipt_predicate(out)
    assert [c["name"] for c in predicate["checks"]] == ["one", "two"]  # type: ignore[union-attr]
    events = predicate["journal"]["events"]  # type: ignore[index]
    span: dict[str, list[float]] = {}
    for e in events:
        if e["kind"] in ("command-started", "command-finished"):
            span.setdefault(e["data"]["check"], []).append(e["t"])
    (start_one, end_one), (start_two, end_two) = span["one"], span["two"]
    assert start_two < end_one, span
    assert start_one < end_two, span
    containers = {e["data"]["container"] for e in events if e["kind"] == "container-created"}
    assert len(containers) >= 2


def test_a_reproof_with_the_same_setup_inputs_skips_setup(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The receipt says miss, then hit with the same key and cached image; it verifies."""
    check = (
        "  - name: unit\n"
        '    setup: "test ! -e app.txt && cat requirements.txt > /opt/deps"\n'
        '    test: "grep -q pinned /opt/deps && test -f app.txt"\n'
        '    setup_inputs: ["requirements.txt"]\n'
    )
    pinned = f"pinned {secrets.token_hex(8)}\n".encode()  # a key no earlier run made
    cfg = {b".github/proofgate.yml": config_yaml(check), b"requirements.txt": pinned}
    environments = []
    try:
        for n in range(2):
            _, path = pr_repo(tmp_path / str(n), cfg, {b"app.txt": str(n).encode()})
            out = tmp_path / f"out{n}"
            assert cli_prove(path, out, "--key", str(keys[0])) == 0
            (shown,) = receipt_predicate(out)["checks"]  # type: ignore[misc]
            environments.append(shown["environment"])
            assert [p["phase"] for p in shown["phases"]] == ["setup", "test"]
            assert main(["verify", str(out / "receipt.json"), "--key", str(keys[1])]) == 0
        capsys.readouterr()
        assert main(["cache", "ls"]) == 0
        listed = capsys.readouterr().out
    finally:
        with contextlib.closing(docker.from_env()) as client:
            for image in {e["image"] for e in environments if e.get("image")}:
                client.api.remove_image(image, force=True)
    miss, hit = environments
    assert miss["cache"] == "miss"
    assert hit == {**miss, "cache": "hit"}
    assert f"{hit['image'][7:19]}  " in listed
    assert f"key {hit['key']}" in listed
