"""The differential (SPEC §3.1) on its own: "tests that lie" against broken code.

Every attack breaks `calc.add` and then makes the change's own tests say nothing about
it. The policy's pattern rules are all switched off (`policy.rules: {id: allow}` for
every built-in rule), so what contains each attack is the semantic comparison: the
base's tests, with the base's harness, run against the change. Honest changes beside
them must stay PROVEN. Real repositories, real Docker, the clean-room image.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate import policy
from gate.faces import cli
from gate.proof import runs as differential_runs
from tests.attacks.corpus import (
    CALC,
    CALC_BROKEN,
    PYTEST,
    Built,
    Observation,
    Workspace,
    config,
    pr_repo,
    predicate_of,
    prove,
)
from tests.gitutil import Content, Symlink

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ALL_RULES_OFF = (
    "policy:\n  rules: {" + ", ".join(f"{rid}: allow" for rid in sorted(policy.RULES)) + "}\n"
)
JUNIT = "reports/junit.xml"
TEST_ARGV = PYTEST[:-1] + f', "--junitxml={JUNIT}"]'


def _check(extra: str) -> str:
    return "  - {name: unit, test: [" + TEST_ARGV + "], junit: " + JUNIT + extra + "}\n"


TESTS_CALC = (
    b"from calc import add, sub\n\n\n"
    b"def test_add():\n    assert add(2, 3) == 5\n\n\n"
    b"def test_sub():\n    assert sub(5, 3) == 2\n"
)
CALC2 = CALC + b"\n\ndef sub(a, b):\n    return a - b\n"
CALC2_BROKEN = CALC_BROKEN + b"\n\ndef sub(a, b):\n    return a - b\n"


def _config(extra: str = "", policy_text: str = ALL_RULES_OFF) -> bytes:
    return config(_check(extra), policy=policy_text)


def _base(**files: Content) -> dict[bytes, Content]:
    tree: dict[bytes, Content] = {
        b".github/proofgate.yml": _config(),
        b"calc.py": CALC2,
        b"tests/test_calc.py": TESTS_CALC,
    }
    tree.update({k.encode(): v for k, v in files.items()})
    return tree


def _run(
    tmp_path: Path, pr: dict[bytes, Content], base: dict[bytes, Content] | None = None
) -> tuple[Observation, dict[str, object]]:
    ws = Workspace(tmp_path)
    _, path = pr_repo(ws, pr, base if base is not None else _base())
    seen = prove(ws, Built(repo=path), tmp_path / "out")
    assert not [p for p in seen.problems if p.startswith("integrity:")], seen.problems
    pred = predicate_of((tmp_path / "out" / "receipt.json").read_bytes())
    return seen, pred


def _tests_block(pred: dict[str, object]) -> dict[str, object]:
    checks = pred["checks"]
    assert isinstance(checks, list)
    block = checks[0]["tests"]
    assert isinstance(block, dict)
    return block


def _codes(pred: dict[str, object]) -> set[str]:
    reasons = pred["reasons"]
    assert isinstance(reasons, list)
    return {str(r["code"]) for r in reasons}


def _detail(seen: Observation, pred: dict[str, object]) -> str:
    return json.dumps({"reasons": pred["reasons"], "outcome": seen.outcome}) + seen.log[-3000:]


# --- attacks: broken calc.add, and the change's tests made to say nothing about it ---

ATTACKS: dict[str, dict[bytes, Content]] = {
    "from-pytest-import-skip": {
        b"tests/test_calc.py": TESTS_CALC.replace(
            b"def test_add():\n", b"def test_add():\n    skip('flaky')\n"
        ).replace(b"from calc import", b"from pytest import skip\nfrom calc import"),
    },
    "import-pytest-as-pt": {
        b"tests/test_calc.py": b"import pytest as pt\n"
        + TESTS_CALC.replace(b"def test_add():\n", b"@pt.mark.skip\ndef test_add():\n"),
    },
    "named-skip-marker": {
        b"tests/test_calc.py": b"import pytest\nslow = pytest.mark.skip(reason='slow')\n"
        + TESTS_CALC.replace(b"def test_add():\n", b"@slow\ndef test_add():\n"),
    },
    "skip-exception-at-runtime": {
        b"tests/test_calc.py": TESTS_CALC.replace(
            b"def test_add():\n",
            b"def test_add():\n    import _pytest.outcomes as o\n    raise o.Skipped('later')\n",
        ),
    },
    "test-file-renamed-by-case": {
        b"tests/test_calc.py": None,
        b"tests/Test_calc.py": TESTS_CALC,
    },
    "test-file-moved-uncollected": {
        b"tests/test_calc.py": None,
        b"tests/calc_checks.py": TESTS_CALC,
    },
    "test-file-symlink-to-trivial": {
        b"tests/test_calc.py": Symlink(b"trivial.py"),
        b"tests/trivial.py": b"def test_add():\n    pass\n\n\ndef test_sub():\n    pass\n",
    },
    "pytest-plugins-in-test-module": {
        b"tests/test_calc.py": b"pytest_plugins = ['tests.green']\n" + TESTS_CALC,
        b"tests/green.py": (
            b"import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
            b"def pytest_runtest_makereport(item, call):\n"
            b"    out = yield\n    rep = out.get_result()\n"
            b"    rep.outcome = 'passed'\n    rep.longrepr = None\n"
        ),
    },
    "dist-info-pytest11-plugin": {
        b"greenplug.dist-info/METADATA": b"Metadata-Version: 2.1\nName: greenplug\nVersion: 1\n",
        b"greenplug.dist-info/entry_points.txt": b"[pytest11]\ngreen = greenplug_hooks\n",
        b"greenplug_hooks.py": (
            b"import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
            b"def pytest_runtest_makereport(item, call):\n"
            b"    out = yield\n    rep = out.get_result()\n"
            b"    rep.outcome = 'passed'\n    rep.longrepr = None\n"
        ),
    },
    "dist-info-in-another-case": {
        b"Greenplug-1.Dist-Info/METADATA": b"Metadata-Version: 2.1\nName: greenplug\nVersion: 1\n",
        b"Greenplug-1.Dist-Info/entry_points.txt": b"[pytest11]\ngreen = greenplug_hooks\n",
        b"greenplug_hooks.py": (
            b"import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
            b"def pytest_runtest_makereport(item, call):\n"
            b"    out = yield\n    rep = out.get_result()\n"
            b"    rep.outcome = 'passed'\n    rep.longrepr = None\n"
        ),
    },
    "tests-pkg-double-shadows-real": {
        b"tests/calc.py": b"def add(a, b):\n    return 5\n\n\ndef sub(a, b):\n    return 2\n",
    },
    "test-body-replaced-same-asserts": {
        b"tests/test_calc.py": TESTS_CALC.replace(
            b"assert add(2, 3) == 5", b"assert add(2, 2) == 0"
        ),
    },
}


@pytest.mark.parametrize("attack", sorted(ATTACKS), ids=sorted(ATTACKS))
def test_lying_tests_are_caught_by_the_differential(attack: str, tmp_path: Path) -> None:
    pr = {**_base(), b"calc.py": CALC2_BROKEN, **ATTACKS[attack]}
    seen, pred = _run(tmp_path, pr)
    detail = _detail(seen, pred)
    assert seen.outcome in ("FAILED", "HELD"), detail
    assert not seen.problems, detail
    assert _codes(pred) & {"regression", "expectation-changed"}, detail
    block = _tests_block(pred)
    assert block["ran"] is True
    flagged = [*block["regressions"], *block["expectation_changed"]]  # type: ignore[misc]
    assert "tests.test_calc::test_add" in flagged, detail


# --- honest changes: PROVEN -----------------------------------------------------------


MUL_TESTS = b"from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"


def test_new_feature_with_new_tests_is_proven(tmp_path: Path) -> None:
    pr = {
        **_base(),
        b"calc.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n",
        b"tests/test_mul.py": MUL_TESTS,
    }
    seen, pred = _run(tmp_path, pr)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    block = _tests_block(pred)
    assert block["runs"]["base"]["pass"] == 2  # type: ignore[index]
    assert block["runs"]["trusted"]["pass"] == 2  # type: ignore[index]
    assert block["proving"] == ["tests.test_mul::test_mul"]
    md = (tmp_path / "out" / "receipt.md").read_text()
    assert "2 passed on the base; 2 of the base's tests pass against the change; 1 new" in md


def test_the_markdown_shows_the_differential_ahead_of_the_logs(tmp_path: Path) -> None:
    pr = {**_base(), b"calc.py": CALC2_BROKEN, **ATTACKS["test-body-replaced-same-asserts"]}
    seen, pred = _run(tmp_path, pr)
    assert seen.outcome == "HELD", _detail(seen, pred)
    md = (tmp_path / "out" / "receipt.md").read_text()
    lists = md.index("**Changed expectations")
    assert md.index("`tests.test_calc::test_add`", lists) < md.index("## Logs")


def test_tests_moved_between_files_is_proven(tmp_path: Path) -> None:
    add_only = b"from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    sub_only = b"from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
    pr = {**_base(), b"tests/test_calc.py": add_only, b"tests/test_sub.py": sub_only}
    seen, pred = _run(tmp_path, pr)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    survived = _tests_block(pred)["survived"]
    assert survived == ["tests.test_calc::test_sub -> tests.test_sub::test_sub (moved)"]


def test_test_renamed_with_body_unchanged_is_proven(tmp_path: Path) -> None:
    pr = {**_base(), b"tests/test_calc.py": TESTS_CALC.replace(b"test_add", b"test_addition")}
    seen, pred = _run(tmp_path, pr)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    survived = _tests_block(pred)["survived"]
    assert survived == [
        "tests.test_calc::test_add -> tests.test_calc::test_addition (renamed, same body)"
    ]


PARAM = (
    b"import pytest\nfrom calc import add\n\n\n"
    b"@pytest.mark.parametrize(('a', 'b', 'c'), [(1, 2, 3), (2, 2, 4)]{ids})\n"
    b"def test_add(a, b, c):\n    assert add(a, b) == c\n"
)


def test_parametrize_ids_that_change_are_proven(tmp_path: Path) -> None:
    base = _base(**{"tests/test_param.py": PARAM.replace(b"{ids}", b"")})
    pr = {**base, b"tests/test_param.py": PARAM.replace(b"{ids}", b", ids=['small', 'even']")}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    assert len(_tests_block(pred)["survived"]) == 2  # type: ignore[arg-type]


def test_pre_existing_failures_on_base_are_recorded_not_held(tmp_path: Path) -> None:
    buggy = CALC2 + b"\n\ndef mul(a, b):\n    return a**b\n"
    base = _base(**{"calc.py": buggy, "tests/test_mul.py": MUL_TESTS})
    pr = {**base, b"calc.py": buggy.replace(b"return a**b\n", b"return a * b\n")}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    block = _tests_block(pred)
    assert block["pre_existing"] == ["tests.test_mul::test_mul"]
    assert block["runs"]["base"] == {"pass": 2, "fail": 1, "error": 0, "skip": 0}  # type: ignore[index]


def test_a_check_without_junit_says_no_differential_ran(tmp_path: Path) -> None:
    base = _base(**{".github/proofgate.yml": config(policy=ALL_RULES_OFF)})
    pr = {**base, b"calc.py": CALC2 + b"\n# comment\n"}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    assert _tests_block(pred) == {
        "differential": "off",
        "ran": False,
        "note": "the check has no junit report to compare",
    }
    assert "check unit: no differential ran" in str(pred["coverage"])


def test_weakened_test_with_differential_off_is_proven_and_says_so(tmp_path: Path) -> None:
    base = _base(**{".github/proofgate.yml": _config(", differential: off")})
    pr = {**base, b"calc.py": CALC2_BROKEN, **ATTACKS["test-body-replaced-same-asserts"]}
    seen, pred = _run(tmp_path, pr, base)
    # the negative control: without the differential this attack reaches PROVEN
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    assert _tests_block(pred) == {"differential": "off", "ran": False, "note": "differential: off"}


def test_a_second_proof_reuses_the_cached_base_run(tmp_path: Path) -> None:
    pr = {**_base(), b"calc.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n"}
    pr[b"tests/test_mul.py"] = MUL_TESTS
    ws = Workspace(tmp_path)
    _, path = pr_repo(ws, pr, _base())
    first = prove(ws, Built(repo=path), tmp_path / "one")
    second = prove(ws, Built(repo=path), tmp_path / "two")
    assert (first.outcome, second.outcome) == ("PROVEN", "PROVEN")
    one = _tests_block(predicate_of((tmp_path / "one" / "receipt.json").read_bytes()))
    two = _tests_block(predicate_of((tmp_path / "two" / "receipt.json").read_bytes()))
    assert "base" not in one["run_notes"]  # type: ignore[operator]
    assert two["run_notes"] == {"base": "reused from the local cache"}
    assert one["runs"] == two["runs"]
    assert two["reused"]["base"].startswith("base-run cache entry ")  # type: ignore[index]
    # the base tree's entry only: a head run is never cached as a base run (SPEC §3.2)
    entries = [json.loads(e.read_bytes()) for e in differential_runs.cache_dir().glob("*.json")]
    assert len(entries) == 1
    assert set(entries[0]) == {"v", "outcomes", "witness", "environment"}
    assert len(entries[0]["outcomes"]) == 2


def test_a_change_to_code_only_reuses_the_head_run_as_the_trusted_run(tmp_path: Path) -> None:
    seen, pred = _run(tmp_path, {**_base(), b"calc.py": CALC2_BROKEN})
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert {"check-failed", "regression"} <= _codes(pred)
    block = _tests_block(pred)
    assert block["run_notes"] == {
        "trusted": "the trusted tree is the head tree: the head run's outcomes"
    }
    events = pred["journal"]["events"]  # type: ignore[index]
    assert not [e for e in events if e["data"].get("check") == "unit@trusted"]


def test_a_changed_expectation_approved_by_a_person_is_proven(tmp_path: Path) -> None:
    # SPEC §3.1: HELD `expectation-changed` waits for a person; an approval bound to this
    # patch digest and policy releases it (a regression is FAILED and no approval helps)
    pr = {**_base(), b"calc.py": CALC2_BROKEN, **ATTACKS["test-body-replaced-same-asserts"]}
    ws = Workspace(tmp_path)
    _, path = pr_repo(ws, pr, _base())
    held = prove(ws, Built(repo=path), tmp_path / "one")
    assert held.outcome == "HELD", held.log[-2000:]
    approval = tmp_path / "approval.json"
    argv = ["approve", "--key", str(ws.key), "--receipt", str(tmp_path / "one" / "receipt.json")]
    assert cli.main([*argv, "--approver", "alice", "--out", str(approval)]) == 0
    approved = prove(ws, Built(repo=path, args=("--approval", str(approval))), tmp_path / "two")
    assert approved.outcome == "PROVEN", approved.log[-2000:]
    pred = predicate_of((tmp_path / "two" / "receipt.json").read_bytes())
    assert pred["approval"]["approver"] == "alice"  # type: ignore[index]
    assert _tests_block(pred)["expectation_changed"] == ["tests.test_calc::test_add"]


def test_differential_full_names_the_tests_that_fail_without_the_change(tmp_path: Path) -> None:
    base = _base(**{".github/proofgate.yml": _config(", differential: full")})
    old_code_test = b"from calc import add\n\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
    pr = {
        **base,
        b"calc.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n",
        b"tests/test_mul.py": MUL_TESTS,
        b"tests/test_zero.py": old_code_test,  # passes without the change: proves nothing
    }
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    block = _tests_block(pred)
    assert block["proving_basis"] == "fail-to-pass"
    assert block["proving"] == ["tests.test_mul::test_mul"]
    assert block["runs"]["proving"]["pass"] == 3  # type: ignore[index]
    assert block["findings"] == []


# --- SPEC §3.2: what the base's tests depend on comes from the base -------------------

PASS_ALL_PLUGIN = (
    b"import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\n"
    b"def pytest_pyfunc_call(pyfuncitem):\n    return True  # the test's body never runs\n"
)


def test_a_plugin_added_in_pyproject_with_a_spaced_header_is_not_the_trusted_runs(
    tmp_path: Path,
) -> None:
    # `[tool .pytest.ini_options]` is pytest's table to TOML; the plugin, a non-test
    # module, loads before the witness and keeps every test body from running
    pr = {
        **_base(),
        b"calc.py": CALC2_BROKEN,
        b"pyproject.toml": b'[project]\nname = "calc"\n\n'
        b'[tool .pytest.ini_options]\naddopts = ["-p", "calc_speedups"]\n',
        b"calc_speedups.py": PASS_ALL_PLUGIN,
    }
    seen, pred = _run(tmp_path, pr)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert "tests.test_calc::test_add" in _tests_block(pred)["regressions"]  # type: ignore[operator]
    assert "trusted" not in _tests_block(pred)["run_notes"], _detail(seen, pred)  # type: ignore[operator]


PYPROJECT = (
    b'[project]\nname = "calc"\nversion = "1.0"\n\n'
    b'[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
)


def test_a_pythonpath_hidden_behind_a_header_in_a_string_is_not_the_trusted_runs(
    tmp_path: Path,
) -> None:
    base = _base(**{"pyproject.toml": PYPROJECT})
    hidden = PYPROJECT + b'notes = """\n[tool.other]\n"""\npythonpath = ["stubs"]\n'
    pr = {**base, b"calc.py": CALC2_BROKEN, b"pyproject.toml": hidden, b"stubs/calc.py": CALC2}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert "tests.test_calc::test_add" in _tests_block(pred)["regressions"]  # type: ignore[operator]


def test_a_pyproject_edit_that_changes_no_pytest_setting_is_proven(tmp_path: Path) -> None:
    base = _base(**{"pyproject.toml": PYPROJECT})
    pr = {
        **base,
        b"pyproject.toml": PYPROJECT.replace(b'version = "1.0"', b'version = "1.1"'),
        b"calc.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n",
        b"tests/test_mul.py": MUL_TESTS,
    }
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    assert _tests_block(pred)["runs"]["trusted"]["pass"] == 2  # type: ignore[index]


IN_PACKAGE = {
    "calc/__init__.py": CALC2,
    "calc/tests/__init__.py": b"",
    "calc/tests/_helpers.py": b"def check_add(add):\n    assert add(2, 3) == 5\n",
    "calc/tests/test_calc.py": b"from calc import add\nfrom calc.tests._helpers import check_add"
    b"\n\n\ndef test_add():\n    check_add(add)\n\n\ndef test_other():\n    assert True\n",
}


def _in_package(**files: Content) -> dict[bytes, Content]:
    tree = {k: v for k, v in _base().items() if k not in (b"calc.py", b"tests/test_calc.py")}
    tree.update({k.encode(): v for k, v in {**IN_PACKAGE, **files}.items()})
    return tree


def test_a_helper_of_in_package_tests_weakened_with_the_code_is_caught(tmp_path: Path) -> None:
    base = _in_package()
    pr = {
        **base,
        b"calc/__init__.py": CALC2_BROKEN,
        b"calc/tests/_helpers.py": b"def check_add(add):\n    pass\n",
    }
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert _tests_block(pred)["regressions"] == ["calc.tests.test_calc::test_add"]


def test_a_helper_in_testing_weakened_with_the_code_is_caught(tmp_path: Path) -> None:
    helper = b"def check_add(add):\n    assert add(2, 3) == 5\n"
    uses = b"from calc import add\nfrom testing.asserts import check_add\n\n\ndef test_add():\n"
    base = _base(
        **{
            "testing/__init__.py": b"",
            "testing/asserts.py": helper,
            "tests/test_calc.py": uses + b"    check_add(add)\n",
        }
    )
    pr = {
        **base,
        b"calc.py": CALC2_BROKEN,
        b"testing/asserts.py": b"def check_add(add):\n    pass\n",
    }
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert _tests_block(pred)["regressions"] == ["tests.test_calc::test_add"]


READS_CASES = (
    b"import json\nimport pathlib\n\nfrom calc import add\n\n"
    b"ROOT = pathlib.Path(__file__).resolve().parents[1]\n\n\n"
    b"def test_add():\n"
    b"    for a, b, c in json.loads((ROOT / 'calc' / 'data' / 'cases.json').read_text()):\n"
    b"        assert add(a, b) == c\n"
)


def test_expected_data_weakened_with_the_code_is_caught(tmp_path: Path) -> None:
    # calc/data/cases.json is not code: the trusted run takes the base's copy (SPEC §3.2,
    # by construction), the base's test fails with it against the broken add, and the
    # change edits it: a person confirms what the tests check against
    base = _base(**{"tests/test_calc.py": READS_CASES, "calc/data/cases.json": b"[[2, 3, 5]]\n"})
    base[b"calc.py"] = CALC
    pr = {**base, b"calc.py": CALC_BROKEN, b"calc/data/cases.json": b"[[2, 3, -1]]\n"}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "HELD", _detail(seen, pred)
    assert _codes(pred) == {"test-input-changed"}, _detail(seen, pred)
    block = _tests_block(pred)
    assert block["test_inputs_failed"] == ["tests.test_calc::test_add"]
    assert block["test_inputs_changed"] == ["calc/data/cases.json"]


def test_a_correct_case_added_to_golden_data_proves_itself(tmp_path: Path) -> None:
    """The trusted run passes with the base's data: that is the proof (SPEC §3.2)."""
    base = _base(**{"tests/test_calc.py": READS_CASES, "calc/data/cases.json": b"[[2, 3, 5]]\n"})
    base[b"calc.py"] = CALC
    pr = {**base, b"calc/data/cases.json": b"[[2, 3, 5], [1, 1, 2]]\n"}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    assert _tests_block(pred)["test_inputs_changed"] == ["calc/data/cases.json"]


