"""Attacks on the evidence itself (SPEC §3 (8), §3.2): the checked code tries to replace
what proofgate reads back, the programs that read it, or what a later command runs.

Every case breaks `calc.py` (so an honest run FAILs) and adds a sabotage that, where it
worked, made the broken change PROVEN. `calc.py` is what the tests import: it is the
code under test, and no policy rule looks at it. Appended to `corpus.CASES`.
"""

from __future__ import annotations

import importlib._bootstrap_external as bootstrap
import importlib.util
import sys
from collections.abc import Callable

from tests.attacks.corpus import (
    CALC,
    CALC_BROKEN,
    FAILED,
    FAKE_JUNIT,
    INCONCLUSIVE,
    PYTEST,
    Built,
    Case,
    F,
    Workspace,
    _attack,
    base_tree,
    both,
    config,
    simple,
    wants_reason,
    with_inspect,
)
from tests.gitutil import Symlink

_PYTEST_JUNIT = PYTEST[:-1] + ', "--junitxml=reports/junit.xml"]'
_SMOKE = '["python3", "-c", "import calc"]'  # a first test command that imports the code
# A config where the report, not the exit status, judges the tests.
_JUDGED_BY_REPORT = (
    '"python3 -m pytest -q -p no:cacheprovider --junitxml=reports/junit.xml || true"'
)


def _sabotage(payload: str) -> bytes:
    """The broken calc.py, which runs `payload` (Python) once, when it is imported."""
    return (
        CALC_BROKEN
        + b"\n\ntry:\n"
        + b"".join(b"    " + line.encode() + b"\n" for line in payload.splitlines())
        + b"except OSError:\n    pass\n"
    )


def _with_config(cfg: bytes, pr: dict[bytes, object]) -> Callable[[Workspace], Built]:
    base = base_tree(**{".github/proofgate.yml": cfg})
    return simple(pr, base)  # type: ignore[arg-type]


_FAKE = FAKE_JUNIT.decode()
_SHIM_PYTHON = f"""import os
os.makedirs("reports", exist_ok=True)
open("reports/junit.xml", "w").write({_FAKE!r})
print("1 passed")
"""
# a python3 early on PATH that forges a report and exits 0 (the image's PATH starts
# with /usr/local/bin)
PLANT_PYTHON3 = f"""import os, sys
with open("/usr/local/bin/python3", "w") as f:
    f.write("#!" + sys.executable + " -I\\n" + {_SHIM_PYTHON!r})
os.chmod("/usr/local/bin/python3", 0o755)
"""

_PTH_LINE = (
    "import os, sys; 'pytest' in sys.orig_argv and (os.makedirs('reports', exist_ok=True), "
    f"open('reports/junit.xml', 'w').write({_FAKE!r}), os._exit(0))"
)
PLANT_PTH_SITE = f"""import site
open(site.getsitepackages()[0] + "/zz-shim.pth", "w").write({_PTH_LINE!r} + "\\n")
"""
PLANT_PTH_USER = f"""import os, site
os.makedirs(site.getusersitepackages(), exist_ok=True)
open(site.getusersitepackages() + "/zz-shim.pth", "w").write({_PTH_LINE!r} + "\\n")
"""

# A `tar` first on PATH: what an in-container read-back would have run by name.
_FORGING_TAR = f"""#!/bin/sh
# forged read-back: a tar holding a passing report
exec python3 -I -c 'import io, sys, tarfile
data = {FAKE_JUNIT!r}
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    i = tarfile.TarInfo("junit.xml"); i.size = len(data); t.addfile(i, io.BytesIO(data))
sys.stdout.buffer.write(buf.getvalue())'
"""
PLANT_TAR = f"""import os
for d in ("/usr/local/bin", "/usr/local/sbin"):
    with open(d + "/tar", "w") as f:
        f.write({_FORGING_TAR!r})
    os.chmod(d + "/tar", 0o755)
"""
PLANT_SLEEPING_TAR = """import os
for d in ("/usr/local/bin", "/usr/local/sbin"):
    with open(d + "/tar", "w") as f:
        f.write("#!/bin/sh\\nexec sleep 3600\\n")
    os.chmod(d + "/tar", 0o755)
"""
# A detached process that rewrites the report once the test command has ended.
BACKGROUND_REWRITE = f"""import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        parent = os.getppid()
        time.sleep(1.5)
        os.makedirs("reports", exist_ok=True)
        open("reports/junit.xml", "w").write({_FAKE!r})
        os._exit(0)
    os._exit(0)
"""


