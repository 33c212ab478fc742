"""The environment by construction (SPEC §3.2): every path setup and build left, outside
/workspace and in it, compared path by path and byte by byte with the base's.

Each attack breaks `calc.add` and, from code the base's own setup or build runs (the
build step imports the change's `calc`, or runs a tool of the tree), leaves something
that makes the base's tests pass anyway: a patched copy of a package setup installed, an
entry point, a shadowing copy of pytest, a module in `/workspace` beside or ahead of the
committed one, the committed source rewritten, bytecode a `python3 -E` child runs, a
payload in the project's own install artefacts. The policy's pattern rules are off, so
what holds each one is the record (and, where the payload also reaches pytest's plugins,
`plugin-loaded`). Beside them, honest setups and builds prove themselves: an editable
install with and without a version bump, a generated version file, a compiled artefact
rebuilt from the source the change edits. Real repositories, real Docker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attacks.corpus import config
from tests.attacks.test_differential import (
    ALL_RULES_OFF,
    CALC2,
    CALC2_BROKEN,
    TESTS_CALC,
    _check,
    _codes,
    _detail,
    _run,
    _tests_block,
)
from tests.gitutil import Content

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SITE = "/usr/local/lib/python3.11/dist-packages"
PIP = "pip install -q --no-index --no-deps --no-build-isolation --break-system-packages"
IMPORTS = 'python3 -c \\"import calc\\"'  # the build imports the change's package
HELPER = {
    b"vendor/helper/pyproject.toml": (
        b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        b'[project]\nname = "helper"\nversion = "1"\n[tool.setuptools]\npy-modules = ["helper"]\n'
    ),
    b"vendor/helper/helper.py": b"def same(a, b):\n    assert a == b\n",
}
PYPROJECT = (
    b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    b'[project]\nname = "calc"\nversion = "VERSION"\n[tool.setuptools]\npy-modules = ["calc"]\n'
)


def _base(keys: str, **files: Content) -> dict[bytes, Content]:
    tree: dict[bytes, Content] = {
        b".github/proofgate.yml": config(_check(", memory: 512m" + keys), policy=ALL_RULES_OFF),
        b"calc.py": CALC2,
        b"tests/test_calc.py": TESTS_CALC,
    }
    tree.update({k.encode(): v for k, v in files.items()})
    return tree


def _held_by_the_record(
    tmp_path: Path, pr: dict[bytes, Content], base: dict[bytes, Content]
) -> list[str]:
    """The attack is HELD and nothing but the record (and `plugin-loaded`) saw it: the
    payload made the base's tests pass against the broken add. The changed paths."""
    seen, pred = _run(tmp_path, pr, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "HELD", detail
    assert _codes(pred) <= {"environment-changed", "plugin-loaded"}, detail
    assert "environment-changed" in _codes(pred), detail
    assert _tests_block(pred)["runs"]["trusted"]["fail"] == 0, detail  # type: ignore[index]
    rows = _tests_block(pred)["environment_changed"]
    assert isinstance(rows, list)
    return [str(r["path"]) for r in rows]


# -- outside /workspace ---------------------------------------------------------------------

PATCH_HELPER = b"""
import os as _os

_f = "%s/helper.py"
if _os.access(_f, _os.W_OK):
    with open(_f, "w") as _h:
        _h.write("def same(a, b):\\n    pass\\n")
""" % SITE.encode()
TESTS_WITH_HELPER = TESTS_CALC.replace(
    b"from calc import add, sub\n", b"from calc import add, sub\nfrom helper import same\n"
).replace(b"assert add(2, 3) == 5", b"same(add(2, 3), 5)")


def test_a_package_setup_installed_patched_by_the_build_is_held(tmp_path: Path) -> None:
    """The normal case: setup installs a package, the build (the change's code) edits it.
    To the daemon the file is added, not the image's: a list of kinds never saw it."""
    keys = f', setup: "{PIP} ./vendor/helper", build: "{IMPORTS}"'
    base = {**_base(keys), b"tests/test_calc.py": TESTS_WITH_HELPER, **HELPER}
    paths = _held_by_the_record(tmp_path, {**base, b"calc.py": CALC2_BROKEN + PATCH_HELPER}, base)
    assert f"{SITE}/helper.py" in paths


SHADOW_PYTEST = b"""
import os as _os
import shutil as _sh

_to = "%s/_pytest"
if _os.access("/usr/local/lib", _os.W_OK):
    _sh.copytree("/usr/lib/python3/dist-packages/_pytest", _to, dirs_exist_ok=True)
    with open(_to + "/python.py", "a") as _f:
        _f.write("\\n\\ndef pytest_pyfunc_call(pyfuncitem):\\n    return True\\n")
""" % SITE.encode()


def test_a_shadowing_copy_of_pytest_is_held(tmp_path: Path) -> None:
    base = _base(f', build: "{IMPORTS}"')
    paths = _held_by_the_record(tmp_path, {**base, b"calc.py": CALC2_BROKEN + SHADOW_PYTEST}, base)
    assert f"{SITE}/_pytest" in paths  # and every file below it (the receipt lists 50)


def test_ld_so_preload_and_files_in_run_are_held(tmp_path: Path) -> None:
    payload = (
        b"\nimport os as _os\n\nif _os.access('/etc', _os.W_OK):\n"
        b"    open('/etc/ld.so.preload', 'w').write('')\n"
        b"    _os.makedirs('/run/calc', exist_ok=True)\n"
        b"    open('/run/calc/expected', 'w').write('5')\n"
    )
    base = _base(f', build: "{IMPORTS}"')
    seen, pred = _run(tmp_path, {**base, b"calc.py": CALC2 + payload}, base)
    assert seen.outcome == "HELD", _detail(seen, pred)
    rows = {str(r["path"]) for r in _tests_block(pred)["environment_changed"]}  # type: ignore[union-attr]
    assert {"/etc/ld.so.preload", "/run/calc/expected"} <= rows


# -- in /workspace --------------------------------------------------------------------------

GOOD = b"def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def _writes(path: str, data: bytes) -> bytes:
    """A payload for the tree's own tool that the base's build runs."""
    return b"import os\n\nos.makedirs(os.path.dirname(%r) or '.', exist_ok=True)\n" % (
        path.encode()
    ) + b"open(%r, 'wb').write(%r)\n" % (path.encode(), data)


@pytest.mark.parametrize(
    ("where", "data"),
    [
        ("calc/__init__.py", GOOD),  # a package beside the committed module wins
        ("tests/calc.py", GOOD),  # ahead of it on sys.path in pytest's prepend mode
        ("calc.py", GOOD),  # the committed source rewritten
    ],
    ids=["package-beside-the-module", "module-in-the-tests-folder", "committed-source-rewritten"],
)
def test_build_output_in_the_workspace_that_the_base_did_not_make_is_held(
    where: str, data: bytes, tmp_path: Path
) -> None:
    base = _base(', build: "python3 tools/gen.py"', **{"tools/gen.py": b"pass\n"})
    pr = {**base, b"calc.py": CALC2_BROKEN, b"tools/gen.py": _writes(where, data)}
    paths = _held_by_the_record(tmp_path, pr, base)
    assert f"/workspace/{where}" in paths


E_CHILD = TESTS_CALC + (
    b"\n\ndef test_in_a_child():\n    import subprocess, sys\n\n"
    b"    code = 'from calc import add; assert add(2, 3) == 5'\n"
    b"    subprocess.run([sys.executable, '-E', '-c', code], check=True)\n"
)
UNCHECKED_PYC = (
    b"""
import importlib._bootstrap_external as _be, importlib.util as _u, os as _os

_src = open("calc.py", "rb").read()
_good = compile(%r, "calc.py", "exec")
_os.makedirs("__pycache__", exist_ok=True)
with open("__pycache__/calc.%%s.pyc" %% __import__("sys").implementation.cache_tag, "wb") as _f:
    _f.write(_be._code_to_hash_pyc(_good, _u.source_hash(_src), checked=False))
"""
    % GOOD
)


def test_bytecode_the_build_writes_for_an_E_child_is_held(tmp_path: Path) -> None:
    base = _base(', build: "python3 tools/gen.py"', **{"tools/gen.py": b"pass\n"})
    base[b"tests/test_calc.py"] = E_CHILD
    pr = {**base, b"calc.py": CALC2_BROKEN, b"tools/gen.py": UNCHECKED_PYC}
    seen, pred = _run(tmp_path, pr, base)
    detail = _detail(seen, pred)
    assert seen.outcome in ("HELD", "FAILED"), detail
    assert "environment-changed" in _codes(pred), detail
    rows = {str(r["path"]) for r in _tests_block(pred)["environment_changed"]}  # type: ignore[union-attr]
    assert any(p.startswith("/workspace/__pycache__/calc.") for p in rows), detail


# -- the project's own install artefacts ---------------------------------------------------

EDITABLE = f', setup: "{PIP} -e .", build: "{IMPORTS}"'


def _editable(version: str, **files: Content) -> dict[bytes, Content]:
    return _base(
        EDITABLE, **{"pyproject.toml": PYPROJECT.replace(b"VERSION", version.encode())}, **files
    )


FINDER_PAYLOAD = b"""
import glob as _g, os as _os

for _p in _g.glob("%s/__editable___calc_*_finder.py"):
    if _os.access(_p, _os.W_OK):
        with open(_p, "a") as _f:
            _f.write("\\nimport _pytest.python as _pp\\n")
            _f.write("_pp.pytest_pyfunc_call = lambda pyfuncitem: True\\n")
""" % SITE.encode()
ENTRY_POINT_PAYLOAD = b"""
import glob as _g, os as _os

for _d in _g.glob("%s/calc-*.dist-info"):
    if _os.access(_d, _os.W_OK):
        open(_d + "/entry_points.txt", "w").write("[pytest11]\\ngreen = calc_green\\n")
        _green = "def pytest_pyfunc_call(pyfuncitem):\\n    return True\\n"
        open("%s/calc_green.py", "w").write(_green)
""" % (SITE.encode(), SITE.encode())


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        (FINDER_PAYLOAD, "__editable___calc_0_1_finder.py"),
        (ENTRY_POINT_PAYLOAD, "calc-0.1.dist-info/entry_points.txt"),
    ],
    ids=["payload-in-the-editable-finder", "entry-points-gain-pytest11"],
)
def test_a_payload_in_the_projects_own_install_artefacts_is_held(
    payload: bytes, where: str, tmp_path: Path
) -> None:
    base = _editable("0.1")
    seen, pred = _run(tmp_path, {**base, b"calc.py": CALC2_BROKEN + payload}, base)
    detail = _detail(seen, pred)
    assert seen.outcome in ("HELD", "FAILED"), detail
    assert "environment-changed" in _codes(pred), detail
    rows = {str(r["path"]) for r in _tests_block(pred)["environment_changed"]}  # type: ignore[union-attr]
    assert f"{SITE}/{where}" in rows, detail


