"""Skips and expected failures read from Python test sources with `ast` (issue 16). Pure.

Spelling does not matter here: imports are resolved (`import pytest as pt`,
`from pytest import mark, skip`, `from unittest import SkipTest`), a marker bound to a
name (`slow = pytest.mark.skip(...)`, then `@slow`) is followed to where it is applied,
and raising the skip exception (`raise pytest.skip.Exception`, `raise unittest.SkipTest`)
counts like calling `pytest.skip()`. A *skip site* is (kind, target): the canonical name
of what skips, and the qualified name of the test it applies to ("" for the whole
module). Comparing the sites of the base's and the proven tree's copy of a file tells
which existing tests a change newly skips, whatever the lines look like.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "MAX_PARSE_BYTES",
    "SkipSite",
    "defined_names",
    "new_skips",
    "parse_source",
    "skip_sites",
]

MAX_PARSE_BYTES = 1 << 20  # larger files fall back to the line patterns

# What skips or xfails a test, by canonical dotted name. A call of any of these, a
# decorator built from one, or raising one of the exceptions.
_SKIPPERS = frozenset(
    {
        "pytest.skip",
        "pytest.xfail",
        "pytest.importorskip",
        "pytest.exit",  # returncode=0 ends the session, passing, before the rest run
        "pytest.exit.Exception",
        "pytest.mark.skip",
        "pytest.mark.skipif",
        "pytest.mark.xfail",
        "pytest.skip.Exception",
        "pytest.xfail.Exception",
        "_pytest.outcomes.skip",
        "_pytest.outcomes.xfail",
        "_pytest.outcomes.Skipped",
        "_pytest.outcomes.XFailed",
        "_pytest.outcomes.exit",
        "_pytest.outcomes.Exit",
        "unittest.skip",
        "unittest.skipIf",
        "unittest.skipUnless",
        "unittest.expectedFailure",
        "unittest.SkipTest",
        "unittest.case.skip",
        "unittest.case.skipIf",
        "unittest.case.skipUnless",
        "unittest.case.expectedFailure",
        "unittest.case.SkipTest",
    }
)
_METHODS = frozenset({"skipTest"})  # self.skipTest(...) in a TestCase


@dataclass(frozen=True, slots=True, order=True)
class SkipSite:
    kind: str  # canonical name, e.g. "pytest.mark.skip"
    target: str  # qualified name of the test or class it applies to; "" = the module
    line: int


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> canonical dotted name, for every import in the module."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    out[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.expr, aliases: dict[str, str], markers: dict[str, str]) -> str | None:
    """Canonical dotted name of an expression (calls and subscripts see through)."""
    if isinstance(node, ast.Call):
        return _dotted(node.func, aliases, markers)
    if isinstance(node, ast.Name):
        return markers.get(node.id) or aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases, markers)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _skipper(node: ast.expr, aliases: dict[str, str], markers: dict[str, str]) -> str | None:
    name = _dotted(node, aliases, markers)
    if name is None:
        return None
    if name in _SKIPPERS:
        return name
    # a marker with arguments: pytest.mark.skipif(...).with_args(...) etc.
    for s in _SKIPPERS:
        if name.startswith(s + "."):
            return s
    return None


def _parts(node: ast.expr) -> Iterator[ast.expr]:
    """The expressions a dotted name is built from (`pytest.skip` in `pytest.skip.X`)."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return
        yield node


def _markers(tree: ast.Module, aliases: dict[str, str]) -> dict[str, str]:
    """Module-level names bound to a skipper (`slow = pytest.mark.skip(...)`)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            kind = _skipper(node.value, aliases, out)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if kind is not None and isinstance(t, ast.Name) and t.id != "pytestmark":
                    out[t.id] = kind
    return out


def _in_value(node: ast.AST, aliases: dict[str, str], markers: dict[str, str]) -> set[str]:
    """Skippers anywhere inside an expression (a `pytestmark` list, say)."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.expr):
            kind = _skipper(sub, aliases, markers)
            if kind is not None:
                out.add(kind)
    return out