def _shim_case(plant: str) -> Callable[[Workspace], Built]:
    cfg = config(
        f"  - {{name: unit, test: [{_SMOKE}, {_PYTEST_JUNIT}], junit: reports/junit.xml}}\n"
    )
    return with_inspect(
        _with_config(cfg, {b"calc.py": _sabotage(plant)}), wants_reason("check-failed")
    )


def _report_judged(plant: str, timeout: int = 30) -> Callable[[Workspace], Built]:
    cfg = config(
        f"  - {{name: unit, test: [{_JUDGED_BY_REPORT}], junit: reports/junit.xml}}\n",
        timeout=timeout,
    )
    return _with_config(cfg, {b"calc.py": _sabotage(plant)})


def _committed_report(junit: str, pr: dict[bytes, object]) -> Callable[[Workspace], Built]:
    cfg = config(f'  - {{name: unit, test: "true", junit: "{junit}"}}\n')
    return with_inspect(
        _with_config(cfg, {b"calc.py": CALC_BROKEN, **pr}), wants_reason("junit-invalid")
    )


def _pyc(source: bytes, *, mtime: int | None, size: int) -> bytes:
    code = compile(source, "calc.py", "exec")
    if mtime is None:  # hash-based, unchecked: never compared with the source
        digest = importlib.util.source_hash(source)
        return bytes(bootstrap._code_to_hash_pyc(code, digest, False))  # type: ignore[attr-defined]
    return bytes(bootstrap._code_to_timestamp_pyc(code, mtime, size))  # type: ignore[attr-defined]


def _committed_bytecode(*, unchecked: bool) -> Callable[[Workspace], Built]:
    """Good bytecode for the broken source, where the interpreter looks first; its header
    matches the mtime every materialized file used to get and the broken source's size."""
    pyc = _pyc(CALC, mtime=None if unchecked else 1_000_000_000, size=len(CALC_BROKEN))
    name = f"__pycache__/calc.{sys.implementation.cache_tag}.pyc".encode()
    return with_inspect(simple({b"calc.py": CALC_BROKEN, name: pyc}), wants_reason("check-failed"))


EVIDENCE_CASES: tuple[Case, ...] = (
    _attack(
        "shim-python3-on-path",
        "a first test command plants a `python3` early on PATH that forges the report",
        F({FAILED}),
        _shim_case(PLANT_PYTHON3),
    ),
    _attack(
        "shim-pth-in-site-packages",
        "a first test command plants a `.pth` in site-packages that ends pytest with exit 0",
        F({FAILED}),
        _shim_case(PLANT_PTH_SITE),
    ),
    _attack(
        "shim-pth-in-user-site",
        "a first test command plants a `.pth` in the user site directory",
        F({FAILED}),
        _shim_case(PLANT_PTH_USER),
    ),
    _attack(
        "readback-tar-replaced",
        "the tests put a forging `tar` first on PATH for proofgate's read-back",
        F({FAILED, INCONCLUSIVE}),
        _report_judged(PLANT_TAR),
    ),
    _attack(
        "readback-tar-sleeps",
        "the tests put a `tar` that never ends first on PATH, to hang the read-back",
        F({FAILED, INCONCLUSIVE}),
        _report_judged(PLANT_SLEEPING_TAR, timeout=5),
    ),
    _attack(
        "report-rewritten-after-the-command",
        "a detached process rewrites the report after the test command ended",
        F({FAILED, INCONCLUSIVE}),
        _report_judged(BACKGROUND_REWRITE),
    ),
    _attack(
        "junit-committed-dot-slash",
        "a committed report, the config spelling the path ./reports/junit.xml",
        F({INCONCLUSIVE}),
        _committed_report("./reports/junit.xml", {b"reports/junit.xml": FAKE_JUNIT}),
    ),
    _attack(
        "junit-dir-symlink-to-committed-file",
        "a committed symlink points the report directory at a committed report",
        F({INCONCLUSIVE}),
        _committed_report(
            "reports/junit.xml",
            {b"reports": Symlink(b"fixtures"), b"fixtures/junit.xml": FAKE_JUNIT},
        ),
    ),
    _attack(
        "pyc-committed-timestamp",
        "good bytecode committed for the broken module, its header matching the old mtime",
        F({FAILED}),
        _committed_bytecode(unchecked=False),
    ),
    _attack(
        "pyc-committed-unchecked-hash",
        "good bytecode committed for the broken module as an unchecked hash-based pyc",
        F({FAILED}),
        _committed_bytecode(unchecked=True),
    ),
)


