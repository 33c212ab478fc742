"""Blast radius (issue 6, AgentDiff's idea kept deterministic). Pure.

Two integer scores go into the receipt next to every input they were computed from, so
a reader can recompute them by hand:

immediate = 1*files + 2*bit_length(lines) + 5*executables + 10*build_time + 10*sensitive
    files        changed paths in the inventory
    lines        added + deleted lines (`bit_length` = floor(log2(lines)) + 1; 0 for 0),
                 so size counts logarithmically and a huge diff cannot drown the rest
    executables  paths whose new mode is 100755
    build_time   paths that run at install/build/CI time or change what a checkout means
    sensitive    paths of the gate config, policy.protected/deny, CI, dependencies

future = 1*direct_importers + 1*transitive_importers + 5*import_time + 10*install_time
         + 10*ci_time
    direct_importers      modules of the proven tree importing a changed Python module
    transitive_importers  modules reaching a changed module through imports (incl. direct)
    import_time           changed files Python runs implicitly (`__init__.py`,
                          `conftest.py`, `*.pth`, `sitecustomize.py`, `usercustomize.py`)
    install_time          changed build/install-time files
    ci_time               changed CI workflow/action files

The import graph is static (`ast`, nothing is executed) over the Python files of the
proven tree the caller supplies; a module's name follows Python's package rule (walk up
while the directory has an `__init__.py`). Without the tree the analyzer is recorded as
not run and contributes 0. Neither score changes the verdict unless a threshold is set.

Parsing is most of the cost (click's 77 modules: ~0.5 s), and a file's imports are a
function of its bytes: the caller may pass an `ImportCache` keyed by the file's git blob
id (`IMPORTS_VERSION` names the analysis), so only files whose blob was never seen are
parsed, and a repeated proof of the same tree parses nothing (gate/proof/policy_run.py keeps
it in the per-user cache).
"""

from __future__ import annotations

import ast
import hashlib
import posixpath
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from gate.model import ChangeStatus, InventoryEntry, JsonDict, path_display

__all__ = [
    "FORMULA_VERSION",
    "IMPORTS_VERSION",
    "BlastRadius",
    "ImportCache",
    "RawImport",
    "Thresholds",
    "blast_radius",
    "blob_id",
    "GraphReader",
    "import_words",
    "imports_from_source",
    "imports_of",
    "parse_python",
    "statements_of",
]

FORMULA_VERSION = 1
IMMEDIATE_WEIGHTS: Mapping[str, int] = {
    "files": 1,
    "lines_bits": 2,
    "executables": 5,
    "build_time": 10,
    "sensitive": 10,
}
FUTURE_WEIGHTS: Mapping[str, int] = {
    "direct_importers": 1,
    "transitive_importers": 1,
    "import_time": 5,
    "install_time": 10,
    "ci_time": 10,
}
LIST_CAP = 50  # paths listed per input; counts are always complete
MAX_PARSE_BYTES = 1 << 20  # larger Python files are counted, not parsed


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    """policy.thresholds: a score strictly above a threshold makes a finding (HOLD)."""

    immediate: int | None = None
    future: int | None = None

    def to_dict(self) -> JsonDict:
        return {"immediate": self.immediate, "future": self.future}


@dataclass(frozen=True, slots=True, kw_only=True)
class BlastRadius:
    immediate: int
    future: int
    detail: JsonDict  # the receipt's `blast_radius`: scores, formulas, weights, inputs


def _listing(paths: Sequence[bytes]) -> list[str]:
    return [path_display(p) for p in sorted(set(paths))[:LIST_CAP]]


def _score(inputs: Mapping[str, int], weights: Mapping[str, int]) -> int:
    return sum(weights[k] * inputs[k] for k in weights)


def _formula(weights: Mapping[str, int]) -> str:
    return " + ".join(f"{w}*{k}" for k, w in weights.items())


_IMPORT_TIME = frozenset({b"__init__.py", b"conftest.py", b"sitecustomize.py", b"usercustomize.py"})


def _runs_on_import(path: bytes) -> bool:
    base = path.rsplit(b"/", 1)[-1]
    return base in _IMPORT_TIME or base.endswith(b".pth")


# --- import graph ------------------------------------------------------------------

RawImport = tuple[int, str, tuple[str, ...]]  # (level, module, imported names)
# git blob id -> the file's imports, or None when it does not parse
ImportCache = MutableMapping[str, tuple[RawImport, ...] | None]
IMPORTS_VERSION = 1  # of `_parse_imports`: raise it when what it extracts changes


