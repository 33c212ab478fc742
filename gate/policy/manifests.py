"""Manifests, lockfiles and the rules that read them (issue 6). Pure.

`pyproject.toml`, `package.json`, `Cargo.toml`, `composer.json`, `setup.cfg` and
`tox.ini` hold build hooks, dependencies and tool configuration side by side: a changed
line is judged by the section it is in, read from the proven tree's copy of the file
when the caller supplies it (`tree_files`), else from what the hunk shows.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence

from gate.model import ChangeStatus, InventoryEntry
from gate.policy.context import Context, RawFinding, as_text, basename, dirs_of, paths_of
from gate.policy.patch import FileDiff, HunkLine
from gate.policy.paths import is_build_file, pin_hold_note
from gate.policy.pins import describe_requirements, pins_suffix
from gate.util.lazyre import lazy

__all__ = [
    "MIXED_MANIFESTS",
    "check_build_hook",
    "check_dependency",
    "check_lockfile_drift",
    "describe_line",
    "indent",
    "is_build_time_path",
    "is_lockfile",
    "is_requirements_file",
    "tool_idle",
    "manifest_sections",
    "requirements_read",
    "wants_tree_file",
]


# --- manifests and lockfiles -------------------------------------------------------

# ecosystem -> (manifests, lockfiles); a lockfile pairs with a manifest of its ecosystem
# in the same directory or a directory below it (workspaces).
_ECOSYSTEMS: dict[str, tuple[frozenset[bytes], frozenset[bytes]]] = {
    "python-project": (
        frozenset({b"pyproject.toml"}),
        frozenset({b"poetry.lock", b"uv.lock", b"pdm.lock", b"pylock.toml"}),
    ),
    "pipenv": (frozenset({b"Pipfile"}), frozenset({b"Pipfile.lock"})),
    "npm": (
        frozenset({b"package.json"}),
        frozenset(
            {
                b"package-lock.json",
                b"npm-shrinkwrap.json",
                b"yarn.lock",
                b"pnpm-lock.yaml",
                b"bun.lockb",
                b"bun.lock",
            }
        ),
    ),
    "go": (frozenset({b"go.mod"}), frozenset({b"go.sum"})),
    "cargo": (frozenset({b"Cargo.toml"}), frozenset({b"Cargo.lock"})),
    "bundler": (frozenset({b"Gemfile"}), frozenset({b"Gemfile.lock"})),
    "composer": (frozenset({b"composer.json"}), frozenset({b"composer.lock"})),
}
MIXED_MANIFESTS = frozenset(
    {b"pyproject.toml", b"package.json", b"Cargo.toml", b"composer.json", b"setup.cfg", b"tox.ini"}
)
_REQUIREMENTS = lazy(rb"^(?:requirements|constraints)[\w.-]*\.(?:txt|in)$")
_PURE_MANIFESTS = frozenset({b"Pipfile", b"go.mod", b"Gemfile", b"environment.yml"})


def _ecosystem(path: bytes) -> tuple[str, bool] | None:
    """(ecosystem, is_lockfile) for a manifest or lockfile path."""
    b = basename(path)
    for name, (manifests, locks) in _ECOSYSTEMS.items():
        if b in locks or (name == "python-project" and re.match(rb"^pylock\.[\w-]+\.toml$", b)):
            return name, True
        if b in manifests:
            return name, False
    return None


def is_lockfile(path: bytes) -> bool:
    eco = _ecosystem(path)
    return (eco is not None and eco[1]) or bool(
        re.match(rb"^requirements[\w.-]*\.lock$", basename(path))
    )


def _is_pure_manifest(path: bytes) -> bool:
    return basename(path) in _PURE_MANIFESTS or is_requirements_file(path)


def is_requirements_file(path: bytes) -> bool:
    """pip's requirements and constraints files (and pip-compile's `.in` inputs)."""
    b = basename(path)
    in_req_dir = b"requirements" in dirs_of(path) and b.endswith((b".txt", b".in"))
    return bool(_REQUIREMENTS.match(b)) or in_req_dir


# --- who reads a requirements file -------------------------------------------------

# A requirements file is only a list of names until something installs from it. The
# policy counts it as a dependency manifest when it can see a reader: a configured check
# command that names it; the project's packaging (an install of the project reads
# pyproject.toml / setup.cfg / setup.py, which may take dependencies from it); tox or
# nox configuration that names it, when a check runs tox or nox; another requirements
# file that is read and includes it (`-r`, `-c`). A check command that runs something
# the policy cannot read (make, just, a shell script) counts every requirements file.
_PACKAGING_FILES = frozenset({b"pyproject.toml", b"setup.cfg", b"setup.py"})
_RUNNER_FILES: dict[bytes, re.Pattern[str]] = {
    b"tox.ini": re.compile(r"\btox\b"),
    b"noxfile.py": re.compile(r"\bnox\b"),
}
# Python files read whole when unchanged (the rest of the tree's Python: imports only)
PYTHON_READ_WHOLE = frozenset(b for b in (*_PACKAGING_FILES, *_RUNNER_FILES) if b.endswith(b".py"))
_OPAQUE_RUNNER = re.compile(r"(?:^|[\s;&|(])(?:make|just|task|invoke|bash|sh|\./\S+|\S+\.sh)\b")
_INCLUDE = re.compile(rb"^\s*(?:-r|-c|--requirement|--constraint)[\s=]+(\S+)", re.MULTILINE)


# Tool configuration that runs only when its tool does: a check that runs tox, nox,
# pre-commit, make or just (or a runner the policy cannot read) runs it in the clean
# room; otherwise it runs in CI under the workflow's existing privileges, as every test
# file of the change does there, and on developers' machines — which the workflow
# rules and review cover, not the proof.
_TOOL_FILES: dict[bytes, re.Pattern[str]] = {
    b"tox.ini": re.compile(r"\btox\b"),
    b"noxfile.py": re.compile(r"\bnox\b"),
    b".pre-commit-config.yaml": re.compile(r"\bpre-commit\b|\bprek\b"),
    b"Makefile": re.compile(r"\bmake\b"),
    b"makefile": re.compile(r"\bmake\b"),
    b"GNUmakefile": re.compile(r"\bmake\b"),
    b"justfile": re.compile(r"\bjust\b"),
    b"Justfile": re.compile(r"\bjust\b"),
    # lockfiles only their own tool installs from (`pip install -e .` reads none of them)
    b"uv.lock": re.compile(r"\buvx?\b"),
    b"poetry.lock": re.compile(r"\bpoetry\b"),
    b"pdm.lock": re.compile(r"\bpdm\b"),
    b"Pipfile.lock": re.compile(r"\bpipenv\b"),
}


def tool_idle(ctx: Context, path: bytes) -> bool:
    """Whether `path` is a tool's configuration (tox.ini, noxfile.py,
    .pre-commit-config.yaml, Makefile, justfile) or lockfile (uv.lock, poetry.lock,
    pdm.lock, Pipfile.lock) that no configured check runs."""
    rx = _TOOL_FILES.get(basename(path))
    if rx is None:
        return False
    for c in ctx.spec.commands:
        if rx.search(c) or _OPAQUE_RUNNER.search(c):
            return False
    return True


# PEP 735 `[dependency-groups]`: `pip install -e .[test]` installs extras, never groups;
# uv, pdm, poetry, `pip install --group` and tox (its `dependency_groups`) do.
_GROUP_INSTALLERS = re.compile(r"\buvx?\b|\bpdm\b|\bpoetry\b|--group\b|\btox\b|\bnox\b")


def groups_idle(ctx: Context) -> bool:
    """Whether no configured check can install a pyproject.toml's dependency groups."""
    return not any(
        _GROUP_INSTALLERS.search(c) or _OPAQUE_RUNNER.search(c) for c in ctx.spec.commands
    )


