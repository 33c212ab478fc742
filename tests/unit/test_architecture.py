"""docs/architecture.md stays true: its tree is `gate/`, its stage table is `prove()`'s
calls in order, and the imports that run back up are exactly the ones it names."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "gate"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")

# Lower to higher: an import from a package into one on a higher floor runs back up.
FLOORS: dict[str, int] = {
    "util": 0,
    "errors": 0,
    "model": 0,
    "config": 2,
    "policy": 2,
    "differential": 2,
    "witness": 2,
    "receipt": 2,
    "git": 3,
    "sandbox": 3,
    "github": 3,
    "proof": 4,
    "faces": 5,
}


def _between(start: str, end: str) -> str:
    return DOC.split(start, 1)[1].split(end, 1)[0]


def _documented_tree() -> set[str]:
    block = DOC.split("```\ngate/\n", 1)[1].split("```", 1)[0]
    found: set[str] = set()
    parents: list[tuple[int, str]] = []
    for line in block.splitlines():
        m = re.match(r"^( +)(\S+)( |$)", line)
        if m is None or not re.fullmatch(r"[\w.]+/?", m.group(2)):
            continue
        depth = len(m.group(1))
        if depth > 4:  # a description's continuation line
            continue
        name = m.group(2)
        parents = [(d, p) for d, p in parents if d < depth]
        prefix = "".join(p for _, p in parents)
        found.add(prefix + name)
        if name.endswith("/"):
            parents.append((depth, name))
    return found


def _actual_tree() -> set[str]:
    found: set[str] = set()
    for path in GATE.rglob("*"):
        rel = path.relative_to(GATE)
        if "__pycache__" in rel.parts or path.name == "py.typed":
            continue
        if path.is_dir():
            found.add(f"{rel.as_posix()}/")
        elif path.suffix == ".py" and (len(rel.parts) == 1 or rel.name != "__init__.py"):
            found.add(rel.as_posix())
        elif path.suffix == ".py" and rel.parts[0] in {"differential", "policy"}:
            found.add(rel.as_posix())  # their __init__ holds the package's logic
    found -= {p for p in found if p.startswith("schema/") and not p.endswith("/")}
    return found


def test_the_documented_tree_is_gate() -> None:
    documented, actual = _documented_tree(), _actual_tree()
    assert documented - actual == set(), "docs/architecture.md names what gate/ lacks"
    assert actual - documented == set(), "gate/ holds what docs/architecture.md omits"


def _prove_function() -> ast.FunctionDef:
    tree = ast.parse((GATE / "proof" / "prove.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "prove":
            return node
    raise AssertionError("gate/proof/prove.py defines no prove()")


def _stage_calls(fn: ast.FunctionDef) -> list[str]:
    nodes = [node for stmt in fn.body for node in ast.walk(stmt)]
    return [
        node.func.id
        for node in nodes
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("_")
    ]


def test_the_stage_table_is_proves_calls_in_order() -> None:
    table = _between("<!-- stages:", "<!-- end of stages -->")
    documented = re.findall(r"^\| `(_\w+)` \|", table, flags=re.M)
    assert documented, "the stage table lists no stage"
    assert _stage_calls(_prove_function()) == documented


def test_prove_reads_in_one_screen() -> None:
    fn = _prove_function()
    assert fn.end_lineno is not None
    assert fn.end_lineno - fn.lineno + 1 <= 80


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "gate" else None


def _imports(path: Path) -> set[str]:
    rel = path.relative_to(ROOT).with_suffix("")
    here = ".".join(p for p in rel.parts if p != "__init__")
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gate"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (ROOT / (candidate.replace(".", "/") + ".py")).exists()
                out.add(f"{here} -> {candidate if is_module else node.module}")
        elif isinstance(node, ast.Import):
            out.update(f"{here} -> {a.name}" for a in node.names if a.name.startswith("gate."))
    return out


def _upward_imports() -> set[str]:
    found: set[str] = set()
    for path in GATE.rglob("*.py"):
        for edge in _imports(path):
            src, dst = edge.split(" -> ")
            a, b = _package(src), _package(dst)
            if a in FLOORS and b in FLOORS and FLOORS[a] < FLOORS[b]:
                found.add(edge)
    return found


def test_the_imports_that_run_back_up_are_the_named_ones() -> None:
    named = set(re.findall(r"`(gate\.[\w.]+ -> gate\.[\w.]+)`", _between("<!-- upward", "<!--")))
    assert named, "the page names no upward import"
    assert _upward_imports() == named


def test_every_package_has_a_floor() -> None:
    packages = {p.stem if p.is_file() else p.name for p in GATE.iterdir()}
    packages -= {"__init__", "__main__", "__pycache__", "py", "schema"}
    assert packages - set(FLOORS) == set()


WITNESS_FILES = ("boot.py", "plugin.py", *(p.name for p in (GATE / "witness").glob("plugin_*.py")))


@pytest.mark.parametrize("name", WITNESS_FILES)
def test_the_witness_imports_nothing_of_proofgate(name: str) -> None:
    """What runs in the check's containers: the start-up hook and the witness package,
    whose modules import only each other (relatively, as the package they are there)."""
    source = (GATE / "witness" / name).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] == "gate" for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # the package's own modules, beside it
                assert name.startswith("plugin")
                assert f"plugin{node.module}.py" in WITNESS_FILES
            else:
                assert (node.module or "").split(".")[0] != "gate"


@pytest.mark.parametrize("module", ["gate.witness.host", "gate.witness.judge", "gate.proof.prove"])
def test_no_docker_sdk_until_a_check_runs(module: str) -> None:
    code = f"import sys, {module}; print('docker' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "False"