def blob_id(data: bytes) -> str:
    """The git blob id of `data` (what `git hash-object` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")  # in every node's _fields order


def statements_of(tree: ast.Module) -> list[ast.AST]:
    """The module, its statements, nested ones too, and the except handlers and match
    cases between them, in `ast.walk` order (breadth first): an import is a statement, so
    no expression is ever searched, which is most of a module's nodes."""
    out: list[ast.AST] = []
    queue: deque[ast.AST] = deque([tree])
    while queue:
        node = queue.popleft()
        out.append(node)
        for block in _BLOCKS:
            inner = getattr(node, block, None)
            if inner:
                queue.extend(inner)
    return out


def _raw_imports(source: bytes, cache: ImportCache | None) -> tuple[RawImport, ...] | None:
    """Imports of one file, or None when it does not parse: from `cache` by the file's
    blob id when it holds them, else parsed (and added to it)."""
    if cache is None:
        return _parse_imports(source)
    key = blob_id(source)
    if key in cache:
        return cache[key]
    found = cache[key] = _parse_imports(source)
    return found


@lru_cache(maxsize=16384)
def _parse_imports(source: bytes) -> tuple[RawImport, ...] | None:
    """The one place a file of the tree is parsed for its imports alone (remembered by
    content within a process); a changed file's imports come from gate/policy/scan.py,
    which parses it once for every rule."""
    tree = parse_python(source)
    return None if tree is None else imports_of(statements_of(tree))


def imports_from_source(source: bytes) -> tuple[RawImport, ...] | None:
    """A tree file's imports, as the import graph reads them (None: over MAX_PARSE_BYTES,
    or it does not parse)."""
    return _parse_imports(source) if len(source) <= MAX_PARSE_BYTES else None


def parse_python(source: bytes) -> ast.Module | None:
    """The module, or None when it does not parse."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def imports_of(statements: list[ast.AST]) -> tuple[RawImport, ...]:
    """The imports among a module's `statements_of`."""
    out: list[RawImport] = []
    for node in statements:
        if isinstance(node, ast.Import):
            out.extend((0, a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module or "", tuple(a.name for a in node.names)))
    return tuple(out)


def _module_name(path: bytes, package_dirs: frozenset[bytes]) -> str | None:
    if not path.endswith(b".py"):
        return None
    parts = path[:-3].split(b"/")
    if parts[-1] == b"__init__":
        parts = parts[:-1]
    d = posixpath.dirname(path)
    start = len(d.split(b"/")) if d else 0
    while d and d in package_dirs:
        up = posixpath.dirname(d)
        if up == d:  # "/" (a path git never produces): stop rather than loop
            break
        d = up
        start -= 1
    name = parts[start:]
    if not name:
        return None
    try:
        return ".".join(p.decode("utf-8") for p in name)
    except UnicodeDecodeError:
        return None


def _resolve(raw: RawImport, module: str, is_package: bool) -> list[str]:
    level, mod, names = raw
    if level:
        pkg = module.split(".") if is_package else module.split(".")[:-1]
        if level - 1 > len(pkg):
            return []
        base = pkg[: len(pkg) - (level - 1)]
        mod = ".".join([*base, mod] if mod else base)
    if not mod:
        return []
    return [mod, *(f"{mod}.{n}" for n in names if n != "*")]


def _target(name: str, known: frozenset[str]) -> str | None:
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        cand = ".".join(parts[:k])
        if cand in known:
            return cand
    return None


def _modules(paths: Iterable[bytes]) -> tuple[frozenset[bytes], dict[str, bytes]]:
    """The package directories and the module name -> path of the Python files `paths`."""
    py = sorted(p for p in paths if p.endswith(b".py"))
    package_dirs = frozenset(posixpath.dirname(p) for p in py if p.endswith(b"/__init__.py"))
    modules: dict[str, bytes] = {}
    for p in py:
        name = _module_name(p, package_dirs)
        if name is not None:
            modules.setdefault(name, p)
    return package_dirs, modules


def _importers(
    modules: Mapping[str, bytes],
    raws_of: Callable[[bytes], tuple[RawImport, ...] | None],
    known: frozenset[str],
) -> tuple[dict[str, set[str]], list[bytes]]:
    """target -> the modules importing it, and the files that do not parse."""
    importers: dict[str, set[str]] = {}
    unparsed: list[bytes] = []
    for name, p in modules.items():
        raws = raws_of(p)
        if raws is None:
            unparsed.append(p)
            continue
        is_pkg = p.endswith(b"/__init__.py") or p == b"__init__.py"
        for raw in raws:
            for imported in _resolve(raw, name, is_pkg):
                t = _target(imported, known)
                while t:  # importing a.b.c runs a/__init__ and a/b/__init__ too
                    if t != name:
                        importers.setdefault(t, set()).add(name)
                    t = t.rpartition(".")[0]
                    if t not in known:
                        break
    return importers, unparsed


