"""SPEC §3.3: the split (pure), and `aggregate`'s refusals over signed shard receipts.

The shard receipts here are built the way `prove --shard` writes them (a predicate with a
`shard` section, a journal, the in-toto statement, signed); the real-Docker e2e is
tests/integration/test_shards.py.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from gate import receipt
from gate.differential.pytestconfig import DEFAULT_PYTHON_FILES, python_files
from gate.errors import UsageError
from gate.faces.cli import main
from gate.model import (
    ChangeStatus,
    CheckResult,
    CheckSpec,
    Config,
    InventoryEntry,
    JsonDict,
    Limits,
    Phase,
    PolicySpec,
    Reason,
    ReasonCode,
    Sha256,
    ShardFilter,
    Verdict,
    hashed_shard,
)
from gate.proof.aggregate import AggregateError, aggregate
from gate.proof.shard import (
    ShardSpec,
    apply,
    collected,
    compute_split,
    defines_tests,
    exit_code,
    own_outcome,
    parse_shard,
    run_durations,
    top_level_tests,
)
from gate.proof.verdict import Outcome
from gate.receipt import verify
from gate.util.journal import Journal
from gate.witness.host import parse_session
from tests.assets import sample

TRUSTED = sample.key("trusted")
UNTRUSTED = sample.key("untrusted")
HEAD = "a" * 40
TREE = "b" * 40
PATCH = "c" * 64


# -- the split --------------------------------------------------------------------------


def _spec(name: str, junit: str | None = "out/junit.xml") -> CheckSpec:
    from gate.model import Command, DifferentialMode

    return CheckSpec(
        name=name,
        phases=((Phase.TEST, (Command(argv=("pytest",)),)),),
        limits=Limits(),
        junit=junit,
        differential=DifferentialMode.TRUSTED if junit else DifferentialMode.OFF,
    )


FILES = tuple(f"tests/test_{i}.py" for i in range(10))
UNITS: dict[str, tuple[str, ...] | None] = dict.fromkeys(FILES, ("test_a",))


def test_split_is_deterministic_and_covers_every_file_once() -> None:
    checks = (_spec("unit"),)
    a = compute_split(checks, {"unit": UNITS}, 3)
    b = compute_split(checks, {"unit": dict(reversed(UNITS.items()))}, 3)
    assert a == b
    assert a.sha256 == b.sha256
    (c,) = a.checks
    assigned = dict(c.assigned)
    assert set(assigned) == set(FILES)
    sizes = sorted(list(assigned.values()).count(i) for i in (1, 2, 3))
    assert sizes == [3, 3, 4]  # round robin over the hash order: balanced by count


def test_split_by_durations_balances_the_time() -> None:
    durations = {"unit": {f: float(i + 1) for i, f in enumerate(FILES)}}  # 1..10 s, 55 s
    split = compute_split((_spec("unit"),), {"unit": UNITS}, 3, durations)
    (c,) = split.checks
    assert c.balanced_by == "durations"
    load = dict.fromkeys((1, 2, 3), 0.0)
    for f, s in c.assigned:
        load[s] += durations["unit"][f]
    assert max(load.values()) <= 19.0  # 55/3 = 18.3: longest first to the least loaded
    assert split.sha256 != compute_split((_spec("unit"),), {"unit": UNITS}, 3).sha256


def _sizes(split_assigned: tuple[tuple[str, int], ...]) -> list[int]:
    shards = [s for _, s in split_assigned]
    return sorted(shards.count(i) for i in (1, 2, 3))


def test_tests_of_no_measurable_cost_spread_over_the_shards() -> None:
    durations = {"unit": {f: (4.0 if i == 0 else 0.0) for i, f in enumerate(FILES)}}
    (c,) = compute_split((_spec("unit"),), {"unit": UNITS}, 3, durations).checks
    assert (c.balanced_by, c.fallback) == ("durations", None)
    # the 4 s file alone on one shard, the nine of no cost spread over the others (not
    # all nine on the lowest index)
    assert _sizes(c.assigned) == [1, 4, 5]


@pytest.mark.parametrize(
    ("durations", "why"),
    [
        ({"unit": dict.fromkeys(FILES, 0.0)}, "is zero"),
        ({"unit": {}}, "no recorded duration"),
        ({"other": {FILES[0]: 3.0}}, "no recorded duration"),
    ],
    ids=["all-zero", "none-for-the-check", "another-check-only"],
)
def test_durations_that_cannot_balance_fall_back_to_the_path_hash(
    durations: dict[str, dict[str, float]], why: str
) -> None:
    plain = compute_split((_spec("unit"),), {"unit": UNITS}, 3)
    split = compute_split((_spec("unit"),), {"unit": UNITS}, 3, durations)
    (c,) = split.checks
    assert c.balanced_by == "path-hash"
    assert c.fallback is not None
    assert why in c.fallback
    assert c.assigned == plain.checks[0].assigned  # deterministic, as without durations
    assert split.to_dict()["checks"][0]["fallback"] == c.fallback  # type: ignore[index]
    assert split.fallbacks == {"unit": c.fallback}
    assert "fallback" not in plain.to_dict()["checks"][0]  # type: ignore[index]


def test_only_what_pytest_collects_is_split() -> None:
    assert collected("tests/test_a.py", DEFAULT_PYTHON_FILES)
    assert collected("tests/a_test.py", DEFAULT_PYTHON_FILES)
    assert not collected("tests/helpers.py", DEFAULT_PYTHON_FILES)
    assert not collected("tests/test_a.txt", DEFAULT_PYTHON_FILES)
    assert collected("tests/check_a.py", ("check_*.py",))
    assert collected("tests/sub/x.py", ("sub/*.py",))
    assert collected("sub/x.py", ("sub/*.py",))
    assert not collected("tests/xsub/x.py", ("sub/*.py",))
    ini = b"[pytest]\npython_files = check_*.py\n    *_t.py\n"
    assert python_files("pytest.ini", ini) == ("check_*.py", "*_t.py")
    toml = b'[tool.pytest.ini_options]\npython_files = ["a_*.py"]\n'
    assert python_files("pyproject.toml", toml) == ("a_*.py",)
    assert python_files("setup.cfg", b"[tool:pytest]\naddopts = -q\n") == DEFAULT_PYTHON_FILES
    assert python_files("pyproject.toml", b"not toml [") == DEFAULT_PYTHON_FILES


def _split_config() -> Config:
    filt = ShardFilter(index=2, count=3, assigned=())
    split = dataclasses.replace(_spec("unit"), shard=filt)
    return Config(version=1, image="img", checks=(split, _spec("whole")), policy=PolicySpec())


def test_a_shards_own_verdict_leaves_an_empty_share_to_the_aggregate() -> None:
    empty = Reason(code=ReasonCode.JUNIT_NO_TESTS, message="no test", check="unit")
    no_phase = Reason(code=ReasonCode.NO_TEST_PHASE, message="no test phase")
    own = own_outcome(Outcome(verdict=Verdict.INCONCLUSIVE, reasons=(no_phase,)), None)
    assert (own.verdict, own.reasons) == (Verdict.PROVEN, ())
    own = own_outcome(Outcome(verdict=Verdict.INCONCLUSIVE, reasons=(empty,)), _split_config())
    assert own.verdict is Verdict.PROVEN
    # a check the shard runs whole is judged here, and so is everything else
    whole = Reason(code=ReasonCode.JUNIT_NO_TESTS, message="no test", check="whole")
    failed = Reason(code=ReasonCode.CHECK_FAILED, message="exited 1", check="unit")
    own = own_outcome(
        Outcome(verdict=Verdict.FAILED, reasons=(empty, whole, failed)), _split_config()
    )
    assert own.reasons == (whole, failed)
    assert own.verdict is Verdict.INCONCLUSIVE  # the whole check's junit-no-tests


@pytest.mark.parametrize(
    ("verdict", "code"),
    [
        (Verdict.PROVEN, 0),
        (Verdict.HELD, 0),
        (Verdict.FAILED, 10),
        (Verdict.BLOCKED, 12),
        (Verdict.INCONCLUSIVE, 13),
    ],
)
def test_a_shards_exit_status(verdict: Verdict, code: int) -> None:
    assert exit_code(verdict) == code


def test_checks_without_junit_or_with_too_few_files_go_whole() -> None:
    checks = (_spec("lint", junit=None), _spec("unit"), _spec("tiny"))
    split = compute_split(checks, {"unit": UNITS, "tiny": {"tests/test_a.py": ("test_x",)}}, 3)
    owners = {c.name: c.owner for c in split.checks}
    assert owners == {"lint": 1, "unit": None, "tiny": 2}
    config = Config(version=1, image="img", checks=checks, policy=PolicySpec())
    two = apply(config, split, ShardSpec(index=2, count=3))
    assert [c.name for c in two.checks] == ["unit", "tiny"]
    assert two.checks[0].shard is not None
    assert two.checks[1].shard is None
    three = apply(config, split, ShardSpec(index=3, count=3))
    assert [c.name for c in three.checks] == ["unit"]


def test_a_file_the_split_does_not_list_goes_by_its_path_hash() -> None:
    split = compute_split((_spec("unit"),), {"unit": UNITS}, 3)
    config = Config(version=1, image="img", checks=(_spec("unit"),), policy=PolicySpec())
    shards = [apply(config, split, ShardSpec(index=i, count=3)).checks[0].shard for i in (1, 2, 3)]
    new = "tests/test_only_in_head.py"
    owners = [f for f in shards if f is not None and f.shard_of(new) == f.index]
    assert len(owners) == 1
    assert owners[0].index == hashed_shard(new, 3)


def test_only_files_that_define_tests_are_split() -> None:
    assert defines_tests(b"def test_x():\n    pass\n")
    assert defines_tests(b"class TestX:\n    pass\n")
    assert defines_tests(b"import unittest\nclass Chunked(unittest.TestCase):\n    pass\n")
    assert not defines_tests(b"import os\n\ndef helper():\n    pass\n")
    assert top_level_tests(b"class A(TestCase): pass\ndef test_b(): pass\ndef c(): pass\n") == (
        "A",
        "test_b",
    )


def test_a_file_with_most_of_the_suite_is_split_by_its_top_level_tests() -> None:
    big = tuple(f"Test{i}" for i in range(12))
    files: dict[str, tuple[str, ...] | None] = {"tests/test_big.py": big, "tests/test_s.py": ("t",)}
    split = compute_split((_spec("unit"),), {"unit": files}, 3)
    (c,) = split.checks
    assert c.by_unit == ("tests/test_big.py",)
    assigned = dict(c.assigned)
    assert assigned["tests/test_s.py"] in (1, 2, 3)
    big_shards = [assigned[f"tests/test_big.py::{n}"] for n in big]
    assert sorted(big_shards.count(i) for i in (1, 2, 3)) in ([4, 4, 4], [4, 4, 5], [3, 4, 4])
    config = Config(version=1, image="img", checks=(_spec("unit"),), policy=PolicySpec())
    one = apply(config, split, ShardSpec(index=1, count=3)).checks[0].shard
    assert one is not None
    assert one.shard_of("tests/test_big.py", "Test0") == assigned["tests/test_big.py::Test0"]
    # a class only in the head, in a divided file: by the hash of its key
    assert one.shard_of("tests/test_big.py", "TestNew") == hashed_shard(
        "tests/test_big.py::TestNew", 3
    )


@pytest.mark.parametrize("text", ["0/3", "4/3", "1", "a/b", "1/0", "1/999999"])
def test_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_shard(text)


def test_the_plugin_places_a_file_where_the_model_does() -> None:
    """The witness plugin computes the same path hash as gate.model (it cannot import
    proofgate inside the clean room)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "proofgate_witness_shard_copy", Path("gate/witness/plugin_shard.py")
    )
    assert spec is not None
    assert spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    shard_of = plugin._shard_of
    for path in ("a.py", "tests/x/test_y.py", "ü.py"):
        for n in (2, 3, 7):
            assert shard_of(path, n, {}) == hashed_shard(path, n)


