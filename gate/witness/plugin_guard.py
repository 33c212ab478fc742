# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+: no annotations, like its pytest)
"""The witness's tripwires (SPEC §3.2; a part of the witness package, see `plugin.py`):
the identities of pytest's, pluggy's, unittest's and the builtins' objects, the trace
functions and import hooks, taken when the witness is imported (before the tree's code
runs) and compared per test. Imports nothing of proofgate."""

import builtins
import operator
import os
import sys
import threading
import types

_WATCHED = ("_pytest", "pytest", "pluggy", "unittest", "proofgate_witness")
_getitem = operator.getitem
_is = operator.is_
_itemgetter = operator.itemgetter
_function_of = operator.attrgetter("function")
_map = map
_all = all
_id = id
_len = len
_str = str
_list = list
_isinstance = isinstance
_getattr = getattr
_vars = vars
_type = type
_abspath = os.path.abspath
_gettrace = sys.gettrace
_getprofile = sys.getprofile
_getframe = sys._getframe
_FunctionType = types.FunctionType
_ModuleType = types.ModuleType


def _describe(obj):
    """A stable name of a hook, tracer or finder: where its code is defined."""
    func = _getattr(obj, "__func__", obj)
    module = _getattr(func, "__module__", None)
    qual = _getattr(func, "__qualname__", None)
    if _isinstance(module, _str) and _isinstance(qual, _str):
        return module + "." + qual
    t = _type(obj)
    return _str(_getattr(t, "__module__", "?")) + "." + _str(_getattr(t, "__qualname__", "?"))


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


def _from_pytest(value):
    func = _getattr(value, "fget", None) or _getattr(value, "__func__", None) or value
    module = _str(_getattr(func, "__module__", "") or "")
    return module == "_pytest" or module.startswith("_pytest.")


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