def _reaching(start: Iterable[str], importers: Mapping[str, set[str]]) -> set[str]:
    seen = set(start)
    queue = deque(seen)
    while queue:
        for m in importers.get(queue.popleft(), ()):
            if m not in seen:
                seen.add(m)
                queue.append(m)
    return seen


# --- reading only what the graph needs (issue 46) ------------------------------------
#
# A file can import module T only if T's last name appears in its text as a word (an
# absolute import spells every part; a relative one the parts below the file's package)
# or T is a package the file is in (`from . import x`, `from .. import y`). So of a large
# tree's files whose imports are not in the cache, only those that could import a changed
# module or one of its importers need parsing: read each once for its words, parse the
# candidates, repeat with the importers found, until none is left. Python reads
# identifiers NFKC-normalized, so a file with a non-ASCII byte is always a candidate.

_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def import_words(source: bytes, words: frozenset[bytes]) -> frozenset[bytes] | None:
    """The `words` (`GraphReader.words`) in `source`; None when it has a non-ASCII byte."""
    if not source.isascii():
        return None
    return words.intersection(_WORD.findall(source))


class GraphReader:
    """Which of a large tree's files the import graph must parse (see above): built from
    the changed files and every Python path of the tree, told the words of each file
    whose imports are not known (`unknown`) and each file's imports as they become known
    (`add`), it names the files to parse next (`wanted`) until none is left. Then the
    graph's counts over the known imports alone are those of the whole tree."""

    def __init__(self, changed: Sequence[bytes], paths: Iterable[bytes]) -> None:
        package_dirs, self._modules = _modules(paths)
        self._name = {p: n for n, p in self._modules.items()}
        changed_mods = {m for p in changed if (m := _module_name(p, package_dirs)) is not None}
        self._known = frozenset(self._modules) | frozenset(changed_mods)
        self.words = frozenset(n.rpartition(".")[2].encode() for n in self._modules if n.isascii())
        self._unknown: set[bytes] = set()
        self._by_word: dict[bytes, set[bytes]] = {}  # a word -> the unknown files using it
        self._by_package: dict[str, set[bytes]] = {}  # a package -> the unknown files in it
        self._importers: dict[str, set[str]] = {}
        self._reached: set[str] = set(changed_mods)
        self._new: set[str] = set(changed_mods)  # reached since `wanted` last looked

    def unknown(self, path: bytes, found: frozenset[bytes] | None) -> None:
        """`path`'s imports are not known; `found`: its `import_words` of `self.words`."""
        name = self._name.get(path)
        if name is None:
            return
        self._unknown.add(path)
        if found is None:
            self._new.add(name)  # any name could be spelled otherwise: parse it
            found = frozenset([name.rpartition(".")[2].encode()])
        for w in found:
            self._by_word.setdefault(w, set()).add(path)
        parts = name.split(".")
        for k in range(1, len(parts)):
            self._by_package.setdefault(".".join(parts[:k]), set()).add(path)

    def add(self, path: bytes, raws: tuple[RawImport, ...] | None) -> None:
        """`path`'s imports are known (None: it does not parse)."""
        self._unknown.discard(path)
        name = self._name.get(path)
        if name is None or raws is None:
            return
        importers, _ = _importers({name: path}, lambda p: raws, self._known)
        for target, who in importers.items():
            self._importers.setdefault(target, set()).update(who)
        if name not in self._reached and not self._reached.isdisjoint(importers):
            grown = _reaching([name], self._importers) - self._reached
            self._reached |= grown
            self._new |= grown

    def wanted(self) -> set[bytes]:
        """The unknown files that could import a module reached since last asked."""
        new, self._new = self._new, set()
        out: set[bytes] = set()
        for t in new:
            out |= self._by_word.get(t.rpartition(".")[2].encode(), set())
            out |= self._by_package.get(t, set())
            if self._modules.get(t) in self._unknown:  # a non-ASCII file itself
                out.add(self._modules[t])
        return out & self._unknown