def _mentions(text: bytes, path: bytes) -> bool:
    return path in text or basename(path) in text


def requirements_read(ctx: Context, path: bytes) -> bool:
    """Whether anything the policy can see installs from the requirements file `path`
    (see above); True when the proven tree's files are not at hand."""
    if ctx.tree_files is None:
        return True
    commands = [c.encode("utf-8", "surrogateescape") for c in ctx.spec.commands]
    if any(_OPAQUE_RUNNER.search(c.decode("utf-8", "replace")) for c in commands):
        return True
    readers: list[bytes] = [*commands]
    for p, content in ctx.tree_files.items():
        b = basename(p)
        runner = _RUNNER_FILES.get(b)
        if b in _PACKAGING_FILES or (
            runner is not None and any(runner.search(as_text(c)) for c in commands)
        ):
            readers.append(content)
    if any(_mentions(r, path) for r in readers):
        return True
    # included by a requirements file that is itself read
    read = {
        p
        for p in ctx.tree_files
        if is_requirements_file(p) and p != path and any(_mentions(r, p) for r in readers)
    }
    seen: set[bytes] = set()
    while read:
        p = read.pop()
        seen.add(p)
        for m in _INCLUDE.finditer(ctx.tree_files.get(p, b"")):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(p), m.group(1)))
            if target == path:
                return True
            if target in ctx.tree_files and target not in seen:
                read.add(target)
    return False