# --- the code under test, inside pytest's own process (the witness, SPEC §3.2) --------

_JUNIT_CFG = config(f"  - {{name: unit, test: [{_PYTEST_JUNIT}], junit: reports/junit.xml}}\n")
# exit 0 whatever pytest counted: at interpreter exit, after pytest returned its status
ATEXIT_EXIT_ZERO = """import atexit, os
atexit.register(lambda: os._exit(0))
"""
# the real report replaced by a passing one once pytest wrote it, then exit 0
ATEXIT_REWRITE = f"""import atexit, os
def _forge():
    os.makedirs("reports", exist_ok=True)
    open("reports/junit.xml", "w").write({_FAKE!r})
    os._exit(0)
atexit.register(_forge)
"""
# pytest's report factory replaced when the module is imported (collection time)
PATCH_REPORTS = """import _pytest.reports as r
_orig = r.TestReport.from_item_and_call.__func__
def _green(cls, item, call):
    rep = _orig(cls, item, call)
    rep.outcome, rep.longrepr = "passed", None
    return rep
r.TestReport.from_item_and_call = classmethod(_green)
"""
# a plugin that turns every report green, registered with the running pytest
REGISTER_PLUGIN = """import gc, pytest
class _Green:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        out = yield
        rep = out.get_result()
        rep.outcome, rep.longrepr = "passed", None
for _o in gc.get_objects():
    if type(_o).__name__ == "PytestPluginManager":
        _o.register(_Green(), "green")
        break
"""
# a process left behind that rewrites the report the moment pytest has exited
WATCH_AND_REWRITE = f"""import os, time
_pytest_pid = os.getpid()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            try:
                os.kill(_pytest_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.0005)
        os.makedirs("reports", exist_ok=True)
        open("reports/junit.xml", "w").write({_FAKE!r})
        os._exit(0)
    os._exit(0)
"""
TEST_IMPORT_ONLY = b"import calc\n\n\ndef test_imports():\n    assert calc.add\n"
TEST_ADD_LATER = b"from calc import add\n\n\ndef test_add_later():\n    assert add(2, 3) == 5\n"
# rewrites a test module pytest has not read yet (collected after this import)
REWRITE_LATER_TEST = """open("test_b_add.py", "w").write("def test_add_later():\\n    pass\\n")
"""
# a conftest that turns reports green, written where pytest collects next
PLANT_CONFTEST = """import os
os.makedirs("zz", exist_ok=True)
open("zz/conftest.py", "w").write(
    "import pytest\\n"
    "@pytest.hookimpl(hookwrapper=True)\\n"
    "def pytest_runtest_makereport(item, call):\\n"
    "    out = yield\\n"
    "    rep = out.get_result()\\n"
    "    rep.outcome, rep.longrepr = 'passed', None\\n"
)
"""


