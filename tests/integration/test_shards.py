"""SPEC §3.3 end to end: a proof split over three shards, each a real `proofgate prove
--shard I/3` against the real Docker daemon, and `proofgate aggregate` over their receipts,
compared with the one-job proof of the same change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.faces.cli import main
from tests.provecli import cli_prove, config_yaml, pr_repo, receipt_predicate

pytestmark = pytest.mark.docker

CHECK = """  - name: unit
    test: [["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=out/junit.xml"]]
    junit: out/junit.xml
    tests: ["tests/**"]
"""
FILES = 8
PER_FILE = 5


def suite(broken: bool = False) -> dict[bytes, object]:
    """A real suite: `calc.py` and 8 test files of 5 tests each (40 tests)."""
    calc = b"def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    files: dict[bytes, object] = {b"calc.py": calc, b"tests/__init__.py": b""}
    for f in range(FILES):
        body = b"from calc import add, mul\n"
        for t in range(PER_FILE):
            body += f"\n\ndef test_{f}_{t}():\n    assert add({t}, {f}) == {t + f}\n".encode()
        files[f"tests/test_mod{f}.py".encode()] = body
    return files


def head_change(*, regress: bool) -> dict[bytes, object]:
    calc = b"def add(a, b):\n    return a + b" + (b" + (a == 3)" if regress else b"") + b"\n\n"
    calc += b"\ndef mul(a, b):\n    return a * b\n\n\ndef sub(a, b):\n    return a - b\n"
    return {
        b"calc.py": calc,
        b"tests/test_sub.py": b"from calc import sub\n\n\ndef test_sub():\n"
        b"    assert sub(5, 3) == 2\n",
    }


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    return tmp_path / "keys" / "proofgate.key", tmp_path / "keys" / "proofgate.pub"


def _counts(predicate: dict[str, object]) -> dict[str, object]:
    checks = predicate["checks"]
    assert isinstance(checks, list)
    return {c["name"]: c["tests"]["runs"] for c in checks if "tests" in c}


def _prove_shards(path: Path, tmp_path: Path, key: Path, n: int = 3) -> list[Path]:
    outs = []
    for i in range(1, n + 1):
        out = tmp_path / f"shard{i}"
        code = cli_prove(path, out, "--key", str(key), "--shard", f"{i}/{n}")
        shard = receipt_predicate(out)["shard"]
        assert isinstance(shard, dict)
        assert code == {"PROVEN": 0, "FAILED": 10, "HELD": 11}[str(shard["verdict"])]
        outs.append(out)
    return outs


@pytest.mark.parametrize("regress", [False, True], ids=["honest", "regression"])
def test_three_shards_aggregate_equals_the_one_job_proof(
    tmp_path: Path, keys: tuple[Path, Path], regress: bool
) -> None:
    base = {b".github/proofgate.yml": config_yaml(CHECK), **suite()}
    _, path = pr_repo(tmp_path, base, head_change(regress=regress))
    one = tmp_path / "one"
    one_code = cli_prove(path, one, "--key", str(keys[0]))
    whole = receipt_predicate(one)

    outs = _prove_shards(path, tmp_path, keys[0])
    shard_runs = []
    for out in outs:
        p = receipt_predicate(out)
        assert p["verdict"] == "INCONCLUSIVE"  # never a whole proof on its own
        assert any(r["code"] == "shard-partial" for r in p["reasons"])  # type: ignore[union-attr]
        # the shard ran only its share: fewer tests than the whole suite in its head run
        shard_runs.append(p["checks"][0]["tests"]["runs"]["head"])  # type: ignore[index]
        # a shard receipt never verifies as a proof
        assert main(["verify", str(out / "receipt.json"), "--key", str(keys[1])]) == 1
    heads = [sum(r.values()) for r in shard_runs]
    assert sum(heads) == FILES * PER_FILE + 1
    assert max(heads) < FILES * PER_FILE

    agg = tmp_path / "agg"
    code = main(
        [
            "aggregate",
            *(str(o / "receipt.json") for o in outs),
            "--key",
            str(keys[1]),
            "--signing-key",
            str(keys[0]),
            "--out",
            str(agg),
        ]
    )
    aggregate = receipt_predicate(agg)
    assert code == one_code == (10 if regress else 0)
    assert aggregate["verdict"] == whole["verdict"]
    assert _counts(aggregate) == _counts(whole)
    for key in ("regressions", "lost", "proving"):
        got, want = aggregate["checks"][0]["tests"], whole["checks"][0]["tests"]  # type: ignore[index]
        assert got[key] == want[key]
    assert "shard" not in aggregate
    listed = aggregate["aggregate"]["shards"]  # type: ignore[index]
    assert [s["index"] for s in listed] == [1, 2, 3]
    assert (agg / "patch.diff").read_bytes() == (one / "patch.diff").read_bytes()
    # release verification reads the aggregate as a single-job receipt
    verify = ["verify", str(agg / "receipt.json"), "--key", str(keys[1])]
    assert main([*verify, "--require", "PROVEN"]) == (1 if regress else 0)
    assert main(verify) == 0
    json.dumps(aggregate)


def test_missing_shard_is_inconclusive(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    base = {b".github/proofgate.yml": config_yaml(CHECK), **suite()}
    _, path = pr_repo(tmp_path, base, head_change(regress=False))
    outs = _prove_shards(path, tmp_path, keys[0], n=2)
    agg = tmp_path / "agg"
    code = main(
        ["aggregate", str(outs[0] / "receipt.json"), "--key", str(keys[1]), "--out", str(agg)]
    )
    assert code == 13
    reasons = receipt_predicate(agg)["reasons"]
    assert [r["code"] for r in reasons] == ["shards-incomplete"]  # type: ignore[union-attr]
    assert "2 of 2 missing" in reasons[0]["message"]  # type: ignore[index]
