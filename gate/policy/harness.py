"""Non-test code that introspects or patches its test harness (issue 27). Pure.

The code under test runs inside pytest's process, so it can lie about that process:
replace `unittest.TestCase.assertEqual`, patch `_pytest.python.Function.runtest`, set a
trace function that rewraps test functions, insert an import hook ahead of pytest's
assertion rewriter, find pytest's plugin manager with `gc.get_objects()`, end the
process with `os._exit` from an `atexit` hook, or simply behave correctly only when
`"pytest" in sys.modules`. The witness sees most of these while the tests run; this rule
sees them in the change itself, before any of its code runs, and is the only defence
against the last one (SPEC §3.2, docs/security.md "In-process tampering").

Read with `ast` from the proven tree's copy of each changed non-test Python file.
Spelling does not matter: imports are resolved (`import unittest as u`, `from _pytest
import python`), names bound to a harness object are followed (`TC = u.TestCase`, then
`TC.assertEqual = ...`), and so are `getattr`/`setattr`/`delattr`, `vars(x)[...]`,
`x.__dict__[...]`, `__import__`, `importlib.import_module`, `sys.modules[...]`,
`mock.patch(...)` / `mock.patch.object(...)`, with names built from string literals
(`"set" + "trace"`, f-strings without fields, `"".join([...])`). A name computed from
data at run time is not seen here (the witness covers what it does).

A *site* is what a file does, by kind (e.g. `replaces unittest.TestCase.assertEqual`,
`uses sys.settrace`). The rule reports the sites on lines the patch adds whose kind the
file does more often than the base's copy did: a project whose own base code already
does it in that file (a pytest plugin reading `_pytest`, a debugger setting a trace
function) is not a new finding when the change touches that code.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

from gate.policy.blast import statements_of
from gate.policy.context import Context, RawFinding, as_text, basename, text_diffs
from gate.policy.paths import is_test_path
from gate.policy.skips import parse_source

__all__ = [
    "HarnessSite",
    "check_harness_tampering",
    "harness_sites",
    "is_harness_code",
    "new_harness_sites",
]


# Harness packages: replacing anything of theirs, or reading their private parts, is a
# site. pytest's and pluggy's public API (`pytest.fixture`, `pluggy.HookimplMarker`) and
# unittest's (`unittest.TestCase`, `unittest.mock`) are ordinary to read.
_HARNESS = frozenset({"pytest", "pluggy", "unittest", "doctest"})
# Read at all: pytest's internals and proofgate's own witness.
_INTERNAL = frozenset({"_pytest", "proofgate_witness"})
# Replacing these is a site too: what the witness and the runner stand on.
_RUNTIME = frozenset({"os", "posix", "builtins", "hashlib", "json", "io", "atexit"})
# Any use of these names (called, read, stored or passed on).
_USES = frozenset(
    {
        "sys.settrace",
        "sys.setprofile",
        "sys.gettrace",
        "sys.getprofile",
        "sys.monitoring",
        "sys.meta_path",
        "sys.path_hooks",
        "sys.path_importer_cache",
        "threading.settrace",
        "threading.setprofile",
        "threading.settrace_all_threads",
        "threading.setprofile_all_threads",
        "threading._trace_hook",
        "threading._profile_hook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)
# Attributes that are harness introspection on any object (a frame, a function).
_ATTRS_ANY = frozenset({"f_trace", "f_trace_lines", "f_trace_opcodes", "cell_contents"})
_ATTRS_WRITTEN = frozenset({"__code__", "__closure__", "__globals__", "__defaults__"})
# Bare strings that name one of the above (a `getattr` whose object is not followed).
_NAMED = frozenset(
    {
        "settrace",
        "setprofile",
        "f_trace",
        "meta_path",
        "path_hooks",
        "get_referrers",
        "get_objects",
        "get_referents",
        "cell_contents",
    }
)
_WHO_RUNS = frozenset({"sys.modules", "sys.argv", "sys.orig_argv", "sys.executable"})
_HARNESS_WORD = re.compile(r"(?:^|[^A-Za-z0-9])(?:_?pytest|py\.test|unittest|pluggy|proofgate)")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_MODULES = _HARNESS | _INTERNAL | _RUNTIME | {"sys", "gc", "threading", "importlib"}
_IMPORTERS = frozenset(
    {"__import__", "builtins.__import__", "importlib.import_module", "importlib.__import__"}
)
_SETTERS = frozenset(
    {
        "setattr",
        "delattr",
        "builtins.setattr",
        "builtins.delattr",
        "object.__setattr__",
        "object.__delattr__",
        "type.__setattr__",
        "type.__delattr__",
    }
)
_MOCK_PATCH = frozenset({"unittest.mock.patch", "mock.patch"})


@dataclass(frozen=True, slots=True, order=True)
class HarnessSite:
    kind: str  # e.g. "replaces unittest.TestCase.assertEqual", "uses sys.settrace"
    line: int
    end: int


def _root(name: str) -> str:
    return name.split(".", 1)[0]


def _private_part(name: str) -> bool:
    return any(p.startswith("_") and not p.endswith("__") for p in name.split(".")[1:])


def _read_kind(name: str) -> str | None:
    """The kind of reading (or calling) an object by its canonical dotted name."""
    if name.startswith("py.test."):  # the old alias of pytest
        name = "pytest." + name.removeprefix("py.test.")
    root = _root(name)
    if root in _INTERNAL:
        return f"uses {name}"
    if root in _HARNESS and _private_part(name):
        return f"uses {name}"
    for use in _USES:
        if name == use or name.startswith(use + "."):
            return f"uses {use}"
    last = name.rsplit(".", 1)[-1]
    if last in _ATTRS_ANY:
        return f"uses .{last}"
    return None


def _write_kind(name: str) -> str | None:
    """The kind of replacing (assigning, deleting) an object by its dotted name."""
    root = _root(name)
    last = name.rsplit(".", 1)[-1]
    if ".__globals__." in name:  # fn.__globals__["x"] = ...: the function's module
        return "replaces .__globals__"
    if "." in name and (root in _HARNESS or root in _INTERNAL or root in _RUNTIME):
        return f"replaces {name}"
    if last in _ATTRS_WRITTEN or last in _ATTRS_ANY:
        return f"replaces .{last}"
    return _read_kind(name)


class _Reader:
    """One module's names, resolved: imports and names bound to dotted objects."""

    def __init__(self, binders: Sequence[ast.AST]) -> None:
        """`binders`: the module's imports and assignments in `ast.walk` order."""
        self.aliases: dict[str, str] = {}
        self.inner: set[int] = set()  # parts of a dotted chain already reported
        for node in binders:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        self.aliases[_root(a.name)] = _root(a.name)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        # `TC = unittest.TestCase`, `g = getattr(sys, "settrace")`: twice, for chains
        for _ in range(2):
            for node in binders:
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    name = self.dotted(node.value)
                    if name is None or ("." not in name and _root(name) not in _MODULES):
                        continue
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id not in self.aliases:
                            self.aliases[t.id] = name
                elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                    name = self.dotted(node.value)
                    if name is not None and "." in name:
                        self.aliases.setdefault(node.target.id, name)

    def dotted(self, node: ast.expr) -> str | None:
        """The canonical dotted name an expression denotes, or None."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        if isinstance(node, ast.Subscript):
            # vars(x)["a"], x.__dict__["a"], sys.modules["m"]
            key = fold(node.slice)
            if key is not None:
                owner = self._mapping_owner(node.value)
                if owner is not None:
                    return f"{owner}.{key}" if owner else key
            return None
        if isinstance(node, ast.Call):
            return self._call_result(node)
        return None

    def _mapping_owner(self, node: ast.expr) -> str | None:
        """What `node[...]` looks names up in: "" for sys.modules (the key is the whole
        name), the object for `vars(x)` and `x.__dict__`; None otherwise."""
        if isinstance(node, ast.Call) and node.args and self.dotted(node.func) == "vars":
            return self.dotted(node.args[0])
        name = self.dotted(node)
        if name == "sys.modules":
            return ""
        if name is not None and name.endswith(".__dict__"):
            return name.removesuffix(".__dict__")
        if name is not None and name.endswith(".__globals__"):  # a function's module
            return name
        return None

    def _call_result(self, node: ast.Call) -> str | None:
        func = self.dotted(node.func)
        args = node.args
        if func in ("getattr", "builtins.getattr") and len(args) >= 2:
            owner, attr = self.dotted(args[0]), fold(args[1])
            return f"{owner}.{attr}" if owner is not None and attr is not None else None
        if func in _IMPORTERS:
            return fold(args[0]) if args else None
        if func == "sys.modules.get" and args:
            return fold(args[0])
        if func is not None and func.endswith(".__getattribute__") and args:
            attr = fold(args[0])
            return f"{func.removesuffix('.__getattribute__')}.{attr}" if attr else None
        return func  # a call is seen through its callee: `sys._getframe(1).f_trace`

    def writes(self, node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
        """Dotted names a statement or call replaces."""
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute | ast.Subscript) and isinstance(
                    sub.ctx, ast.Store | ast.Del
                ):
                    name = self.dotted(sub)
                    if name is not None:
                        yield name, sub
        if isinstance(node, ast.Call):
            func = self.dotted(node.func)
            args = node.args
            if func is None:
                return
            if func in _SETTERS and len(args) >= 2:
                owner, attr = self.dotted(args[0]), fold(args[1])
                if owner is not None and attr is not None:
                    yield f"{owner}.{attr}", node
            elif func.endswith((".__setattr__", ".__delattr__")) and args:
                attr = fold(args[0])
                if attr is not None:
                    yield f"{func.rsplit('.', 1)[0]}.{attr}", node
            elif func in _MOCK_PATCH or func.endswith(".mock.patch") or func == "patch":
                target = fold(args[0]) if args else None
                if target is not None and _DOTTED.match(target):
                    yield target, node
            elif func.endswith("patch.object") and len(args) >= 2:
                owner, attr = self.dotted(args[0]), fold(args[1])
                if owner is not None and attr is not None:
                    yield f"{owner}.{attr}", node


def fold(node: ast.expr) -> str | None:
    """The value of a string built only from literals, or None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = fold(node.left), fold(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.FormattedValue) and node.format_spec is None:
        return fold(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = [fold(v) for v in node.values]
        return "".join(p for p in parts if p is not None) if None not in parts else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.List | ast.Tuple)
    ):
        sep = fold(node.func.value)
        parts = [fold(e) for e in node.args[0].elts]
        if sep is not None and None not in parts:
            return sep.join(p for p in parts if p is not None)
    return None


