"""SPEC §3.1 as a table: the pure comparison, per-test outcomes, and the config keys."""

from __future__ import annotations

import hashlib
import json

import pytest

from gate import differential
from gate.config import load_config
from gate.differential import Run, compare, list_digest, pytestconfig
from gate.differential.junit import TestId, TestOutcome, parse_outcomes
from gate.differential.tarprotect import PROTECTED_UID
from gate.errors import ConfigError
from gate.model import CheckSpec, Decision, DifferentialMode, Limits, ReasonCode
from gate.policy.paths import is_test_path
from gate.proof.verdict import verdict_for

P, F, E, S = TestOutcome.PASS, TestOutcome.FAIL, TestOutcome.ERROR, TestOutcome.SKIP
ADD = TestId(classname="tests.test_calc", name="test_add")
SUB = TestId(classname="tests.test_calc", name="test_sub")
SRC = (
    b"def test_add():\n    assert add(2, 3) == 5\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
)


def _compare(
    head: dict[TestId, TestOutcome] | None,
    trusted: dict[TestId, TestOutcome] | None,
    *,
    base: dict[TestId, TestOutcome] | None = None,
    changed: frozenset[bytes] = frozenset({b"calc.py"}),
    head_files: dict[bytes, bytes] | None = None,
    proving: dict[TestId, TestOutcome] | None = None,
    full: bool = False,
    inputs: frozenset[bytes] = frozenset(),
) -> differential.DifferentialReport:
    return compare(
        check="unit",
        mode=DifferentialMode.FULL if full else DifferentialMode.TRUSTED,
        head=Run(name="head", outcomes=head),
        base=Run(name="base", outcomes=base if base is not None else {ADD: P, SUB: P}),
        trusted=Run(name="trusted", outcomes=trusted, problem=None if trusted else "crashed"),
        proving=Run(name="proving", outcomes=proving) if full else None,
        changed=changed,
        nontest_changed=any(not p.startswith(b"tests/") for p in changed),
        base_files={b"tests/test_calc.py": SRC},
        head_files=head_files if head_files is not None else {b"tests/test_calc.py": SRC},
        inputs=inputs,
    )


def _codes(report: differential.DifferentialReport) -> list[str]:
    return [r.code.value for r in report.reasons]


TABLE = [
    # (head, trusted, changed paths, expected codes)
    ({ADD: P, SUB: P}, {ADD: P, SUB: P}, {b"calc.py"}, []),
    ({ADD: P, SUB: P}, {ADD: F, SUB: P}, {b"calc.py"}, ["regression"]),
    ({ADD: P, SUB: P}, {ADD: E, SUB: P}, {b"calc.py"}, ["regression"]),
    (
        {ADD: P, SUB: P},
        {ADD: F, SUB: P},
        {b"calc.py", b"tests/test_calc.py"},
        ["expectation-changed"],
    ),
    ({ADD: P, SUB: P}, {SUB: P}, {b"calc.py"}, ["regression"]),
    ({ADD: P, SUB: P}, {ADD: S, SUB: P}, {b"calc.py"}, ["regression"]),
    ({ADD: S, SUB: P}, {ADD: P, SUB: P}, {b"calc.py"}, ["tests-lost"]),
    ({SUB: P}, {ADD: P, SUB: P}, {b"calc.py"}, ["tests-lost"]),
    (None, None, {b"calc.py"}, ["differential-incomplete", "differential-incomplete"]),
    ({ADD: P, SUB: P}, None, {b"calc.py"}, ["differential-incomplete"]),
    (None, {ADD: P, SUB: P}, {b"calc.py"}, ["differential-incomplete"]),
]


@pytest.mark.parametrize(
    ("head", "trusted", "changed", "codes"),
    TABLE,
    ids=[
        "all-pass",
        "trusted-fails-file-unchanged",
        "trusted-errors-file-unchanged",
        "trusted-fails-file-changed",
        "absent-in-trusted",
        "skipped-in-trusted",
        "skipped-in-head",
        "absent-in-head",
        "no-reports",
        "no-trusted-report",
        "no-head-report",
    ],
)
def test_spec_table(
    head: dict[TestId, TestOutcome] | None,
    trusted: dict[TestId, TestOutcome] | None,
    changed: set[bytes],
    codes: list[str],
) -> None:
    assert _codes(_compare(head, trusted, changed=frozenset(changed))) == codes