# -- aggregate ------------------------------------------------------------------------------

ROWS = {
    1: [["tests.test_a", "test_1", "pass"], ["tests.test_a", "test_2", "pass"]],
    2: [["tests.test_b", "test_1", "pass"]],
}


def _changed(path: str) -> JsonDict:
    """An inventory entry as a proof records it (SPEC §4: verify checks its shape)."""
    mode = 0o100644
    entry = InventoryEntry(
        path=path.encode(), status=ChangeStatus.MODIFIED, old_mode=mode, new_mode=mode, size=10
    )
    return entry.to_dict()


def _predicate(index: int, count: int = 2) -> JsonDict:
    rows = ROWS.get(index, [])
    journal = Journal(clock=lambda: 0.0)
    journal.append("run-started")
    return {
        "verdict": "INCONCLUSIVE",
        "reasons": [{"code": "shard-partial", "message": "shard only"}],
        "repository": "owner/name",
        "trigger": {"kind": "pull_request", "base_ref": "refs/heads/main", "pull_request": 7},
        "base": {"commit": "d" * 40, "tree": "e" * 40},
        "merge_base": "d" * 40,
        "head": {"commit": HEAD, "tree": TREE},
        "proven_tree": TREE,
        "patch": {"sha256": PATCH, "bytes": 10, "files": 1},
        "inventory": [_changed("calc.py")],
        "coverage": {"complete": True, "notes": []},
        "config": {"source": "base-tree", "path": ".github/proofgate.yml", "blob": "f" * 40},
        "policy": {"fingerprint": "9" * 64, "decision": "ALLOW", "findings": []},
        "checks": [
            {
                "name": "unit",
                "image": "img",
                "image_digest": "sha256:" + "1" * 64,
                "started": True,
                "phases": [],
                "junit": {"tests": len(rows), "failures": 0, "errors": 0, "skipped": 0},
                "tests": {"differential": "trusted", "ran": True},
            }
        ],
        "journal": journal.to_dict(),
        "tool": {"name": "proofgate", "version": "0"},
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:01Z",
        "shard": {
            "index": index,
            "count": count,
            "split_sha256": "5" * 64,
            "split": {"count": count, "checks": [{"name": "unit", "by": "path-hash", "files": {}}]},
            "verdict": "PROVEN",
            "image_digest": "sha256:" + "1" * 64,
            "checks": {
                "unit": {
                    "outcomes": {"head": rows, "base": rows, "trusted": rows},
                    "problems": {},
                    "fingerprints": {"base": [], "head": []},
                    "nontest_changed": False,
                    "no_proving_decision": "ALLOW",
                    "durations": {},
                }
            },
        },
    }