_BINDERS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.NamedExpr)


@dataclass(slots=True)
class _Module:
    """One parsed module as the rule reads it: its statements (with the except handlers
    and match cases between them) in `ast.walk` order, which is all that binds a name or
    is a docstring, so the expressions are walked once, by `_sites`, not once per use."""

    tree: ast.Module
    statements: list[ast.AST]
    reader: _Reader
    docs: set[int]

    @classmethod
    def of(
        cls, tree: ast.Module, source: bytes, statements: list[ast.AST] | None = None
    ) -> _Module:
        """`statements`: `statements_of(tree)` when the caller has them."""
        if statements is None:
            statements = statements_of(tree)
        # `:=` is the one binding inside an expression; only then is every node walked
        walked = ast.walk(tree) if b":=" in source else statements
        binders = [n for n in walked if isinstance(n, _BINDERS)]
        docs = {
            id(n.value)
            for n in statements
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        }
        return cls(tree, statements, _Reader(binders), docs)


def _string_kind(text: str) -> str | None:
    """A string literal that names pytest's internals or the witness, a `PYTEST_*`
    variable, or an attribute the rule looks for (a private name of pluggy or unittest
    in a string is documentation more often than not: `docs/conf.py`'s nitpick lists)."""
    if text.startswith("PYTEST_") and len(text) > len("PYTEST_"):
        return f"reads {text.split('=')[0]}"
    if text in _NAMED:
        return f"names {text}"
    if _DOTTED.match(text) and _root(text) in _INTERNAL:
        return _read_kind(text)
    return None


