# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+: no annotations, like its pytest)
"""proofgate's witness: a pytest plugin that reports what pytest itself saw (SPEC §3.2).

PYTEST_DONT_REWRITE (the marker pytest honours: the witness is imported by proofgate's
start-up hook before pytest marks `-p` plugins for assertion rewriting, and needs none;
without it pytest warns, and a project with `filterwarnings = error` fails to start).

This package (this file as `__init__.py`, the `plugin_*.py` beside it as its modules) is
copied into every check container as `witness/proofgate_witness/`, in proofgate's volume,
read-only to every container of the check (docs/security.md, "The witness"). Every test
command gets proofgate's start-up hook first on `PYTHONPATH` (gate/witness/boot.py), which
puts this package into `sys.modules` by path before any of the tree's code runs, and
`PYTEST_ADDOPTS=-p proofgate_witness`, which pytest then finds there.
Loaded before any test module or conftest is imported, it writes one line to the
standard output pytest started with, at the end of the session, after the JUnit report
was written:

    ##[proofgate-witness] {"v": 1, "exitstatus": ..., "junit": {...}, ...}

and, when the process ends normally (its last `atexit` hook), a closing line
`##[proofgate-witness] {"v": 1, "end": PID}`: a process that ends with `os._exit` or a
signal after its session has none.

proofgate compares that line with what it reads back itself: the report's SHA-256 (a
report rewritten after pytest wrote it, by an `atexit` hook or a process left behind,
no longer matches), the session's exit status (a process that exits 0 although pytest
counted failures), the conftest files pytest loaded (each must be a file of the tree,
as committed) and the tripwires below. Code that runs inside pytest's process can in
principle lie about that process; the witness makes the generic ways to do so visible
(docs/security.md, "In-process tampering"):

- `outcome-rewritten`: a test's call raised (not a skip or xfail), or a unittest-style
  test reported a failure or error to its result, and its report says passed;
- `outcome-rewritten` too: a report's outcome changed between the hook that made it and
  the hooks that report it (the JUnit writer among them);
- `pytest-patched`: a function or class of pytest, pluggy, unittest, the builtins or
  this plugin, or a method of such a class, was replaced after this plugin was loaded,
  seen before every test (the objects on the report path; the rest a share at a time),
  after every collector, at the end of collection and of the session (all of them); or
  the plugin manager's hook caller, or the implementations of a hook after collection;
- `plugin-registered`: a plugin other than a conftest was registered while the tests
  were collected or ran;
- `trace-function`: a trace or profile function (`sys.settrace`, `sys.setprofile`,
  `threading.settrace`, a frame's `f_trace`, a `sys.monitoring` tool) that was not there
  when this plugin was loaded (a runner such as `coverage run` sets its own before);
- `import-hook`: a `sys.meta_path` finder, or a `sys.path_hooks` hook, ahead of the
  standard ones that was not there when this plugin was loaded (pytest's assertion
  rewriter is installed before it);
- `test-code-replaced`: a test function whose code is not what its file compiles to
  (checked against the code pytest compiled when it imported the module), or, for a
  test defined without decorators, code from elsewhere;
- `tests-unaccounted`: the session ended with status 0 and a collected test never ran.

Everything the witness uses to check and to write is bound when it is imported (before
the tree's code runs): `os.write`, `hashlib`, its JSON encoder, `sys.gettrace`, and its
state and checks live in closures, not in attributes the code under test could replace.
Stdlib and pytest only; Python 3.7+ and pytest 5+ syntax (it runs in the project's
image, whatever that has). It never imports proofgate. Nothing here changes what a test
does or how pytest reports it (the unittest observer calls through), but for one thing in
a sharded proof (SPEC §3.3): a session whose every collected test is another shard's ends
0, not 5 (below).
"""

import atexit
import builtins
import hashlib
import os
import sys
import types
import unittest  # noqa: F401 - loaded now, so its objects' identities are taken now

import pytest

# the rest of the witness, beside this file in its package (never found through sys.path)
from ._code import _make_code_check, _observe_compilation
from ._guard import (
    _BASE_FINDERS,
    _BASE_MODULES,
    _BASE_ROWS,
    _BASE_TRACERS,
    _REBASED,
    _finders,
    _frame_tracers,
    _from_pytest,
    _identity_table,
    _make_guard,
    _tracers,
)
from ._plugins import _foreign, _plugins
from ._reads import _make_reads, _test_files
from ._shard import _tree_path, _unit
from ._shard import pytest_collection_modifyitems as _shard_modifyitems  # noqa: F401 - installed by `_install`
from ._shard import pytest_ignore_collect as _shard_ignore_collect  # noqa: F401 - installed by `_install`
from ._shard import pytest_sessionfinish as _shard_sessionfinish  # noqa: F401 - installed by `_install`