def _sign(predicate: JsonDict, key: object = TRUSTED) -> bytes:
    statement = receipt.build_statement(
        predicate,
        patch_sha256=predicate["patch"]["sha256"],  # type: ignore[index]
        head_commit=predicate["head"]["commit"],  # type: ignore[index]
        proven_tree=predicate["proven_tree"],  # type: ignore[arg-type]
    )
    return receipt.sign(receipt.serialize(statement), key)  # type: ignore[arg-type]


def _aggregate(*predicates: JsonDict) -> tuple[str, list[JsonDict]]:
    run = aggregate(
        [_sign(p) for p in predicates],
        [TRUSTED.public_key()],
        signing_key=TRUSTED,
        clock=time.time,
    )
    reasons = run.predicate["reasons"]
    assert isinstance(reasons, list)
    return run.verdict.value, reasons


def test_a_complete_agreeing_set_is_proven_and_verifies_as_one_receipt() -> None:
    run = aggregate(
        [_sign(_predicate(2)), _sign(_predicate(1))],
        [TRUSTED.public_key()],
        signing_key=TRUSTED,
        clock=time.time,
    )
    assert run.verdict.value == "PROVEN", run.reasons
    assert run.predicate["checks"][0]["tests"]["runs"]["base"]["pass"] == 3  # type: ignore[index]
    verified = verify(run.envelope, receipt.expectations([TRUSTED.public_key()]))
    assert verified.verdict.value == "PROVEN"
    listed = run.predicate["aggregate"]["shards"]  # type: ignore[index]
    assert [s["index"] for s in listed] == [1, 2]


