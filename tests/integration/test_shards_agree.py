"""SPEC §3.3, issue 38: every verdict of the aggregate equals the one-job proof's, whatever
the split. Each case is a real change in a real repository, proven once as one job and
once as three `proofgate prove --shard I/3` with `proofgate aggregate` over their receipts,
all through the CLI against the real Docker daemon; the aggregate's verdict, reason codes
and exit status must be the one-job proof's, and each case says what that is (so a case
cannot pass by both being wrong alike)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from gate import receipt
from gate.faces.cli import main
from gate.model import hashed_shard
from gate.proof.shard import by_path_hash
from tests.integration.test_shards import CHECK
from tests.provecli import cli_prove, config_yaml, pr_repo, receipt_predicate

pytestmark = pytest.mark.docker

N = 3
CALC = b"def add(a, b):\n    return a + b\n"
FILES = ("tests/test_a.py", "tests/test_b.py", "tests/test_c.py")
# a helper module in the test directory: a TestCase base class pytest never collects
HELPER = (
    b"import unittest\n\n\nclass BaseCase(unittest.TestCase):\n"
    b"    def check_add(self, a, b):\n        from calc import add\n"
    b"        self.assertEqual(add(a, b), a + b)\n"
)


def _test_file(stem: str, bodies: dict[str, str]) -> bytes:
    out = "from calc import add\n"
    for name, body in bodies.items():
        out += f"\n\ndef test_{stem}_{name}():\n    {body}\n"
    return out.encode()


def _bodies(i: int) -> dict[str, str]:
    return {str(t): f"assert add({t}, {i}) == {t + i}" for t in range(2)}


def base_tree() -> dict[bytes, object]:
    files: dict[bytes, object] = {
        b".github/proofgate.yml": config_yaml(CHECK),
        b"calc.py": CALC,
        b"tests/helpers.py": HELPER,
    }
    for i, path in enumerate(FILES):
        files[path.encode()] = _test_file(path[len("tests/test_") : -3], _bodies(i))
    return files


def _shard_of_base(path: str) -> int:
    """The base split (by path hash: no durations) of the three test files."""
    return by_path_hash(list(FILES), N)[path]


def _elsewhere(path: str) -> str:
    """A new name for `path` whose hash puts it on another shard: its shard's share empty."""
    home = _shard_of_base(path)
    for k in range(100):
        new = f"tests/test_renamed{k}.py"
        if hashed_shard(new, N) != home:
            return new
    raise AssertionError("no name hashes elsewhere")


def head_honest() -> dict[bytes, object]:
    return {
        b"calc.py": CALC + b"\n\ndef sub(a, b):\n    return a - b\n",
        b"tests/test_sub.py": b"from calc import sub\n\n\ndef test_sub():\n"
        b"    assert sub(5, 3) == 2\n",
    }


def head_regression() -> dict[bytes, object]:
    return {b"calc.py": b"def add(a, b):\n    return a + b + (a == 1)\n"}


def head_renamed_file() -> dict[bytes, object]:
    old = FILES[0]
    data = base_tree()[old.encode()]
    return {old.encode(): None, _elsewhere(old).encode(): data}


def head_moved_into_suite() -> dict[bytes, object]:
    base = base_tree()
    out: dict[bytes, object] = {}
    for path in (*FILES, "tests/helpers.py"):
        out[path.encode()] = None
        out[path.replace("tests/", "tests/suite/").encode()] = base[path.encode()]
    return out


def head_deleted_file() -> dict[bytes, object]:
    return {FILES[2].encode(): None}


def head_disguised_drop() -> dict[bytes, object]:
    # test_a_0 is dropped (the name rebound, so pytest collects nothing by it); a function
    # of that name in the same file has the body of a new test: with one fingerprint map
    # (head over base) the dropped test passed for "renamed, same body"
    body = "assert add(7, 7) == 14"
    data = _test_file("a", {"0": body, "1": _bodies(0)["1"], "new": body})
    return {FILES[0].encode(): data + b"\n\ntest_a_0 = None\n"}


def head_renamed_test() -> dict[bytes, object]:
    # the negative control of the disguised drop: a real rename, same body, survives (the
    # policy still holds the name that went away, in one job as in the aggregate)
    bodies = _bodies(0)
    data = _test_file("a", {"zero": bodies["0"], "1": bodies["1"]})
    return {FILES[0].encode(): data}


@dataclass(frozen=True)
class Case:
    head: dict[bytes, object]
    verdict: str  # the one-job proof's
    codes: tuple[str, ...]  # its reason codes
    empty: bool  # some shard's share collects no test


