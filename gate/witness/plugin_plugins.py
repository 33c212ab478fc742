# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+: no annotations, like its pytest)
"""The pytest plugins a session loaded, and what each one's hooks do (SPEC §3.2; a part
of the witness package, see `plugin.py`). Imports nothing of proofgate.

The trusted run's plugins must be the base run's: gate/witness/judge.py compares this list
of the two runs. A plugin is its registered name, the file that defines it and, per hook
it implements, a digest of the implementation's code (its bytecode, names and constants,
the line numbers left out: an edit elsewhere in the file does not change it). So the
project's own plugin, the same name on both sides, that gains or changes a hook is seen,
and a plugin that an entry point, a `-p` option or `PYTEST_PLUGINS` loaded in one run
and not in the other.
"""

import hashlib
import os
import types

_getattr = getattr
_isinstance = isinstance
_str = str
_sorted = sorted
_CodeType = types.CodeType
_abspath = os.path.abspath
_MAX_PLUGINS = 200
_OWN = ("_pytest.", "pluggy.")
_HERE = os.path.dirname(os.path.abspath(__file__)) + "/"
_TREE = "/workspace/"


def _code_digest(code, h):
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for const in code.co_consts:
        if _isinstance(const, _CodeType):
            _code_digest(const, h)
        else:
            h.update(repr(const).encode("utf-8", "backslashreplace"))


def _impl_digest(function):
    func = _getattr(function, "__func__", function)
    code = _getattr(func, "__code__", None)
    h = hashlib.sha256()
    if _isinstance(code, _CodeType):
        _code_digest(code, h)
    else:
        h.update(repr(type(func)).encode())
    return h.hexdigest()[:16]


def _module_of(plugin):
    """The module that defines a plugin: itself, or its class's (or, for a class
    registered as a plugin, that class's)."""
    if _isinstance(plugin, types.ModuleType):
        return _str(_getattr(plugin, "__name__", "") or "")
    if _isinstance(plugin, type):
        return _str(_getattr(plugin, "__module__", "") or "")
    return _str(_getattr(type(plugin), "__module__", "") or "")


def _file_of(plugin, module):
    path = _getattr(plugin, "__file__", None)
    if not _isinstance(path, _str):
        import sys

        path = _getattr(sys.modules.get(module), "__file__", None)
    return _abspath(path) if _isinstance(path, _str) else ""


def _plugins(pm):
    """[[name, file, {hook: digest}]] of the registered plugins that are not pytest's,
    pluggy's (from outside the tree) or this witness's (from its own directory), sorted;
    bounded."""
    out = []
    for plugin in list(pm.get_plugins()):
        module = _module_of(plugin)
        path = _file_of(plugin, module)
        if path.startswith(_HERE) or (module.startswith(_OWN) and not path.startswith(_TREE)):
            continue
        hooks = {}
        for caller in pm.get_hookcallers(plugin) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    hooks[caller.name] = _impl_digest(impl.function)
        out.append([_str(pm.get_name(plugin) or ""), path, hooks])
        if len(out) >= _MAX_PLUGINS:
            break
    return _sorted(out, key=lambda row: (row[0], row[1]))


# SPEC §3.2: in the trusted run the code under test is the tree's. A module whose
# top-level package or module the tree has at an import root (`/workspace`, `src/`, or a
# `/workspace` entry of sys.path), imported from outside the tree, is listed: unless its
# file is a byte-for-byte copy of the tree's (a non-editable install of the same code),
# the tests did not run the tree's code.
_MAX_FOREIGN = 50


def _sha256_of(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _tree_roots():
    import sys

    roots = [_TREE.rstrip("/"), _TREE + "src"]
    roots += [p for p in sys.path if isinstance(p, str) and p.startswith(_TREE)]
    return [r for r in dict.fromkeys(os.path.normpath(r) for r in roots) if os.path.isdir(r)]


def _foreign():
    """[[module, file]] of modules of the tree's packages imported from outside it."""
    import sys

    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    roots = _tree_roots()
    tops = {}
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            full = os.path.join(root, name)
            if name.endswith(".py") and name != "conftest.py":
                tops.setdefault(name[:-3], root)
            elif os.path.isfile(os.path.join(full, "__init__.py")):
                tops.setdefault(name, root)
    out = []
    for name, module in list(sys.modules.items()):
        top = name.split(".", 1)[0]
        if top not in tops or top in stdlib or top.startswith(("_pytest", "pytest", "proofgate")):
            continue
        path = _getattr(module, "__file__", None)
        if not _isinstance(path, _str) or _abspath(path).startswith(_TREE):
            continue
        rel = name.replace(".", "/")
        base = os.path.basename(path)
        mine = os.path.join(tops[top], rel, base) if base == "__init__.py" else None
        mine = mine or os.path.join(tops[top], rel + os.path.splitext(path)[1])
        if _sha256_of(mine) is not None and _sha256_of(mine) == _sha256_of(path):
            continue  # a copy of the tree's own file: the tree's code
        out.append([_str(name), _abspath(path)])
        if len(out) >= _MAX_FOREIGN:
            break
    return _sorted(out)