def _import_graph(
    changed: Sequence[bytes],
    tree_files: Mapping[bytes, bytes],
    cache: ImportCache | None,
    imports: Mapping[bytes, tuple[RawImport, ...] | None],
) -> tuple[JsonDict, int, int]:
    py = sorted({p for p in tree_files if p.endswith(b".py")} | set(imports))
    package_dirs, modules = _modules(py)
    changed_mods = sorted({m for p in changed if (m := _module_name(p, package_dirs)) is not None})
    known = frozenset(modules) | frozenset(changed_mods)

    def raws_of(p: bytes) -> tuple[RawImport, ...] | None:
        if p in imports:
            return imports[p]
        # a changed file (gate/policy/scan.py put its imports in `cache`), or one whose
        # imports need not be known (b"": see `files_to_parse`)
        src = tree_files[p]
        return _raw_imports(src, cache) if len(src) <= MAX_PARSE_BYTES else None

    importers, unparsed = _importers(modules, raws_of, known)
    direct = sorted({m for c in changed_mods for m in importers.get(c, ())} - set(changed_mods))
    transitive = sorted(_reaching(changed_mods, importers) - set(changed_mods))
    detail: JsonDict = {
        "name": "import-graph",
        "ran": True,
        "python_files": len(py),
        "unparsed": _listing(unparsed),
        "changed_modules": changed_mods[:LIST_CAP],
        "direct_importers": direct[:LIST_CAP],
        "direct_importers_count": len(direct),
        "transitive_importers_count": len(transitive),
    }
    return detail, len(direct), len(transitive)


# --- scores ------------------------------------------------------------------------


def blast_radius(
    inventory: Sequence[InventoryEntry],
    *,
    build_time: Callable[[bytes], bool],
    ci: Callable[[bytes], bool],
    sensitive: Callable[[bytes], bool],
    tree_files: Mapping[bytes, bytes] | None,
    thresholds: Thresholds | None,
    import_cache: ImportCache | None = None,
    tree_imports: Mapping[bytes, tuple[RawImport, ...] | None] | None = None,
    unanalyzed: str | None = None,
) -> BlastRadius:
    """Both scores with their inputs (see the module doc for the formulas).

    `tree_imports` (optional) are the imports of Python files of the proven tree whose
    contents `tree_files` does not hold (read by the caller one at a time, issue 46);
    `unanalyzed` says why the import graph cannot be complete (the receipt shows it, and
    the analyzer is recorded as not run)."""
    paths = [p for e in inventory for p in {e.path, e.old_path or e.path}]
    lines = sum(e.lines_added + e.lines_deleted for e in inventory)
    execs = [
        e.path for e in inventory if e.new_mode == 0o100755 and e.status is not ChangeStatus.DELETED
    ]
    build = sorted({p for p in paths if build_time(p)})
    sens = sorted({p for p in paths if sensitive(p)})
    imm_inputs = {
        "files": len(inventory),
        "lines_bits": lines.bit_length(),
        "executables": len(set(execs)),
        "build_time": len(build),
        "sensitive": len(sens),
    }
    immediate_score = _score(imm_inputs, IMMEDIATE_WEIGHTS)
    immediate: JsonDict = {
        "score": immediate_score,
        "formula": _formula(IMMEDIATE_WEIGHTS),
        "weights": dict(IMMEDIATE_WEIGHTS),
        "inputs": {**imm_inputs, "lines": lines},
        "paths": {
            "executables": _listing(execs),
            "build_time": _listing(build),
            "sensitive": _listing(sens),
        },
    }

    on_import = sorted({p for p in paths if _runs_on_import(p)})
    on_install = [p for p in build if not ci(p)]
    on_ci = sorted({p for p in paths if ci(p)})
    py_changed = sorted({p for p in paths if p.endswith(b".py")})
    analyzers: list[JsonDict] = []
    if tree_files is None or unanalyzed is not None:
        why = unanalyzed or "the proven tree was not supplied"
        analyzers.append({"name": "import-graph", "ran": False, "why": why})
        direct = transitive = 0
    else:
        graph, direct, transitive = _import_graph(
            py_changed, tree_files, import_cache, tree_imports or {}
        )
        analyzers.append(graph)
    analyzers.append(
        {
            "name": "execution-time",
            "ran": True,
            "import_time": _listing(on_import),
            "install_time": _listing(on_install),
            "ci_time": _listing(on_ci),
        }
    )
    fut_inputs = {
        "direct_importers": direct,
        "transitive_importers": transitive,
        "import_time": len(on_import),
        "install_time": len(on_install),
        "ci_time": len(on_ci),
    }
    future_score = _score(fut_inputs, FUTURE_WEIGHTS)
    future: JsonDict = {
        "score": future_score,
        "formula": _formula(FUTURE_WEIGHTS),
        "weights": dict(FUTURE_WEIGHTS),
        "inputs": fut_inputs,
        "analyzers": analyzers,
    }
    detail: JsonDict = {
        "version": FORMULA_VERSION,
        "immediate": immediate,
        "future": future,
        "thresholds": (thresholds or Thresholds()).to_dict(),
    }
    return BlastRadius(immediate=int(immediate_score), future=int(future_score), detail=detail)
