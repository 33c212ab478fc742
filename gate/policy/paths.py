"""Path classes and the rules decided by path alone (issue 6). Pure.

Glob semantics (`glob_match`) are gitignore's, as `pathspec` implements them (the tests
hold it to the list below, which the README documents):

- A pattern is matched against the whole path, `/`-separated, case-sensitive. Paths are
  bytes in git; they are decoded as UTF-8 with `surrogateescape`, so undecodable bytes
  never match a literal but do match `*` and `?`.
- A pattern with no `/` (other than a trailing one) matches at any depth
  (`Dockerfile` matches `Dockerfile` and `docker/Dockerfile`); a pattern with a `/` is
  anchored at the repository root; a leading `/` only anchors.
- `*` matches anything but `/`; `?` one character but `/`; `[abc]`, `[a-z]`, `[!a]`
  character classes; `\\x` a literal `x`.
- `**` as a whole segment: leading `**/` matches in any directory, `a/**/b` zero or more
  directories between, trailing `/**` everything below. `**` elsewhere is `*`.
- A pattern that matches a directory matches everything below it (`vendor` matches
  `vendor/x/y.c`); a trailing `/` matches directories only.
- No negation: the config loader refuses a leading `!` (see `glob_problem`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator
from functools import lru_cache

from pathspec import GitIgnoreSpec

from gate.model import ChangeStatus, InventoryEntry, PolicySpec, path_display
from gate.policy.context import Check, Context, RawFinding, as_text, basename, dirs_of, paths_of
from gate.policy.patch import path_text
from gate.policy.pinbump import pin_status

__all__ = [
    "check_binary_added",
    "check_binary_changed",
    "check_ci_matrix",
    "check_compiled_code",
    "check_plugin_metadata",
    "check_gate_config",
    "check_git_plumbing",
    "check_new_executable",
    "check_symlink",
    "DEFAULT_TESTS",
    "glob_match",
    "glob_problem",
    "glob_rule",
    "is_build_file",
    "is_ci_path",
    "is_compiled_path",
    "is_git_plumbing_path",
    "is_test_path",
    "plugin_metadata_root",
    "selects_tests",
]


# --- globs -------------------------------------------------------------------------


def glob_problem(pattern: str) -> str | None:
    """Why a configured glob is unusable, or None. For the config loader."""
    if not pattern or not pattern.strip("/"):
        return "a non-empty path pattern"
    if pattern.startswith("!"):
        return "a pattern without '!' (negation is not supported)"
    if "\x00" in pattern:
        return "a pattern without NUL characters"
    depth = 0
    for c in pattern:
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
    if depth:
        return "a pattern with balanced '[' ']'"
    return None


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> tuple[GitIgnoreSpec, bool]:
    """(spec, dir_only): a trailing `/` is matched against the path's directories only."""
    dir_only = pattern.endswith("/")
    line = pattern.rstrip("/") if dir_only else pattern
    # gitignore *files* read a leading `#` as a comment and drop trailing spaces; a
    # configured glob means them literally
    if line.startswith("#"):
        line = "\\" + line
    stripped = line.rstrip(" ")
    line = stripped + "\\ " * (len(line) - len(stripped))
    return GitIgnoreSpec.from_lines([line]), dir_only


def glob_match(pattern: str, path: bytes) -> bool:
    """Whether `path` (or a directory above it) matches `pattern`; see the module doc."""
    if not pattern.strip("/"):
        return False
    spec, dir_only = _compile(pattern)
    text = path_text(path)
    if not dir_only:
        return spec.match_file(text)  # a directory pattern covers what is below it
    segs = text.split("/")
    return any(spec.match_file("/".join(segs[:k])) for k in range(1, len(segs)))


# --- path classes ------------------------------------------------------------------