DISAGREEMENTS = [
    ("base", ("base", "commit"), "0" * 40),
    ("head", ("head", "tree"), "0" * 40),
    ("patch digest", ("patch", "sha256"), "0" * 64),
    ("proven tree", ("proven_tree",), "0" * 40),
    ("config digest", ("config", "blob"), "0" * 40),
    ("policy fingerprint", ("policy", "fingerprint"), "0" * 64),
    ("image digest", ("shard", "image_digest"), "sha256:" + "0" * 64),
    ("split digest", ("shard", "split_sha256"), "0" * 64),
    ("repository", ("repository",), "other/repo"),
    ("trigger", ("trigger", "base_ref"), "refs/heads/lax"),
]


@pytest.mark.parametrize(
    ("name", "path", "value"), DISAGREEMENTS, ids=[d[0] for d in DISAGREEMENTS]
)
def test_shards_that_disagree_are_refused_naming_the_field(
    name: str, path: tuple[str, ...], value: str
) -> None:
    other = _predicate(2)
    target = other
    for p in path[:-1]:
        target = target[p]  # type: ignore[assignment]
    target[path[-1]] = value
    verdict, reasons = _aggregate(_predicate(1), other)
    assert verdict == "INCONCLUSIVE"
    assert [r["code"] for r in reasons] == ["shards-disagree"]
    assert f"the shards disagree on the {name}" in str(reasons[0]["message"])


