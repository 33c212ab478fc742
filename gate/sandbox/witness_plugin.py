# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+: no annotations, like its pytest)
"""proofgate's witness: a pytest plugin that reports what pytest itself saw (SPEC §3.2).

This one file is copied into every check container as `proofgate_witness.py`, in a
directory the check cannot write (docs/security.md, "The witness"), and every test
command gets `PYTEST_ADDOPTS=-p proofgate_witness` and that directory on `PYTHONPATH`.
Loaded before any test module or conftest is imported, it writes one line to the
standard output pytest started with, at the end of the session, after the JUnit report
was written:

    ##[proofgate-witness] {"v": 1, "exitstatus": ..., "junit": {...}, ...}

proofgate compares that line with what it reads back itself: the report's SHA-256 (a
report rewritten after pytest wrote it, by an `atexit` hook or a process left behind,
no longer matches), the session's exit status (a process that exits 0 although pytest
counted failures), the conftest files pytest loaded (each must be a file of the tree,
as committed) and the tripwires below. Code that runs inside pytest's process can in
principle lie about that process; the witness makes the generic ways to do so visible:

- `outcome-rewritten`: a test's call raised (not a skip or xfail) and its report says
  passed;
- `outcome-rewritten` too: a report's outcome changed between the hook that made it and
  the hooks that report it (the JUnit writer among them);
- `pytest-patched`: a function or class of pytest or pluggy, or a method of such a
  class, was replaced after this plugin was loaded;
- `plugin-registered`: a plugin other than a conftest was registered while the tests
  were collected or ran;
- `tests-unaccounted`: the session ended with status 0 and a collected test never ran.

Stdlib and pytest only; Python 3.7+ and pytest 5+ syntax (it runs in the project's
image, whatever that has). It never imports proofgate. Nothing here changes what a
test does or how pytest reports it.
"""

import hashlib
import json
import os
import sys
import types

import pytest

MARKER = "##[proofgate-witness] "
VERSION = 1
_WATCHED = ("_pytest", "pytest", "pluggy", "proofgate_witness")
_MAX_LISTED = 50


def _watched(module_name):
    name = str(module_name or "")
    return any(name == w or name.startswith(w + ".") for w in _WATCHED)


_METHODS = (types.FunctionType, classmethod, staticmethod, property)


def _snapshot():
    """Every function and class of the watched modules loaded now, and every method of
    those classes, by identity."""
    seen = {}
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or not _watched(name):
            continue
        for attr, value in list(vars(module).items()):
            if not _watched(getattr(value, "__module__", "")):
                continue
            if isinstance(value, types.FunctionType):
                seen[(name, attr)] = value
            elif isinstance(value, type):
                seen[(name, attr)] = value
                owner = f"{value.__module__}.{value.__qualname__}"
                for method, impl in list(vars(value).items()):
                    if isinstance(impl, _METHODS):
                        seen[(owner, method)] = impl
    return seen


