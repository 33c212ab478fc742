"""SPEC §3.3: the aggregate of three shards agrees with the one-job proof over a base of
nine test files (in tests/ and tests/sub/, a parametrized test, a test class) and two
checks: `unit` (`junit`, the differential, split by file) and `smoke` (no `junit`: it goes
whole to one shard). Each case is a real change proven once as one job and once as three
`proofgate prove --shard I/3` with `proofgate aggregate`, all through the CLI against the
real Docker daemon; the verdict, the sorted reason codes and the exit status must be the
one-job proof's, and each case says what that is (both wrong alike cannot pass)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from gate.proof.shard import by_path_hash
from tests.integration.test_shards import CHECK
from tests.integration.test_shards_agree import EXIT, N, _aggregate, _codes, _prove_shards
from tests.integration.test_shards_agree import keys as keys  # the fixture
from tests.provecli import cli_prove, config_yaml, pr_repo, receipt_predicate

pytestmark = pytest.mark.docker

SMOKE = '  - name: smoke\n    test: [["python3", "smoke.py"]]\n'
OFF = '    differential: "off"\n'
POLICY = 'policy:\n  protected: ["deploy/**"]\n'
CALC = (
    b"def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n\n\n"
    b"def neg(a):\n    return -a\n"
)
PLAIN = ("tests/test_a.py", "tests/test_b.py", "tests/test_c.py", "tests/test_d.py")
SUB = ("tests/sub/test_f.py", "tests/sub/test_g.py", "tests/sub/test_i.py")
PARAM = "tests/test_e.py"  # a parametrized test
CLASS = "tests/sub/test_h.py"  # a test class
FILES = (*PLAIN, PARAM, *SUB, CLASS)


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1][len("test_") : -3]


def _plain(stem: str, bodies: dict[str, str], marks: dict[str, str] | None = None) -> bytes:
    out = "import pytest\n\nfrom calc import add, mul\n"
    for name, body in bodies.items():
        mark = (marks or {}).get(name)
        out += "\n\n" + (f"@pytest.mark.{mark}\n" if mark else "")
        out += f"def test_{stem}_{name}():\n    {body}\n"
    return out.encode()


def _bodies(i: int) -> dict[str, str]:
    return {str(t): f"assert add({t}, {i}) == {t + i}" for t in range(2)}


def _param(cases: tuple[int, ...] = (1, 2, 3)) -> bytes:
    return (
        "import pytest\n\nfrom calc import add\n\n\n"
        f"@pytest.mark.parametrize('n', {list(cases)})\ndef test_e_p(n):\n"
        "    assert add(n, 0) == n\n\n\ndef test_e_1():\n    assert add(1, 1) == 2\n"
    ).encode()


def _class(name: str, methods: tuple[str, ...]) -> bytes:
    out = f"from calc import add\n\n\nclass {name}:\n"
    for m in methods:
        out += f"    def test_{m}(self):\n        assert add({len(m)}, 1) == {len(m) + 1}\n\n"
    return out.encode()


def base_tree(extra: dict[bytes, object] | None = None) -> dict[bytes, object]:
    files: dict[bytes, object] = {
        b".github/proofgate.yml": config_yaml(CHECK + SMOKE, POLICY),
        b"calc.py": CALC,
        b"smoke.py": b"from calc import neg\n\nassert neg(2) == -2\n",
        b"deploy/run.sh": b"#!/bin/sh\necho deploy\n",
    }
    for i, path in enumerate((*PLAIN, *SUB)):
        files[path.encode()] = _plain(_stem(path), _bodies(i))
    files[b"tests/sub/test_f.py"] = _plain("f", {**_bodies(4), "mul": "assert mul(2, 3) == 6"})
    files[PARAM.encode()] = _param()
    files[CLASS.encode()] = _class("TestH", ("h_0", "h_1"))
    files.update(extra or {})
    return files


def _shard(path: str) -> int:
    return by_path_hash(list(FILES), N)[path]


def _other(path: str, among: tuple[str, ...] = FILES) -> str:
    """A base test file on another shard than `path`."""
    return next(f for f in among if _shard(f) != _shard(path))


def _honest_calc() -> bytes:
    return CALC + b"\n\ndef sub(a, b):\n    return a - b\n"


def head_expectation_changed() -> dict[bytes, object]:
    calc = CALC.replace(b"return a * b", b"return a * b + 1")
    test = _plain("f", {**_bodies(4), "mul": "assert mul(2, 3) == 7"})
    return {b"calc.py": calc, b"tests/sub/test_f.py": test}


def head_newly_skipped() -> dict[bytes, object]:
    return {b"tests/test_b.py": _plain("b", _bodies(1), {"0": "skip(reason='later')"})}


def head_xfail_marked() -> dict[bytes, object]:
    return {b"tests/test_c.py": _plain("c", _bodies(2), {"0": "xfail"})}


def head_new_test_file() -> dict[bytes, object]:
    return {
        b"calc.py": _honest_calc(),
        b"tests/sub/test_new.py": b"from calc import sub\n\n\ndef test_sub():\n"
        b"    assert sub(5, 3) == 2\n",
    }


def head_conftest_hides_regression() -> dict[bytes, object]:
    # the change breaks mul and adds a conftest that deselects the test of it: the head run
    # passes; the base's test, in the trusted run without that conftest, fails
    conftest = (
        b"def pytest_collection_modifyitems(config, items):\n"
        b"    items[:] = [i for i in items if 'mul' not in i.name]\n"
    )
    return {
        b"calc.py": CALC.replace(b"return a * b", b"return a * b + 1"),
        b"tests/conftest.py": conftest,
    }


def head_proving_test() -> dict[bytes, object]:
    bodies = {**_bodies(1), "sub": "from calc import sub\n    assert sub(5, 3) == 2"}
    return {b"calc.py": _honest_calc(), b"tests/test_b.py": _plain("b", bodies)}


def head_policy_hold() -> dict[bytes, object]:
    return {**head_new_test_file(), b"deploy/run.sh": b"#!/bin/sh\necho deploy now\n"}


def head_param_lost() -> dict[bytes, object]:
    return {PARAM.encode(): _param((1, 2))}


def head_class_test_moved() -> dict[bytes, object]:
    target = _other(CLASS, SUB)
    data = base_tree()[target.encode()]
    assert isinstance(data, bytes)
    moved = _class("TestH", ("h_1",)).split(b"\n", 1)[1]  # without its import
    return {CLASS.encode(): _class("TestH", ("h_0",)), target.encode(): data + b"\n\n" + moved}


def head_file_split() -> dict[bytes, object]:
    bodies = _bodies(3)
    second = "tests/sub/test_d2.py"
    return {
        b"tests/test_d.py": _plain("d", {"0": bodies["0"]}),
        second.encode(): _plain("d", {"1": bodies["1"]}),
    }


def head_deleted_and_added() -> dict[bytes, object]:
    bodies = _bodies(2)
    return {b"tests/test_c.py": _plain("c", {"1": bodies["1"], "new": "assert add(9, 9) == 18"})}


def head_regression_test_deleted() -> dict[bytes, object]:
    return {
        b"calc.py": CALC.replace(b"return a * b", b"return a * b + 1"),
        b"tests/sub/test_f.py": _plain("f", _bodies(4)),
    }


def head_edits_a_tests_module() -> dict[bytes, object]:
    # a module named `tests` (app/tests.py: no test file, pytest does not collect it) is a
    # dotted prefix of every test's classname (tests.sub.test_f): the change editing it
    # leaves the base's test of mul, failing in the trusted run, in an unchanged file
    return {
        **head_conftest_hides_regression(),
        b"app/tests.py": b"CASES = [1, 2, 3]\n",
    }


CONFTEST = b"import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n"


def head_conftest_changed() -> dict[bytes, object]:
    more = b"\n\n@pytest.fixture\ndef three():\n    return 3\n"
    test = _plain("g", {**_bodies(5), "three": "assert three == 3"}).replace(
        b"def test_g_three()", b"def test_g_three(three)"
    )
    return {b"tests/conftest.py": CONFTEST + more, b"tests/sub/test_g.py": test}


def head_broken_test_module() -> dict[bytes, object]:
    return {b"tests/test_d.py": _plain("d", _bodies(3)) + b"\ndef broken(:\n"}


def head_smoke_fails() -> dict[bytes, object]:
    return {b"calc.py": CALC.replace(b"return -a", b"return a")}


@dataclass(frozen=True)
class Case:
    head: dict[bytes, object]
    verdict: str  # the one-job proof's
    codes: tuple[str, ...]  # its reason codes
    base: dict[bytes, object] | None = None
    proving: bool = False  # the one-job proof lists the new test of `sub` as proving


PRE_EXISTING = {
    b"tests/sub/test_i.py": _plain("i", {**_bodies(6), "bad": "assert add(1, 1) == 3"}),
}
WITH_CONFTEST = {b"tests/conftest.py": CONFTEST}
FULL = {b".github/proofgate.yml": config_yaml(CHECK + "    differential: full\n" + SMOKE, POLICY)}
HELD_EXPECTATION = ("expectation-changed",)
CASES = {
    "expectation-changed": Case(head_expectation_changed(), "HELD", HELD_EXPECTATION),
    "newly-skipped": Case(head_newly_skipped(), "HELD", ("policy-hold", "tests-lost")),
    # an xfail mark on a passing test: XPASS, reported as a pass (the policy holds the mark)
    "xfail-marked": Case(head_xfail_marked(), "HELD", ("policy-hold",)),
    "conftest-hides-regression": Case(
        head_conftest_hides_regression(), "FAILED", ("policy-hold", "regression", "tests-lost")
    ),
    # the change breaks mul and deletes its test: the base's test fails in the trusted run,
    # in a file the change edits
    "regression-test-deleted": Case(
        head_regression_test_deleted(), "HELD", ("expectation-changed", "policy-hold", "tests-lost")
    ),
    "proving-test": Case(head_proving_test(), "PROVEN", (), None, True),
    "policy-hold-and-honest-code": Case(head_policy_hold(), "HELD", ("policy-hold",)),
    "param-lost": Case(head_param_lost(), "HELD", ("tests-lost",)),
    "class-test-moved": Case(head_class_test_moved(), "PROVEN", ()),
    "file-split-in-two": Case(head_file_split(), "PROVEN", ()),
    "pre-existing-failure": Case(
        head_new_test_file(), "FAILED", ("check-failed",), base_tree(PRE_EXISTING)
    ),
    "deleted-and-added": Case(head_deleted_and_added(), "HELD", ("policy-hold", "tests-lost")),
    "regression-beside-a-tests-module": Case(
        head_edits_a_tests_module(),
        "FAILED",
        ("policy-hold", "regression", "tests-lost"),
        base_tree({b"app/tests.py": b"CASES = [1, 2]\n"}),
    ),
    "conftest-changed": Case(
        head_conftest_changed(), "HELD", ("policy-hold",), base_tree(WITH_CONFTEST)
    ),
    # a head test module that does not parse: an error at collection in every shard
    "broken-test-module": Case(head_broken_test_module(), "FAILED", ("check-failed", "tests-lost")),
    # `differential: full`: the proving run finds the new test failing without the change,
    # in whichever shard runs it
    "full-proving-test": Case(head_proving_test(), "PROVEN", (), base_tree(FULL), True),
    "second-check-fails": Case(head_smoke_fails(), "FAILED", ("check-failed",)),
    # a check with `junit` and `differential: off` is split like any other: the shards'
    # JUnit reports count its tests, though no differential ran on any of them
    "differential-off": Case(
        head_new_test_file(),
        "PROVEN",
        (),
        base_tree({b".github/proofgate.yml": config_yaml(CHECK + OFF + SMOKE, POLICY)}),
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_aggregate_verdict_equals_the_one_job_proof(
    tmp_path: Path, keys: tuple[Path, Path], case: Case
) -> None:
    _, path = pr_repo(tmp_path, case.base or base_tree(), case.head)
    one = tmp_path / "one"
    one_code = cli_prove(path, one, "--key", str(keys[0]))
    whole = receipt_predicate(one)
    got_one = (whole["verdict"], _codes(whole), one_code)

    outs = _prove_shards(path, tmp_path, keys[0])
    split = receipt_predicate(outs[0])["shard"]["split"]  # type: ignore[index]
    assert sorted(split["checks"][0]["files"]) == sorted(FILES)  # type: ignore[index]
    assert split["checks"][1] == {"name": "smoke", "whole": 1}  # type: ignore[index]
    code, agg = _aggregate(outs, tmp_path, keys)
    aggregate = receipt_predicate(agg)
    got_agg = (aggregate["verdict"], _codes(aggregate), code)
    assert got_agg == got_one, aggregate["reasons"]
    assert got_one == (case.verdict, case.codes, EXIT[case.verdict])
    unit_one, unit_agg = whole["checks"][0]["tests"], aggregate["checks"][0]["tests"]  # type: ignore[index]
    for key in ("regressions", "expectation_changed", "lost", "proving"):
        assert unit_agg.get(key) == unit_one.get(key), key
    if case.proving:
        assert unit_one["proving"] == ["tests.test_b::test_b_sub"]
