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

import ast
import atexit
import builtins
import fnmatch
import hashlib
import json
import operator
import os
import sys
import threading
import types
import unittest  # noqa: F401 - loaded now, so its objects' identities are taken now

import pytest

MARKER = "##[proofgate-witness] "
VERSION = 1
_WATCHED = ("_pytest", "pytest", "pluggy", "unittest", "proofgate_witness")
_MAX_LISTED = 50

# --- bound at import, before any of the tree's code has run ---------------------------

_write = os.write
_dup = os.dup
_getpid = os.getpid
_abspath = os.path.abspath
_basename = os.path.basename
_open = open
_sha1 = hashlib.sha1
_sha256 = hashlib.sha256
_gettrace = sys.gettrace
_getprofile = sys.getprofile
_getframe = sys._getframe
_is = operator.is_
_getitem = operator.getitem
_function_of = operator.attrgetter("function")
_itemgetter = operator.itemgetter
_isinstance = isinstance
_getattr = getattr
_id = id
_len = len
_str = str
_int = int
_repr = repr
_sorted = sorted
_list = list
_all = all
_map = map
_vars = vars
_type = type
_parse = ast.parse
_walk = ast.walk
_FunctionDef = (ast.FunctionDef, ast.AsyncFunctionDef)
_compile = compile
_normpath = os.path.normpath
_expanduser = os.path.expanduser
_hookimpl = pytest.hookimpl
_CodeType = types.CodeType
_FunctionType = types.FunctionType
_ModuleType = types.ModuleType
try:
    from json.encoder import c_encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - CPython has the C encoder
    from json.encoder import py_encode_basestring_ascii as _quote
if _quote is None:  # pragma: no cover
    from json.encoder import py_encode_basestring_ascii as _quote
_loads = json.loads  # the shard's list (SPEC §3.3), read once at import
del json


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


def _describe(obj):
    """A stable name of a hook, tracer or finder: where its code is defined."""
    func = _getattr(obj, "__func__", obj)
    module = _getattr(func, "__module__", None)
    qual = _getattr(func, "__qualname__", None)
    if _isinstance(module, _str) and _isinstance(qual, _str):
        return module + "." + qual
    t = _type(obj)
    return _str(_getattr(t, "__module__", "?")) + "." + _str(_getattr(t, "__qualname__", "?"))


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


# --- what pytest compiled ---------------------------------------------------------------
# The code of every test module pytest rewrote, as pytest compiled it at import: a test
# function's code must be one of its code objects.

_COMPILED = {}  # filename -> module code object


def _observe_compilation():
    try:
        import _pytest.assertion.rewrite as rewrite
    except ImportError:  # pragma: no cover
        return
    for name in ("_rewrite_test", "_read_pyc"):  # pytest compiles, or reads its own cache
        original = _vars(rewrite).get(name)
        if _isinstance(original, _FunctionType):
            setattr(rewrite, name, _recording(original))


def _recording(original):
    def observer(*args, **kwargs):
        result = original(*args, **kwargs)
        try:
            code = result[-1] if _isinstance(result, tuple) else result
            if _isinstance(code, _CodeType):
                _COMPILED[code.co_filename] = code
        except Exception:  # noqa: S110 - never change what pytest does
            pass
        return result

    observer.__module__ = original.__module__
    observer.__name__ = original.__name__
    observer.__qualname__ = original.__qualname__
    observer.__wrapped__ = original
    return observer


# --- identities: what was loaded when the witness was --------------------------------

_METHODS = (types.FunctionType, classmethod, staticmethod, property)


def _watched(module_name):
    name = _str(module_name or "")
    return any(name == w or name.startswith(w + ".") for w in _WATCHED)