def _blob_id(path):
    """The git blob id of a file's content (what proofgate compares with the tree)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's id


# SPEC §3.2: what the base's tests depend on comes from the base. The collected tests'
# files (a test's file is the file the run itself reports) and the workspace files test
# code opened for reading (data such as `calc/data/cases.json`), each bounded; proofgate
# keeps the reads whose reader is a test file of the check (gate/differential/__init__.py).
_WORKSPACE = "/workspace/"
_MAX_TEST_FILES = 20000
_MAX_READS = 2000
_SOURCE_DISPLAY = ("/linecache.py",)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _test_files(items):
    """The files the collected tests are defined in (absolute paths), bounded."""
    out = set()
    for item in items:
        path = getattr(item, "path", None) or getattr(item, "fspath", None)
        if path is not None:
            out.add(str(path))
            if len(out) >= _MAX_TEST_FILES:
                break
    return sorted(out)


def _reading(mode, flags):
    if isinstance(mode, str):
        return not any(c in mode for c in "wax+")
    return isinstance(flags, int) and not flags & _WRITE_FLAGS


class _Reads:
    """An audit hook (Python 3.8+) on `open`: for a read of a workspace file, the nearest
    workspace frame that asked for it (the reader). Opens made by the import system on
    behalf of a module (its source, through the frozen importlib) are imports, and source
    lines read for a traceback or `inspect` (through `linecache`) are displays: neither
    is recorded."""

    def __init__(self):
        self.seen = {}  # (reader, path) -> None, in order
        self.dropped = 0

    def install(self):
        if hasattr(sys, "addaudithook"):
            sys.addaudithook(self._hook)

    def _hook(self, event, args):
        if event != "open" or not args:
            return
        path = args[0]
        if not isinstance(path, str) or not path.startswith(_WORKSPACE):
            return
        if not _reading(args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None):
            return
        try:
            frame = sys._getframe(1)
        except ValueError:
            return
        reader = None
        for _ in range(64):
            if frame is None:
                break
            name = frame.f_code.co_filename
            if name.startswith("<frozen importlib") or name.endswith(_SOURCE_DISPLAY):
                return
            if name.startswith(_WORKSPACE):
                reader = name
                break
            frame = frame.f_back
        if reader is None or (reader, path) in self.seen:
            return
        if len(self.seen) >= _MAX_READS:
            self.dropped += 1
            return
        self.seen[(reader, path)] = None

    def to_json(self):
        return {"reads": [[r, p] for r, p in self.seen], "dropped": self.dropped}


class Witness:
    def __init__(self, config):
        self.config = config
        try:  # standard output as pytest started (capture is suspended here)
            self.fd = os.dup(1)
        except OSError:
            self.fd = None
        self.snapshot = _snapshot()
        pm = config.pluginmanager
        self.hookexec = getattr(pm, "_inner_hookexec", None)
        self.collecting = False
        self.tampered = []
        self.raised = {}  # nodeid -> the call raised (not a skip)
        self.ran = set()
        self.items = []
        self.conftests = {}
        self.late_plugins = []
        self.counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        self.reported = {}  # (nodeid, when) -> the outcome makereport returned
        self.emitted = False
        self.test_files = []
        self.reads = _Reads()
        self.reads.install()

    def _flag(self, kind, detail):
        if len(self.tampered) < _MAX_LISTED:
            self.tampered.append({"kind": kind, "detail": str(detail)[:300]})

    # --- hooks ------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_plugin_registered(self, plugin, manager):
        if not self.collecting:
            return
        path = getattr(plugin, "__file__", None)
        if isinstance(plugin, types.ModuleType) and path:
            if os.path.basename(path) in ("conftest.py", "conftest.pyc"):
                self.conftests[os.path.abspath(path)] = _blob_id(path)
                return
        self._flag("plugin-registered", _plugin_detail(plugin))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        self.collecting = True
        # conftests loaded before collection (initial ones) count the same
        for plugin in list(self.config.pluginmanager.get_plugins()):
            path = getattr(plugin, "__file__", None)
            if isinstance(plugin, types.ModuleType) and path:
                if os.path.basename(path) == "conftest.py":
                    self.conftests[os.path.abspath(path)] = _blob_id(path)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        self.items = [item.nodeid for item in items]
        self.test_files = _test_files(items)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        outcome = yield
        excinfo = outcome.excinfo
        if excinfo is not None and not _is_skip(excinfo[1]):
            self.raised[item.nodeid] = excinfo[0].__name__

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        self.ran.add(item.nodeid)
        self.reported[(item.nodeid, call.when)] = report.outcome
        if call.when == "call" and item.nodeid in self.raised:
            if report.passed and not hasattr(report, "wasxfail"):
                self._flag(
                    "outcome-rewritten",
                    f"{item.nodeid} raised {self.raised[item.nodeid]}, its report says passed",
                )

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        made = self.reported.get((report.nodeid, report.when))
        if made is not None and made != report.outcome:
            self._flag(
                "outcome-rewritten",
                f"{report.nodeid} {report.when}: made {made}, reported {report.outcome}",
            )
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.passed:
                self.counts["passed"] += 1
            elif report.skipped:
                self.counts["skipped"] += 1
            elif report.when == "call":
                self.counts["failed"] += 1
            else:
                self.counts["error"] += 1
        elif report.when == "teardown" and report.failed:
            self.counts["error"] += 1

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        yield  # the JUnit report is written by now (junitxml's own sessionfinish)
        self._emit(session)

    # --- the line -----------------------------------------------------------------------

    def _checks(self, session):
        now = _snapshot()
        old = self.snapshot.items()
        changed = sorted(
            {
                "{}.{}".format(*k): _replaced_by(now.get(k)) for k, v in old if now.get(k) is not v
            }.items()
        )
        for name, source in changed:
            self._flag("pytest-patched", f"{name} ({source})")
        pm = self.config.pluginmanager
        if getattr(pm, "_inner_hookexec", None) is not self.hookexec:
            self._flag("pytest-patched", "the plugin manager's hook caller")
        status = int(getattr(session, "exitstatus", 0) or 0)
        if status == 0 and not getattr(self.config, "workerinput", None):
            if not getattr(self.config.option, "collectonly", False):
                missing = [n for n in self.items if n not in self.ran]
                if missing and not _xdist(self.config):
                    self._flag("tests-unaccounted", ", ".join(missing[:5]))

    def _emit(self, session):
        if self.emitted:
            return
        self.emitted = True
        self._checks(session)
        xmlpath = getattr(self.config.option, "xmlpath", None)
        junit = None
        if xmlpath:
            path = os.path.abspath(os.path.normpath(os.path.expanduser(xmlpath)))
            digest = None
            try:
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                pass
            junit = {"path": path, "sha256": digest}
        line = {
            "v": VERSION,
            "pid": os.getpid(),
            "exitstatus": int(getattr(session, "exitstatus", 0) or 0),
            "junit": junit,
            "counts": self.counts,
            "conftests": [[p, b] for p, b in sorted(self.conftests.items())],
            "tampered": self.tampered,
            "xdist": _xdist(self.config),
            "test_files": self.test_files,
            "inputs": self.reads.to_json(),
        }
        data = ("\n" + MARKER + json.dumps(line, sort_keys=True) + "\n").encode()
        if self.fd is None:
            return
        try:
            os.write(self.fd, data)
        except OSError:
            pass


def _replaced_by(value):
    """Where a replaced attribute's new value is defined: its code's file, or 'removed'."""
    if value is None:
        return "removed"
    func = getattr(value, "__func__", None) or getattr(value, "fget", None) or value
    code = getattr(func, "__code__", None)
    if code is not None:
        return "now defined in " + os.path.abspath(code.co_filename)
    module = sys.modules.get(getattr(value, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    return "now defined in " + (os.path.abspath(path) if isinstance(path, str) else "no file")


def _plugin_detail(plugin):
    """A registered plugin's name and the file that defines it: proofgate waives a finding
    the base run shows too only for the very same detail (gate/differential/witness.py)."""
    name = getattr(plugin, "__name__", None) or type(plugin).__name__
    path = getattr(plugin, "__file__", None)
    if not isinstance(path, str):
        module = sys.modules.get(getattr(type(plugin), "__module__", "") or "")
        path = getattr(module, "__file__", None)
    return "{} ({})".format(name, os.path.abspath(path) if isinstance(path, str) else "no file")


def _is_skip(exc):
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"Skipped", "XFailed", "SkipTest"})


def _xdist(config):
    option = config.option
    return bool(getattr(option, "numprocesses", None)) or getattr(option, "dist", "no") not in (
        "no",
        None,
    )


def pytest_configure(config):
    if getattr(config, "workerinput", None) is not None:
        return  # an xdist worker: its standard output is the controller's channel
    config.pluginmanager.register(Witness(config), "proofgate-witness")