def _in_process(plant: str, cfg: bytes, **extra: bytes) -> Callable[[Workspace], Built]:
    base = base_tree(**{".github/proofgate.yml": cfg, **extra})
    return simple({b"calc.py": _sabotage(plant)}, base)  # type: ignore[arg-type]


def _later_files() -> dict[str, bytes]:
    # the first module to import calc checks nothing about add; a later one does
    return {
        "test_calc.py": TEST_IMPORT_ONLY,
        "test_a_import.py": TEST_IMPORT_ONLY,
        "test_b_add.py": TEST_ADD_LATER,
    }


WITNESS_CASES: tuple[Case, ...] = (
    _attack(
        "atexit-forces-exit-zero",
        "the code under test exits 0 from an atexit hook, after pytest counted failures",
        F({FAILED}),
        with_inspect(_in_process(ATEXIT_EXIT_ZERO, config()), wants_reason("evidence-tampered")),
    ),
    _attack(
        "atexit-rewrites-the-report",
        "an atexit hook in the code under test replaces the report pytest wrote, exits 0",
        F({FAILED}),
        with_inspect(_in_process(ATEXIT_REWRITE, _JUNIT_CFG), wants_reason("evidence-tampered")),
    ),
    _attack(
        "import-patches-pytest-reports",
        "the code under test patches pytest's report factory when it is imported",
        F({FAILED}),
        _in_process(PATCH_REPORTS, _JUNIT_CFG),
    ),
    _attack(
        "import-registers-a-plugin",
        "the code under test registers a report-rewriting plugin with the running pytest",
        F({FAILED}),
        _in_process(REGISTER_PLUGIN, _JUNIT_CFG),
    ),
    _attack(
        "import-patches-pytest-without-junit",
        "the code under test patches pytest's reports, in a check judged by exit status",
        F({FAILED}),
        with_inspect(_in_process(PATCH_REPORTS, config()), wants_reason("evidence-tampered")),
    ),
    _attack(
        "import-registers-a-plugin-without-junit",
        "the code under test registers a green plugin, in a check judged by exit status",
        F({FAILED}),
        with_inspect(_in_process(REGISTER_PLUGIN, config()), wants_reason("evidence-tampered")),
    ),
    _attack(
        "left-behind-process-rewrites-at-exit",
        "a process left behind rewrites the report the instant pytest exits",
        F({FAILED, INCONCLUSIVE}),
        _in_process(WATCH_AND_REWRITE, _JUNIT_CFG),
    ),
    _attack(
        "import-rewrites-a-later-test-file",
        "the code under test rewrites a base test module pytest has not collected yet",
        F({FAILED}),
        _in_process(REWRITE_LATER_TEST, _JUNIT_CFG, **_later_files()),
    ),
    _attack(
        "import-plants-a-conftest",
        "the code under test writes a report-rewriting conftest.py where pytest goes next",
        F({FAILED}),
        _in_process(
            PLANT_CONFTEST, _JUNIT_CFG, **_later_files(), **{"zz/test_add.py": TEST_ADD_LATER}
        ),
    ),
)


# --- what the base's tests depend on comes from the base (SPEC §3.2) ------------------

_PASS_ALL = b"""import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    return True
"""
SPACED_HEADER_PLUGIN = b'[tool .pytest.ini_options]\naddopts = ["-p", "speedups"]\n'
_CHECK_ADD = b"def check_add(add):\n    assert add(2, 3) == 5\n"
_USES_HELPER = b"from calc import add\nfrom calc.tests._helpers import check_add\n\n\n"
_USES_HELPER += b"def test_add():\n    check_add(add)\n"
_READS_CASES = b"""import json
import pathlib

from calc import add


def test_add():
    cases = pathlib.Path(__file__).with_name("calc") / "data" / "cases.json"
    for a, b, c in json.loads(cases.read_text()):
        assert add(a, b) == c
"""
_HARMLESS_CONFTEST = b"""class Harmless:
    pass


def pytest_collection(session):
    session.config.pluginmanager.register(Harmless(), "harmless")
"""
_GREEN_HARMLESS = """import gc, pytest
class Harmless:
    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        return True
for _o in gc.get_objects():
    if type(_o).__name__ == "PytestPluginManager":
        _o.register(Harmless(), "harmless-too")
        break
"""