# --- sections of structured manifests ----------------------------------------------

_TOML_HEADER = lazy(r"^\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = lazy(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")
_JSON_KEY = lazy(r'^\s*"((?:[^"\\]|\\.)*)"\s*:')


def indent(s: str) -> int:
    return len(s) - len(s.lstrip(" \t"))


def _section(line: str, before: Sequence[str], json: bool, whole_file: bool) -> str | None:
    """Dotted section of `line` given the lines before it (nearest last).

    TOML: `table.key` (the enclosing table header, then the key whose value spans the
    line). JSON: the chain of enclosing keys by indentation. None when the lines seen do
    not reach a TOML header or (JSON, or TOML root) the start of the file.
    """
    if not json:
        h = _TOML_HEADER.match(line)
        if h:
            return h.group(1).replace('"', "").replace("'", "")
    rx = _JSON_KEY if json else _TOML_KEY
    keys: list[str] = []
    own = rx.match(line)
    if own:
        keys.append(own.group(1).strip("\"'"))
    level = indent(line) if line.strip() else 1 << 30
    if own and json and level <= 2:
        return ".".join(keys)  # a top-level key of a formatted JSON document
    for prev in reversed(before):
        if not prev.strip():
            continue
        if not json:
            h = _TOML_HEADER.match(prev)
            if h:
                table = h.group(1).replace('"', "").replace("'", "")
                return ".".join([table, *reversed(keys)])
        ind = indent(prev)
        if ind < level:
            m = rx.match(prev)
            if m:
                keys.append(m.group(1).strip("\"'"))
            level = ind
            if json and (ind == 0 or (m and ind <= 2)):
                return ".".join(reversed(keys))
    if whole_file:
        return ".".join(reversed(keys))
    return None


def manifest_sections(
    diff: FileDiff, new_content: bytes | None
) -> Iterator[tuple[HunkLine, str | None]]:
    """(changed line, its section or None when it cannot be told) for a structured file."""
    json = diff.path.endswith(b".json")
    full = as_text(new_content).split("\n") if new_content is not None else None
    if full is not None and not all(
        0 < ln.new <= len(full) and full[ln.new - 1] == as_text(ln.text)
        for hunk in diff.hunks
        for ln in hunk
        if ln.kind != "-"
    ):
        full = None  # the supplied content is not this patch's new side: do not trust it
    for hunk in diff.hunks:
        seen: list[str] = []  # new-side lines (context, added) of this hunk so far
        gone: list[str] = []  # deleted lines since the last new-side line
        for ln in hunk:
            text = as_text(ln.text)
            if ln.kind != " ":
                before = full[: max(0, ln.new - 1)] if full is not None else seen
                if ln.kind == "-":
                    before = [*before, *gone]
                yield ln, _section(text, before, json, full is not None)
            if ln.kind == "-":
                gone.append(text)
            else:
                seen.append(text)
                gone = []