def test_in_package_tests_and_golden_data_under_tests_are_proven(tmp_path: Path) -> None:
    golden = b"import json\nimport pathlib\n\nfrom calc import add\n\n\ndef test_golden():\n"
    golden += b"    data = pathlib.Path(__file__).with_name('golden.json').read_text()\n"
    golden += b"    assert [add(a, b) for a, b in json.loads(data)] == [5]\n"
    base = _in_package(
        **{"calc/tests/test_golden.py": golden, "calc/tests/golden.json": b"[[2, 3]]\n"}
    )
    pr = {
        **base,
        b"calc/__init__.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n",
        b"calc/tests/test_mul.py": MUL_TESTS,
    }
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    block = _tests_block(pred)
    assert block["runs"]["trusted"]["pass"] == 3  # type: ignore[index]
    assert block["proving"] == ["calc.tests.test_mul::test_mul"]


def test_a_packages_init_does_not_relabel_a_regression(tmp_path: Path) -> None:
    # the change breaks calc/__init__.py and hides the failure from its own run with a
    # conftest (the trusted run has the base's harness): a regression, not an approvable
    # changed expectation of `calc.tests.*`
    base = _in_package()
    skip = b"import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
    skip += b"    for item in items:\n        if item.name == 'test_add':\n"
    skip += b"            item.add_marker(pytest.mark.skip('later'))\n"
    pr = {**base, b"calc/__init__.py": CALC2_BROKEN, b"calc/tests/conftest.py": skip}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    block = _tests_block(pred)
    assert block["regressions"] == ["calc.tests.test_calc::test_add"]
    assert block["expectation_changed"] == []