MARKER = "##[proofgate-witness] "
VERSION = 1
_MAX_LISTED = 50
_MAX_DURATIONS = 5000  # top-level tests timed (the rest count as the mean when balancing)
_MAX_EARLY = 200
_WORKSPACE = "/workspace/"

# --- bound at import, before any of the tree's code has run ---------------------------

_write = os.write
_dup = os.dup
_getpid = os.getpid
_abspath = os.path.abspath
_basename = os.path.basename
_open = open
_sha1 = hashlib.sha1
_sha256 = hashlib.sha256
_is = __import__("operator").is_
_isinstance = isinstance
_getattr = getattr
_id = id
_len = len
_str = str
_int = int
_sorted = sorted
_list = list
_all = all
_map = map
_vars = vars
_type = type
_normpath = os.path.normpath
_expanduser = os.path.expanduser
_hookimpl = pytest.hookimpl
_FunctionType = types.FunctionType
_ModuleType = types.ModuleType
try:
    from json.encoder import c_encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - CPython has the C encoder
    from json.encoder import py_encode_basestring_ascii as _quote
if _quote is None:  # pragma: no cover
    from json.encoder import py_encode_basestring_ascii as _quote


def _dumps(value):
    """JSON of the line's plain values (dict, list, str, int, bool, None), sorted keys,
    written with what was bound at import (json's own encoder looks names up later)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if _isinstance(value, _str):
        return _quote(value)
    if _isinstance(value, _int):
        return _int.__repr__(value)
    if _isinstance(value, dict):
        items = _sorted((_str(k), v) for k, v in value.items())
        return "{" + ", ".join(_quote(k) + ": " + _dumps(v) for k, v in items) + "}"
    if _isinstance(value, (_list, tuple)):
        return "[" + ", ".join(_dumps(v) for v in value) + "]"
    return _quote(_str(value))


def _is_skip(exc):
    names = {c.__name__ for c in _type(exc).__mro__}
    return bool(names & {"Skipped", "XFailed", "SkipTest"})


# --- the unittest result path ---------------------------------------------------------
# A unittest-style test's failure reaches pytest through the unittest result (the item's
# addFailure/addError), never as an exception out of its call: observe it there.

_UNITTEST_FAILED = {}  # nodeid -> the exception's type name


def _observe_unittest():
    try:
        from _pytest.unittest import TestCaseFunction
    except ImportError:  # pragma: no cover
        return
    for name in ("addError", "addFailure"):
        original = _vars(TestCaseFunction).get(name)
        if not _isinstance(original, _FunctionType):
            continue

        def observer(self, testcase, rawexcinfo, *args, _original=original, **kwargs):
            try:
                exc = rawexcinfo[1]
                if not _is_skip(exc):
                    _UNITTEST_FAILED[self.nodeid] = _type(exc).__name__
            except Exception:  # noqa: S110 - never change what the test does
                pass
            return _original(self, testcase, rawexcinfo, *args, **kwargs)

        observer.__name__ = observer.__qualname__ = name
        observer.__module__ = original.__module__
        observer.__wrapped__ = original
        setattr(TestCaseFunction, name, observer)


@_hookimpl
def pytest_load_initial_conftests(early_config):
    """The last moment before the first conftest (and what it imports) is loaded: what
    pytest's own plugins replaced since the witness was imported (legacypath adds its
    properties to Config and Node here) is pytest's, and the trace functions and
    import hooks set by then (pytest-cov starts coverage here) are the environment's."""
    if _REBASED:
        return  # an inner session (pytest.main inside a test): not a baseline
    _REBASED.append(True)
    for i, (label, mapping, keys, values, get) in enumerate(_BASE_ROWS):
        now = tuple(mapping.get(k, v) for k, v in zip(keys, values))  # noqa: B905
        if not _all(_map(_is, now, values)):
            kept = tuple(n if n is not v and _from_pytest(n) else v for n, v in zip(now, values))  # noqa: B905
            _BASE_ROWS[i] = (label, mapping, keys, kept, get)
    _BASE_TRACERS.update(key for _, key, _ in _tracers())
    _BASE_TRACERS.update(_frame_tracers())
    _BASE_FINDERS.extend(f for _, f in _finders() if not any(f is b for b in _BASE_FINDERS))
    _EARLY.extend(_early(early_config.pluginmanager))


