"""The base's outcomes from the base tree's own receipt (SPEC §3.1, §5: `prove
--base-receipt FILE --base-key PUB`).

A repository of three commits: `v0`, then `main` (the commit a pull request branches
from, whose own proof, `v0..main`, is the merge queue's receipt), then the pull request.
Proving the pull request with that receipt takes the base's outcomes from it instead of
running the base's tests; every receipt that does not stand for the base run is refused,
named, and the proof runs the base's tests and reaches the verdict it reaches without a
receipt. Real git, real Docker, the CLI; the base-run cache is empty throughout (a fresh
CI runner).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.attacks.corpus import KEYS, Built, Workspace, predicate_of, prove
from tests.attacks.test_differential import (
    CALC2,
    CALC2_BROKEN,
    TESTS_CALC,
    _codes,
    _config,
    _detail,
    _tests_block,
)
from tests.gitutil import Content, commit, make_repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]

MUL = CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n"
MUL_TESTS = b"from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh runner: no base-run cache, no receipt of a run kept on the machine."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _repo(
    ws: Workspace, pr: dict[bytes, Content], main: dict[bytes, Content] | None = None
) -> Path:
    repo = make_repo(ws.root)
    v0 = commit(
        repo,
        {b".github/proofgate.yml": _config(), b"calc.py": CALC2, b"tests/test_calc.py": TESTS_CALC},
    )
    repo.references.create("refs/heads/v0", v0)
    tip = commit(
        repo, main if main is not None else {b"calc.py": CALC2 + b"# main\n"}, message="main"
    )
    commit(repo, pr, branch="pr", parent=tip, message="pull request")
    return Path(repo.workdir)


def _base_receipt(ws: Workspace, path: Path, out: Path) -> Path:
    """The merge queue's proof of `main` (v0..main): its receipt."""
    seen = prove(ws, Built(repo=path, base="v0", head="main"), out)
    assert seen.outcome == "PROVEN", seen.log[-3000:]
    return out / "receipt.json"


def _prove_pr(ws: Workspace, path: Path, out: Path, *args: str) -> tuple[str, dict[str, object]]:
    seen = prove(ws, Built(repo=path, args=args), out)
    assert not seen.problems, seen.problems
    return seen.outcome, predicate_of((out / "receipt.json").read_bytes())


def _base_ran(pred: dict[str, object]) -> bool:
    events = pred["journal"]["events"]  # type: ignore[index]
    return any(e["kind"] == "command-started" and e["data"].get("run") == "base" for e in events)  # type: ignore[union-attr]


def test_the_base_receipt_gives_the_base_outcomes_and_the_same_verdict(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    path = _repo(ws, {b"calc.py": MUL, b"tests/test_mul.py": MUL_TESTS})
    receipt = _base_receipt(ws, path, tmp_path / "main")
    as_base = _tests_block(predicate_of(receipt.read_bytes()))["as_base"]
    assert isinstance(as_base, dict)
    assert as_base["count"] == 2
    outcome, pred = _prove_pr(
        ws, path, tmp_path / "pr", "--base-receipt", str(receipt), "--base-key", str(ws.pub)
    )
    assert outcome == "PROVEN", _detail_of(pred)
    block = _tests_block(pred)
    assert str(block["reused"]["base"]).startswith("base receipt sha256:")  # type: ignore[index]
    assert block["runs"]["base"]["pass"] == 2  # type: ignore[index]
    assert not _base_ran(pred)
    # the same change without the receipt: the same verdict, the base's tests run
    outcome, plain = _prove_pr(ws, path, tmp_path / "plain")
    assert outcome == "PROVEN"
    assert _base_ran(plain)
    assert _tests_block(plain)["runs"]["base"] == block["runs"]["base"]  # type: ignore[index]


def test_a_broken_change_is_failed_with_the_base_receipt_too(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    bent = TESTS_CALC.replace(b"assert add(2, 3) == 5", b"assert add(2, 3) == -1")
    path = _repo(ws, {b"calc.py": CALC2_BROKEN, b"tests/test_calc.py": bent})
    receipt = _base_receipt(ws, path, tmp_path / "main")
    outcome, pred = _prove_pr(
        ws, path, tmp_path / "pr", "--base-receipt", str(receipt), "--base-key", str(ws.pub)
    )
    assert outcome == "HELD", _detail_of(pred)
    assert _codes(pred) == {"expectation-changed"}
    assert not _base_ran(pred)


def _doctored(receipt: Path, out: Path) -> Path:
    """The receipt with one byte of its payload changed (its signature no longer holds)."""
    env = json.loads(receipt.read_bytes())
    payload = bytearray(base64.b64decode(env["payload"]))
    payload[payload.index(b'"pass"')] = ord("P")
    env["payload"] = base64.b64encode(bytes(payload)).decode()
    out.write_text(json.dumps(env))
    return out


@pytest.mark.parametrize(
    "refusal",
    ["another-key", "a-changed-byte", "another-tree", "another-configuration", "failed-proof"],
)
def test_a_receipt_that_does_not_stand_for_the_base_run_is_refused_and_the_base_runs(
    refusal: str, tmp_path: Path
) -> None:
    ws = Workspace(tmp_path)
    main: dict[bytes, Content] | None = None
    if refusal == "another-configuration":  # main edits the configuration
        main = {b".github/proofgate.yml": _config(", timeout: 29")}
    if refusal == "failed-proof":  # main's own proof failed
        main = {b"calc.py": CALC2_BROKEN}
    path = _repo(ws, {b"calc.py": MUL, b"tests/test_mul.py": MUL_TESTS}, main)
    if refusal == "failed-proof":
        seen = prove(ws, Built(repo=path, base="v0", head="main"), tmp_path / "main")
        assert seen.outcome == "FAILED"
        receipt = tmp_path / "main" / "receipt.json"
    elif refusal == "another-tree":  # a receipt of another tree: the pull request's own
        prove(ws, Built(repo=path, base="v0", head="pr"), tmp_path / "other")
        receipt = tmp_path / "other" / "receipt.json"
    else:
        receipt = _base_receipt(ws, path, tmp_path / "main")
    key = ws.pub
    if refusal == "another-key":
        key = KEYS / "untrusted.pub"
    if refusal == "a-changed-byte":
        receipt = _doctored(receipt, tmp_path / "doctored.json")
    outcome, pred = _prove_pr(
        ws, path, tmp_path / "pr", "--base-receipt", str(receipt), "--base-key", str(key)
    )
    block = _tests_block(pred)
    assert "base_receipt_refused" in block, _detail_of(pred)
    assert _base_ran(pred)
    _, plain = _prove_pr(ws, path, tmp_path / "plain")
    assert (outcome, _codes(pred)) == (str(plain["verdict"]), _codes(plain))


def _detail_of(pred: dict[str, object]) -> str:
    return json.dumps({"reasons": pred["reasons"], "tests": _tests_block(pred).get("reused")})


def test_the_flags_go_together(tmp_path: Path) -> None:
    from gate.faces import cli

    ws = Workspace(tmp_path)
    path = _repo(ws, {b"calc.py": MUL})
    assert (
        cli.main(
            [
                "prove",
                "--repo",
                str(path),
                "--base",
                "main",
                "--head",
                "pr",
                "--base-receipt",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert (
        cli.main(
            [
                "prove",
                "--repo",
                str(path),
                "--base",
                "main",
                "--head",
                "pr",
                "--base-key",
                str(ws.pub),
            ]
        )
        == 2
    )
    assert _detail  # the differential's own helper, kept for failures' detail