HARMLESS_CONFTEST = (
    b"class Harmless:\n    pass\n\n\n"
    b"def pytest_collection(session):\n"
    b"    session.config.pluginmanager.register(Harmless(), 'harmless')\n"
)
GREEN_AT_IMPORT = CALC2_BROKEN + (
    b"\n\nimport gc\n\nimport pytest\n\n\nclass Harmless:\n"
    b"    @pytest.hookimpl(tryfirst=True)\n"
    b"    def pytest_pyfunc_call(self, pyfuncitem):\n        return True\n\n\n"
    b"for _o in gc.get_objects():\n"
    b"    if type(_o).__name__ == 'PytestPluginManager':\n"
    b"        _o.register(Harmless(), 'harmless-too')\n        break\n"
)


def test_a_base_harness_plugin_does_not_waive_the_changes_plugin(tmp_path: Path) -> None:
    base = _base(**{"conftest.py": HARMLESS_CONFTEST})
    pr = {**base, b"calc.py": GREEN_AT_IMPORT}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert "evidence-tampered" in _codes(pred), _detail(seen, pred)
    tampered = _tests_block(pred)["tampered"]
    assert any("/workspace/calc.py" in t for t in tampered), tampered  # type: ignore[union-attr]


def test_a_base_harness_plugin_alone_is_waived(tmp_path: Path) -> None:
    base = _base(**{"conftest.py": HARMLESS_CONFTEST})
    pr = {**base, b"calc.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n"}
    pr[b"tests/test_mul.py"] = MUL_TESTS
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)


