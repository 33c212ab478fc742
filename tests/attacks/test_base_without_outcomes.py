"""A differential never fails open (SPEC §3.1): a base that gave no per-test outcomes.

Main is broken often enough on a busy project: a module that does not compile fails the
build, a suite crashes, exits before pytest writes its report, hangs past the timeout or
never reaches the test phase. Then the base run has no outcomes, and "pre-existing" must
not swallow every failure: the pull request that fixes main and, on the way, breaks
`calc.add` and rewrites `test_add`'s expectation is not PROVEN. The same fix done
honestly is PROVEN, because the base's tests pass against it. A trusted or head run with
no report is INCONCLUSIVE `differential-incomplete`. Real repositories, real Docker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attacks.corpus import config
from tests.attacks.test_differential import (
    ALL_RULES_OFF,
    _check,
    _codes,
    _detail,
    _run,
    _tests_block,
)
from tests.gitutil import Content

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ADD_SUB = b"def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
ADD_BROKEN = ADD_SUB.replace(b"return a + b", b"return a - b")
INIT = b"from calc.core import add, sub\nfrom calc import extra  # noqa: F401\n"
TESTS = (
    b"from calc import add, sub\n\n\n"
    b"def test_add():\n    assert add(2, 3) == 5\n\n\n"
    b"def test_sub():\n    assert sub(5, 3) == 2\n"
)
# what the attacker's pull request makes of the test: it agrees with the broken add
TESTS_BENT = TESTS.replace(b"assert add(2, 3) == 5", b"assert add(2, 3) == -1")
EXTRA_FIXED = b"VERSION = 2\n"

# How main is broken: (calc/extra.py on the base, the check's extra keys)
BROKEN_MAIN: dict[str, tuple[bytes, str]] = {
    "build-fails": (b"VERSION = (\n", ', build: "python3 -m compileall -q calc"'),
    "suite-segfaults": (b"import ctypes\n\nctypes.string_at(0)\n", ""),
    "suite-exits-before-the-report": (b"import os\n\nos._exit(0)\n", ""),
    "suite-hangs-past-the-timeout": (b"import time\n\ntime.sleep(600)\n", ""),
    "setup-fails": (
        b"VERSION = 1\n",
        ', setup: "python3 tools/setup.py"',
    ),
}


def _base(name: str) -> dict[bytes, Content]:
    extra, keys = BROKEN_MAIN[name]
    tree: dict[bytes, Content] = {
        b".github/proofgate.yml": config(_check(keys), policy=ALL_RULES_OFF, timeout=8),
        b"calc/__init__.py": INIT,
        b"calc/core.py": ADD_SUB,
        b"calc/extra.py": extra,
        b"tests/test_calc.py": TESTS,
    }
    if name == "setup-fails":
        tree[b"tools/setup.py"] = b"raise SystemExit('the setup of main is broken')\n"
    return tree


def _fix(name: str) -> dict[bytes, Content]:
    """What fixes main: the module, or the setup script."""
    if name == "setup-fails":
        return {b"tools/setup.py": b"print('set up')\n"}
    return {b"calc/extra.py": EXTRA_FIXED}


@pytest.mark.parametrize("broken", sorted(BROKEN_MAIN), ids=sorted(BROKEN_MAIN))
def test_fixing_a_broken_main_does_not_prove_a_bent_expectation(
    broken: str, tmp_path: Path
) -> None:
    base = _base(broken)
    pr = {
        **base,
        **_fix(broken),
        b"calc/core.py": ADD_BROKEN,
        b"tests/test_calc.py": TESTS_BENT,
    }
    seen, pred = _run(tmp_path, pr, base)
    detail = _detail(seen, pred)
    # the base's test_add fails against the broken add, and the change edits its file
    assert seen.outcome == "HELD", detail
    assert _codes(pred) == {"expectation-changed"}, detail
    block = _tests_block(pred)
    assert block["expectation_changed"] == ["tests.test_calc::test_add"], detail
    assert block["pre_existing"] == [], detail
    assert "the base run gave no per-test outcomes" in str(block["note"]), detail
    assert "base" in block["run_notes"], detail  # type: ignore[operator]


def test_fixing_a_broken_main_does_not_prove_a_regression(tmp_path: Path) -> None:
    base = _base("build-fails")
    pr = {**base, **_fix("build-fails"), b"calc/core.py": ADD_BROKEN}
    seen, pred = _run(tmp_path, pr, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "FAILED", detail
    assert "regression" in _codes(pred), detail
    assert _tests_block(pred)["regressions"] == ["tests.test_calc::test_add"], detail


@pytest.mark.parametrize("broken", ["build-fails", "suite-segfaults"])
def test_the_pull_request_that_fixes_main_is_proven(broken: str, tmp_path: Path) -> None:
    base = _base(broken)
    seen, pred = _run(tmp_path, {**base, **_fix(broken)}, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "PROVEN", detail
    block = _tests_block(pred)
    assert block["runs"]["trusted"]["pass"] == 2, detail  # type: ignore[index]
    md = (tmp_path / "out" / "receipt.md").read_text()
    assert "the base run gave no per-test outcomes" in md


def test_a_trusted_run_without_a_report_is_inconclusive(tmp_path: Path) -> None:
    """The change's add ends the process, without pytest's report, exactly when the
    base's test calls it; its own test calls it otherwise. No outcomes from the trusted
    run is no judgement at all: INCONCLUSIVE, naming the run."""
    base = {
        b".github/proofgate.yml": config(_check(""), policy=ALL_RULES_OFF),
        b"calc/__init__.py": b"from calc.core import add, sub\n",
        b"calc/core.py": ADD_SUB,
        b"tests/test_calc.py": TESTS,
    }
    quitting = ADD_SUB.replace(
        b"    return a + b",
        b"    if (a, b) == (2, 3):\n        import os\n\n        os._exit(0)\n    return a + b",
    )
    pr = {
        **base,
        b"calc/core.py": quitting,
        b"tests/test_calc.py": TESTS.replace(b"add(2, 3) == 5", b"add(2, 2) == 4"),
    }
    seen, pred = _run(tmp_path, pr, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "INCONCLUSIVE", detail
    incomplete = [r for r in pred["reasons"] if r["code"] == "differential-incomplete"]  # type: ignore[union-attr]
    assert incomplete, detail
    assert "the trusted run gave no per-test outcomes" in incomplete[0]["message"], detail