_PY_HOOK_SECTIONS = lazy(
    r"^(?:build-system|project\.(?:scripts|gui-scripts|entry-points)|tool\.setuptools\.cmdclass"
    r"|tool\.hatch\.(?:build|metadata\.hooks)|tool\.pdm\.build|tool\.poetry\.(?:build|scripts|plugins)"
    r"|tool\.scikit-build|tool\.maturin|tool\.setuptools-rust|package\.build|package\.links"
    r"|scripts)(?:\.|$)|(?:^|\.)(?:hooks?|cmdclass)(?:\.|$)"
)
_NPM_LIFECYCLE = lazy(
    r'^\s*"(?:pre|post)?(?:install|uninstall|prepare|prepublish|prepublishOnly|publish|pack|'
    r'test|build|start|restart|stop|version|dependencies)"\s*:'
)
_DEP_SECTIONS = lazy(
    r"^(?:project\.(?:dependencies|optional-dependencies)|dependency-groups|build-system\.requires"
    r"|tool\.poetry\.(?:dependencies|dev-dependencies|group|source)|tool\.pdm\.dev-dependencies"
    r"|tool\.uv|tool\.pixi\.(?:dependencies|pypi-dependencies)"
    r"|(?:target\..+\.|workspace\.)?(?:dev-|build-)?dependencies|patch|replace"
    r"|(?:dev|peer|optional|bundled?)?[dD]ependencies|overrides|resolutions|require(?:-dev)?"
    r"|repositories|packageManager|pnpm\.overrides)(?:\.|$)"
)
# setup.cfg / tox.ini (INI): only the sections that run or install something.
_INI_HOOK_SECTIONS: dict[bytes, re.Pattern[str]] = {
    b"setup.cfg": lazy(r"^options\.(?:entry_points|cmdclass|setup_requires)(?:\.|$)"),
    b"tox.ini": lazy(r"^(?:tox|testenv)"),  # tox runs these commands in CI
}
_INI_DEP_SECTIONS: dict[bytes, re.Pattern[str]] = {
    b"setup.cfg": lazy(
        r"^options\.(?:install_requires|setup_requires|tests_require|extras_require)(?:\.|$)"
    ),
    b"tox.ini": lazy(r"^(?:tox|testenv[^.]*)\.(?:deps|requires)(?:\.|$)"),
}


def _section_hits(
    ctx: Context, entry: InventoryEntry, rx: re.Pattern[str], npm_lifecycle: bool
) -> Iterator[tuple[HunkLine, str | None]]:
    """Changed lines of a structured manifest whose section matches rx (or is unknown)."""
    diff = ctx.diff_of(entry)
    if diff is None:
        return
    content = ctx.tree_files.get(entry.path) if ctx.tree_files is not None else None
    for ln, section in manifest_sections(diff, content):
        if not ln.text.strip():
            continue
        if section is None:
            yield ln, None
        elif rx.search(section) or (npm_lifecycle and _NPM_LIFECYCLE.match(as_text(ln.text))):
            yield ln, section


def describe_line(ln: HunkLine, section: str | None, what: str) -> RawFinding:
    verb = "added" if ln.kind == "+" else "deleted"
    where = f"in [{section}]" if section else "in a section the patch does not show"
    line = ln.new if ln.kind == "+" else None
    return RawFinding(None, f"{what}: line {verb} {where}", line)


def wants_tree_file(path: bytes) -> bool:
    """Files of the proven tree the policy reads when given (`evaluate(tree_files=...)`).

    Python sources (import graph), structured manifests (sections of changed lines),
    lockfiles (only their existence matters: an empty value is enough) and
    `.pre-commit-config.yaml` (which hook repository a moved `rev:` belongs to) and
    requirements files (which one includes which: `requirements_read`).
    """
    return (
        path.endswith(b".py")
        or basename(path) in MIXED_MANIFESTS
        or is_lockfile(path)
        or basename(path) == b".pre-commit-config.yaml"  # the `repo:` of a moved `rev:`
        or is_requirements_file(path)  # which requirements files include which
    )


def is_build_time_path(path: bytes) -> bool:
    """Files that run at install/build/test/interpreter-start time (whole-file classes)."""
    return is_build_file(path) or basename(path) in MIXED_MANIFESTS