def test_reason_codes_map_to_the_spec_verdicts() -> None:
    assert verdict_for(ReasonCode.REGRESSION).value == "FAILED"
    assert verdict_for(ReasonCode.EXPECTATION_CHANGED).value == "HELD"
    assert verdict_for(ReasonCode.TESTS_LOST).value == "HELD"
    assert verdict_for(ReasonCode.DIFFERENTIAL_INCOMPLETE).value == "INCONCLUSIVE"


def _without_base(
    trusted: dict[TestId, TestOutcome], changed: frozenset[bytes] = frozenset({b"calc.py"})
) -> differential.DifferentialReport:
    return compare(
        check="unit",
        mode=DifferentialMode.TRUSTED,
        head=Run(name="head", outcomes={ADD: P, SUB: P}),
        base=Run(name="base", outcomes=None, problem="build: `make` exited 2"),
        trusted=Run(name="trusted", outcomes=trusted),
        proving=None,
        changed=changed,
        nontest_changed=True,
        base_files={},
        head_files={},
    )


@pytest.mark.parametrize(
    ("trusted", "changed", "codes"),
    [
        ({ADD: P, SUB: P}, {b"calc.py"}, []),
        ({ADD: F, SUB: P}, {b"calc.py"}, ["regression"]),
        ({ADD: E, SUB: P}, {b"calc.py"}, ["regression"]),
        ({ADD: F, SUB: P}, {b"calc.py", b"tests/test_calc.py"}, ["expectation-changed"]),
        ({TestId(classname="", name="tests.test_calc"): E}, {b"calc.py"}, ["regression"]),
    ],
    ids=["passes", "fails", "errors", "fails-file-changed", "module-does-not-import"],
)
def test_a_base_without_outcomes_leaves_nothing_pre_existing(
    trusted: dict[TestId, TestOutcome], changed: set[bytes], codes: list[str]
) -> None:
    """SPEC §3.1: a differential never fails open. With no outcomes from the base (its
    build failed), every failure of the base's tests against the change counts; the
    pull request that fixes a broken main is PROVEN when the base's tests pass on it."""
    report = _without_base(trusted, frozenset(changed))
    assert _codes(report) == codes
    assert report.ran
    assert report.note is not None
    assert "build: `make` exited 2" in report.note
    assert report.to_dict()["note"] == report.note


def test_a_test_the_base_did_not_report_failing_is_not_pre_existing() -> None:
    """Pre-existing means reported failing by the base, test by test: a test the base
    skipped, or did not report at all, that fails against the change counts."""
    report = _compare({ADD: P, SUB: P}, {ADD: F, SUB: F}, base={ADD: S})
    assert _codes(report) == ["regression"]
    assert report.regressions == ("tests.test_calc::test_add", "tests.test_calc::test_sub")


def test_a_differential_that_could_not_run_is_inconclusive() -> None:
    report = differential.could_not_run("unit", DifferentialMode.TRUSTED, "no trees")
    assert _codes(report) == ["differential-incomplete"]
    assert "no trees" in report.reasons[0].message


def test_base_failures_are_pre_existing_not_held() -> None:
    report = _compare({ADD: P, SUB: F}, {ADD: P, SUB: F}, base={ADD: P, SUB: F})
    assert report.reasons == ()
    assert report.pre_existing == ("tests.test_calc::test_sub",)


def test_a_test_moved_to_another_module_is_not_lost() -> None:
    moved = TestId(classname="tests.test_sub", name="test_sub")
    report = _compare({ADD: P, moved: P}, {ADD: P, SUB: P})
    assert report.reasons == ()
    assert report.survived == ("tests.test_calc::test_sub -> tests.test_sub::test_sub (moved)",)