CASES = {
    "honest": Case(head_honest(), "PROVEN", (), False),
    "regression": Case(head_regression(), "FAILED", ("check-failed", "regression"), False),
    "renamed-file": Case(head_renamed_file(), "PROVEN", (), True),
    "moved-into-tests-suite": Case(head_moved_into_suite(), "PROVEN", (), True),
    "deleted-shard-only-file": Case(
        head_deleted_file(), "HELD", ("policy-hold", "tests-lost"), True
    ),
    "disguised-drop-same-name": Case(head_disguised_drop(), "HELD", ("tests-lost",), False),
    # the policy holds a removed test name; the differential finds nothing lost
    "renamed-test-same-body": Case(head_renamed_test(), "HELD", ("policy-hold",), False),
}
EXIT = {"PROVEN": 0, "FAILED": 10, "HELD": 11, "BLOCKED": 12, "INCONCLUSIVE": 13}


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    return tmp_path / "keys" / "proofgate.key", tmp_path / "keys" / "proofgate.pub"


def _codes(predicate: dict[str, object]) -> tuple[str, ...]:
    reasons = predicate["reasons"]
    assert isinstance(reasons, list)
    return tuple(sorted({r["code"] for r in reasons}))


def _prove_shards(path: Path, tmp_path: Path, key: Path, *extra: str) -> list[Path]:
    """Every shard through the CLI; each exits 0 unless its own verdict is FAILED or worse."""
    outs = []
    for i in range(1, N + 1):
        out = tmp_path / f"shard{i}"
        code = cli_prove(path, out, "--key", str(key), "--shard", f"{i}/{N}", *extra)
        own = receipt_predicate(out)["shard"]["verdict"]  # type: ignore[index]
        assert code == (0 if own in ("PROVEN", "HELD") else EXIT[own]), own
        outs.append(out)
    return outs


def _aggregate(outs: list[Path], tmp_path: Path, keys: tuple[Path, Path]) -> tuple[int, Path]:
    agg = tmp_path / "agg"
    receipts = [str(o / "receipt.json") for o in outs]
    code = main(
        ["aggregate", *receipts, "--key", str(keys[1]), "--signing-key", str(keys[0])]
        + ["--out", str(agg)]
    )
    return code, agg


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_aggregate_verdict_equals_the_one_job_proof(
    tmp_path: Path, keys: tuple[Path, Path], case: Case
) -> None:
    _, path = pr_repo(tmp_path, base_tree(), case.head)
    one = tmp_path / "one"
    one_code = cli_prove(path, one, "--key", str(keys[0]))
    whole = receipt_predicate(one)
    assert (whole["verdict"], _codes(whole), one_code) == (
        case.verdict,
        case.codes,
        EXIT[case.verdict],
    )

    outs = _prove_shards(path, tmp_path, keys[0])
    shards = [receipt_predicate(o)["shard"] for o in outs]
    split = shards[0]["split"]  # type: ignore[index]
    # only what pytest collects is split: the helper module is no share
    assert sorted(split["checks"][0]["files"]) == sorted(FILES)  # type: ignore[index]
    empty = [s["checks"]["unit"]["empty"] for s in shards]  # type: ignore[index]
    assert any(empty) is case.empty
    for s, was_empty in zip(shards, empty, strict=True):
        if was_empty:  # recorded, not failed
            assert s["verdict"] in ("PROVEN", "HELD"), s  # type: ignore[index]

    code, agg = _aggregate(outs, tmp_path, keys)
    aggregate = receipt_predicate(agg)
    assert (aggregate["verdict"], _codes(aggregate), code) == (
        whole["verdict"],
        _codes(whole),
        one_code,
    )
    got, want = aggregate["checks"][0]["tests"], whole["checks"][0]["tests"]  # type: ignore[index]
    assert got["lost"] == want["lost"]
    assert got["regressions"] == want["regressions"]