def _identity_table(skip=()):
    """Every function and class of the watched modules loaded now (and the builtins),
    and every method of those classes: [(label, mapping, keys, values, getter)], one row
    per module or class, so a check is one C-level lookup and comparison per row."""
    rows = []
    seen = set()

    def row(label, mapping, wanted, owner):
        keys = tuple(wanted)
        if not keys or _id(owner) in seen:
            return
        seen.add(_id(owner))
        if _len(keys) == 1:
            keys = keys * 2  # itemgetter of one key returns the value, not a tuple
        rows.append((label, mapping, keys, tuple(mapping[k] for k in keys), _itemgetter(*keys)))

    for name, module in _list(sys.modules.items()):
        if name in skip or not _isinstance(module, _ModuleType) or not _watched(name):
            continue
        d = _vars(module)
        wanted = []
        for attr, value in _list(d.items()):
            if not _watched(_getattr(value, "__module__", "")):
                continue
            if _isinstance(value, (_FunctionType, _type)):
                wanted.append(attr)
            if _isinstance(value, _type):
                owner = value.__module__ + "." + value.__qualname__
                methods = [m for m, impl in _vars(value).items() if _isinstance(impl, _METHODS)]
                row(owner, _vars(value), methods, value)
        row(name, d, wanted, module)
    b = _vars(builtins)
    kinds = (types.BuiltinFunctionType, _type)
    hot = [k for k in _HOT_BUILTINS if k in b]
    rows.append(("builtins", b, (*hot, *hot), (*(b[k] for k in hot),) * 2, None))
    row("builtins", b, [k for k, v in b.items() if _isinstance(v, kinds) and k not in hot], b)
    return rows


def _group(rows):
    """Rows flattened into one (labels, mappings, keys, values): a check of the group is
    one C-level pass of lookups and one of identity comparisons, whatever its size."""
    labels, maps, keys, values = [], [], [], []
    for label, mapping, ks, vs, _ in rows:
        for k, v in zip(ks, vs):  # noqa: B905 - Python 3.7+
            labels.append(label)
            maps.append(mapping)
            keys.append(k)
            values.append(v)
    return (tuple(labels), tuple(maps), tuple(keys), tuple(values))


def _changed(group):
    """Dotted names of the group's objects that are not what they were."""
    labels, maps, keys, values = group
    try:
        now = tuple(_map(_getitem, maps, keys))
    except Exception:  # noqa: BLE001 - a key deleted: find which below
        now = None
    if now is not None and _all(_map(_is, now, values)):
        return []
    out = []
    seen = set()
    for label, mapping, k, v in zip(labels, maps, keys, values):  # noqa: B905
        name = label + "." + k
        now = mapping.get(k, None)
        if now is not v and name not in seen:
            seen.add(name)
            out.append(name + " (" + _replaced_by(now) + ")")
    return out


def _tracer_key(t):
    if t is None:
        return None
    owner = _getattr(t, "__self__", None)
    func = _getattr(t, "__func__", None)
    if owner is not None and func is not None:  # a bound method: the same tracer object
        return (_id(owner), _id(func))
    return (_id(t),)


def _tracers():
    """(what, key, object) of every trace and profile function set now."""
    out = []
    for what, t in (("sys.settrace", _gettrace()), ("sys.setprofile", _getprofile())):
        if t is not None:
            out.append((what, _tracer_key(t), t))
    for what, attr in (
        ("threading.settrace", "_trace_hook"),
        ("threading.setprofile", "_profile_hook"),
    ):
        t = _getattr(threading, attr, None)
        if t is not None:
            out.append((what, _tracer_key(t), t))
    monitoring = _getattr(sys, "monitoring", None)
    if monitoring is not None:
        for tool in range(6):
            name = monitoring.get_tool(tool)
            if name is not None:
                out.append(("sys.monitoring", ("tool", tool, name), name))
    return out


def _finders():
    """Finders ahead of the standard path finder, and hooks ahead of FileFinder's."""
    out = []
    for f in _list(sys.meta_path):
        if _getattr(f, "__name__", "") == "PathFinder" and _getattr(f, "__module__", "").startswith(
            ("_frozen_importlib", "importlib")
        ):
            break
        out.append(("sys.meta_path", f))
    for h in _list(sys.path_hooks):
        if "FileFinder" in _getattr(h, "__qualname__", ""):
            break
        out.append(("sys.path_hooks", h))
    return out


def _frame_tracers():
    out = set()
    frame = _getframe(0)
    while frame is not None:
        if frame.f_trace is not None:
            out.add(_tracer_key(frame.f_trace))
        frame = frame.f_back
    return out


_BASE_TRACERS = set()
_BASE_FINDERS = []  # kept alive: identities stay meaningful
_BASE_ROWS = []
_BASE_MODULES = set()
_REBASED = []
_FD = None


def _from_pytest(value):
    func = _getattr(value, "fget", None) or _getattr(value, "__func__", None) or value
    module = _str(_getattr(func, "__module__", "") or "")
    return module == "_pytest" or module.startswith("_pytest.")


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