def test_a_missing_shard_is_refused() -> None:
    verdict, reasons = _aggregate(_predicate(1))
    assert verdict == "INCONCLUSIVE"
    assert [r["code"] for r in reasons] == ["shards-incomplete"]
    assert "shard(s) 2 of 2 missing" in str(reasons[0]["message"])


def test_a_repeated_shard_is_refused() -> None:
    verdict, reasons = _aggregate(_predicate(1), _predicate(1))
    assert verdict == "INCONCLUSIVE"
    messages = [str(r["message"]) for r in reasons]
    assert "shard 1 of 2 is given 2 times" in messages
    assert any("2 of 2 missing" in m for m in messages)


def test_a_shard_signed_by_an_untrusted_key_is_refused() -> None:
    run = aggregate(
        [_sign(_predicate(1)), _sign(_predicate(2), UNTRUSTED)],
        [TRUSTED.public_key()],
        signing_key=None,
        clock=time.time,
    )
    assert run.verdict.value == "INCONCLUSIVE"
    assert any("does not verify" in r.message for r in run.reasons)


def test_no_verifiable_receipt_is_an_error() -> None:
    with pytest.raises(AggregateError):
        aggregate(
            [_sign(_predicate(1), UNTRUSTED)],
            [TRUSTED.public_key()],
            signing_key=None,
            clock=time.time,
        )


def test_a_whole_proof_is_not_a_shard() -> None:
    whole = _predicate(2)
    del whole["shard"]
    verdict, reasons = _aggregate(_predicate(1), whole)
    assert verdict == "INCONCLUSIVE"
    assert any("is not a shard receipt" in str(r["message"]) for r in reasons)


def test_the_union_judges_a_test_lost_in_one_shard_and_regressed() -> None:
    one, two = _predicate(1), _predicate(2)
    section = two["shard"]["checks"]["unit"]  # type: ignore[index]
    section["outcomes"]["trusted"] = [["tests.test_b", "test_1", "fail"]]
    section["outcomes"]["head"] = []
    verdict, reasons = _aggregate(one, two)
    assert verdict == "FAILED"
    assert {r["code"] for r in reasons} == {"regression", "tests-lost"}


def test_a_test_moved_into_another_shards_file_survives() -> None:
    one, two = _predicate(1), _predicate(2)
    # shard 2's test moved, in the head, into a file that shard 1 runs
    two["shard"]["checks"]["unit"]["outcomes"]["head"] = []  # type: ignore[index]
    one["shard"]["checks"]["unit"]["outcomes"]["head"] = [  # type: ignore[index]
        *ROWS[1],
        ["tests.test_c", "test_1", "pass"],
    ]
    verdict, reasons = _aggregate(one, two)
    assert verdict == "PROVEN", reasons


