"""Attacks on the trusted run's environment (SPEC §3.2): the change's code, run by the
base's own build step, rewrites the image outside /workspace so that the base's tests
pass against broken code. Appended to `corpus.CASES`; the details of each are asserted
in test_environment.py.
"""

from __future__ import annotations

from tests.attacks.corpus import (
    CALC,
    CALC_BROKEN,
    FAILED,
    HELD,
    PYTEST,
    Case,
    F,
    _attack,
    _honest,
    config,
    simple,
    wants_reason,
    with_inspect,
)
from tests.gitutil import Content

JUNIT = "reports/junit.xml"
TEST_ARGV = PYTEST[:-1] + f', "--junitxml={JUNIT}"]'
TEST_CALC = b"from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
STAMP = (
    b"import sys\n\nsys.path.insert(0, '.')\nimport calc\n\n"
    b"print('version', getattr(calc, '__version__', '0'))\n"
)
BUILD = 'build: "python3 tools/stamp_version.py"'

# Run at import, as root, during the build only (the test phase's root is read-only).
PATCH_PYTEST = b"""
import os as _os
import _pytest.python as _pp

_src = _pp.__file__
if _os.access(_src, _os.W_OK):
    with open(_src, "a") as _f:
        _f.write(
            "\\n_orig_runtest = Function.runtest\\n"
            "def _quiet(self):\\n"
            "    try:\\n"
            "        _orig_runtest(self)\\n"
            "    except AssertionError:\\n"
            "        pass\\n"
            "Function.runtest = _quiet\\n"
        )
"""

DROP_PTH = b"""
import os as _os

_site = "/usr/local/lib/python3.11/dist-packages"
if _os.access("/usr/local/lib", _os.W_OK):
    _os.makedirs(_site, exist_ok=True)
    with open(_site + "/zz_quiet.py", "w") as _f:
        _f.write(
            "import sys\\n"
            "sys.path.append('/usr/lib/python3/dist-packages')\\n"
            "import _pytest.python as p\\n"
            "orig = p.Function.runtest\\n"
            "def quiet(self):\\n"
            "    try:\\n"
            "        orig(self)\\n"
            "    except AssertionError:\\n"
            "        pass\\n"
            "p.Function.runtest = quiet\\n"
        )
    with open(_site + "/zz_quiet.pth", "w") as _f:
        _f.write("import zz_quiet\\n")
"""

# A program planted ahead of the image's on PATH: `pytest` in /usr/local/sbin.
SHADOW_ON_PATH = b"""
import os as _os

if _os.access("/usr/local/sbin", _os.W_OK):
    with open("/usr/local/sbin/python3", "w") as _f:
        _f.write("#!/bin/sh\\nexec /usr/bin/python3 -c 'print(\\"1 passed\\")'\\n")
    _os.chmod("/usr/local/sbin/python3", 0o755)
"""


def base(build: str = BUILD, **files: Content) -> dict[bytes, Content]:
    """calc with one test, judged by its report, and a build step that imports calc."""
    check = "  - {name: unit, " + build + ", test: [" + TEST_ARGV + "], junit: " + JUNIT + "}\n"
    tree: dict[bytes, Content] = {
        b".github/proofgate.yml": config(check),
        b"calc.py": CALC,
        b"tests/test_calc.py": TEST_CALC,
        b"tools/stamp_version.py": STAMP,
    }
    tree.update({k.encode(): v for k, v in files.items()})
    return tree


def _changed(payload: bytes) -> dict[bytes, Content]:
    return {**base(), b"calc.py": CALC_BROKEN + payload}


ENVIRONMENT_CASES: tuple[Case, ...] = (
    _attack(
        "build-import-patches-the-images-pytest",
        "the build step imports the change's package, which edits the image's "
        "_pytest/python.py to swallow assertion errors (environment-changed)",
        F({HELD, FAILED}),
        with_inspect(simple(_changed(PATCH_PYTEST), base()), wants_reason("environment-changed")),
    ),
    _attack(
        "build-import-drops-a-pth-hook",
        "the build step imports the change's package, which drops a .pth startup hook "
        "that patches pytest before any plugin loads (environment-changed)",
        F({HELD, FAILED}),
        with_inspect(simple(_changed(DROP_PTH), base()), wants_reason("environment-changed")),
    ),
    _attack(
        "build-import-shadows-python3-on-path",
        "the build step imports the change's package, which plants a python3 ahead of "
        "the image's on PATH that prints a pass (environment-changed)",
        F({HELD, FAILED, "INCONCLUSIVE"}),
        with_inspect(simple(_changed(SHADOW_ON_PATH), base()), wants_reason("environment-changed")),
    ),
    _honest(
        "honest-build-imports-the-package",
        "a build step that imports the package for its version, and a change to it",
        simple({**base(), b"calc.py": b"__version__ = '2'\n" + CALC}, base()),
    ),
)