def _sites(m: _Module, within: list[ast.stmt] | None = None) -> Iterator[HarnessSite]:
    """Every site of the module, or (`within`) of those top-level statements only, where
    the pair os._exit/atexit.register is reported as soon as either is seen."""
    r, docs = m.reader, m.docs
    r.inner.clear()  # marks of one walk: a later walk of the same module starts afresh
    written: set[int] = set()  # nodes already reported as written
    atexit_lines: list[tuple[int, int]] = []
    exit_lines: list[tuple[int, int]] = []

    def site(kind: str, node: ast.AST) -> HarnessSite:
        line = getattr(node, "lineno", 0)
        return HarnessSite(kind, line, getattr(node, "end_lineno", None) or line)

    nodes = ast.walk(m.tree) if within is None else chain.from_iterable(map(ast.walk, within))
    for node in nodes:
        if isinstance(node, ast.stmt | ast.Call):
            for target, sub in r.writes(node):
                kind = _write_kind(target)
                if kind is not None:
                    written.update(id(n) for n in ast.walk(sub))
                    yield site(kind, sub)
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for imported in names:
                kind = _read_kind(imported)
                if kind is not None:
                    yield site(kind, node)
                    break
        elif isinstance(node, ast.Attribute | ast.Name | ast.Subscript | ast.Call):
            if id(node) in written:
                continue
            name = r.dotted(node)
            if name is None:
                continue
            if name == "atexit.register":
                atexit_lines.append((node.lineno, node.end_lineno or node.lineno))
            if name == "os._exit" or name == "posix._exit":
                exit_lines.append((node.lineno, node.end_lineno or node.lineno))
            # only the outermost expression of a dotted chain: `sys.settrace` once
            kind = _read_kind(name)
            if kind is not None and not _inner(node, r):
                yield site(kind, node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docs:
                continue
            kind = _string_kind(node.value)
            if kind is not None:
                yield site(kind, node)
        elif isinstance(node, ast.BinOp | ast.JoinedStr):
            text = fold(node)
            if text is not None and not any(
                isinstance(v, ast.Constant) and v.value == text for v in ast.walk(node)
            ):
                kind = _string_kind(text)
                if kind is not None:
                    yield site(kind, node)
        if isinstance(node, ast.Compare | ast.Subscript | ast.Call):
            kind = _who_runs(node, r)
            if kind is not None:
                yield site(kind, node)
    if within is not None and (atexit_lines or exit_lines):
        yield HarnessSite("uses os._exit or atexit.register", *(atexit_lines or exit_lines)[0])
    elif atexit_lines and exit_lines:
        for line, end in exit_lines:
            yield HarnessSite("uses os._exit in a module that registers atexit hooks", line, end)
        for line, end in atexit_lines:
            yield HarnessSite("registers atexit hooks in a module that uses os._exit", line, end)


def _inner(node: ast.expr, r: _Reader) -> bool:
    """Whether `node` is itself part of a longer dotted chain already reported (once, at
    the outermost expression: ast.walk visits outer nodes first)."""
    marks = r.inner
    if id(node) in marks:
        return True
    sub: ast.expr = node
    while True:
        if isinstance(sub, ast.Attribute | ast.Subscript):
            sub = sub.value
        elif isinstance(sub, ast.Call):
            sub = sub.func
        else:
            break
        marks.add(id(sub))
    return False


def _who_runs(node: ast.Compare | ast.Subscript | ast.Call, r: _Reader) -> str | None:
    """`"pytest" in sys.modules`, `sys.modules.get("_pytest")`, `"pytest" in sys.argv[0]`:
    code that asks whether a test harness is running it."""
    if isinstance(node, ast.Compare):
        parts: list[ast.expr] = [node.left, *node.comparators]
    elif isinstance(node, ast.Subscript):
        parts = [node.value, node.slice]
    else:
        parts = [node.func, *node.args]
    names = set()
    words = False
    for p in parts:
        text = fold(p)
        if text is not None:
            words = words or bool(_HARNESS_WORD.search(text))
            continue
        while isinstance(p, ast.Subscript):  # sys.argv[0]
            p = p.value
        name = r.dotted(p)
        if name is not None:
            for who in _WHO_RUNS:
                if name == who or name.startswith(who + "."):
                    names.add(who)
    if words and names:
        return f"asks whether a test harness runs it ({', '.join(sorted(names))})"
    return None


def harness_sites(source: bytes) -> list[HarnessSite] | None:
    """Every harness site of a Python source; None when it cannot be parsed."""
    tree = parse_source(source)
    return None if tree is None else sorted(set(_sites(_Module.of(tree, source))))


def _span(node: ast.stmt) -> tuple[int, int]:
    """The lines a top-level statement covers, its decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
    return first, node.end_lineno or node.lineno


def new_harness_sites(
    new: bytes,
    added: frozenset[int],
    old: bytes | None,
    *,
    tree: ast.Module | None = None,
    statements: list[ast.AST] | None = None,
) -> list[HarnessSite] | None:
    """Sites of `new` on `added` lines whose kind `new` has more often than `old` (the
    base's copy; None: the file is new). None when `new` cannot be parsed. `tree` is
    `new` already parsed, `statements` its `statements_of` (gate/policy/scan.py parses
    each changed file once).

    Cost (issue 46): only the top-level statements that touch an added line are walked
    first; every site on an added line lies inside one of them, so when they hold none
    (nearly every change) neither copy is walked whole and the base's is not parsed."""
    tree = tree if tree is not None else parse_source(new)
    if tree is None:
        return None
    module = _Module.of(tree, new, statements)
    lines = sorted(added)
    touched: list[ast.stmt] = []
    for stmt in tree.body:
        first, last = _span(stmt)
        at = bisect_left(lines, first)
        if at < len(lines) and lines[at] <= last:
            touched.append(stmt)
    if not touched or next(_sites(module, touched), None) is None:
        return []
    sites = sorted(set(_sites(module)))
    before = Counter(s.kind for s in (harness_sites(old) if old is not None else None) or [])
    after = Counter(s.kind for s in sites)
    budget = {k: after[k] - before[k] for k in after}
    out: list[HarnessSite] = []
    for s in sites:
        if budget[s.kind] <= 0 or not any(n in added for n in range(s.line, s.end + 1)):
            continue
        budget[s.kind] -= 1
        out.append(s)
    return out


# Without the proven tree's copy (no proven tree), the added lines are read as text.
_FALLBACK = re.compile(
    rb"(_pytest|proofgate_witness|settrace|setprofile|gettrace|f_trace|meta_path|path_hooks"
    rb"|get_referrers|get_referents|get_objects|PYTEST_\w+|sys\.modules\b.*pytest"
    rb"|pytest\b.*\bsys\.modules|os\._exit|cell_contents|__code__\s*=)"
)


def is_harness_code(path: bytes) -> bool:
    """Non-test Python code: what this rule reads."""
    return path.endswith(b".py") and not is_test_path(path) and basename(path) != b"conftest.py"


def check_harness_tampering(ctx: Context) -> Iterator[RawFinding]:
    scanned = ctx.scans.harness if ctx.scans is not None else {}
    for d in text_diffs(ctx):
        if d.new_path is None or not is_harness_code(d.new_path):
            continue
        added = frozenset(ln.new for ln in d.added)
        if not added:
            continue
        if d.path in scanned:
            sites = scanned[d.path]
        else:
            new = ctx.tree_files.get(d.new_path) if ctx.tree_files is not None else None
            old = None
            if d.old_path is not None and ctx.base_files is not None:
                old = ctx.base_files.get(d.old_path)
            sites = new_harness_sites(new, added, old) if new is not None else None
        if sites is None:
            for ln in d.added:
                m = _FALLBACK.search(ln.text)
                if m is not None:
                    what = as_text(m.group(1))
                    yield RawFinding(
                        d.path, f"non-test code mentions its test harness ({what})", ln.new
                    )
            continue
        for s in sites:
            yield RawFinding(d.path, f"non-test code {s.kind}", s.line)