def test_lost_tests_are_judged_with_the_bases_fingerprints() -> None:
    one, two = _predicate(1), _predicate(2)
    section = one["shard"]["checks"]["unit"]  # type: ignore[index]
    # the head drops test_1 and adds test_new; a head function named test_1 (never
    # collected) has test_new's body: with one map (head over base) it passed for renamed
    section["outcomes"]["head"] = [ROWS[1][1], ["tests.test_a", "test_new", "pass"]]
    section["fingerprints"] = {
        "base": [["tests/test_a.py", "test_1", "B" * 64], ["tests/test_a.py", "test_2", "C" * 64]],
        "head": [
            ["tests/test_a.py", "test_1", "N" * 64],
            ["tests/test_a.py", "test_2", "C" * 64],
            ["tests/test_a.py", "test_new", "N" * 64],
        ],
    }
    verdict, reasons = _aggregate(one, two)
    assert (verdict, [r["code"] for r in reasons]) == ("HELD", ["tests-lost"])
    # the negative control: a real rename, the base's body under a new name, survives
    section["fingerprints"]["head"][2][2] = "B" * 64  # type: ignore[index]
    verdict, reasons = _aggregate(one, two)
    assert verdict == "PROVEN", reasons


def test_an_empty_share_is_recorded_and_the_union_judged() -> None:
    one, two = _predicate(1), _predicate(2)
    two["reasons"] = [
        {"code": "junit-no-tests", "message": "no executed test", "check": "unit"},
        *two["reasons"],  # type: ignore[misc]
    ]
    section = two["shard"]["checks"]["unit"]  # type: ignore[index]
    section["outcomes"]["head"] = []
    section["empty"] = True
    run = aggregate(
        [_sign(one), _sign(two)], [TRUSTED.public_key()], signing_key=None, clock=time.time
    )
    assert run.verdict is Verdict.HELD  # shard 2's base test is lost, as one job says
    assert [r.code for r in run.reasons] == [ReasonCode.TESTS_LOST]
    assert run.predicate["checks"][0]["empty_shares"] == [2]  # type: ignore[index]


def test_a_test_lives_in_the_file_the_base_run_reports() -> None:
    """A base test failing in the trusted run, its file unchanged, is a regression: a
    changed module whose dotted name prefixes its classname (app/tests.py, `tests`) is
    not its file. Without the base run's files (older shard receipts), the changed
    modules stand in, as for a run without the witness."""
    one, two = _predicate(1), _predicate(2)
    for p in (one, two):
        p["inventory"] = [_changed("calc.py"), _changed("app/tests.py")]
    one["shard"]["checks"]["unit"]["base_test_files"] = ["tests/test_a.py"]  # type: ignore[index]
    section = two["shard"]["checks"]["unit"]  # type: ignore[index]
    section["base_test_files"] = ["tests/test_b.py"]
    section["outcomes"]["trusted"] = [["tests.test_b", "test_1", "fail"]]
    verdict, reasons = _aggregate(one, two)
    assert (verdict, [r["code"] for r in reasons]) == ("FAILED", ["regression"])
    del section["base_test_files"]
    verdict, reasons = _aggregate(one, two)
    assert (verdict, [r["code"] for r in reasons]) == ("HELD", ["expectation-changed"])


@pytest.mark.parametrize(("skipped", "verdict"), [(0, "PROVEN"), (1, "INCONCLUSIVE")])
def test_a_split_check_without_a_differential_counts_the_shards_junit(
    skipped: int, verdict: str
) -> None:
    """`differential: off`: no shard has per-test outcomes of the check; the shards' JUnit
    reports say whether a test was executed, as the one-job proof's report does."""
    shards = [_predicate(1), _predicate(2)]
    for p in shards:
        del p["shard"]["checks"]["unit"]  # type: ignore[attr-defined]
        p["checks"][0]["tests"] = {"differential": "off", "ran": False}  # type: ignore[index]
        p["checks"][0]["junit"]["skipped"] = skipped * p["checks"][0]["junit"]["tests"]  # type: ignore[index]
    got, reasons = _aggregate(*shards)
    assert got == verdict, reasons
    assert [r["code"] for r in reasons] == ([] if not skipped else ["junit-no-tests"])