# SPEC §3.2: what of the tree ran before the harness. The witness (imported by proofgate's
# start-up hook, gate/witness/boot.py) precedes the tree; by the first conftest, the tree's
# modules already imported are those a `-p` option or an entry point named, and whatever
# they imported. The trusted run's must be the base run's (gate/witness/judge.py).
_EARLY = []  # [[module, file, sha256]] of the tree's modules imported before the first conftest


def _early(pm):
    registered = {_id(p) for p in pm.get_plugins()}
    out = []
    for name, module in _list(sys.modules.items()):
        path = _getattr(module, "__file__", None)
        if not _isinstance(path, _str) or _id(module) in registered:
            continue  # a plugin: its hooks are compared instead (witness/plugin_plugins.py)
        path = _abspath(path)
        if path.startswith(_WORKSPACE):
            try:
                with _open(path, "rb") as f:
                    digest = _sha256(f.read()).hexdigest()[:16]
            except OSError:
                digest = None
            out.append([_str(name), path, digest])
    return _sorted(out)[:_MAX_EARLY]


def _blob_id(path):
    """The git blob id of a file's content (what proofgate compares with the tree)."""
    try:
        with _open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return _sha1(b"blob %d\0" % _len(data) + data).hexdigest()  # noqa: S324 - git's id


def _plugin_detail(plugin):
    """A registered plugin's name and the file that defines it: proofgate waives a finding
    the base run shows too only for the very same detail (gate/witness/judge.py)."""
    name = _getattr(plugin, "__name__", None) or _type(plugin).__name__
    path = _getattr(plugin, "__file__", None)
    if not _isinstance(path, str):
        module = sys.modules.get(_getattr(_type(plugin), "__module__", "") or "")
        path = _getattr(module, "__file__", None)
    return "{} ({})".format(name, _abspath(path) if _isinstance(path, str) else "no file")


# --- the closing line -------------------------------------------------------------------
# Registered at import, before the tree's code can register its own hooks: atexit runs
# last-registered first, so this runs after them, when the process ends normally.

_CHANNEL = []  # [fd, pid] once a session has written its line


def _closing():
    if not _CHANNEL:
        return
    fd, pid = _CHANNEL[0], _CHANNEL[1]
    if _getpid() != pid:
        return  # a forked child's exit is not pytest's
    data = ("\n" + MARKER + _dumps({"v": VERSION, "end": pid}) + "\n").encode()
    try:
        _write(fd, data)
    except OSError:
        pass


# --- the witness ------------------------------------------------------------------------