def test_shard_with_no_check_exits_0(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """One check without `junit` over two shards: shard 2 has no check at all; it records
    that and exits 0, and the aggregate is the one-job proof's PROVEN."""
    check = (
        '  - name: unit\n    test: [["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]]\n'
    )
    base = {**base_tree(), b".github/proofgate.yml": config_yaml(check)}
    _, path = pr_repo(tmp_path, base, head_honest())
    assert cli_prove(path, tmp_path / "one", "--key", str(keys[0])) == 0
    outs = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        assert cli_prove(path, out, "--key", str(keys[0]), "--shard", f"{i}/2") == 0
        outs.append(out)
    second = receipt_predicate(outs[1])
    assert second["checks"] == []
    assert second["shard"]["verdict"] == "PROVEN"  # type: ignore[index]
    code, agg = _aggregate(outs, tmp_path, keys)
    assert (code, receipt_predicate(agg)["verdict"]) == (0, "PROVEN")


def _resigned(out: Path, key: Path, zero: bool) -> Path:
    """OUT's receipt with every recorded duration set to 0.0, signed again with `key`: a
    verified receipt whose durations cannot balance a split."""
    envelope = json.loads((out / "receipt.json").read_bytes())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    for check in statement["predicate"]["checks"]:
        check["durations"] = dict.fromkeys(check.get("durations", {}), 0.0) if zero else {}
    signing = receipt.load_private_key(key.read_bytes(), source="test key")
    target = out.parent / f"resigned-{zero}.json"
    target.write_bytes(receipt.sign(receipt.serialize(statement), signing))
    return target


def test_balance_from_a_one_job_receipt(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """The one-job receipt records microsecond durations; the split balances by them and
    no shard is left without tests."""
    _, path = pr_repo(tmp_path, base_tree(), head_honest())
    one = tmp_path / "one"
    assert cli_prove(path, one, "--key", str(keys[0])) == 0
    durations = receipt_predicate(one)["checks"][0]["durations"]  # type: ignore[index]
    assert sorted({k.split("::")[0] for k in durations}) == sorted([*FILES, "tests/test_sub.py"])
    assert all(v > 0 for v in durations.values()), durations  # not rounded away to 0.0
    balance = ("--balance-from", str(one / "receipt.json"), "--balance-key", str(keys[1]))
    outs = _prove_shards(path, tmp_path, keys[0], *balance)
    for out in outs:
        p = receipt_predicate(out)
        assert p["shard"]["split"]["checks"][0]["by"] == "durations"  # type: ignore[index]
        assert sum(p["checks"][0]["tests"]["runs"]["head"].values()) > 0  # type: ignore[index]
    code, agg = _aggregate(outs, tmp_path, keys)
    assert (code, receipt_predicate(agg)["verdict"]) == (0, "PROVEN")


@pytest.mark.parametrize("zero", [True, False], ids=["all-zero", "none-recorded"])
def test_durations_that_cannot_balance_fall_back_and_say_so(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str], zero: bool
) -> None:
    _, path = pr_repo(tmp_path, base_tree(), head_honest())
    one = tmp_path / "one"
    assert cli_prove(path, one, "--key", str(keys[0])) == 0
    source = _resigned(one, keys[0], zero)
    capsys.readouterr()
    balance = ("--balance-from", str(source), "--balance-key", str(keys[1]))
    outs = _prove_shards(path, tmp_path, keys[0], *balance)
    assert "the recorded durations cannot balance the split" in capsys.readouterr().err
    plain = _prove_shards(path, tmp_path / "plain", keys[0])
    for out, same in zip(outs, plain, strict=True):
        p = receipt_predicate(out)
        planned = p["shard"]["split"]["checks"][0]  # type: ignore[index]
        assert planned["by"] == "path-hash"
        assert ("zero" if zero else "no recorded duration") in planned["fallback"]
        # deterministic: the same shares as the split without durations
        assert planned["files"] == receipt_predicate(same)["shard"]["split"]["checks"][0]["files"]  # type: ignore[index]
        events = [e for e in p["journal"]["events"] if e["kind"] == "shard-split"]  # type: ignore[index]
        assert events[0]["data"]["fallback"] == {"unit": planned["fallback"]}
    code, agg = _aggregate(outs, tmp_path, keys)
    assert (code, receipt_predicate(agg)["verdict"]) == (0, "PROVEN")


def test_more_shards_than_test_files_agrees(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """One test file of two tests over three shards (fewer items than shards, even by
    test): the check goes whole to one shard, the others have no check; every shard exits
    0 and the aggregate is the one-job proof's."""
    base = base_tree()
    for gone in FILES[1:]:
        del base[gone.encode()]
    _, path = pr_repo(tmp_path, base, head_honest())
    one = tmp_path / "one"
    assert cli_prove(path, one, "--key", str(keys[0])) == 0
    outs = _prove_shards(path, tmp_path, keys[0])
    planned = receipt_predicate(outs[0])["shard"]["split"]["checks"]  # type: ignore[index]
    assert planned == [{"name": "unit", "whole": 1}]
    assert [len(receipt_predicate(o)["checks"]) for o in outs] == [1, 0, 0]  # type: ignore[arg-type]
    code, agg = _aggregate(outs, tmp_path, keys)
    aggregate, whole = receipt_predicate(agg), receipt_predicate(one)
    assert (code, aggregate["verdict"], _codes(aggregate)) == (0, whole["verdict"], _codes(whole))