def check_build_hook(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        note = pin_hold_note(ctx, e)
        if all(tool_idle(ctx, p) for p in paths_of(e)):
            continue
        for p in paths_of(e):
            if is_build_file(p) and note != "":
                tail = pins_suffix(ctx, e, p) + (note or "")
                yield RawFinding(p, f"build/install-time file {e.status.value}{tail}")
        b = basename(e.path)
        if b in MIXED_MANIFESTS and e.status is not ChangeStatus.DELETED:
            if e.status is ChangeStatus.ADDED:
                yield RawFinding(e.path, "build manifest added")
                continue
            npm = b == b"package.json"
            rx = _INI_HOOK_SECTIONS.get(b, _PY_HOOK_SECTIONS)
            for ln, section in _section_hits(ctx, e, rx, npm):
                f = describe_line(ln, section, "build hook or script changed")
                yield RawFinding(e.path, f.message, f.line)


def check_dependency(ctx: Context) -> Iterator[RawFinding]:
    for e, what in _dependency_entries(ctx):
        d = ctx.diff_of(e)
        moved = describe_requirements(d) if d is not None and not is_lockfile(e.path) else None
        yield RawFinding(e.path, f"{what}: {moved}" if moved else what)


def _dependency_entries(ctx: Context) -> Iterator[tuple[InventoryEntry, str]]:
    """Inventory entries that change dependencies, with a one-line description."""
    for e in ctx.inventory:
        if is_lockfile(e.path):
            if all(tool_idle(ctx, p) for p in paths_of(e)):
                continue  # no check runs the tool that installs from it
            yield e, f"lockfile {e.status.value}"
        elif _is_pure_manifest(e.path):
            if is_requirements_file(e.path) and not any(
                requirements_read(ctx, p) for p in paths_of(e)
            ):
                continue  # no check installs from it and nothing includes it
            yield e, f"dependency manifest {e.status.value}"
        elif basename(e.path) in MIXED_MANIFESTS:
            if all(tool_idle(ctx, p) for p in paths_of(e)):
                continue  # tox.ini that no check runs installs nothing in the clean room
            if e.status in (ChangeStatus.ADDED, ChangeStatus.DELETED):
                yield e, f"dependency manifest {e.status.value}"
                continue
            rx = _INI_DEP_SECTIONS.get(basename(e.path), _DEP_SECTIONS)
            sections = sorted({s or "?" for _, s in _section_hits(ctx, e, rx, False)})
            if basename(e.path) == b"pyproject.toml" and groups_idle(ctx):
                sections = [x for x in sections if not x.startswith("dependency-groups")]
            if sections:
                where = ", ".join(
                    f"[{s}]" if s != "?" else "a section the patch does not show" for s in sections
                )
                yield e, f"dependencies changed in {where}"


def check_lockfile_drift(ctx: Context) -> Iterator[RawFinding]:
    changed = {e.path: e for e in ctx.inventory}
    dep_changed = {e.path for e, _ in _dependency_entries(ctx)}
    known = set(changed) | (set(ctx.tree_files) if ctx.tree_files is not None else set())
    known -= {e.path for e in ctx.inventory if e.status is ChangeStatus.DELETED}

    def under(d: bytes, p: bytes) -> bool:
        return not d or p.startswith(d + b"/")

    for e in ctx.inventory:
        eco = _ecosystem(e.path)
        if eco is None:
            continue
        name, is_lock = eco
        manifests, locks = _ECOSYSTEMS[name]
        # lockfiles no check installs from (their tool never runs) do not count
        locks = frozenset(x for x in locks if not tool_idle(ctx, x))
        if is_lock and tool_idle(ctx, e.path):
            continue
        d = posixpath.dirname(e.path)
        if is_lock and e.status is not ChangeStatus.DELETED:
            if not any(
                basename(p) in manifests and (posixpath.dirname(p) == d or under(d, p))
                for p in changed
            ):
                yield RawFinding(e.path, "lockfile changed without its manifest")
        elif not is_lock and e.path in dep_changed and e.status is ChangeStatus.MODIFIED:
            # Only where a lockfile is known to exist (in the patch or the proven tree):
            # many projects have none, and the patch alone cannot tell.
            lock_dirs = {posixpath.dirname(p) for p in known if basename(p) in locks}
            ancestors = [x for x in lock_dirs if x == d or under(x, e.path)]
            if ancestors and not any(
                basename(p) in locks and posixpath.dirname(p) in ancestors for p in changed
            ):
                yield RawFinding(e.path, "dependencies changed without their lockfile")