def test_a_moved_name_must_be_new_in_the_head() -> None:
    # test_sub already existed elsewhere on the base: deleting this one loses it
    other = TestId(classname="tests.test_other", name="test_sub")
    report = _compare(
        {ADD: P, other: P}, {ADD: P, SUB: P, other: P}, base={ADD: P, SUB: P, other: P}
    )
    assert _codes(report) == ["tests-lost"]


def test_a_test_renamed_with_its_body_unchanged_is_not_lost() -> None:
    renamed = TestId(classname="tests.test_calc", name="test_addition")
    files = {b"tests/test_calc.py": SRC.replace(b"test_add", b"test_addition")}
    report = _compare({renamed: P, SUB: P}, {ADD: P, SUB: P}, head_files=files)
    assert report.reasons == ()
    assert "renamed, same body" in report.survived[0]


def test_a_renamed_test_with_a_new_body_is_lost() -> None:
    renamed = TestId(classname="tests.test_calc", name="test_addition")
    weaker = SRC.replace(
        b"def test_add():\n    assert add(2, 3) == 5", b"def test_addition():\n    assert True"
    )
    report = _compare(
        {renamed: P, SUB: P}, {ADD: P, SUB: P}, head_files={b"tests/test_calc.py": weaker}
    )
    assert _codes(report) == ["tests-lost"]


def test_parametrize_ids_that_change_keep_the_cases() -> None:
    old = {TestId(classname="tests.test_p", name=f"test_p[{i}]"): P for i in ("1", "2")}
    new = {TestId(classname="tests.test_p", name=f"test_p[{i}]"): P for i in ("a", "b")}
    report = _compare(
        {**new, ADD: P, SUB: P}, {**old, ADD: P, SUB: P}, base={**old, ADD: P, SUB: P}
    )
    assert report.reasons == ()
    fewer = dict(list(new.items())[:1])
    report = _compare(
        {**fewer, ADD: P, SUB: P}, {**old, ADD: P, SUB: P}, base={**old, ADD: P, SUB: P}
    )
    assert _codes(report) == ["tests-lost"]


def test_proving_tests_fail_without_the_change() -> None:
    new = TestId(classname="tests.test_mul", name="test_mul")
    report = _compare(
        {ADD: P, SUB: P, new: P}, {ADD: P, SUB: P}, proving={ADD: P, SUB: P, new: F}, full=True
    )
    assert report.proving == ("tests.test_mul::test_mul",)
    assert report.findings == ()
    # a new test that also passes without the change proves nothing
    report = _compare(
        {ADD: P, SUB: P, new: P}, {ADD: P, SUB: P}, proving={ADD: P, SUB: P, new: P}, full=True
    )
    assert report.proving == ()
    assert [f["rule"] for f in report.findings] == ["no-proving-test"]
    assert report.findings[0]["decision"] == Decision.ALLOW.value
    assert report.reasons == ()


def test_receipt_lists_are_bounded_with_the_digest_of_the_full_list() -> None:
    many = {TestId(classname="tests.t", name=f"test_{i:03}"): P for i in range(120)}
    report = _compare({}, dict(many), base=dict(many))
    block = report.to_dict()
    assert len(block["lost"]) == differential.MAX_LISTED  # type: ignore[arg-type]
    lists = block["lists"]
    assert isinstance(lists, dict)
    assert lists["lost"]["count"] == 120
    full = sorted(str(t) for t in many)
    expected = hashlib.sha256(json.dumps(full, separators=(",", ":")).encode()).hexdigest()
    assert lists["lost"]["sha256"] == expected == list_digest(full)


REPORT = b"""<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok"/>
<testcase classname="tests.test_a" name="test_p[1-2]"><failure message="x"/></testcase>
<testcase classname="tests.test_a" name="test_e"><error message="x"/></testcase>
<testcase classname="tests.test_a" name="test_s"><skipped message="x"/></testcase>
<testcase classname="tests.test_a" name="test_ok"><error message="teardown"/></testcase>
</testsuite></testsuites>"""


