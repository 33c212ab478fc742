# mypy: ignore-errors
# (runs in the project's interpreter, Python 3.7+: no annotations, like its pytest)
"""The witness's test-code check (SPEC §3.2; a part of the witness package, see
`plugin.py`): the test function pytest runs is the code its file compiles to. Imports
nothing of proofgate."""

import ast
import types

from ._guard import _describe

_COMPILED = {}  # filename -> module code object
_getattr = getattr
_isinstance = isinstance
_id = id
_len = len
_str = str
_open = open
_parse = ast.parse
_walk = ast.walk
_compile = compile
_FunctionDef = (ast.FunctionDef, ast.AsyncFunctionDef)
_CodeType = types.CodeType
_FunctionType = types.FunctionType
_vars = vars


# --- what pytest compiled ---------------------------------------------------------------
# The code of every test module pytest rewrote, as pytest compiled it at import: a test
# function's code must be one of its code objects.


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
