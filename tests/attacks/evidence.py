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
    HELD,
    INCONCLUSIVE,
    PYTEST,
    Built,
    Case,
    F,
    Workspace,
    _attack,
    _honest,
    base_tree,
    config,
    simple,
    wants_finding,
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


# --- in-process lies (issue 27): the code under test rewrites its judge ---------------
# Each of these made a broken change PROVEN before. Most are judged twice: with
# `harness-tampering` allowed (the witness alone contains it: evidence-tampered) and
# under the default policy (the static rule holds the change before anything runs).

_LAX = "policy:\n  rules:\n    harness-tampering: allow\n"
_JUNIT_CHECK = f"  - {{name: unit, test: [{_PYTEST_JUNIT}], junit: reports/junit.xml}}\n"
_JUNIT_LAX = config(_JUNIT_CHECK, policy=_LAX)
TEST_CALC_UNITTEST = (
    b"import unittest\n\nfrom calc import add\n\n\nclass TestAdd(unittest.TestCase):\n"
    b"    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)
# unittest's assertions made no-ops (the base's tests are unittest.TestCase classes)
UNITTEST_ASSERT_NOOP = """import unittest
unittest.TestCase.assertEqual = lambda self, first, second, msg=None: None
"""
# a trace function on the importing test module's frame: when the module has run, its
# test functions are wrapped so that an AssertionError passes; tracing then switched off
FTRACE_WRAPS_TESTS = """import sys
def _wrap(f):
    def test(*a, **k):
        try:
            f(*a, **k)
        except AssertionError:
            pass
    test.__name__ = f.__name__
    return test
_f = sys._getframe(1)
while _f is not None and not str(_f.f_globals.get("__name__", "")).startswith("test"):
    _f = _f.f_back
def _tracer(frame, event, arg):
    if frame is _f and event == "return":
        g = frame.f_globals
        for name, v in list(g.items()):
            if name.startswith("test") and callable(v):
                g[name] = _wrap(v)
        sys.settrace(None)
    return _tracer
if _f is not None:
    _f.f_trace = _tracer
    sys.settrace(lambda *a: None)
"""
# a finder ahead of pytest's assertion rewriter compiles test modules with `assert`
# replaced by `pass` (the base's conftest imports the package first)
META_PATH_DROPS_ASSERTS = """import ast, sys, importlib.machinery
class _Loader:
    def __init__(self, origin):
        self.origin = origin
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        tree = ast.parse(open(self.origin).read())
        for node in ast.walk(tree):
            for _field, value in ast.iter_fields(node):
                if isinstance(value, list):
                    value[:] = [
                        ast.copy_location(ast.Pass(), v) if isinstance(v, ast.Assert) else v
                        for v in value
                    ]
        exec(compile(tree, self.origin, "exec"), module.__dict__)
class _Finder:
    def find_spec(self, name, path=None, target=None):
        if not name.rsplit(".", 1)[-1].startswith("test_"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _Loader(spec.origin)
        return spec
sys.meta_path.insert(0, _Finder())
"""
# pytest's Function.runtest swallows failures, and is put back during the last test:
# a comparison at the session's end sees the original
RUNTEST_PATCHED_AND_RESTORED = """import _pytest.python as _p
_orig = _p.Function.runtest
def _runtest(self):
    try:
        _orig(self)
    except AssertionError:
        pass
    finally:
        if self is self.session.items[-1]:
            _p.Function.runtest = _orig
_p.Function.runtest = _runtest
"""
# os.write wrapped: when the witness writes its line, the report is rewritten to passes,
# the line re-encoded with the new digest and status 0, and the process ends
_FAKE_TWO = FAKE_JUNIT.replace(b'tests="1"', b'tests="2"').replace(
    b"</testsuite>", b'<testcase classname="test_other" name="test_other"/></testsuite>'
)
OS_WRITE_REWRITES_THE_LINE = f"""import hashlib, json, os
_w = os.write
_FAKE = {_FAKE_TWO!r}
def _write(fd, data):
    marker = b"##[proofgate-witness] "
    if marker in data and b'"exitstatus"' in data:
        head, _, rest = data.partition(marker)
        line = json.loads(rest)
        if line.get("junit"):
            open(line["junit"]["path"], "wb").write(_FAKE)
            line["junit"]["sha256"] = hashlib.sha256(_FAKE).hexdigest()
        line["exitstatus"], line["tampered"] = 0, []
        line["counts"] = {{"passed": 2, "failed": 0, "error": 0, "skipped": 0}}
        _w(fd, head + marker + json.dumps(line, sort_keys=True).encode() + b"\\n")
        os._exit(0)
    return _w(fd, data)
os.write = _write
"""
# the witness's own methods and hooks replaced (as the plugin's attributes)
WITNESS_HOOKS_REPLACED = """import sys
_w = sys.modules.get("proofgate_witness")
for _name in list(vars(_w) if _w is not None else ()):
    if _name.startswith(("pytest_", "_")) and not _name.startswith("__"):
        setattr(_w, _name, lambda *a, **k: None)
_cls = getattr(_w, "Witness", None)
if _cls is not None:
    _cls._emit = lambda *a, **k: None
"""
# exit 0 from an atexit hook after the witness wrote its (truthful) line
EXIT_AFTER_THE_LINE = """import atexit, os
atexit.register(lambda: os._exit(0))
"""
# unittest-style failures turned green by a hookwrapper: the failure reaches pytest
# through the unittest result, never as an exception out of the call
GREEN_CONFTEST = b"""import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    rep = out.get_result()
    if rep.when == "call" and rep.failed:
        rep.outcome, rep.longrepr = "passed", None
"""
# right only when pytest runs it: no test can tell (the static rule is the defence)
ONLY_UNDER_PYTEST = b"""import sys


def add(a, b):
    if "pytest" in sys.modules:
        return a + b
    return a - b
"""


def _lie(
    plant: str, *, lax: bool = True, unittest_style: bool = False, **extra: bytes
) -> Callable[[Workspace], Built]:
    """The broken calc.py with `plant`; judged by the witness alone when `lax`."""
    cfg = _JUNIT_LAX if lax else _JUNIT_CFG
    if unittest_style:
        extra = {"test_calc.py": TEST_CALC_UNITTEST, **extra}
    build = _in_process(plant, cfg, **extra)
    if lax:
        return with_inspect(build, wants_reason("evidence-tampered"))
    return with_inspect(build, wants_finding("harness-tampering"))


# Honest controls: code that uses unittest.mock, a runner that sets its own trace
# function before pytest starts (what `coverage run -m pytest` does; coverage is not in
# the clean-room image, so a minimal tracing runner stands in for it), tests that run
# pytest inside pytest (pytester), unittest-style tests.
CALC_WITH_MOCK = b"""import os
from unittest import mock

clock = mock.Mock(return_value=5)


def add(a, b):
    with mock.patch.dict(os.environ, {"CALC_MODE": "sum"}):
        return a + b if os.environ["CALC_MODE"] == "sum" else a - b
"""
TRACED_RUNNER = b"""import sys


def _tracer(frame, event, arg):
    return _tracer


sys.settrace(_tracer)
import pytest  # noqa: E402

raise SystemExit(pytest.main(sys.argv[1:]))
"""
_TRACED = (
    '["python3", "tools/traced_pytest.py", "-q", "-p", "no:cacheprovider", '
    '"--junitxml=reports/junit.xml"]'
)
TEST_PYTESTER = b"""from calc import add


def test_add():
    assert add(2, 3) == 5


def test_inner_session(pytester):
    pytester.makepyfile("def test_x():\\n    assert 1\\n")
    pytester.runpytest().assert_outcomes(passed=1)


def test_inline_failure(pytester):
    pytester.makepyfile("def test_y():\\n    assert 0\\n")
    pytester.inline_run().assertoutcome(failed=1)
"""
CALC_RENAMED_ARGS = b"def add(x, y):\n    return x + y\n"


def _honest_in_process(
    pr: dict[bytes, bytes], cfg: bytes, **extra: bytes
) -> Callable[[Workspace], Built]:
    base = base_tree(**{".github/proofgate.yml": cfg, **extra})
    return simple(pr, base)  # type: ignore[arg-type]


IN_PROCESS_CASES: tuple[Case, ...] = (
    _attack(
        "unittest-assertions-made-no-ops",
        "the package replaces unittest.TestCase.assertEqual with a no-op (unittest tests)",
        F({FAILED}),
        _lie(UNITTEST_ASSERT_NOOP, unittest_style=True),
    ),
    _attack(
        "unittest-assertions-made-no-ops-held",
        "... under the default policy: the static rule sees unittest patched",
        F({FAILED, HELD}),
        _lie(UNITTEST_ASSERT_NOOP, lax=False, unittest_style=True),
    ),
    _attack(
        "trace-function-wraps-tests",
        "a trace function on the test module's frame wraps its tests as it finishes",
        F({FAILED}),
        _lie(FTRACE_WRAPS_TESTS),
    ),
    _attack(
        "trace-function-wraps-tests-held",
        "... under the default policy: the static rule sees sys.settrace and f_trace",
        F({FAILED, HELD}),
        _lie(FTRACE_WRAPS_TESTS, lax=False),
    ),
    _attack(
        "meta-path-finder-drops-asserts",
        "a finder ahead of the assertion rewriter compiles tests with `assert` as `pass`",
        F({FAILED}),
        _lie(META_PATH_DROPS_ASSERTS, **{"conftest.py": b"import calc  # noqa: F401\n"}),
    ),
    _attack(
        "runtest-patched-and-restored",
        "Function.runtest swallows failures and is restored during the last test",
        F({FAILED}),
        _lie(RUNTEST_PATCHED_AND_RESTORED),
    ),
    _attack(
        "os-write-rewrites-the-witness-line",
        "os.write rewrites the report and the witness's line (new digest, status 0), exits",
        F({FAILED}),
        with_inspect(
            _in_process(OS_WRITE_REWRITES_THE_LINE, _JUNIT_LAX),
            wants_reason("check-failed", "regression", "evidence-tampered"),
        ),
    ),
    _attack(
        "witness-hooks-replaced",
        "the package replaces the witness's functions, hooks and methods by attribute",
        F({FAILED}),
        with_inspect(
            _in_process(WITNESS_HOOKS_REPLACED, _JUNIT_LAX),
            wants_reason("check-failed", "regression", "evidence-tampered"),
        ),
    ),
    _attack(
        "exit-zero-after-the-witness-line",
        "an atexit hook ends the process with os._exit(0) after the witness's line",
        F({FAILED}),
        _lie(EXIT_AFTER_THE_LINE),
    ),
    _attack(
        "unittest-failures-turned-green",
        "a conftest hookwrapper turns unittest-style failures (via the result) into passes",
        F({FAILED}),
        with_inspect(
            simple(
                {b"calc.py": CALC_BROKEN, b"conftest.py": GREEN_CONFTEST},
                base_tree(
                    **{".github/proofgate.yml": _JUNIT_LAX, "test_calc.py": TEST_CALC_UNITTEST}
                ),
            ),
            wants_reason("evidence-tampered"),
        ),
    ),
    _attack(
        "correct-only-under-pytest",
        "the package is right only when 'pytest' in sys.modules (no test can see it)",
        F({HELD}),
        with_inspect(
            _with_config(_JUNIT_CFG, {b"calc.py": ONLY_UNDER_PYTEST}),
            wants_finding("harness-tampering"),
        ),
    ),
    _honest(
        "honest-package-uses-unittest-mock",
        "the package uses unittest.mock on its own objects",
        _with_config(_JUNIT_CFG, {b"calc.py": CALC_WITH_MOCK}),
    ),
    _honest(
        "honest-runner-sets-a-trace-function",
        "the configured runner sets a trace function before pytest starts (coverage run)",
        _honest_in_process(
            {b"calc.py": CALC_RENAMED_ARGS},
            config(f"  - {{name: unit, test: [{_TRACED}], junit: reports/junit.xml}}\n"),
            **{"tools/traced_pytest.py": TRACED_RUNNER},
        ),
    ),
    _honest(
        "honest-tests-use-pytester",
        "the tests run pytest inside pytest (pytester: in-process and subprocess)",
        _honest_in_process(
            {b"calc.py": CALC_RENAMED_ARGS},
            _JUNIT_CFG,
            **{"conftest.py": b'pytest_plugins = ["pytester"]\n', "test_calc.py": TEST_PYTESTER},
        ),
    ),
    _honest(
        "honest-unittest-style-tests",
        "a change to a package whose tests are unittest.TestCase classes",
        _honest_in_process(
            {b"calc.py": CALC_RENAMED_ARGS}, _JUNIT_CFG, **{"test_calc.py": TEST_CALC_UNITTEST}
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
        F({HELD}),
        with_inspect(
            simple(
                {
                    **_reads_data(),
                    b"calc.py": CALC_BROKEN,
                    b"calc/data/cases.json": b"[[2, 3, -1]]\n",
                },
                _reads_data(),  # type: ignore[arg-type]
            ),
            wants_reason("test-input-changed"),
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