def test_junit_outcomes_per_identity_worst_wins() -> None:
    got = parse_outcomes(REPORT)
    assert got == {
        TestId(classname="tests.test_a", name="test_ok"): E,
        TestId(classname="tests.test_a", name="test_p[1-2]"): F,
        TestId(classname="tests.test_a", name="test_e"): E,
        TestId(classname="tests.test_a", name="test_s"): S,
    }


@pytest.mark.parametrize(
    "report",
    [b'<!DOCTYPE x [<!ENTITY a "b">]><testsuite/>', b"<html/>", b"<testsuite>"],
    ids=["entities", "not-junit", "malformed"],
)
def test_junit_outcomes_refuse_hostile_reports(report: bytes) -> None:
    with pytest.raises(ValueError, match="DTD|root element|well-formed"):
        parse_outcomes(report)


BASE_CONFIG = "version: 1\nchecks:\n  - {name: unit, test: [pytest]%s}\n"


@pytest.mark.parametrize(
    ("extra", "mode", "tests"),
    [
        ("", DifferentialMode.OFF, ()),
        (", junit: r.xml", DifferentialMode.TRUSTED, ()),
        (", junit: r.xml, differential: full, tests: ['t/**']", DifferentialMode.FULL, ("t/**",)),
        (", junit: r.xml, differential: off", DifferentialMode.OFF, ()),
    ],
    ids=["no-junit", "junit-default-trusted", "full-with-globs", "off"],
)
def test_config_differential_keys(
    extra: str, mode: DifferentialMode, tests: tuple[str, ...]
) -> None:
    (check,) = load_config((BASE_CONFIG % extra).encode(), source="f.yml").checks
    assert check.differential is mode
    assert check.tests == tests


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        (", differential: trusted", "checks[0].differential"),
        (", junit: r.xml, differential: always", "checks[0].differential"),
        (", junit: r.xml, tests: []", "checks[0].tests"),
        (", junit: r.xml, tests: ['!x']", "checks[0].tests[0]"),
    ],
    ids=["needs-junit", "bad-mode", "empty-globs", "negated-glob"],
)
def test_config_differential_errors_name_the_key(extra: str, key: str) -> None:
    with pytest.raises(ConfigError, match=r"f\.yml") as info:
        load_config((BASE_CONFIG % extra).encode(), source="f.yml")
    assert key in str(info.value)


def test_a_module_that_does_not_collect_errors_its_tests() -> None:
    broken = TestId(classname="", name="tests.test_calc")  # pytest's collection error entry
    report = _compare({ADD: P, SUB: P}, {broken: E}, changed=frozenset({b"calc.py"}))
    assert report.regressions == ("tests.test_calc::test_add", "tests.test_calc::test_sub")
    new = TestId(classname="tests.test_mul", name="test_mul")
    other = TestId(classname="tests.test_other", name="test_other")
    report = _compare(
        {ADD: P, SUB: P, new: P, other: P},
        {ADD: P, SUB: P},
        proving={ADD: P, SUB: P, TestId(classname="", name="tests.test_mul"): E},
        full=True,
    )
    # test_mul does not import without the change; test_other is merely absent: no proof
    assert report.proving == ("tests.test_mul::test_mul",)


PKG_ADD = TestId(classname="calc.tests.test_calc", name="test_add")


def _in_package(changed: frozenset[bytes], test_files: tuple[bytes, ...]) -> list[str]:
    report = compare(
        check="unit",
        mode=DifferentialMode.TRUSTED,
        head=Run(name="head", outcomes={PKG_ADD: P}),
        base=Run(name="base", outcomes={PKG_ADD: P}, test_files=test_files),
        trusted=Run(name="trusted", outcomes={PKG_ADD: F}),
        proving=None,
        changed=changed,
        nontest_changed=True,
        base_files={},
        head_files={},
    )
    return _codes(report)


@pytest.mark.parametrize("reported", [(b"calc/tests/test_calc.py",), ()], ids=["witness", "none"])
def test_a_packages_init_is_never_a_tests_file(reported: tuple[bytes, ...]) -> None:
    # SPEC §3.2: `calc/__init__.py` is no test's file, so a regression in calc.tests.* stays
    # a regression (FAILED) when the change edits it, not an approvable changed expectation
    assert _in_package(frozenset({b"calc/__init__.py"}), reported) == ["regression"]


