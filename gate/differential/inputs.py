"""What the base's tests depend on, by construction (SPEC §3.2): the files of the base
tree that the trusted run takes from the base besides the trusted test files. Pure.

A base test may read any file of the tree, by any route: in the test process or a child
(`cat`), through `sqlite3`, by a relative or `..` path, from an initial conftest, through
the package's own loader, after any number of other reads. So what the trusted run takes
from the base is not what a run was seen reading but a property of the file: every file
of the base tree that is not the change's *code* is a test input. Code is what the
change's tests and build execute or compile:

- source files, by suffix (`CODE_SUFFIXES`: Python, C and C++, Cython, Rust, Go, Java,
  JavaScript and TypeScript, ...), and committed compiled objects;
- the build's and the project's own configuration, by name (`BUILD_NAMES`,
  `BUILD_GLOBS`): `pyproject.toml`, `setup.py`, `setup.cfg`, `requirements*.txt`,
  lockfiles, `Makefile`, `package.json`, the workflows; what the install writes from
  them is the change's code (gate/differential/environment.py), and the policy judges
  their edits.

Everything else (data, fixtures, golden files, databases, documents a doctest runs) is an
input. So is a Python module that the base's tests import and that holds only data
(assignments of literals: expected values), which is not the code under test but what it
is checked against. Inputs the base run was seen reading (the witness's audit hook) are
added to the set, never the other way round.

What lies one step outside, written down in docs/differential.md: expected values kept
in a file with a code suffix and read as data, or in a module that defines functions,
are the change's; a data file the code under test itself reads (package data) is the
base's in the trusted run, so behaviour broken through data alone is judged by the
change's own tests (and, where a base test fails with the base's copy, held).
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable, Iterable, Mapping

from gate.policy.paths import glob_match

__all__ = ["BUILD_GLOBS", "BUILD_NAMES", "CODE_SUFFIXES", "inputs", "is_code", "imported_names"]

CODE_SUFFIXES = frozenset(
    {
        ".py", ".pyi", ".pyx", ".pxd", ".pxi", ".pyw",
        ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".inc", ".cu",
        ".rs", ".go", ".java", ".kt", ".kts", ".scala", ".groovy", ".gradle",
        ".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx", ".vue", ".svelte",
        ".f", ".f90", ".f95", ".for", ".m", ".mm", ".swift", ".zig", ".s", ".asm",
        ".so", ".pyd", ".dll", ".dylib", ".a", ".o", ".pyc",
    }
)  # fmt: skip
BUILD_NAMES = frozenset(
    {
        "pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in", "tox.ini", "noxfile.py",
        "Makefile", "GNUmakefile", "CMakeLists.txt", "meson.build", "meson_options.txt",
        "Cargo.toml", "Cargo.lock", "go.mod", "go.sum", "build.gradle", "pom.xml",
        "package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "tsconfig.json",
        "Pipfile", "Pipfile.lock", "poetry.lock", "pdm.lock", "uv.lock", "environment.yml",
        "Dockerfile", ".dockerignore", ".gitattributes", ".gitignore", ".gitmodules",
        ".pre-commit-config.yaml", "conftest.py",
    }
)  # fmt: skip
BUILD_GLOBS = (
    ".github/**",
    "**/requirements*.txt",
    "**/requirements/*.txt",
    "**/constraints*.txt",
    "**/*.lock",
    "**/*.mk",
    "**/*.cmake",
)


def is_code(path: bytes) -> bool:
    """Source, compiled code, or the build's and the project's configuration."""
    name = posixpath.basename(path.decode("utf-8", "surrogateescape"))
    suffix = posixpath.splitext(name)[1].lower()
    if suffix in CODE_SUFFIXES or name in BUILD_NAMES:
        return True
    return any(glob_match(g, path) for g in BUILD_GLOBS)


def data_only(source: bytes) -> bool:
    """A module of literals: docstrings, imports, and assignments whose values are
    literals (numbers, strings, bytes, tuples, lists, dicts and sets of them)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            try:
                ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return False
            continue
        return False
    return bool(tree.body)


def imported_names(sources: Mapping[bytes, bytes]) -> frozenset[str]:
    """Every dotted name `import` and `from ... import` statements of `sources` name (a
    `from a.b import c` names `a.b` and `a.b.c`)."""
    out: set[str] = set()
    for data in sources.values():
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                out.add(node.module)
                out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(out)


def _module_names(path: bytes) -> set[str]:
    """The dotted names a `.py` file can be imported as, from any import root above it."""
    parts = path.decode("utf-8", "surrogateescape")[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return {".".join(parts[i:]) for i in range(len(parts)) if parts[i:]}


def inputs(
    candidates: Iterable[bytes],
    *,
    trusted: Callable[[bytes], bool],
    base_sources: Mapping[bytes, bytes],
    tests_import: frozenset[str],
    observed: Iterable[bytes] = (),
) -> frozenset[bytes]:
    """Of `candidates` (paths the patch touches that the base tree has), those the
    trusted run takes from the base as test inputs: not trusted test files (taken from
    the base anyway), and not code, or a data-only module the base's tests import
    (`base_sources` holds the base's copies of the candidate `.py` files); plus the base
    run's `observed` reads among the candidates."""
    seen = frozenset(observed)
    out: set[bytes] = set()
    for path in candidates:
        if trusted(path):
            continue
        if path in seen or not is_code(path):
            out.add(path)
        elif path.endswith(b".py") and path in base_sources:
            if _module_names(path) & tests_import and data_only(base_sources[path]):
                out.add(path)
    return frozenset(out)