@pytest.mark.parametrize("version", ["0.1", "0.2"], ids=["same-version", "version-bumped"])
def test_an_honest_editable_install_proves_itself(version: str, tmp_path: Path) -> None:
    base = _editable("0.1")
    pr = {**_editable(version), b"calc.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n"}
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    assert "environment_changed" not in _tests_block(pred)


GEN_VERSION = (
    b"import re\n\nv = re.search(r'version = \"(.*)\"', open('pyproject.toml').read())[1]\n"
    b"open('calc_version.py', 'w').write('VERSION = %r\\n' % v)\n"
)


def test_a_generated_version_file_proves_itself_and_a_payload_in_it_is_held(tmp_path: Path) -> None:
    keys = f', setup: "{PIP} -e .", build: "python3 tools/gen.py"'
    base = _base(
        keys,
        **{"pyproject.toml": PYPROJECT.replace(b"VERSION", b"0.1"), "tools/gen.py": GEN_VERSION},
    )
    bumped = {**base, b"pyproject.toml": PYPROJECT.replace(b"VERSION", b"0.2")}
    seen, pred = _run(tmp_path / "honest", bumped, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    payload = GEN_VERSION + b"open('calc_version.py', 'a').write('import os\\n')\n"
    seen, pred = _run(tmp_path / "payload", {**bumped, b"tools/gen.py": payload}, base)
    assert seen.outcome == "HELD", _detail(seen, pred)
    rows = {str(r["path"]) for r in _tests_block(pred)["environment_changed"]}  # type: ignore[union-attr]
    assert "/workspace/calc_version.py" in rows


FAKE_CC = (
    b"import hashlib\n\nsrc = open('native/_native.c', 'rb').read()\n"
    b"so = '_native.cpython-311-x86_64-linux-gnu.so'\n"
    b"open(so, 'wb').write(b'\\x7fELF' + hashlib.sha256(src).digest())\n"
)


def test_a_compiled_artefact_rebuilt_from_the_edited_source_proves_itself(tmp_path: Path) -> None:
    files = {
        "tools/cc.py": FAKE_CC,
        "native/_native.c": b"int add(int a, int b) { return a + b; }\n",
    }
    base = _base(', build: "python3 tools/cc.py"', **files)
    edited = {**base, b"native/_native.c": b"int add(int a, int b) { return b + a; }\n"}
    seen, pred = _run(tmp_path / "honest", edited, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    # the same artefact changed with its source untouched is not the source's
    rigged = {**base, b"tools/cc.py": FAKE_CC.replace(b"+ hashlib", b"+ b'x' + hashlib")}
    seen, pred = _run(tmp_path / "rigged", rigged, base)
    assert seen.outcome == "HELD", _detail(seen, pred)


# -- where the package under test comes from ------------------------------------------------

SRC_PYPROJECT = (
    b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    b'[project]\nname = "calc"\nversion = "1"\n[tool.setuptools.packages.find]\nwhere = ["src"]\n'
)


def _src_layout(keys: str, **files: Content) -> dict[bytes, Content]:
    tree = _base(keys, **files)
    tree[b"src/calc/__init__.py"] = tree.pop(b"calc.py")
    tree[b"pyproject.toml"] = SRC_PYPROJECT
    return tree


def test_a_release_of_the_package_imported_instead_of_the_tree_is_inconclusive(
    tmp_path: Path,
) -> None:
    """Setup installs a release of the package (the same on both sides, so the
    environment is the base's) and nothing puts the tree's first: the tests run the
    release, never the change. The verdict says so and names the fix."""
    release = {
        "vendor/release/pyproject.toml": SRC_PYPROJECT.replace(b'["src"]', b'["."]'),
        "vendor/release/calc/__init__.py": CALC2,
    }
    base = _src_layout(f', setup: "{PIP} ./vendor/release"', **release)
    seen, pred = _run(tmp_path, {**base, b"src/calc/__init__.py": CALC2_BROKEN}, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "INCONCLUSIVE", detail
    reasons = [r for r in pred["reasons"] if r["code"] == "differential-incomplete"]  # type: ignore[union-attr]
    assert reasons, detail
    assert "imported the package under test from outside the tree" in reasons[0]["message"]
    assert "pip install -e ." in reasons[0]["message"]


def test_a_non_editable_install_of_the_tree_proves_itself(tmp_path: Path) -> None:
    """`pip install .` copies the change's committed modules: the tests run the tree's
    code, from a copy, and the copies are the change's code, judged as the tree."""
    base = _src_layout(f', build: "{PIP} ."')
    pr = {**base, b"src/calc/__init__.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n"}
    seen, pred = _run(tmp_path / "honest", pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    seen, pred = _run(tmp_path / "broken", {**base, b"src/calc/__init__.py": CALC2_BROKEN}, base)
    assert seen.outcome == "FAILED", _detail(seen, pred)
    assert "regression" in _codes(pred)


CHILD_ONLY = (
    b"import subprocess\nimport sys\n\n\n"
    b"def test_add_in_a_child():\n"
    b"    code = 'from calc import add; assert add(2, 3) == 5'\n"
    b"    subprocess.run([sys.executable, '-E', '-c', code], check=True)\n"
)


def _committed_pyc(source: bytes) -> bytes:
    import importlib._bootstrap_external as be  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415

    code = compile(GOOD, "calc.py", "exec")
    return bytes(be._code_to_hash_pyc(code, importlib.util.source_hash(source), checked=False))  # type: ignore[attr-defined]


def test_committed_bytecode_never_runs_even_in_an_E_child(tmp_path: Path) -> None:
    """The change commits an unchecked hash-based pyc of a good `add` beside its broken
    source; the base's test checks `add` in a child started with `-E` (which ignores the
    prefix and looks in `__pycache__`). The pyc reaches the container unreadable, so the
    child compiles the broken source."""
    import sys  # noqa: PLC0415

    base = _base("", **{"tests/test_calc.py": CHILD_ONLY})
    pyc = f"__pycache__/calc.{sys.implementation.cache_tag}.pyc".encode()
    pr = {**base, b"calc.py": CALC2_BROKEN, pyc: _committed_pyc(CALC2_BROKEN)}
    seen, pred = _run(tmp_path, pr, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "FAILED", detail
    assert _tests_block(pred)["regressions"] == ["tests.test_calc::test_add_in_a_child"], detail