def test_a_tests_file_is_the_one_the_base_run_reports_by_exact_path() -> None:
    changed = frozenset({b"calc/__init__.py", b"calc/tests/test_calc.py"})
    assert _in_package(changed, (b"calc/tests/test_calc.py",)) == ["expectation-changed"]
    # the base run says the test lives elsewhere: the changed file of that name is not its
    assert _in_package(changed, (b"src/calc/tests/test_calc.py",)) == ["regression"]


@pytest.mark.parametrize(
    ("path", "trusted"),
    [
        (b"calc/tests/_helpers.py", True),
        (b"testing/asserts.py", True),
        (b"src/pkg/test/data/golden.json", True),
        (b"tests/data/cases.json", True),
        (b"pkg/sub/conftest.py", True),
        (b"calc/tests.py", True),
        (b"calc/data/cases.json", False),
        (b"calc/__init__.py", False),
        (b"contest.py", False),
    ],
)
def test_one_definition_of_a_test_path_for_policy_and_differential(
    path: bytes, trusted: bool
) -> None:
    default = differential.test_files(CheckSpec(name="unit", phases=(), limits=Limits()))
    assert default(path) is trusted
    if path.endswith(b".py"):
        assert is_test_path(path) is trusted  # the policy's Python test paths are the same


@pytest.mark.parametrize(
    ("files", "want"),
    [
        ({}, ("pytest.ini", b"")),
        ({b"pyproject.toml": b"[project]\nname = 'x'\n"}, ("pytest.ini", b"")),
        (
            {b"pyproject.toml": b"[tool.pytest.ini_options]\naddopts = '-q'\n"},
            ("pyproject.toml", b"[tool.pytest.ini_options]\naddopts = '-q'\n"),
        ),
        (
            {b"pyproject.toml": b"[tool .pytest . ini_options]\n", b"tox.ini": b"[pytest]\n"},
            ("pyproject.toml", b"[tool .pytest . ini_options]\n"),
        ),
        (
            {b"setup.cfg": b"[tool:pytest]\ntestpaths = t\n", b"tox.ini": b"[tox]\n"},
            ("setup.cfg", b"[tool:pytest]\ntestpaths = t\n"),
        ),
        (
            {b"pytest.ini": b"", b"setup.cfg": b"[tool:pytest]\n"},
            ("pytest.ini", b""),  # pytest.ini wins whatever it holds
        ),
        ({b"pyproject.toml": b"[tool\n"}, ("pyproject.toml", b"[tool\n")),
    ],
    ids=[
        "none",
        "pyproject-without",
        "pyproject",
        "spaced-header",
        "setup-cfg",
        "pytest-ini",
        "bad",
    ],
)
def test_the_base_pytest_configuration_is_the_file_pytest_finds(
    files: dict[bytes, bytes], want: tuple[str, bytes]
) -> None:
    assert pytestconfig.effective(files) == want


def test_the_configuration_sits_read_only_in_proofgates_volume() -> None:
    import io
    import tarfile

    from gate.witness.host import plugin_tar, test_environment

    data = plugin_tar(pytest_config=("setup.cfg", b"[tool:pytest]\n"))
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        member = t.getmember("config/setup.cfg")
        assert (member.mode, member.uid) == (0o444, PROTECTED_UID)
        assert t.getmember("config").mode == 0o555
        assert t.extractfile(member).read() == b"[tool:pytest]\n"  # type: ignore[union-attr]
    env = test_environment(
        {"PYTEST_ADDOPTS": "-x"}, ("setup.cfg", b"[tool:pytest]\n"), differential=False
    )
    assert env[0] == (
        "PYTEST_ADDOPTS=-p proofgate_witness -c /opt/proofgate/config/setup.cfg "
        "--rootdir /workspace -x"
    )
    assert (
        test_environment({}, None, differential=False)[0] == "PYTEST_ADDOPTS=-p proofgate_witness"
    )
