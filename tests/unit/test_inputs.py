"""Test inputs by construction (SPEC §3.2): which files the trusted run takes from the
base as what the base's tests may read (gate/differential/inputs.py, pure)."""

from __future__ import annotations

import pytest

from gate.differential import inputs
from gate.differential.junit import TestId, TestOutcome
from gate.model import DifferentialMode
from tests.unit.test_differential import _compare

TRUSTED = lambda p: p.startswith(b"tests/")  # noqa: E731


@pytest.mark.parametrize(
    ("path", "taken"),
    [
        (b"tests/data/cases.json", False),  # a trusted test file: the base's anyway
        (b"golden/add.txt", True),
        (b"calc/data/table.db", True),
        (b"../x", True),
        (b"README.md", True),  # a doctest's document
        (b"calc.py", False),
        (b"native/_speedups.c", False),
        (b"pyproject.toml", False),
        (b"requirements/test.txt", False),
        (b".github/workflows/ci.yml", False),
        (b"Makefile", False),
    ],
)
def test_every_file_that_is_not_code_is_an_input(path: bytes, taken: bool) -> None:
    got = inputs.inputs([path], trusted=TRUSTED, base_sources={}, tests_import=frozenset())
    assert (path in got) is taken


def test_a_data_only_module_the_tests_import_is_an_input() -> None:
    sources = {
        b"expected.py": b'"""Expected values."""\nADD = {(2, 3): 5}\nNAMES: list[str] = ["a"]\n',
        b"calc.py": b"def add(a, b):\n    return a + b\n",
        b"helpers.py": b"ADD = 5\n\n\ndef check(x):\n    assert x == ADD\n",
        b"unused.py": b"ADD = 5\n",
    }
    tests = {
        b"tests/test_calc.py": b"from expected import ADD\nimport calc\nfrom helpers import check\n"
    }
    got = inputs.inputs(
        list(sources),
        trusted=TRUSTED,
        base_sources=sources,
        tests_import=inputs.imported_names(tests),
    )
    # a module of literals the tests import; not the code under test, not a helper that
    # defines functions, not a data module the tests do not import
    assert got == {b"expected.py"}


def test_observed_reads_add_and_never_remove() -> None:
    got = inputs.inputs(
        [b"calc/expected.py", b"golden.txt"],
        trusted=TRUSTED,
        base_sources={},
        tests_import=frozenset(),
        observed=[b"calc/expected.py"],
    )
    assert got == {b"calc/expected.py", b"golden.txt"}


ADD = TestId(classname="tests.test_calc", name="test_add")
SUB = TestId(classname="tests.test_calc", name="test_sub")
P, F = TestOutcome.PASS, TestOutcome.FAIL


def test_a_base_test_failing_with_the_bases_inputs_is_held_not_failed() -> None:
    report = _compare({ADD: P, SUB: P}, {ADD: F, SUB: P}, inputs=frozenset({b"golden/add.txt"}))
    assert [r.code.value for r in report.reasons] == ["test-input-changed"]
    assert report.inputs_failed == ("tests.test_calc::test_add",)
    assert report.to_dict()["test_inputs_changed"] == ["golden/add.txt"]


def test_when_the_bases_tests_pass_with_the_bases_inputs_that_is_the_proof() -> None:
    report = _compare({ADD: P, SUB: P}, {ADD: P, SUB: P}, inputs=frozenset({b"golden/add.txt"}))
    assert report.reasons == ()
    assert report.to_dict()["test_inputs_changed"] == ["golden/add.txt"]  # recorded
    assert report.mode is DifferentialMode.TRUSTED


def test_package_metadata_in_any_case_is_the_bases_in_the_trusted_run() -> None:
    from gate.differential import trusted_selector
    from gate.model import CheckSpec, Limits

    spec = CheckSpec(name="unit", phases=(), limits=Limits(), junit="r.xml")
    chosen = trusted_selector(spec)
    assert chosen(b"green-1.Dist-Info/entry_points.txt")
    assert chosen(b"src/Green.EGG-INFO/entry_points.txt")
    assert not chosen(b"calc.py")