def _make_witness(config):
    """The plugin object: its hooks are closures over its state and the guard."""
    fd = _FD
    tampered = []
    st = {"collecting": False, "items": [], "emitted": False, "test_files": []}
    reads = _make_reads()
    raised = {}  # nodeid -> the call raised (not a skip)
    ran = set()
    conftests = {}
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    reported = {}  # (nodeid, when) -> the outcome makereport returned
    durations = {}  # "file::Name" (a top-level test) -> seconds, for balancing shards
    flagged = set()
    rootdir = _str(_getattr(config, "rootpath", None) or _getattr(config, "rootdir", ""))

    def flag(kind, detail):
        key = (kind, _str(detail)[:300])
        if key in flagged or _len(tampered) >= _MAX_LISTED:
            return
        flagged.add(key)
        tampered.append({"kind": key[0], "detail": key[1]})

    check, set_baseline, freeze_hooks = _make_guard(flag)
    check_code = _make_code_check(flag, rootdir, config)
    pm = config.pluginmanager
    function_type = _function_type()

    @_hookimpl(tryfirst=True)
    def pytest_plugin_registered(plugin, manager):
        if not st["collecting"]:
            return
        path = _getattr(plugin, "__file__", None)
        if _isinstance(plugin, _ModuleType) and path:
            if _basename(path) in ("conftest.py", "conftest.pyc"):
                conftests[_abspath(path)] = _blob_id(path)
                return
        flag("plugin-registered", _plugin_detail(plugin))

    @_hookimpl(tryfirst=True)
    def pytest_collection(session):
        st["collecting"] = True
        # conftests loaded before collection (initial ones) count the same
        for plugin in _list(pm.get_plugins()):
            path = _getattr(plugin, "__file__", None)
            if _isinstance(plugin, _ModuleType) and path:
                if _basename(path) == "conftest.py":
                    conftests[_abspath(path)] = _blob_id(path)

    @_hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_make_collect_report(collector):
        yield
        check(False)

    @_hookimpl(trylast=True)
    def pytest_collection_modifyitems(session, config, items):
        st["items"] = [item.nodeid for item in items]
        st["test_files"] = _test_files(items)

    @_hookimpl(trylast=True)
    def pytest_collection_finish(session):
        check(True)
        freeze_hooks()

    @_hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(item, nextitem):
        # Between tests: what a test's own fixtures patch (monkeypatch) is undone by its
        # teardown; what the code under test patched from its import is seen before the
        # first test runs, however it is restored later (after the last: at the end).
        check(False)
        yield

    @_hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(item):
        if function_type is not None and _isinstance(item, function_type):
            check_code(item)
        outcome = yield
        excinfo = outcome.excinfo
        if excinfo is not None and not _is_skip(excinfo[1]):
            raised[item.nodeid] = excinfo[0].__name__

    @_hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        ran.add(item.nodeid)
        reported[(item.nodeid, call.when)] = report.outcome
        timed(item, report)
        if call.when != "call" or not report.passed or hasattr(report, "wasxfail"):
            return
        if item.nodeid in raised:
            flag(
                "outcome-rewritten",
                item.nodeid + " raised " + raised[item.nodeid] + ", its report says passed",
            )
        failed = _UNITTEST_FAILED.get(item.nodeid)
        if failed is not None:
            flag(
                "outcome-rewritten",
                item.nodeid + " reported " + failed + " to its unittest result, "
                "its report says passed",
            )

    @_hookimpl(trylast=True)
    def pytest_runtest_logreport(report):
        made = reported.get((report.nodeid, report.when))
        if made is not None and made != report.outcome:
            flag(
                "outcome-rewritten",
                report.nodeid
                + " "
                + report.when
                + ": made "
                + made
                + ", reported "
                + report.outcome,
            )
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.passed:
                counts["passed"] += 1
            elif report.skipped:
                counts["skipped"] += 1
            elif report.when == "call":
                counts["failed"] += 1
            else:
                counts["error"] += 1
        elif report.when == "teardown" and report.failed:
            counts["error"] += 1

    @_hookimpl(hookwrapper=True, trylast=True)
    def pytest_sessionfinish(session, exitstatus):
        yield  # the JUnit report is written by now (junitxml's own sessionfinish)
        emit(session)

    def timed(item, report):
        """Seconds per top-level test (setup, call and teardown), to the microsecond: what
        `prove --shard --balance-from` balances by (the JUnit report's are milliseconds,
        and a fast suite's tests are all 0.000 there). Bounded; never a verdict's input."""
        try:
            seconds = float(_getattr(report, "duration", 0.0) or 0.0)
            unit = _unit(item)
            key = _tree_path(item) + ("::" + unit if unit else "")
        except (TypeError, ValueError, AttributeError):
            return
        if key not in durations and _len(durations) >= _MAX_DURATIONS:
            return
        durations[key] = durations.get(key, 0.0) + max(seconds, 0.0)

    def unaccounted(session):
        status = _int(_getattr(session, "exitstatus", 0) or 0)
        if status != 0 or _getattr(config, "workerinput", None):
            return
        if _getattr(config.option, "collectonly", False) or _xdist(config):
            return
        missing = [n for n in st["items"] if n not in ran]
        if missing:
            flag("tests-unaccounted", ", ".join(missing[:5]))

    def emit(session):
        if st["emitted"]:
            return
        st["emitted"] = True
        check(True)
        unaccounted(session)
        xmlpath = _getattr(config.option, "xmlpath", None)
        junit = None
        if xmlpath:
            path = _abspath(_normpath(_expanduser(xmlpath)))
            digest = None
            try:
                with _open(path, "rb") as f:
                    digest = _sha256(f.read()).hexdigest()
            except OSError:
                pass
            junit = {"path": path, "sha256": digest}
        line = {
            "v": VERSION,
            "pid": _getpid(),
            "exitstatus": _int(_getattr(session, "exitstatus", 0) or 0),
            "junit": junit,
            "counts": counts,
            "conftests": [[p, b] for p, b in _sorted(conftests.items())],
            "tampered": tampered,
            "xdist": _xdist(config),
            "test_files": st["test_files"],
            "inputs": reads(),
            "durations_us": {k: _int(v * 1000000) for k, v in durations.items()},
            "plugins": _plugins(pm),
            "early": _EARLY,
            "foreign": _foreign(),
        }
        data = ("\n" + MARKER + _dumps(line) + "\n").encode()
        if fd is None:
            return
        try:
            _write(fd, data)
        except OSError:
            return
        if not _CHANNEL:
            _CHANNEL.extend((fd, _getpid()))

    set_baseline(pm)
    hooks = {
        "pytest_plugin_registered": pytest_plugin_registered,
        "pytest_collection": pytest_collection,
        "pytest_make_collect_report": pytest_make_collect_report,
        "pytest_collection_modifyitems": pytest_collection_modifyitems,
        "pytest_collection_finish": pytest_collection_finish,
        "pytest_runtest_protocol": pytest_runtest_protocol,
        "pytest_runtest_call": pytest_runtest_call,
        "pytest_runtest_makereport": pytest_runtest_makereport,
        "pytest_runtest_logreport": pytest_runtest_logreport,
        "pytest_sessionfinish": pytest_sessionfinish,
    }
    plugin = _Plugin()
    for name, hook in hooks.items():
        setattr(plugin, name, hook)
    return plugin


