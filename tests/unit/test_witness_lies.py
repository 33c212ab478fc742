"""The witness against in-process lies (issue 27): the plugin in a real pytest, fed the
corpus's payloads (tests/attacks/evidence.py), and the host's reading of its closing line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tests.attacks.corpus  # noqa: F401 - the corpus first (evidence imports from it)
from gate.witness import judge as witness
from gate.witness.host import MARKER, Scanner
from tests.attacks import evidence
from tests.unit.test_witness import _project, _pytest_with_witness, _result, _session, _spec

UNITTEST_TEST = evidence.TEST_CALC_UNITTEST.decode()


def _sabotage(payload: str) -> str:
    return evidence._sabotage(payload).decode()


def _kinds(line: dict[str, object]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in line["tampered"]:  # type: ignore[attr-defined]
        out.setdefault(t["kind"], []).append(t["detail"])
    return out


def _run(tmp_path: Path, calc: str, *args: str, **files: str) -> tuple[int, dict[str, object]]:
    root = _project(tmp_path, **files)
    (root / "calc.py").write_text(calc)
    code, lines = _pytest_with_witness(root, *args)
    assert len(lines) == 1, lines
    return code, lines[0]


def test_unittest_assertions_made_no_ops_are_seen(tmp_path: Path) -> None:
    code, line = _run(
        tmp_path, _sabotage(evidence.UNITTEST_ASSERT_NOOP), **{"test_calc.py": UNITTEST_TEST}
    )
    assert code == 0  # the lie worked on pytest ...
    (detail,) = _kinds(line)["pytest-patched"]
    # the detail names where the replacement is defined: the change's calc.py
    assert detail.startswith("unittest.case.TestCase.assertEqual (now defined in ")
    assert detail.endswith("/calc.py)")


def test_a_trace_function_that_wraps_tests_is_seen(tmp_path: Path) -> None:
    code, line = _run(tmp_path, _sabotage(evidence.FTRACE_WRAPS_TESTS))
    assert code == 0
    assert "test_calc.py::test_add runs calc.py:test" in _kinds(line)["test-code-replaced"]


def test_a_finder_ahead_of_the_rewriter_is_seen(tmp_path: Path) -> None:
    code, line = _run(
        tmp_path, _sabotage(evidence.META_PATH_DROPS_ASSERTS), **{"conftest.py": "import calc\n"}
    )
    assert code == 0
    kinds = _kinds(line)
    assert kinds["import-hook"] == ["sys.meta_path: calc._Finder"]
    assert (
        "test_calc.py::test_add is not what test_calc.py compiles to" in kinds["test-code-replaced"]
    )


def test_runtest_patched_and_restored_is_seen(tmp_path: Path) -> None:
    code, line = _run(tmp_path, _sabotage(evidence.RUNTEST_PATCHED_AND_RESTORED))
    assert code == 0
    (detail,) = _kinds(line)["pytest-patched"]
    assert detail.startswith("_pytest.python.Function.runtest (now defined in ")


def test_wrapping_os_write_does_not_reach_the_witness_line(tmp_path: Path) -> None:
    code, line = _run(tmp_path, _sabotage(evidence.OS_WRITE_REWRITES_THE_LINE), "--junitxml=r.xml")
    assert code == 1
    assert line["exitstatus"] == 1
    assert line["counts"] == {"passed": 1, "failed": 1, "error": 0, "skipped": 0}


def test_replacing_the_witness_by_attribute_changes_nothing(tmp_path: Path) -> None:
    code, line = _run(tmp_path, _sabotage(evidence.WITNESS_HOOKS_REPLACED))
    assert code == 1
    assert line["exitstatus"] == 1
    assert line["ended"]


def test_unittest_failures_turned_green_by_a_hookwrapper_are_seen(tmp_path: Path) -> None:
    code, line = _run(
        tmp_path,
        "def add(a, b):\n    return a - b\n",
        **{"test_calc.py": UNITTEST_TEST, "conftest.py": evidence.GREEN_CONFTEST.decode()},
    )
    assert code == 0
    [detail] = _kinds(line)["outcome-rewritten"]
    assert detail.startswith("test_calc.py::TestAdd::test_add reported AssertionError")


def test_an_exit_after_the_line_leaves_no_closing_line(tmp_path: Path) -> None:
    code, line = _run(tmp_path, _sabotage(evidence.EXIT_AFTER_THE_LINE))
    assert code == 0
    assert not line["ended"]
    (tmp_path / "honest").mkdir()
    _, honest = _run(tmp_path / "honest", "def add(a, b):\n    return a + b\n")
    assert honest["ended"]


def test_a_runner_that_traces_before_pytest_is_not_a_finding(tmp_path: Path) -> None:
    root = _project(tmp_path, **{"test_calc.py": UNITTEST_TEST})
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "traced.py").write_bytes(evidence.TRACED_RUNNER)
    code, [line] = _pytest_with_witness(root, runner=[sys.executable, "traced.py"])
    assert code == 0
    assert line["tampered"] == []


def test_a_trace_function_set_by_the_code_is_seen(tmp_path: Path) -> None:
    calc = "import sys\nsys.setprofile(lambda *a: None)\ndef add(a, b):\n    return a + b\n"
    _, line = _run(tmp_path, calc)
    assert _kinds(line)["trace-function"] == ["sys.setprofile: calc.<lambda>"]


@pytest.mark.parametrize(
    "tests",
    [
        "import builtins\n\n\ndef test_patches(monkeypatch):\n"
        "    monkeypatch.setattr(builtins, 'input', lambda *a: 'y')\n"
        "    monkeypatch.setattr('_pytest.runner.show_test_item', print)\n"
        "    assert input() == 'y'\n\n\ndef test_after():\n    assert True\n",
        evidence.TEST_PYTESTER.decode(),
        "import functools\n\n\ndef deco(f):\n    @functools.wraps(f)\n"
        "    def inner(*a, **k):\n        return f(*a, **k)\n    return inner\n\n\n"
        "@deco\ndef test_wrapped():\n    assert True\n",
    ],
    ids=["monkeypatch-in-a-test", "pytester", "decorated-in-the-file"],
)
def test_honest_harness_use_is_not_a_finding(tmp_path: Path, tests: str) -> None:
    files = {"test_calc.py": tests, "conftest.py": 'pytest_plugins = ["pytester"]\n'}
    code, line = _run(tmp_path, "def add(a, b):\n    return a + b\n", **files)
    assert code == 0
    assert line["tampered"] == []


def test_the_closing_line_marks_its_sessions_ended() -> None:
    scanner = Scanner()
    session = b'{"v": 1, "pid": 7, "exitstatus": 0, "counts": {}, "tampered": []}'
    scanner.feed(b"\n" + MARKER + session + b"\n")
    assert [s.ended for s in scanner.sessions] == [False]
    scanner.feed(b"\n" + MARKER + b'{"v": 1, "end": 8}\n')  # another process's
    assert [s.ended for s in scanner.sessions] == [False]
    scanner.feed(b"\n" + MARKER + b'{"v": 1, "end": 7}\n')
    assert [s.ended for s in scanner.sessions] == [True]
    assert scanner.problems == []


def test_a_session_without_its_closing_line_is_exit_forced_when_the_command_passed() -> None:
    seen = witness.assess(_result((_session(pid=7, ended=False),)), _spec(None), None)
    assert [k for k, _ in seen.findings] == ["exit-forced"]
    failed = _result((_session(pid=7, ended=False),), exit_code=1)
    assert witness.assess(failed, _spec(None), None).findings == ()