_CI_GLOBS = (
    ".github/workflows/**",
    ".github/actions/**",
    "action.yml",
    "action.yaml",
    ".gitlab-ci.yml",
    ".gitlab/ci/**",
    ".circleci/**",
    ".travis.yml",
    "azure-pipelines.yml",
    ".azure-pipelines/**",
    "Jenkinsfile",
    ".buildkite/**",
    ".woodpecker.yml",
    ".woodpecker/**",
)


# A path's class is asked by many rules; remembered per path so that a patch of n files
# matches each class's globs n times, not n times per rule (issue 46).
@lru_cache(maxsize=1 << 16)
def is_ci_path(path: bytes) -> bool:
    return any(glob_match(g, path) for g in _CI_GLOBS)


# Files whose content runs when the project is installed, built, tested or an
# interpreter starts: setup scripts, make, containers, hook managers, package-manager
# configuration, Python startup files. pyproject.toml / package.json / Cargo.toml are
# decided per changed line (see `manifest_sections`).
_BUILD_BASENAMES = frozenset(
    {
        b"setup.py",
        b"conftest.py",
        b"Makefile",
        b"makefile",
        b"GNUmakefile",
        b"CMakeLists.txt",
        b"Containerfile",
        b".pre-commit-config.yaml",
        b".pre-commit-hooks.yaml",
        b".npmrc",
        b".yarnrc",
        b".yarnrc.yml",
        b".pnpmfile.cjs",
        b"noxfile.py",
        b"sitecustomize.py",
        b"usercustomize.py",
        b"build.rs",
        b".envrc",
        b"justfile",
        b"Justfile",
        b"Taskfile.yml",
        b"Rakefile",
        b"build.gradle",
        b"build.gradle.kts",
        b"settings.gradle",
        b"pom.xml",
        b"docker-compose.yml",
        b"docker-compose.yaml",
        b"compose.yml",
        b"compose.yaml",
    }
)


def is_build_file(path: bytes) -> bool:
    b = basename(path)
    return (
        b in _BUILD_BASENAMES
        or b.endswith((b".mk", b".pth", b".Dockerfile", b".dockerfile"))
        or b.startswith((b"Dockerfile", b"Containerfile"))
    )


_HOOK_DIRS = frozenset({b".githooks", b".husky", b"git-hooks", b".git-hooks", b"githooks"})


def is_git_plumbing_path(path: bytes) -> bool:
    b = basename(path)
    if b in (b".gitattributes", b".gitmodules", b".lfsconfig"):
        return True
    return any(d in _HOOK_DIRS for d in dirs_of(path))


_TEST_DIRS = frozenset({b"tests", b"test", b"__tests__", b"testing", b"spec", b"specs"})
_CODE_EXT = (
    b".py",
    b".pyi",
    b".js",
    b".jsx",
    b".ts",
    b".tsx",
    b".mjs",
    b".cjs",
    b".go",
    b".rb",
    b".java",
    b".kt",
    b".rs",
    b".c",
    b".cc",
    b".cpp",
    b".cs",
    b".php",
    b".sh",
    b".swift",
)
_TEST_NAME = re.compile(
    rb"^(?:test_.+\.py|.+_tests?\.py|tests?\.py|conftest\.py|.+_test\.go|.+\.(?:test|spec)\."
    rb"(?:[cm]?[jt]sx?)|.+Tests?\.(?:java|kt|cs|swift)|.+_(?:spec|test)\.rb|test_.+\.(?:sh|rb)"
    rb"|.+_test\.(?:c|cc|cpp|rs|exs))$"
)


# SPEC §3.1/§3.2: the trusted test files by default, one definition for the policy (a
# Python test path is `is_test_path`) and the differential (the files the trusted run takes
# from the base). Test directories at any depth (`calc/tests/`, pluggy's and pytest's
# `testing/`), test-named modules anywhere, and every conftest.py.
DEFAULT_TESTS = (
    "**/tests/**",
    "**/test/**",
    "**/testing/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/*_tests.py",
    "**/tests.py",
    "**/conftest.py",
)


