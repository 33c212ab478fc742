"""The walk of one proof's request through the code, measured from the source (issue 39).

Starting at `prove(request, ...)`, read the code as a newcomer follows `request`: each
use of it (the name, or a piece of it, `request.x`) in reading order, and into every call
it is passed to, under the name of the parameter that receives it (a function is read
once, the first time). Counted:

- stays: the uses read;
- places: the distinct functions they are in (modules: the distinct modules);
- climbs: uses read right after coming back up from a callee, where the reader has to
  climb back to a function above and pick up its thread again;
- crossings: consecutive uses in two different modules (the reader changes files).

Only calls that resolve to a function defined under `gate/` are followed (a name defined
in the module, a name imported from a gate module, `module.function` through an imported
gate module; imports inside functions count). Prints the figures for the working tree and,
with `--at REV`, for a git revision beside it:

    python benchmarks/prove_walk.py --at ea02373
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Tree:
    """The `gate/` sources of one revision, by dotted module name."""

    sources: dict[str, str]
    parsed: dict[str, ast.Module] = field(default_factory=dict)

    def module(self, name: str) -> ast.Module | None:
        if name not in self.sources:
            return None
        if name not in self.parsed:
            self.parsed[name] = ast.parse(self.sources[name])
        return self.parsed[name]


def _dotted(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def tree_at(rev: str | None) -> Tree:
    if rev is None:
        files = {
            p.relative_to(ROOT).as_posix(): p.read_text() for p in (ROOT / "gate").rglob("*.py")
        }
    else:
        names = subprocess.run(
            ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev, "gate"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        files = {
            n: subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{rev}:{n}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for n in names
            if n.endswith(".py")
        }
    return Tree({_dotted(p): s for p, s in files.items()})


def _functions(mod: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in mod.body if isinstance(n, ast.FunctionDef)}


def _imports(tree: Tree, module: str, scope: ast.AST) -> dict[str, tuple[str, str | None]]:
    """Names bound by imports in `scope`: alias -> (module, function or None)."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gate"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in tree.sources:
                    out[a.asname or a.name] = (sub, None)
                else:
                    out[a.asname or a.name] = (node.module, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("gate") and a.asname:
                    out[a.asname] = (a.name, None)
    return out


def _rooted(node: ast.expr, names: set[str]) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in names


def _resolve(
    tree: Tree, module: str, fn: ast.FunctionDef, call: ast.Call
) -> tuple[str, ast.FunctionDef] | None:
    mod = tree.module(module)
    assert mod is not None
    bound = {**_imports(tree, module, mod), **_imports(tree, module, fn)}
    target: tuple[str, str] | None = None
    if isinstance(call.func, ast.Name):
        name = call.func.id
        if name in _functions(mod):
            target = (module, name)
        elif name in bound and bound[name][1] is not None:
            target = (bound[name][0], bound[name][1] or "")
    elif isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
        alias = call.func.value.id
        if alias in bound and bound[alias][1] is None:
            target = (bound[alias][0], call.func.attr)
    if target is None:
        return None
    other = tree.module(target[0])
    if other is None:
        return None
    found = _functions(other).get(target[1])
    return (target[0], found) if found is not None else None


def _receivers(fn: ast.FunctionDef, call: ast.Call, names: set[str]) -> set[str]:
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    got: set[str] = set()
    for i, arg in enumerate(call.args):
        if _rooted(arg, names) and i < len(params):
            got.add(params[i])
    for kw in call.keywords:
        if kw.arg is not None and _rooted(kw.value, names):
            got.add(kw.arg)
    return got


@dataclass
class Walk:
    """Each use of the request, in reading order: (module, function, depth)."""

    uses: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def stays(self) -> int:
        return len(self.uses)

    @property
    def places(self) -> set[tuple[str, str]]:
        return {(m, f) for m, f, _ in self.uses}

    @property
    def modules(self) -> set[str]:
        return {m for m, _, _ in self.uses}

    @property
    def crossings(self) -> int:
        """Consecutive uses in two different modules: the reader changes files."""
        return sum(1 for a, b in zip(self.uses, self.uses[1:], strict=False) if a[0] != b[0])

    @property
    def climbs(self) -> int:
        """Uses read after coming back up from a callee: the reader climbs back."""
        return sum(1 for a, b in zip(self.uses, self.uses[1:], strict=False) if b[2] < a[2])


def _in_order(node: ast.AST) -> list[ast.AST]:
    """`node`'s descendants in source order (a call's arguments before the call)."""
    out: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        out.extend(_in_order(child))
        out.append(child)
    return out


def walk(tree: Tree) -> Walk:
    empty = ast.Module(body=[], type_ignores=[])
    start_module = next(
        m
        for m in tree.sources
        if m.endswith(".prove") and "prove" in _functions(tree.module(m) or empty)
    )
    start = _functions(tree.module(start_module) or empty)["prove"]
    result = Walk()
    expanded: set[tuple[str, str]] = set()

    def visit(module: str, fn: ast.FunctionDef, names: set[str], depth: int) -> None:
        expanded.add((module, fn.name))
        counted: set[int] = set()
        for node in _in_order(fn):
            if isinstance(node, ast.Call):
                target = _resolve(tree, module, fn, node)
                if target is None or target[1] is fn:
                    continue
                callee_module, callee = target
                receivers = _receivers(callee, node, names)
                if receivers and (callee_module, callee.name) not in expanded:
                    visit(callee_module, callee, receivers, depth + 1)
            elif _rooted_use(node, names) and id(node) not in counted:
                for inner in ast.walk(node):
                    counted.add(id(inner))
                result.uses.append((module, fn.name, depth))

    visit(start_module, start, {"request"}, 0)
    return result


def _rooted_use(node: ast.AST, names: set[str]) -> bool:
    """A use of the request: its name, or the outermost attribute read rooted in it."""
    if isinstance(node, ast.Name):
        return node.id in names and isinstance(node.ctx, ast.Load)
    return isinstance(node, ast.Attribute) and _rooted(node, names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--at", help="a git revision to measure beside the working tree")
    args = parser.parse_args()
    rows = [("working tree", walk(tree_at(None)))]
    if args.at:
        rows.insert(0, (args.at, walk(tree_at(args.at))))
    print(f"{'revision':>14}  stays  places  modules  climbs  crossings")
    for name, w in rows:
        print(
            f"{name:>14}  {w.stays:>5}  {len(w.places):>6}  {len(w.modules):>7}"
            f"  {w.climbs:>6}  {w.crossings:>9}"
        )


if __name__ == "__main__":
    main()
