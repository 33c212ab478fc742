"""File verify's release checks (`--repository`, `--branch`, `--accept-reproof`), the
expectations behind them, what `prove`/`policy` record as trigger and config digest, and
`show` that never passes an unverified receipt off as a proof (issues 15, 16)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gate import receipt
from gate.faces.cli import main
from gate.model import JsonDict, TriggerKind, Verdict
from gate.receipt import VerificationError
from tests.assets import sample
from tests.gitutil import checkout, commit, make_repo

ASSETS = Path(__file__).resolve().parents[1] / "assets"
PUB = str(ASSETS / "keys/trusted.pub")
TRUSTED = sample.key("trusted")


def write_receipt(
    tmp_path: Path,
    trigger: JsonDict | None = None,
    name: str = "r.json",
    predicate: JsonDict | None = None,
) -> Path:
    """The sample receipt (or `predicate`'s), signed by the trusted key."""
    p = sample.predicate() if predicate is None else predicate
    if trigger is not None:
        p["trigger"] = trigger
    st = receipt.build_statement(
        p,
        patch_sha256=sample.PATCH_SHA256,
        head_commit=sample.HEAD_COMMIT,
        proven_tree=sample.HEAD_TREE,
    )
    path = tmp_path / name
    path.write_bytes(receipt.sign(receipt.serialize(st), TRUSTED))
    return path


def verify(path: Path, *flags: str) -> int:
    return main(["verify", str(path), "--key", PUB, *flags])


# --- file verify ----------------------------------------------------------------------


def test_file_verify_checks_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = write_receipt(tmp_path)
    assert verify(r, "--repository", "example/calc") == 0
    assert verify(r, "--repository", "attacker/calc") == 1
    err = capsys.readouterr().err
    assert "verify failed: receipt is for repository 'example/calc', not 'attacker/calc'" in err


def test_file_verify_checks_branch_and_trigger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = write_receipt(tmp_path)  # pull_request onto refs/heads/main
    assert verify(r, "--branch", "main") == 0
    assert verify(r, "--branch", "refs/heads/main", "--require", "PROVEN") == 0
    assert verify(r, "--branch", "lax") == 1
    err = capsys.readouterr().err
    assert "trigger.base_ref is 'refs/heads/main'; 'refs/heads/lax' is required" in err


def test_file_verify_refuses_a_reproof_unless_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = write_receipt(tmp_path, {"kind": "commit", "base_ref": "refs/heads/main"})
    assert verify(r) == 0  # no release check asked for: signature and subjects only
    assert verify(r, "--branch", "main") == 1
    assert "trigger.kind is 'commit'; 'merge_group or pull_request' is required" in (
        capsys.readouterr().err
    )
    assert verify(r, "--branch", "main", "--accept-reproof") == 0


def test_file_verify_refuses_an_empty_pull_request_for_a_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pull request whose proven tree is its base's own tree judged no change: on top of
    a commit pushed straight to the branch it is a re-proof in disguise."""
    p = sample.predicate()
    p["base"] = {"commit": sample.BASE_COMMIT, "tree": sample.HEAD_TREE}
    st = receipt.build_statement(
        p,
        patch_sha256=sample.PATCH_SHA256,
        head_commit=sample.HEAD_COMMIT,
        proven_tree=sample.HEAD_TREE,
    )
    r = tmp_path / "empty.json"
    r.write_bytes(receipt.sign(receipt.serialize(st), TRUSTED))
    assert verify(r) == 0  # no release check asked for
    assert verify(r, "--branch", "main") == 1
    assert f"patch is empty: the proven tree {sample.HEAD_TREE} is the base's own tree" in (
        capsys.readouterr().err
    )
    assert verify(r, "--branch", "main", "--accept-reproof") == 0


def test_file_verify_refuses_a_local_receipt_for_a_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = write_receipt(tmp_path, {"kind": "local", "base_ref": "refs/heads/main"})
    assert verify(r, "--branch", "main", "--accept-reproof") == 1
    assert "trigger.kind is 'local'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "branch",
    ["refs/tags/v1", "", "..", "a..b", "has space", "refs/heads/", "x.lock", "-x", "a//b"],
    ids=["tag", "empty", "dotdot", "inner-dotdot", "space", "no-name", "lock", "dash", "dslash"],
)
def test_file_verify_bad_branch_exits_2(
    tmp_path: Path, branch: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify(write_receipt(tmp_path), f"--branch={branch}") == 2
    assert "proofgate: --branch:" in capsys.readouterr().err


def test_accept_reproof_without_branch_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify(write_receipt(tmp_path), "--accept-reproof") == 2
    assert "--accept-reproof only means something with --branch" in capsys.readouterr().err


# --- expectations ---------------------------------------------------------------------


def test_verification_error_names_field_and_both_values(tmp_path: Path) -> None:
    data = write_receipt(tmp_path, {"kind": "commit", "base_ref": "refs/heads/main"}).read_bytes()
    expect = receipt.AllOf(
        receipt.Signed([TRUSTED.public_key()]),
        receipt.TriggerIn({TriggerKind.PULL_REQUEST}),
    )
    with pytest.raises(VerificationError) as e:
        receipt.verify(data, expect)
    assert (e.value.field, e.value.want, e.value.got) == ("trigger.kind", "pull_request", "commit")


def test_no_signed_expectation_verifies_nothing(tmp_path: Path) -> None:
    data = write_receipt(tmp_path).read_bytes()
    with pytest.raises(receipt.ReceiptError, match="no trusted public key given"):
        receipt.verify(data, receipt.AllOf(receipt.AtLeast(Verdict.PROVEN)))


def test_config_blob_expectation(tmp_path: Path) -> None:
    data = write_receipt(tmp_path).read_bytes()
    signed = receipt.Signed([TRUSTED.public_key()])
    verified = receipt.verify(data, receipt.AllOf(signed, receipt.ConfigBlob(sample.CONFIG_BLOB)))
    assert verified.predicate.config.sha256 == sample.CONFIG_SHA256
    with pytest.raises(VerificationError) as e:
        receipt.verify(data, receipt.AllOf(signed, receipt.ConfigBlob("a" * 40)))
    assert e.value.field == "config.blob (.github/proofgate.yml)"
    assert (e.value.want, e.value.got) == ("a" * 40, sample.CONFIG_BLOB)


def test_verified_receipt_is_typed(tmp_path: Path) -> None:
    data = write_receipt(tmp_path).read_bytes()
    verified = receipt.verify(data, receipt.expectations([TRUSTED.public_key()]))
    assert verified.verdict is Verdict.PROVEN
    assert verified.predicate.trigger == sample.TRIGGER
    assert verified.keyid == receipt.keyid(TRUSTED.public_key())
    assert verified.predicate.builder is None


# --- what prove / policy record -------------------------------------------------------


CONFIG = b"version: 1\nchecks: [{name: unit, test: pytest}]\n"


def test_policy_records_a_local_trigger_and_the_config_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path)
    base = commit(repo, {b".github/proofgate.yml": CONFIG, b"a.py": b"x = 1\n"})
    commit(repo, {b"a.py": b"x = 2\n"}, branch="feature", parent=base)
    checkout(repo)
    args = ["policy", "--repo", str(repo.workdir), "--head", "feature", "--json"]

    main([*args, "--base", "main"])
    p = json.loads(capsys.readouterr().out)
    assert p["trigger"] == {"kind": "local", "base_ref": "refs/heads/main"}
    assert p["config"]["sha256"] == hashlib.sha256(CONFIG).hexdigest()
    assert p["verdict"] is None
    assert p["preflight"] is True

    main([*args, "--base", str(base)])  # a commit id names no branch
    assert json.loads(capsys.readouterr().out)["trigger"] == {"kind": "local", "base_ref": None}

    config = tmp_path / "mine.yml"
    config.write_bytes(CONFIG + b"# mine\n")
    main([*args, "--base", "main", "--config", str(config)])
    p = json.loads(capsys.readouterr().out)
    assert p["config"]["sha256"] == hashlib.sha256(CONFIG + b"# mine\n").hexdigest()


# --- show (issue 16) --------------------------------------------------------------------


def _junk_signed(tmp_path: Path) -> Path:
    env = json.loads((ASSETS / "receipts/proven-unsigned.json").read_bytes())
    env["signatures"] = [{"keyid": "ab" * 32, "sig": base64.b64encode(b"\x01" * 64).decode()}]
    path = tmp_path / "junk.json"
    path.write_text(json.dumps(env))
    return path


def test_show_without_key_says_nothing_was_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(_junk_signed(tmp_path))]) == 0
    page = capsys.readouterr().out
    first = page.splitlines()[0]
    assert first.startswith("> **UNVERIFIED: nothing on this page was checked.**")
    assert "# proofgate: PROVEN" in page  # what the receipt claims, under the banner


def test_show_with_a_key_refuses_a_junk_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(_junk_signed(tmp_path)), "--key", PUB]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "it did not verify: no valid signature by a trusted key" in captured.err


def test_show_with_the_right_key_has_no_unverified_banner(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["show", str(ASSETS / "receipts/proven.json"), "--key", PUB]) == 0
    page = capsys.readouterr().out
    assert "UNVERIFIED" not in page
    assert page.startswith("# proofgate: PROVEN")
    assert "pull\\_request onto `refs/heads/main`, pull request #7" in page


# --- a signed predicate of the wrong shape (issue 46) -------------------------------------


def _set(path: str, value: object) -> Callable[[JsonDict], None]:
    """Set (or with `DROP`, delete) the predicate field at a dotted path; `[i]` indexes."""

    def mutate(p: JsonDict) -> None:
        keys: list[str | int] = [
            int(k[1:-1]) if k.startswith("[") else k for k in re.findall(r"\[\d+\]|[^.\[\]]+", path)
        ]
        node: Any = p
        for k in keys[:-1]:
            node = node[k]
        if value is DROP:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value

    return mutate


DROP = object()
COMMAND = "checks[0].phases[1].commands[0]"
WRONG_SHAPES = {
    "checks-a-string": (
        _set("checks", "unit"),
        "predicate field checks is a string ('unit'); expected a list of checks",
    ),
    "reasons-an-object": (
        _set("reasons", {"code": "check-failed"}),
        "predicate field reasons is an object; expected a list of reasons",
    ),
    "verdict-a-number": (
        _set("verdict", 0),
        "predicate field verdict is a number (0); expected one of PROVEN, FAILED, HELD, "
        "BLOCKED, INCONCLUSIVE",
    ),
    "verdict-missing": (
        _set("verdict", DROP),
        "predicate field verdict is missing; expected one of PROVEN",
    ),
    "exit-code-a-boolean": (
        _set(f"{COMMAND}.exit_code", True),
        f"predicate field {COMMAND}.exit_code is a boolean (true); expected an integer or null",
    ),
    "argv-a-string": (
        _set(f"{COMMAND}.argv", "pytest -q"),
        f"predicate field {COMMAND}.argv is a string ('pytest -q'); expected a list of strings",
    ),
    "inventory-size-a-string": (
        _set("inventory[0].size", "34"),
        "predicate field inventory[0].size is a string ('34'); expected an integer or null",
    ),
    "coverage-complete-a-string": (
        _set("coverage.complete", "yes"),
        "predicate field coverage.complete is a string ('yes'); expected true or false",
    ),
    "patch-bytes-a-float": (
        _set("patch.bytes", 1.5),
        "predicate field patch.bytes is a number (1.5); expected an integer",
    ),
    "policy-findings-missing": (
        _set("policy.findings", DROP),
        "predicate field policy.findings is missing; expected a list of findings",
    ),
    "reason-message-null": (
        _set("reasons", [{"code": "check-failed", "message": None}]),
        "predicate field reasons[0].message is null; expected a string",
    ),
    "trigger-kind-unknown": (
        _set("trigger.kind", "push"),
        "predicate field trigger.kind is a string ('push'); expected one of pull_request",
    ),
    "journal-events-an-object": (
        _set("journal.events", {}),
        "predicate field journal.events is an object; expected a list of objects",
    ),
    "test-runs-a-list": (
        _set("checks[0].tests", {"differential": "trusted", "ran": True, "runs": []}),
        "predicate field checks[0].tests.runs is an empty list; expected an object whose "
        "values are each an object whose values are each an integer",
    ),
    "durations-a-string-value": (
        _set("checks[0].durations", {"tests/test_calc.py::test_add": "0.25"}),
        "predicate field checks[0].durations['tests/test_calc.py::test_add'] is a string "
        "('0.25'); expected a number",
    ),
    "shard-index-a-string": (
        _set("shard", {"index": "1", "count": 2, "split_sha256": "0" * 64, "verdict": "PROVEN"}),
        "predicate field shard.index is a string ('1'); expected an integer",
    ),
}


def _signed_shape(tmp_path: Path, mutate: Callable[[JsonDict], None]) -> Path:
    p = sample.predicate()
    mutate(p)
    return write_receipt(tmp_path, predicate=p)


@pytest.mark.parametrize(("mutate", "why"), WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_a_trusted_signature_over_a_predicate_of_the_wrong_shape_does_not_verify(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mutate: Callable[[JsonDict], None],
    why: str,
) -> None:
    """The signature holds; the predicate is not what SPEC §4 documents: `verify` and
    `show --key` refuse it (1), naming the field and what was expected."""
    r = _signed_shape(tmp_path, mutate)
    assert verify(r) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"proofgate: verify failed: {why}"), line
    assert main(["show", str(r), "--key", PUB]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert f"proofgate: cannot show {r}: it did not verify: {why}" in out.err


def test_the_documented_shape_itself_verifies(tmp_path: Path) -> None:
    """The control: the same receipt unmutated, and every signed asset receipt."""
    assert verify(_signed_shape(tmp_path, lambda p: None)) == 0
    for name in ("proven.json", "failed.json"):
        assert verify(ASSETS / "receipts" / name) == 0