# Objects on the way from a test to its report, checked before every test; the rest a
# share at a time (every object at least every `_SHARES` tests), and all of them after
# collection and at the end.
_HOT = frozenset(
    {
        "_pytest.runner",
        "_pytest.runner.CallInfo",
        "_pytest.reports.BaseReport",
        "_pytest.reports.TestReport",
        "_pytest.python.Function",
        "_pytest.unittest.TestCaseFunction",
        "_pytest.junitxml._NodeReporter",
        "_pytest.skipping",
        "pluggy._callers",
        "pluggy._hooks.HookCaller",
        "pluggy._hooks._HookCaller",
        "pluggy._hooks.HookImpl",
        "pluggy._result.Result",
        "pluggy._result._Result",
    }
)
_SHARES = 32
# the builtins the code under test would replace to lie (a failed `assert` raises the
# AssertionError it finds in builtins); the others are checked a share at a time
_HOT_BUILTINS = (
    "AssertionError",
    "BaseException",
    "Exception",
    "__import__",
    "__build_class__",
    "compile",
    "exec",
    "getattr",
    "isinstance",
    "issubclass",
    "open",
    "print",
    "super",
    "type",
)

# Hooks on the way from a test to its report (and the report to the JUnit file).
_JUDGING_HOOKS = (
    "pytest_runtest_",
    "pytest_pyfunc_call",
    "pytest_report_",
    "pytest_terminal_summary",
    "pytest_sessionfinish",
    "pytest_exception_interact",
)


def _make_guard(flag):
    """The per-check tripwires, as closures over what was bound at import.

    `flag(kind, detail)` records a finding. Returns (check, set_baseline): `check(when)`
    runs every tripwire; `set_baseline()` takes the identities to compare with (called
    once, when the witness is configured).
    """
    state = {"hot": _group([]), "cold": [_group([])] * _SHARES, "turn": 0}
    state.update(hooks=None, pm=None, hookexec=None)
    base_tracers = _BASE_TRACERS
    base_finders = _BASE_FINDERS

    def set_baseline(pm):
        # the identities taken at import, plus modules pytest loaded since (its own)
        known = {row[0] for row in _BASE_ROWS}
        later = _identity_table(skip=_BASE_MODULES)
        rows = _BASE_ROWS + [r for r in later if r[0] not in known and r[0] != "builtins"]
        hot = [
            r
            for r in rows
            if r[0] in _HOT and r[4] is not None or r[0] == "builtins" and r[4] is None
        ]
        cold = [r for r in rows if not any(r is h for h in hot)]
        state["hot"] = _group(hot)
        state["cold"] = [_group(cold[i::_SHARES]) for i in range(_SHARES)]
        state["pm"] = pm
        state["hookexec"] = _getattr(pm, "_inner_hookexec", None)

    def freeze_hooks():
        """The implementations of every hook, once collection is done."""
        pm = state["pm"]
        hooks = {}
        for name, caller in _list(_vars(pm.hook).items()):
            if not name.startswith(_JUDGING_HOOKS):
                continue
            impls = _getattr(caller, "get_hookimpls", None)
            if impls is None:
                continue
            got = tuple(impls())
            hooks[name] = (caller, got, tuple(i.function for i in got))
        state["hooks"] = hooks

    def check(full):
        """Every tripwire; the identities all (`full`), or those on the way from a test
        to its report and a rotating share of the rest (each every `_SHARES` tests), and
        the hooks and the stack's frames every fourth test."""
        if full:
            groups = [state["hot"], *state["cold"]]
        else:
            turn = state["turn"] = (state["turn"] + 1) % _SHARES
            groups = [state["hot"], state["cold"][turn]]
        deep = full or turn % 4 == 0
        for group in groups:
            for name in _changed(group):
                flag("pytest-patched", name)
        pm = state["pm"]
        if pm is not None and _getattr(pm, "_inner_hookexec", None) is not state["hookexec"]:
            flag("pytest-patched", "the plugin manager's hook caller")
        hooks = state["hooks"]
        if hooks is not None and deep:
            current = _vars(pm.hook)
            for name, (caller, impls, functions) in hooks.items():
                now = current.get(name)
                if now is not caller:
                    flag("pytest-patched", "hook " + name + " (its caller replaced)")
                    continue
                got = caller.get_hookimpls()
                same = _len(got) == _len(impls) and _all(_map(_is, got, impls))
                if not (same and _all(_map(_is, _map(_function_of, got), functions))):
                    flag("pytest-patched", "hook " + name + " (its implementations changed)")
        for what, key, t in _tracers():
            if key not in base_tracers:
                flag("trace-function", what + ": " + _describe(t))
        frame = _getframe(0) if deep else None
        while frame is not None:
            t = frame.f_trace
            if t is not None and _tracer_key(t) not in base_tracers:
                flag("trace-function", "f_trace of a frame: " + _describe(t))
            frame = frame.f_back
        for what, f in _finders():
            if not any(f is b for b in base_finders):
                flag("import-hook", what + ": " + _describe(f))

    return check, set_baseline, freeze_hooks