def selects_tests(globs: tuple[str, ...] = ()) -> Callable[[bytes], bool]:
    """Whether a path is a test file: matched by `globs` (a check's `tests`), or by
    DEFAULT_TESTS when there are none; conftest.py always is."""
    patterns = (*(globs or DEFAULT_TESTS), "**/conftest.py")
    return lambda path: any(glob_match(g, path) for g in patterns)


_is_default_test = selects_tests()


@lru_cache(maxsize=1 << 16)
def is_test_path(path: bytes) -> bool:
    """A test source file. Python: DEFAULT_TESTS, the differential's definition; other
    languages: a test-named file anywhere, or source code under a test directory."""
    b = basename(path)
    if b.endswith((b".py", b".pyi")):
        return _is_default_test(path)
    if _TEST_NAME.match(b):
        return True
    return b.endswith(_CODE_EXT) and any(d in _TEST_DIRS for d in dirs_of(path))


_EXEC_DIRS = frozenset({b"scripts", b"script", b"bin", b"tools", b"sbin", b".bin"})


def check_gate_config(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        for p in paths_of(e):
            if p == ctx.config_path:
                yield RawFinding(
                    p,
                    f"the gate's configuration is {e.status.value}; this run is judged by the "
                    "base's configuration and the change takes effect only after merge",
                )


def pin_hold_note(ctx: Context, entry: InventoryEntry) -> str | None:
    """ "" for a verified pin bump (`pin-bump-verified` records it; nothing else holds
    the file), `; not verified: WHY` for a change that moves pins, None otherwise."""
    pins = pin_status(ctx, entry, ci=is_ci_path(entry.path))
    if pins is None:
        return None
    return "" if pins[1] is None else f"; not verified: {pins[1]}"


# A workflow's test matrix: `- {python: '3.13'}`, `- {name: Windows, python: '3.12',
# os: windows-latest, tox: py312}`, `- '3.13'`. Values that are plain tokens cannot
# inject into the `run:` steps that read them (`${{ matrix.python }}`); `os` must be a
# GitHub-hosted runner label (a self-hosted runner reaches the network it sits in).
_MATRIX_KEYS = frozenset(
    {"name", "python", "python-version", "tox", "toxenv", "py", "version", "os", "experimental"}
)
_MATRIX_ITEM = re.compile(r"""^\s*-\s*(['"]?)([A-Za-z0-9_.+-]*)\1\s*(?:#.*)?$""")
_MATRIX_MAP = re.compile(r"^\s*-\s*\{(.*)\}\s*(?:#.*)?$")
_MATRIX_PAIR = re.compile(r"""^\s*([\w-]+)\s*:\s*(['"]?)([A-Za-z0-9_.+-]*)\2\s*$""")
_HOSTED = re.compile(
    r"^(?:ubuntu|windows|macos)-(?:latest|[0-9][0-9.]*(?:-arm)?(?:-large|-xlarge)?)$"
)


def _matrix_line(text: str) -> bool:
    if not text.strip() or text.lstrip().startswith("#"):
        return True
    if _MATRIX_ITEM.match(text):
        return True
    m = _MATRIX_MAP.match(text)
    if m is None:
        return False
    for pair in m.group(1).split(","):
        p = _MATRIX_PAIR.match(pair)
        if p is None or p.group(1) not in _MATRIX_KEYS:
            return False
        if p.group(1) == "os" and not _HOSTED.match(p.group(3)):
            return False
    return True


def matrix_only(ctx: Context, entry: InventoryEntry) -> bool:
    """Whether a modified workflow's every changed line is a test-matrix entry of plain
    values (or blank, or a comment): which Pythons and hosted runners CI tests on."""
    if entry.status is not ChangeStatus.MODIFIED or not glob_match(
        ".github/workflows/**", entry.path
    ):
        return False
    d = ctx.diff_of(entry)
    if d is None or not (d.added or d.deleted):
        return False
    texts = [as_text(ln.text) for ln in (*d.added, *d.deleted)]
    if all(not t.strip() or t.lstrip().startswith("#") for t in texts):
        return False  # comments only: `ci-workflow-changed` records it
    return all(_matrix_line(t) for t in texts)


def check_ci_matrix(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if matrix_only(ctx, e):
            d = ctx.diff_of(e)
            n = len(d.added) + len(d.deleted) if d is not None else 0
            yield RawFinding(e.path, f"only test-matrix entries changed ({n} line(s))")


def check_pin_bump_verified(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        pins = pin_status(ctx, e, ci=is_ci_path(e.path))
        if pins is None or pins[1] is not None:
            continue
        moved = "; ".join(m.describe() for m in pins[0])
        yield RawFinding(
            e.path,
            f"pins moved to newer released tags of the same upstream, each SHA that tag's "
            f"commit (looked up on GitHub); nothing else changed: {moved}",
        )


def check_git_plumbing(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.gitlink:
            yield RawFinding(
                e.path,
                f"submodule pointer {e.status.value}; submodule contents are outside the "
                "evidence (not materialized, not proven)",
            )
        for p in paths_of(e):
            if is_git_plumbing_path(p):
                yield RawFinding(p, f"git plumbing {e.status.value}: changes what a checkout means")


def _symlink_escape_reason(entry: InventoryEntry) -> str | None:
    if entry.new_mode != 0o120000 or entry.status is ChangeStatus.DELETED:
        return None
    target = entry.symlink_target
    if entry.symlink_absolute or (target is not None and target.startswith(b"/")):
        return "absolute"
    if entry.symlink_escapes:
        return "escaping"
    if target is None:
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(entry.path), target))
    if joined == b".." or joined.startswith(b"../"):
        return "escaping"
    return None


def _symlink_loop(entry: InventoryEntry) -> str | None:
    """What a link whose resolution never ends leads into, in words (None: it ends)."""
    chain = entry.symlink_loop
    if not chain or entry.new_mode != 0o120000 or entry.status is ChangeStatus.DELETED:
        return None
    shown = " -> ".join(path_display(p) for p in chain)
    if chain[0] != entry.path:  # it resolves; another link's resolution loops through it
        return (
            f"looping symlink: the resolution of {path_display(chain[0])} passes through it "
            f"into a symlink loop: {shown}"
        )
    # the link itself in the loop (a -> b -> a), or on the way into one (c -> a -> b -> a)
    into = "is" if chain[0] == chain[-1] else "leads into"
    return f"looping symlink: its target {into} a symlink loop: {shown}"


def check_symlink(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        loop = _symlink_loop(e)
        if loop is not None:  # it does not leave the tree; it cannot be resolved at all
            yield RawFinding(e.path, loop)
            continue
        why = _symlink_escape_reason(e)
        if why is not None:
            yield RawFinding(e.path, f"{why} symlink: its target lies outside the repository")


def unmaterializable(entry: InventoryEntry) -> bool:
    """A symlink the patch adds or changes whose relative target, joined to its directory,
    climbs above the tree's root (`up -> ../x`, `a/up -> ../../x`): the Docker daemon refuses
    to extract it into /workspace ("invalid symlink"), so the tree as committed cannot be
    materialized in the clean room (SPEC §1). Absolute targets extract as they are."""
    target = entry.symlink_target
    if entry.new_mode != 0o120000 or entry.status is ChangeStatus.DELETED or target is None:
        return False
    if target.startswith(b"/"):
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(entry.path), target))
    return joined == b".." or joined.startswith(b"../")


def check_symlink_unmaterializable(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if unmaterializable(e):
            yield RawFinding(
                e.path,
                "symlink climbs out of the tree through `..`: the clean room cannot "
                "materialize it as committed (the Docker daemon refuses to extract it), so "
                "nothing of this tree can run or be proven. Make it point inside the "
                "repository, or remove it",
            )


def check_new_executable(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.new_mode != 0o100755 or e.old_mode == 0o100755:
            continue
        if any(d in _EXEC_DIRS for d in dirs_of(e.path)):
            continue
        how = "added as executable" if e.old_mode is None else "made executable"
        yield RawFinding(e.path, f"file {how} outside scripts/, bin/, tools/")


# Compiled code: bytecode and native extensions run in place of (or beside) source, and
# no reviewer reads them (SPEC §3.2: committed bytecode must never stand in for source).
_COMPILED = re.compile(rb"\.(?:pyc|pyo|so|pyd|dylib)$|\.so\.[0-9][0-9.]*$")


def is_compiled_path(path: bytes) -> bool:
    return bool(_COMPILED.search(basename(path))) or b"__pycache__" in dirs_of(path)


def check_compiled_code(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.status is ChangeStatus.DELETED or e.gitlink or not is_compiled_path(e.path):
            continue
        if e.new_mode == 0o120000:
            # Python imports `calc.pyc -> assets/calc.dat` as bytecode, whatever the target
            # is called: the link's name decides, so the link is compiled code.
            yield RawFinding(
                e.path,
                f"symlink named like compiled code {e.status.value}: Python loads its target "
                "as compiled code, which cannot be reviewed",
            )
        else:
            yield RawFinding(
                e.path,
                f"compiled code {e.status.value}: it runs in place of or beside the source, "
                "and cannot be reviewed",
            )


# Package metadata where Python looks for installed distributions: a `*.dist-info` or
# `*.egg-info` there is an installed package to `importlib.metadata`, so its
# entry_points.txt can register a `pytest11` plugin that every test run loads; `.pth`
# and `.egg-link` files add paths or run code at start-up. A sys.path root is the
# repository root (the working directory), `src/`, or any top-level directory (pytest's
# rootdir-relative imports and `pythonpath` settings put those on the path).
_METADATA_DIRS = (b".dist-info", b".egg-info")
_METADATA_FILES = (b".egg-link", b".pth", b".egg-info")


def plugin_metadata_root(path: bytes) -> bytes | None:
    """The metadata entry (dir or file) of `path` when it sits at a sys.path root. The
    suffix in any case: `importlib.metadata` finds `X.Dist-Info` as it finds
    `x.dist-info`."""
    parts = path.split(b"/")
    for i, comp in enumerate(parts):
        last = i == len(parts) - 1
        lowered = comp.lower()
        if (not last and lowered.endswith(_METADATA_DIRS)) or (
            last and lowered.endswith(_METADATA_FILES)
        ):
            return b"/".join(parts[: i + 1]) if i <= 1 else None
    return None


def check_plugin_metadata(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.status is ChangeStatus.DELETED:
            continue
        root = plugin_metadata_root(e.path)
        if root is not None:
            where = as_text(root.rsplit(b"/", 1)[0]) + "/" if b"/" in root else "the root"
            yield RawFinding(
                e.path,
                f"package metadata {e.status.value} at a sys.path root ({where}): Python "
                "treats it as an installed package, whose entry points (e.g. pytest11) "
                "load into every test run",
            )


def check_binary_added(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.binary and e.status is ChangeStatus.ADDED and not is_compiled_path(e.path):
            yield RawFinding(
                e.path, f"binary file added ({e.size if e.size is not None else '?'} bytes)"
            )


def check_binary_changed(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if (
            e.binary
            and not is_compiled_path(e.path)
            and e.status
            in (
                ChangeStatus.MODIFIED,
                ChangeStatus.RENAMED,
                ChangeStatus.TYPE_CHANGED,
            )
        ):
            yield RawFinding(e.path, f"binary file {e.status.value}")


def glob_rule(globs: Callable[[PolicySpec], tuple[str, ...]], what: str) -> Check:
    def check(ctx: Context) -> Iterator[RawFinding]:
        for e in ctx.inventory:
            for p in paths_of(e):
                for g in globs(ctx.spec):
                    if glob_match(g, p):
                        yield RawFinding(p, f"{what} path {e.status.value} (matches {g!r})")

    return check
