"""proofgate's code in the test process, by construction (SPEC §3.2).

The witness is loaded by proofgate's start-up hook (a `sitecustomize` on its read-only
volume, gate/witness/boot.py) by path, under a name the tree cannot provide, with pytest
and its own plugins, before the working directory is on `sys.path`; setup and build
compile into a volume no test container mounts; and the trusted run's pytest plugins, and
the tree's modules run before the harness, are the base run's. Every attack breaks
`calc.add` and makes the base's tests pass anyway, through a route the harness used to
leave open; each negative control runs the same tree with the witness loaded the old way
(by name, from a directory on `PYTHONPATH`) and shows the route works there.
Real repositories, real Docker, the clean-room image.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attacks.corpus import PYTEST, config
from tests.attacks.test_differential import (
    ALL_RULES_OFF,
    CALC2,
    CALC2_BROKEN,
    JUNIT,
    TESTS_CALC,
    _codes,
    _detail,
    _run,
    _tests_block,
)
from tests.gitutil import Content

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# the witness loaded the old way: by name, from a directory on PYTHONPATH after /workspace
OLD_WAY = '"env", "PYTHONPATH=/opt/proofgate/witness", '
GREEN_HOOK = (
    b"def pytest_pyfunc_call(pyfuncitem):\n"
    b"    return True  # the test's body never runs: every test passes\n"
)


def _config(*, old_way: bool = False, build: str = "", ini: bool = False) -> bytes:
    argv = PYTEST[:-1] + f', "--junitxml={JUNIT}"]'
    if old_way:
        argv = "[" + OLD_WAY + argv[1:]
    check = "  - {name: unit, test: [" + argv + "], junit: " + JUNIT + build + "}\n"
    return config(check, policy=ALL_RULES_OFF)


def _base(**kw: object) -> dict[bytes, Content]:
    return {
        b".github/proofgate.yml": _config(**kw),  # type: ignore[arg-type]
        b"calc.py": CALC2,
        b"tests/test_calc.py": TESTS_CALC,
    }


# -- a root module named like the witness ------------------------------------------------

# Patches pytest's own hook, then hands over to the real witness (loaded from its volume
# under another name), so the witness's line still comes out clean.
FAKE_WITNESS = b"""
import importlib.util as _u
import sys as _s

_d = "/opt/proofgate/witness/proofgate_witness"
_spec = _u.spec_from_file_location(
    "proofgate_witness_real", _d + "/__init__.py", submodule_search_locations=[_d]
)
_real = _u.module_from_spec(_spec)
_s.modules["proofgate_witness_real"] = _real
_spec.loader.exec_module(_real)


def _green(pyfuncitem):
    return True


def pytest_configure(config):
    for impl in config.pluginmanager.hook.pytest_pyfunc_call.get_hookimpls():
        impl.function = _green
    _real.pytest_configure(config)