def _make_code_check(flag, rootdir, config):
    """`check(item)`: the test function pytest runs is the code its file compiles to."""
    index = {}  # filename -> {(name, firstlineno): code}, or None (not readable)
    decorated = {}  # filename -> names of functions defined with decorators
    seen = set()

    def codes_of(filename, module):
        if filename in index:
            return index[filename]
        code = _COMPILED.get(filename)
        if code is None:  # not rewritten by pytest (or not through the hook): compile it
            code = _compile_file(filename, "@py_builtins" in _vars(module), config)
        found = None
        if code is not None:
            found = {}
            stack = [code]
            while stack:
                c = stack.pop()
                found[(c.co_name, c.co_firstlineno)] = c
                stack.extend(k for k in c.co_consts if _isinstance(k, _CodeType))
        index[filename] = found
        return found

    def check(item):
        module = _getattr(item, "module", None)
        fn = _getattr(item, "obj", None)
        path = _str(_getattr(item, "path", None) or _getattr(item, "fspath", ""))
        if module is None or fn is None or not path:
            return
        func = _getattr(fn, "__func__", fn)
        key = (_id(func), path)
        if key in seen:
            return
        seen.add(key)
        name = _getattr(item, "originalname", None) or item.name.split("[")[0]
        where = _relative(path, rootdir) + "::" + name
        code = _getattr(func, "__code__", None)
        codes = codes_of(path, module)
        if codes is None:
            return
        if not _isinstance(code, _CodeType):
            flag("test-code-replaced", where + " is not a function (" + _describe(fn) + ")")
            return
        if code.co_filename != path:
            if path not in decorated:  # rare: read the file's decorators only now
                decorated[path] = _decorated_names(path)
            if name not in decorated[path]:
                flag(
                    "test-code-replaced",
                    where + " runs " + _relative(code.co_filename, rootdir) + ":" + code.co_name,
                )
            return
        mine = codes.get((code.co_name, code.co_firstlineno))
        if mine is None or mine != code:
            flag(
                "test-code-replaced",
                where + " is not what " + _relative(path, rootdir) + " compiles to",
            )

    return check