def test_a_cached_base_run_keeps_the_test_inputs_it_recorded(tmp_path: Path) -> None:
    base = _base(**{"tests/test_calc.py": READS_CASES, "calc/data/cases.json": b"[[2, 3, 5]]\n"})
    base[b"calc.py"] = CALC
    pr = {**base, b"calc.py": CALC_BROKEN, b"calc/data/cases.json": b"[[2, 3, -1]]\n"}
    ws = Workspace(tmp_path)
    _, path = pr_repo(ws, pr, base)
    first = prove(ws, Built(repo=path), tmp_path / "one")
    second = prove(ws, Built(repo=path), tmp_path / "two")
    assert (first.outcome, second.outcome) == ("HELD", "HELD"), second.log[-3000:]
    pred = predicate_of((tmp_path / "two" / "receipt.json").read_bytes())
    block = _tests_block(pred)
    assert block["run_notes"]["base"] == "reused from the local cache"  # type: ignore[index]
    assert block["test_inputs_failed"] == ["tests.test_calc::test_add"]
    assert block["test_inputs_changed"] == ["calc/data/cases.json"]


SRC_PYTHONPATH = b'[tool.pytest.ini_options]\npythonpath = ["src"]\n'


def test_a_pythonpath_in_the_configuration_reaches_every_run(tmp_path: Path) -> None:
    """pytest resolves `pythonpath` against the configuration file's directory; every
    run gets the file as a copy in proofgate's volume, so the entries are given again as
    paths under /workspace. Without that the base's tests did not import the package, were
    all pre-existing failures, and a broken add with a bent test was PROVEN."""
    base = {
        b".github/proofgate.yml": _config(),
        b"pyproject.toml": SRC_PYTHONPATH,
        b"src/calc.py": CALC2,
        b"tests/test_calc.py": TESTS_CALC,
    }
    bent = TESTS_CALC.replace(b"assert add(2, 3) == 5", b"assert add(2, 3) == -1")
    seen, pred = _run(
        tmp_path, {**base, b"src/calc.py": CALC2_BROKEN, b"tests/test_calc.py": bent}, base
    )
    assert seen.outcome == "HELD", _detail(seen, pred)
    assert _codes(pred) == {"expectation-changed"}, _detail(seen, pred)
    assert _tests_block(pred)["runs"]["base"]["pass"] == 2  # type: ignore[index]