pytest_load_initial_conftests = _real.pytest_load_initial_conftests
pytest_collection_modifyitems = _real.pytest_collection_modifyitems
pytest_sessionfinish = _real.pytest_sessionfinish
pytest_ignore_collect = _real.pytest_ignore_collect
"""


def test_a_root_module_named_like_the_witness_is_never_loaded(tmp_path: Path) -> None:
    base = _base()
    pr = {**base, b"calc.py": CALC2_BROKEN, b"proofgate_witness.py": FAKE_WITNESS}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert _tests_block(pred)["regressions"] == ["tests.test_calc::test_add"]


def test_negative_control_the_witness_by_name_is_the_trees(tmp_path: Path) -> None:
    """Loaded the old way, the tree's module stands in for the witness: the trusted
    run reports the broken add as passing, and only the plugin it registered (compared
    with the base run's) is left to hold it."""
    base = _base(old_way=True)
    pr = {**base, b"calc.py": CALC2_BROKEN, b"proofgate_witness.py": FAKE_WITNESS}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "HELD", _detail(seen, pred)
    assert _codes(pred) == {"plugin-loaded"}, _detail(seen, pred)
    assert _tests_block(pred)["runs"]["trusted"] == {  # type: ignore[index]
        "pass": 2,
        "fail": 0,
        "error": 0,
        "skip": 0,
    }


# -- a root `org/` package, which the standard library's `copy` tries at pytest's start ---

ORG_CORE = (
    b"import _pytest.python as _p\n\nprint('the tree ran before the harness')\n\n\n"
    + GREEN_HOOK
    + b"\n\n_p.pytest_pyfunc_call = pytest_pyfunc_call\nPyStringMap = None\n"
)
ORG = {b"org/__init__.py": b"", b"org/python/__init__.py": b"", b"org/python/core.py": ORG_CORE}


def test_a_root_org_package_never_runs_before_the_harness(tmp_path: Path) -> None:
    base = _base()
    pr = {**base, b"calc.py": CALC2_BROKEN, **ORG}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert _codes(pred) == {"check-failed", "regression"}, _detail(seen, pred)


def test_negative_control_a_root_org_package_runs_first_without_the_hook(
    tmp_path: Path,
) -> None:
    """Without the start-up hook the tree's `org` runs while pytest starts (it is then
    seen as run before the harness: `plugin-loaded`)."""
    base = _base(old_way=True)
    seen, pred = _run(tmp_path, {**base, b"calc.py": CALC2_BROKEN, **ORG}, base)
    loaded = _tests_block(pred).get("plugins_loaded") or []
    assert any(p.startswith("org ") for p in loaded), _detail(seen, pred)  # type: ignore[union-attr]


# -- bytecode the build writes into the prefix -------------------------------------------

# Run by the base's own build step (`python3 -c "import calc"`), as root: replace the link
# to `_pytest/python.py`'s bytecode in the prefix with bytecode of a patched source, its
# header matching the real source's mtime and size, so Python takes it for the source's.
FORGE = b"""
import importlib._bootstrap_external as _be
import importlib.util as _u
import os as _os

_src = "/usr/lib/python3/dist-packages/_pytest/python.py"
_pyc = _u.cache_from_source(_src)
if _os.access(_os.path.dirname(_pyc), _os.W_OK):
    _st = _os.stat(_src)
    with open(_src) as _f:
        _text = _f.read() + "\\n\\ndef pytest_pyfunc_call(pyfuncitem):\\n    return True\\n"
    _code = compile(_text, _src, "exec")
    _data = _be._code_to_timestamp_pyc(_code, int(_st.st_mtime), _st.st_size)
    try:
        _os.remove(_pyc)
    except OSError:
        pass
    with open(_pyc, "wb") as _f:
        _f.write(_data)
"""
SEEN_FORGED = (
    "python3 -c \\\"import _pytest.python as p; print('forged:', p.pytest_pyfunc_call(None))\\\""
)


def test_bytecode_the_build_forges_in_the_prefix_never_reaches_the_tests(tmp_path: Path) -> None:
    build = ', build: ["python3 -c \\"import calc\\"", "' + SEEN_FORGED + '"]'
    base = _base(build=build)
    seen, pred = _run(tmp_path, {**base, b"calc.py": CALC2_BROKEN + FORGE}, base)
    detail = _detail(seen, pred)
    # the route works where the build's prefix is mounted: the build's own command ran
    # the forged bytecode
    build = pred["checks"][0]["phases"][0]["commands"][1]  # type: ignore[index]
    assert "forged: True" in build["log_tail"], detail
    assert seen.outcome == "FAILED", detail
    assert _tests_block(pred)["regressions"] == ["tests.test_calc::test_add"], detail


# -- the project's own plugin gains a hook -------------------------------------------------

PLUGIN = b"def pytest_report_header(config):\n    return 'calc plugin'\n"
INI = b"[pytest]\naddopts = -p calc_plugin\n"


def test_the_projects_own_plugin_gaining_a_hook_is_held(tmp_path: Path) -> None:
    base = {**_base(), b"pytest.ini": INI, b"calc_plugin.py": PLUGIN}
    pr = {**base, b"calc.py": CALC2_BROKEN, b"calc_plugin.py": PLUGIN + b"\n\n" + GREEN_HOOK}
    seen, pred = _run(tmp_path, pr, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "HELD", detail
    assert _codes(pred) == {"plugin-loaded"}, detail
    loaded = _tests_block(pred)["plugins_loaded"]
    assert any("calc_plugin" in p and "pytest_pyfunc_call" in p for p in loaded), detail  # type: ignore[union-attr]


def test_an_edit_of_the_projects_plugin_outside_its_hooks_is_proven(tmp_path: Path) -> None:
    base = {**_base(), b"pytest.ini": INI, b"calc_plugin.py": PLUGIN}
    honest = b"VERSION = 2\n\n\n" + PLUGIN
    pr = {**base, b"calc.py": CALC2 + b"# ok\n", b"calc_plugin.py": honest}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)


# -- an entry point the build installs ----------------------------------------------------

ENTRY_POINT = b"""
import os as _os

_site = "/usr/local/lib/python3.11/dist-packages"
if _os.access("/usr/local/lib", _os.W_OK):
    _os.makedirs(_site + "/green-1.dist-info", exist_ok=True)
    with open(_site + "/green-1.dist-info/METADATA", "w") as _f:
        _f.write("Metadata-Version: 2.1\\nName: green\\nVersion: 1\\n")
    with open(_site + "/green-1.dist-info/entry_points.txt", "w") as _f:
        _f.write("[pytest11]\\ngreen = green_hooks\\n")
    with open(_site + "/green_hooks.py", "w") as _f:
        _f.write("def pytest_pyfunc_call(pyfuncitem):\\n    return True\\n")
"""


def test_a_pytest11_entry_point_the_build_installs_is_held(tmp_path: Path) -> None:
    base = _base(build=', build: "python3 -c \\"import calc\\""')
    seen, pred = _run(tmp_path, {**base, b"calc.py": CALC2_BROKEN + ENTRY_POINT}, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "HELD", detail
    assert "plugin-loaded" in _codes(pred), detail
    loaded = _tests_block(pred)["plugins_loaded"]
    assert any("green_hooks.py" in p for p in loaded), detail  # type: ignore[union-attr]