def _compile_file(filename, rewritten, config):
    try:
        with _open(filename, "rb") as f:
            source = f.read()
        tree = _parse(source, filename=filename)
        if rewritten:
            from _pytest.assertion.rewrite import rewrite_asserts

            rewrite_asserts(tree, source, filename, config)
        return _compile(tree, filename, "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - unreadable: not judged here
        return None


def _decorated_names(filename):
    """Functions of a file defined with a decorator other than pytest's marks and
    fixtures (which return the function itself): what they run may be a wrapper."""
    try:
        with _open(filename, "rb") as f:
            tree = _parse(f.read(), filename=filename)
    except Exception:  # noqa: BLE001
        return set()
    out = set()
    for node in _walk(tree):
        if _isinstance(node, _FunctionDef):
            for dec in node.decorator_list:
                if not _is_mark(dec):
                    out.add(node.name)
                    break
    return out


def _is_mark(node):
    """`@pytest.mark.x(...)`, `@mark.x`: a decorator that returns the function itself."""
    while _isinstance(node, (ast.Call, ast.Attribute)):
        node = node.func if _isinstance(node, ast.Call) else node.value
        if _isinstance(node, ast.Attribute) and node.attr == "mark":
            return True
    return _isinstance(node, ast.Name) and node.id == "mark"


def _relative(path, rootdir):
    prefix = rootdir.rstrip("/") + "/"
    return path[_len(prefix) :] if path.startswith(prefix) else path


def _blob_id(path):
    """The git blob id of a file's content (what proofgate compares with the tree)."""
    try:
        with _open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return _sha1(b"blob %d\0" % _len(data) + data).hexdigest()  # noqa: S324 - git's id


# SPEC §3.2: what the base's tests depend on comes from the base. The collected tests'
# files (a test's file is the file the run itself reports) and the workspace files test
# code opened for reading (data such as `calc/data/cases.json`), each bounded; proofgate
# keeps the reads whose reader is a test file of the check (gate/differential/__init__.py).
_WORKSPACE = "/workspace/"
_MAX_TEST_FILES = 20000
_MAX_READS = 2000
_MAX_DURATIONS = 5000  # top-level tests timed (the rest count as the mean when balancing)
_SOURCE_DISPLAY = ("/linecache.py",)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _test_files(items):
    """The files the collected tests are defined in (absolute paths), bounded."""
    out = set()
    for item in items:
        path = _getattr(item, "path", None) or _getattr(item, "fspath", None)
        if path is not None:
            out.add(_str(path))
            if _len(out) >= _MAX_TEST_FILES:
                break
    return _sorted(out)


def _reading(mode, flags):
    if _isinstance(mode, str):
        return not any(c in mode for c in "wax+")
    return _isinstance(flags, int) and not flags & _WRITE_FLAGS


def _make_reads():
    """An audit hook (Python 3.8+) on `open`: for a read of a workspace file, the nearest
    workspace frame that asked for it (the reader). Opens made by the import system on
    behalf of a module (its source, through the frozen importlib) are imports, and source
    lines read for a traceback or `inspect` (through `linecache`) are displays: neither
    is recorded. Returns a function giving what was recorded."""
    seen = {}  # (reader, path) -> None, in order
    dropped = [0]

    def hook(event, args):
        if event != "open" or not args:
            return
        path = args[0]
        if not _isinstance(path, str) or not path.startswith(_WORKSPACE):
            return
        if not _reading(args[1] if _len(args) > 1 else None, args[2] if _len(args) > 2 else None):
            return
        try:
            frame = _getframe(1)
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
        if reader is None or (reader, path) in seen:
            return
        if _len(seen) >= _MAX_READS:
            dropped[0] += 1
            return
        seen[(reader, path)] = None

    if _getattr(sys, "addaudithook", None) is not None:
        sys.addaudithook(hook)

    def to_json():
        return {"reads": [[r, p] for r, p in seen], "dropped": dropped[0]}

    return to_json


def _replaced_by(value):
    """Where a replaced attribute's new value is defined: its code's file, or 'removed'."""
    if value is None:
        return "removed"
    func = _getattr(value, "__func__", None) or _getattr(value, "fget", None) or value
    code = _getattr(func, "__code__", None)
    if code is not None:
        return "now defined in " + _abspath(code.co_filename)
    module = sys.modules.get(_getattr(value, "__module__", "") or "")
    path = _getattr(module, "__file__", None)
    return "now defined in " + (_abspath(path) if _isinstance(path, str) else "no file")


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


# --- SPEC §3.3: a shard runs only its share of the tests ----------------------------------
#
# proofgate writes `proofgate_shard.json` beside this file (its read-only volume) when the
# check is split over shards: {"index": I, "count": N, "assigned": {key: shard},
# "by_unit": [path...]}, paths relative to /workspace; a key is a file, or `file::Name` (a
# top-level test class or function) for a file in `by_unit`. Read at import, before any
# conftest. Items of other shards are deselected, so the configured test command is
# unchanged; a key the split does not list goes by its SHA-256 (gate.model.hashed_shard).


def _load_shard():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proofgate_shard.json")
    try:
        with open(path, "rb") as f:
            data = _loads(f.read().decode("utf-8"))
        by_unit = frozenset(str(p) for p in data.get("by_unit") or ())
        return int(data["index"]), int(data["count"]), dict(data["assigned"]), by_unit
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


_SHARD = _load_shard()


def _shard_of(path, count, assigned):
    """`path`: a file, or `file::Name` for a unit of a file the split divides by unit."""
    if path in assigned:
        return int(assigned[path])
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def _unit(item):
    """The item's top-level test class or function in its module (no parametrize id)."""
    chain = item.listchain()
    for i, node in enumerate(chain):
        if isinstance(node, pytest.Module) and i + 1 < len(chain):
            return chain[i + 1].name.split("[", 1)[0]
    return None


def _tree_path(item):
    raw = str(getattr(item, "path", None) or getattr(item, "fspath", "") or "")
    path = os.path.normpath(raw) if raw else item.nodeid.split("::", 1)[0]
    prefix = "/workspace/"
    return path[len(prefix) :] if path.startswith(prefix) else path


# An empty share (SPEC §3.3): every test pytest would collect is another shard's (their
# files are not collected here, their other tests deselected: a file moved or renamed
# into another shard's keys, more shards than files, zero recorded durations). pytest
# would end with status 5 (no tests collected), which the one-job proof never sees; the
# session ends 0 instead, with a JUnit report of no test, and the aggregate judges the
# union. A session that collected nothing at all keeps its 5: the one-job proof of the
# same tree has it too.
_EMPTY_SHARE = []  # holds True once this shard's share turned out empty
_IGNORED = []  # files of the tree whose every test is another shard's: never collected


def _another_shards_file(path, config):
    """True for a test module of the tree (a file of the split, or one pytest's
    `python_files` select) whose every test is another shard's: pytest does not collect
    it at all (its tests would only be deselected), so a shard pays for collecting its own
    share. Never a directory, a package's `__init__.py`, a `conftest.py` (what they set
    up is every shard's), another module (a doctest's goes by deselection), nor a file the
    split divides by unit. None otherwise, so pytest's own rules (`--ignore`,
    `collect_ignore`) decide."""
    if _SHARD is None:
        return None
    index, count, assigned, by_unit = _SHARD
    raw = os.path.normpath(str(path))
    if not raw.startswith(_WORKSPACE) or not raw.endswith(".py") or not os.path.isfile(raw):
        return None
    rel = raw[len(_WORKSPACE) :]
    name = os.path.basename(rel)
    if name in ("__init__.py", "conftest.py") or rel in by_unit:
        return None
    if rel not in assigned:
        try:
            patterns = [str(p) for p in config.getini("python_files") or ()]
        except (ValueError, TypeError):
            return None
        # as pytest matches them (and proofgate's split, gate/proof/shard.py `collected`):
        # a pattern without `/` the file's name, one with `/` the end of its path
        if not any(
            fnmatch.fnmatchcase(name, p) if "/" not in p else fnmatch.fnmatchcase(raw, "*/" + p)
            for p in patterns
        ):
            return None
    if _shard_of(rel, count, assigned) == index:
        return None
    _IGNORED.append(rel)
    return True


if int(pytest.__version__.split(".", 1)[0]) >= 7:

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(collection_path, config):
        return _another_shards_file(collection_path, config)

else:

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(path, config):
        return _another_shards_file(path, config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    if _SHARD is None:
        return
    index, count, assigned, by_unit = _SHARD
    mine, others = [], []
    for item in items:
        path = _tree_path(item)
        unit = _unit(item) if path in by_unit else None
        shard = _shard_of(path if unit is None else path + "::" + unit, count, assigned)
        (mine if shard == index else others).append(item)
    if others:
        items[:] = mine
        config.hook.pytest_deselected(items=others)
    if (others or _IGNORED) and not mine:
        _EMPTY_SHARE.append(True)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    if _SHARD is None:  # a one-job run's "no tests collected" is never rewritten
        return
    if _EMPTY_SHARE and _int(_getattr(session, "exitstatus", 0) or 0) == 5:
        session.exitstatus = 0


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
    """This module's functions, re-homed in a namespace of their own whose builtins are
    a copy taken now: replacing `proofgate_witness._write` or `builtins.isinstance`
    later changes nothing the witness runs."""
    g = dict(globals())
    g["__builtins__"] = dict(_vars(builtins))
    for name, value in _list(g.items()):
        if _isinstance(value, _FunctionType) and value.__module__ == __name__:
            copy = _FunctionType(
                value.__code__, g, value.__name__, value.__defaults__, value.__closure__
            )
            copy.__kwdefaults__ = value.__kwdefaults__
            copy.__qualname__ = value.__qualname__
            copy.__doc__ = value.__doc__
            copy.__dict__.update(value.__dict__)  # pytest's hookimpl marks
            g[name] = copy
    return g


def _install(module_globals):
    """Leave the module only its hooks (the re-homed ones) and its marker."""
    g = _private()
    keep = {"__name__", "__doc__", "__file__", "__spec__", "__loader__", "__package__"}
    keep |= {"__builtins__", "__cached__", "MARKER", "VERSION"}
    for name in _list(module_globals):
        if name not in keep:
            del module_globals[name]
    module_globals["pytest_configure"] = g["pytest_configure"]
    module_globals["pytest_load_initial_conftests"] = g["pytest_load_initial_conftests"]
    module_globals["pytest_collection_modifyitems"] = g["pytest_collection_modifyitems"]
    module_globals["pytest_sessionfinish"] = g["pytest_sessionfinish"]
    module_globals["pytest_ignore_collect"] = g["pytest_ignore_collect"]
    g["_start"]()


_install(globals())