def in_package(**extra: bytes) -> dict[bytes, object]:
    """The base with its tests inside the package: calc/tests/, a helper beside them."""
    tree = base_tree(**{".github/proofgate.yml": _JUNIT_CFG})
    for old in (b"calc.py", b"test_calc.py"):
        del tree[old]
    files = {
        "calc/__init__.py": CALC,
        "calc/tests/__init__.py": b"",
        "calc/tests/_helpers.py": _CHECK_ADD,
        "calc/tests/test_calc.py": _USES_HELPER,
        **extra,
    }
    tree.update({k.encode(): v for k, v in files.items()})
    return tree  # type: ignore[return-value]


def _reads_data() -> dict[bytes, object]:
    tree = base_tree(**{".github/proofgate.yml": _JUNIT_CFG, "test_calc.py": _READS_CASES})
    tree[b"calc/data/cases.json"] = b"[[2, 3, 5]]\n"
    return tree  # type: ignore[return-value]


DEPENDS_CASES: tuple[Case, ...] = (
    _attack(
        "pyproject-plugin-behind-spaced-header",
        'breaks the code and adds `[tool .pytest.ini_options] addopts = ["-p", ...]`, a '
        "plugin in a non-test module that keeps every test body from running",
        F({FAILED}),
        with_inspect(
            _with_config(
                _JUNIT_CFG,
                {
                    b"calc.py": CALC_BROKEN,
                    b"pyproject.toml": SPACED_HEADER_PLUGIN,
                    b"speedups.py": _PASS_ALL,
                },
            ),
            wants_reason("regression"),
        ),
    ),
    _attack(
        "in-package-test-helper-weakened",
        "breaks the code and weakens the helper of the in-package tests (calc/tests/_helpers.py)",
        F({FAILED}),
        with_inspect(
            simple(
                {
                    **in_package(),
                    b"calc/__init__.py": CALC_BROKEN,
                    b"calc/tests/_helpers.py": b"def check_add(add):\n    pass\n",
                },
                in_package(),  # type: ignore[arg-type]
            ),
            wants_reason("regression"),
        ),
    ),
    _attack(
        "expected-data-weakened",
        "breaks the code and rewrites the expected data the base's tests read (calc/data/)",
        F({FAILED}),
        with_inspect(
            simple(
                {
                    **_reads_data(),
                    b"calc.py": CALC_BROKEN,
                    b"calc/data/cases.json": b"[[2, 3, -1]]\n",
                },
                _reads_data(),  # type: ignore[arg-type]
            ),
            both(wants_reason("regression"), wants_reason("test-input-changed")),
        ),
    ),
    _attack(
        "package-init-relabels-a-regression",
        "breaks calc/__init__.py and skips its test in its own run only (a new conftest)",
        F({FAILED}),
        with_inspect(
            simple(
                {
                    **in_package(),
                    b"calc/__init__.py": CALC_BROKEN,
                    b"calc/tests/conftest.py": b"import pytest\n\n\n"
                    b"def pytest_collection_modifyitems(items):\n    for item in items:\n"
                    b"        if item.name == 'test_add':\n"
                    b"            item.add_marker(pytest.mark.skip('later'))\n",
                },
                in_package(),  # type: ignore[arg-type]
            ),
            wants_reason("regression"),
        ),
    ),
    _attack(
        "base-harness-plugin-waives-the-changes",
        "the base's conftest registers a harmless plugin; the broken code registers a "
        "pass-forcing one of the same name",
        F({FAILED}),
        with_inspect(
            _in_process(_GREEN_HARMLESS, _JUNIT_CFG, **{"conftest.py": _HARMLESS_CONFTEST}),
            wants_reason("evidence-tampered"),
        ),
    ),
)