def _sites(tree: ast.Module) -> Iterator[SkipSite]:
    aliases = _aliases(tree)
    markers = _markers(tree, aliases)

    def visit(body: list[ast.stmt], scope: str) -> Iterator[SkipSite]:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{scope}.{node.name}" if scope else node.name
                for dec in node.decorator_list:
                    for kind in _in_value(dec, aliases, markers):
                        yield SkipSite(kind, name, dec.lineno)
                if isinstance(node, ast.ClassDef):
                    yield from visit(node.body, name)
                else:
                    yield from _calls(node.body, name)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
                    for kind in _in_value(node.value, aliases, markers):
                        yield SkipSite(kind, scope, node.lineno)
            else:
                yield from _calls([node], scope)

    def _calls(body: list[ast.stmt], scope: str) -> Iterator[SkipSite]:
        # Any mention of a skipper in code counts, called or not: a call or a raise, and
        # a marker handed on (`request.applymarker(pytest.mark.xfail)`) or bound to a
        # local name. A call is seen through its callee, visited on its own.
        # `pytest.skip.Exception` is one site, not also a `pytest.skip` (its inner part).
        for stmt in body:
            inner: set[int] = set()
            for sub in ast.walk(stmt):  # breadth first: an outer name before its parts
                if isinstance(sub, ast.Call):
                    f = sub.func
                    if isinstance(f, ast.Attribute) and f.attr in _METHODS:
                        yield SkipSite(f"TestCase.{f.attr}", scope, sub.lineno)
                elif isinstance(sub, ast.expr) and id(sub) not in inner:
                    kind = _skipper(sub, aliases, markers)
                    if kind is not None:
                        yield SkipSite(kind, scope, sub.lineno)
                        inner.update(id(n) for n in _parts(sub))

    yield from visit(tree.body, "")


def parse_source(source: bytes) -> ast.Module | None:
    """The module, or None when it does not parse or is over MAX_PARSE_BYTES."""
    if len(source) > MAX_PARSE_BYTES:
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def skip_sites(source: bytes, *, tree: ast.Module | None = None) -> list[SkipSite] | None:
    """Every skip site of a Python source (`tree`: it already parsed); None when it
    cannot be parsed (or is too big)."""
    tree = tree if tree is not None else parse_source(source)
    return None if tree is None else sorted(set(_sites(tree)))


def _defined_names(tree: ast.Module) -> set[str]:
    """Qualified names of the functions and classes a module defines (tests among them)."""
    out: set[str] = set()

    def visit(body: list[ast.stmt], scope: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{scope}.{node.name}" if scope else node.name
                out.add(name)
                if isinstance(node, ast.ClassDef):
                    visit(node.body, name)

    visit(tree.body, "")
    return out


def defined_names(source: bytes) -> set[str] | None:
    """Qualified names of the functions and classes a source defines (tests among them)."""
    tree = parse_source(source)
    return None if tree is None else _defined_names(tree)


def new_skips(
    old: bytes, new: bytes, *, new_tree: ast.Module | None = None
) -> list[SkipSite] | None:
    """Skip sites of `new` that `old` lacks and that apply to something `old` defined
    (a test, a class, or — for module-wide sites — any definition at all). A skip
    rewritten in place (same kind, same target) is not new; a new test that is skipped
    weakens nothing that existed. None when either side cannot be parsed. `new_tree`
    is `new` already parsed; each copy is parsed once."""
    old_tree = parse_source(old)
    if old_tree is None:
        return None
    old_sites, new_sites = skip_sites(old, tree=old_tree), skip_sites(new, tree=new_tree)
    existing = _defined_names(old_tree)
    if old_sites is None or new_sites is None:
        return None
    before = Counter((s.kind, s.target) for s in old_sites)
    out: list[SkipSite] = []
    for s in new_sites:
        key = (s.kind, s.target)
        if before[key] > 0:
            before[key] -= 1
            continue
        if (s.target == "" and existing) or s.target in existing:
            out.append(s)
        elif existing and not _in_new_test(s.target, existing):
            # a helper or fixture the patch adds: any existing test may call it
            out.append(s)
    return out


def _in_new_test(target: str, existing: set[str]) -> bool:
    """Whether `target` is, or sits inside, a test function or class the patch adds."""
    parts = target.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in existing and parts[i - 1].startswith(("test", "Test")):
            return True
    return False