def test_a_shards_own_failure_carries_over() -> None:
    two = _predicate(2)
    two["reasons"] = [
        {"code": "check-failed", "message": "test: `pytest` exited 1", "check": "unit"},
        *two["reasons"],  # type: ignore[misc]
    ]
    verdict, reasons = _aggregate(_predicate(1), two)
    assert verdict == "FAILED"
    assert [r["code"] for r in reasons] == ["check-failed"]


# -- a shard receipt is never a whole proof ---------------------------------------------


def test_verify_refuses_a_shard_receipt_even_when_its_verdict_would_pass(tmp_path: Path) -> None:
    forged = copy.deepcopy(_predicate(1))
    forged["verdict"] = "PROVEN"  # even signed PROVEN, a shard is not a proof
    forged["reasons"] = []
    path = tmp_path / "receipt.json"
    path.write_bytes(_sign(forged))
    pub = tmp_path / "k.pub"
    pub.write_bytes(receipt.public_pem(TRUSTED.public_key()))
    assert main(["verify", str(path), "--key", str(pub)]) == 1
    assert main(["verify", str(path), "--key", str(pub), "--require", "PROVEN"]) == 1
    with pytest.raises(receipt.VerificationError) as e:
        verify(path.read_bytes(), receipt.expectations([TRUSTED.public_key()]))
    assert e.value.field == "shard"


def test_aggregate_cli_writes_one_receipt(tmp_path: Path) -> None:
    paths = []
    for i in (1, 2):
        p = tmp_path / f"s{i}.json"
        p.write_bytes(_sign(_predicate(i)))
        paths.append(str(p))
    pub, key = tmp_path / "k.pub", tmp_path / "k.key"
    pub.write_bytes(receipt.public_pem(TRUSTED.public_key()))
    key.write_bytes(
        TRUSTED.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    out = tmp_path / "agg"
    assert (
        main(["aggregate", *paths, "--key", str(pub), "--signing-key", str(key), "--out", str(out)])
        == 0
    )
    assert (
        main(["verify", str(out / "receipt.json"), "--key", str(pub), "--require", "PROVEN"]) == 0
    )
    # one shard alone: refused, exit 13 (INCONCLUSIVE)
    assert main(["aggregate", paths[0], "--key", str(pub), "--out", str(tmp_path / "one")]) == 13


# -- durations: what balances a split ----------------------------------------------------


def _witnessed(line: bytes, junit: bytes | None) -> CheckResult:
    from gate.model import CommandResult, ImageRef, PhaseResult

    session = parse_session(line)
    assert session is not None
    cmd = CommandResult(
        argv=("pytest",), exit_code=0, duration_s=1.0, log_sha256=Sha256("0" * 64),
        log_bytes=0, log_tail="", witness=(session,),
    )  # fmt: skip
    return CheckResult(
        name="unit",
        image=ImageRef(name="img", id="sha256:" + "1" * 64),
        started=True,
        phases=(PhaseResult(phase=Phase.TEST, commands=(cmd,)),),
        junit_report=junit,
    )


def test_durations_come_from_the_witness_to_the_microsecond() -> None:
    line = (
        b'{"v": 1, "exitstatus": 0, "durations_us": {"tests/test_a.py::test_x": 41, '
        b'"tests/test_a.py::TestY": 1500000, "tests/test_b.py::t": -3, "x": "7"}}'
    )
    junit = (
        b'<testsuite tests="1"><testcase classname="tests.test_a" name="test_x" time="0.000"/>'
        b"</testsuite>"
    )
    got = run_durations(_witnessed(line, junit), lambda: (b"tests/test_a.py",))
    # negative or non-integer microseconds are not durations
    assert got == {"tests/test_a.py::TestY": 1.5, "tests/test_a.py::test_x": 0.000041}
    # without the witness's timing, the JUnit report's (milliseconds)
    got = run_durations(
        _witnessed(b'{"v": 1, "exitstatus": 0}', junit), lambda: (b"tests/test_a.py",)
    )
    assert got == {"tests/test_a.py::test_x": 0.0}