class _Plugin:
    """The witness as pytest sees it: hooks set on the instance (closures)."""


def _function_type():
    try:
        from _pytest.python import Function
    except ImportError:  # pragma: no cover
        return None
    return Function


def _xdist(config):
    option = config.option
    return bool(getattr(option, "numprocesses", None)) or getattr(option, "dist", "no") not in (
        "no",
        None,
    )


def pytest_configure(config):
    if _getattr(config, "workerinput", None) is not None:
        return  # an xdist worker: its standard output is the controller's channel
    config.pluginmanager.register(_make_witness(config), "proofgate-witness")


def _start():
    """What the witness takes when it is imported (pytest's start-up, before any conftest
    or test module, before capture): the identities, trace functions and import hooks
    there are now (a runner's: `coverage run -m pytest` sets its trace function before
    pytest starts), the standard output, the observers, the closing hook."""
    global _FD
    _observe_unittest()
    _observe_compilation()
    _BASE_TRACERS.update(key for _, key, _ in _tracers())
    _BASE_TRACERS.update(_frame_tracers())
    _BASE_FINDERS.extend(f for _, f in _finders())
    _BASE_ROWS.extend(_identity_table())
    _BASE_MODULES.update(sys.modules)
    try:
        _FD = _dup(1)
    except OSError:
        _FD = None
    atexit.register(_closing)


def _private():
    """The witness's functions, re-homed in namespaces of their own (one per module of
    the package, copies of the modules' globals) whose builtins are a copy taken now:
    replacing `proofgate_witness._write`, a function of a module beside it or
    `builtins.isinstance` later changes nothing the witness runs."""
    frozen = dict(_vars(builtins))
    ours = [__name__] + [m for m in _list(sys.modules) if m.startswith(__name__ + ".")]
    spaces = {}
    for name in ours:
        space = dict(_vars(sys.modules[name])) if name != __name__ else dict(globals())
        space["__builtins__"] = frozen
        spaces[name] = space
    for space in spaces.values():
        for key, value in _list(space.items()):
            if _isinstance(value, _FunctionType) and value.__module__ in spaces:
                home = spaces[value.__module__]
                copy = _FunctionType(
                    value.__code__, home, value.__name__, value.__defaults__, value.__closure__
                )
                copy.__kwdefaults__ = value.__kwdefaults__
                copy.__qualname__ = value.__qualname__
                copy.__doc__ = value.__doc__
                copy.__dict__.update(value.__dict__)  # pytest's hookimpl marks
                space[key] = copy
    return spaces[__name__]


def _install(module_globals):
    """Leave the module only its hooks (the re-homed ones) and its marker."""
    g = _private()
    keep = {"__name__", "__doc__", "__file__", "__spec__", "__loader__", "__package__"}
    keep |= {"__path__", "__builtins__", "__cached__", "MARKER", "VERSION"}
    for name in _list(module_globals):
        if name not in keep:
            del module_globals[name]
    module_globals["pytest_configure"] = g["pytest_configure"]
    module_globals["pytest_load_initial_conftests"] = g["pytest_load_initial_conftests"]
    module_globals["pytest_collection_modifyitems"] = g["_shard_modifyitems"]
    module_globals["pytest_sessionfinish"] = g["_shard_sessionfinish"]
    module_globals["pytest_ignore_collect"] = g["_shard_ignore_collect"]
    g["_start"]()


_install(globals())
