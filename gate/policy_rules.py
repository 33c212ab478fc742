"""The built-in rule catalog of the policy (issue 6). Pure.

Each rule reads every effect (every inventory entry and every added/deleted line of the
patch) and yields raw findings; `gate.policy.evaluate` applies the rule's effective
decision and merges them, worst wins. A rule reads what the change does (paths, modes,
lines), never how it is described (commit messages, PR titles).

Secrets found by `private-key` and `secret-token` are never echoed: findings carry the
kind of secret, its length and the first 8 hex digits of its SHA-256 only.

A test run's verdict is only as good as what runs the tests, so the catalog also holds
changes to *how* tests are found and run, not only to the tests themselves:
`module-shadowing` (a module placed where the runner imports from, replacing pytest, its
dependencies or the standard library — e.g. a root `pytest.py` that prints "2 passed"
and exits 0), `test-config-changed` (any line of pytest's configuration, which decides
what is collected), `tests-skipped` (skip markers, deselection, `__test__`,
`collect_ignore`, module-level `pytestmark`) and `tests-deleted` (test files, and tests
inside kept files, that are not added back elsewhere). Code that the tests import can
still misbehave at run time; that is for the checks' evidence (JUnit counts), not for
this static policy.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gate.model import ChangeStatus, Decision, InventoryEntry, PolicySpec
from gate.policy_patch import FileDiff, HunkLine, glob_match

__all__ = [
    "CATALOG",
    "Context",
    "RawFinding",
    "Rule",
    "is_build_time_path",
    "is_ci_path",
    "is_git_plumbing_path",
    "is_test_path",
    "wants_tree_file",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """A built-in rule: stable kebab-case id, default decision, one-line rationale."""

    id: str
    default: Decision
    rationale: str


@dataclass(frozen=True, slots=True)
class RawFinding:
    path: bytes | None
    message: str
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """Everything a rule may read. `diffs` is keyed by FileDiff.path."""

    inventory: tuple[InventoryEntry, ...]
    diffs: Mapping[bytes, FileDiff]
    spec: PolicySpec
    config_path: bytes
    tree_files: Mapping[bytes, bytes] | None
    blast_scores: Mapping[str, int]
    thresholds: Mapping[str, int | None]

    def diff_of(self, entry: InventoryEntry) -> FileDiff | None:
        return self.diffs.get(entry.path) or (
            self.diffs.get(entry.old_path) if entry.old_path is not None else None
        )


def _paths(entry: InventoryEntry) -> tuple[bytes, ...]:
    """Both sides of a rename: a rule on paths must see where a file came from too."""
    if entry.old_path is not None and entry.old_path != entry.path:
        return (entry.path, entry.old_path)
    return (entry.path,)


def _base(path: bytes) -> bytes:
    return path.rsplit(b"/", 1)[-1]


def _dirs(path: bytes) -> list[bytes]:
    return path.split(b"/")[:-1]


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


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


def is_ci_path(path: bytes) -> bool:
    return any(glob_match(g, path) for g in _CI_GLOBS)


# Files whose content runs when the project is installed, built, tested or an
# interpreter starts: setup scripts, make, containers, hook managers, package-manager
# configuration, Python startup files. pyproject.toml / package.json / Cargo.toml are
# decided per changed line (see `_manifest_sections`).
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


def _is_build_file(path: bytes) -> bool:
    b = _base(path)
    return (
        b in _BUILD_BASENAMES
        or b.endswith((b".mk", b".pth", b".Dockerfile", b".dockerfile"))
        or b.startswith((b"Dockerfile", b"Containerfile"))
    )


def wants_tree_file(path: bytes) -> bool:
    """Files of the proven tree the policy reads when given (`evaluate(tree_files=...)`).

    Python sources (import graph), structured manifests (sections of changed lines) and
    lockfiles (only their existence matters: an empty value is enough).
    """
    return path.endswith(b".py") or _base(path) in _MIXED_MANIFESTS or _is_lockfile(path)


def is_build_time_path(path: bytes) -> bool:
    """Files that run at install/build/test/interpreter-start time (whole-file classes)."""
    return _is_build_file(path) or _base(path) in _MIXED_MANIFESTS


_HOOK_DIRS = frozenset({b".githooks", b".husky", b"git-hooks", b".git-hooks", b"githooks"})


def is_git_plumbing_path(path: bytes) -> bool:
    b = _base(path)
    if b in (b".gitattributes", b".gitmodules", b".lfsconfig"):
        return True
    return any(d in _HOOK_DIRS for d in _dirs(path))


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


def is_test_path(path: bytes) -> bool:
    """A test source file: a test-named file anywhere, or source code under a test dir."""
    b = _base(path)
    if _TEST_NAME.match(b):
        return True
    return b.endswith(_CODE_EXT) and any(d in _TEST_DIRS for d in _dirs(path))


# --- module shadowing --------------------------------------------------------------

# Top-level modules a test run imports by name. The workspace is first on sys.path
# (`python -m pytest` puts the working directory there; pytest's default `prepend`
# import mode inserts, for every test file and conftest.py, the first directory above it
# that has no `__init__.py`), so a file of the same name there replaces the real module
# for everything that imports it afterwards — the runner included.
#
# Standard library: CPython 3.11's `sys.stdlib_module_names` plus the modules added up
# to 3.14, frozen here so the policy decides the same on every interpreter. Modules
# removed from newer versions stay listed: they shadow on the versions that have them.
_STDLIB_MODULES = frozenset(
    (
        "__future__ _abc _aix_support _ast _asyncio _bisect _blake2 _bootsubprocess _bz2 _codecs "
        "_codecs_cn _codecs_hk _codecs_iso2022 _codecs_jp _codecs_kr _codecs_tw _collections "
        "_collections_abc _colorize _compat_pickle _compression _contextvars _crypt _csv _ctypes "
        "_curses _curses_panel _datetime _dbm _decimal _elementtree _frozen_importlib "
        "_frozen_importlib_external _functools _gdbm _hashlib _heapq _imp _interpchannels "
        "_interpqueues _interpreters _io _ios_support _json _locale _lsprof _lzma _markupbase "
        "_md5 _msi _multibytecodec _multiprocessing _opcode _operator _osx_support _overlapped "
        "_pickle _posixshmem _posixsubprocess _py_abc _pydatetime _pydecimal _pyio _pylong "
        "_pyrepl _queue _random _scproxy _sha1 _sha256 _sha3 _sha512 _signal _sitebuiltins "
        "_socket _sqlite3 _sre _ssl _stat _statistics _string _strptime _struct _suggestions "
        "_symtable _sysconfig _thread _threading_local _tkinter _tokenize _tracemalloc _typing "
        "_uuid _warnings _weakref _weakrefset _winapi _zoneinfo _zstd abc aifc annotationlib "
        "antigravity argparse array ast asynchat asyncio asyncore atexit audioop base64 bdb "
        "binascii bisect builtins bz2 cProfile calendar cgi cgitb chunk cmath cmd code codecs "
        "codeop collections colorsys compileall compression concurrent configparser contextlib "
        "contextvars copy copyreg crypt csv ctypes curses dataclasses datetime dbm decimal "
        "difflib dis distutils doctest email encodings ensurepip enum errno faulthandler fcntl "
        "filecmp fileinput fnmatch fractions ftplib functools gc genericpath getopt getpass "
        "gettext glob graphlib grp gzip hashlib heapq hmac html http idlelib imaplib imghdr imp "
        "importlib inspect io ipaddress itertools json keyword lib2to3 linecache locale logging "
        "lzma mailbox mailcap marshal math mimetypes mmap modulefinder msilib msvcrt "
        "multiprocessing netrc nis nntplib nt ntpath nturl2path numbers opcode operator optparse "
        "os ossaudiodev pathlib pdb pickle pickletools pipes pkgutil platform plistlib poplib "
        "posix posixpath pprint profile pstats pty pwd py_compile pyclbr pydoc pydoc_data pyexpat "
        "queue quopri random re readline reprlib resource rlcompleter runpy sched secrets select "
        "selectors shelve shlex shutil signal site smtpd smtplib sndhdr socket socketserver spwd "
        "sqlite3 sre_compile sre_constants sre_parse ssl stat statistics string stringprep struct "
        "subprocess sunau symtable sys sysconfig syslog tabnanny tarfile telnetlib tempfile "
        "termios textwrap this threading time timeit tkinter token tokenize tomllib trace "
        "traceback tracemalloc tty turtle turtledemo types typing unicodedata unittest urllib uu "
        "uuid venv warnings wave weakref webbrowser winreg winsound wsgiref xdrlib xml xmlrpc "
        "zipapp zipfile zipimport zlib zoneinfo "
    ).split()
)
# Test tooling: pytest and what it imports at start-up (pluggy, iniconfig, packaging,
# exceptiongroup/tomli on older Pythons, colorama on Windows, pygments for tracebacks,
# importlib_metadata), the packaging stack a run may import (setuptools, pkg_resources
# and the `_distutils_hack` its .pth imports, pip, wheel), plugins pytest loads by entry
# point (anything named `pytest_*`, xdist, hypothesis' `_hypothesis_*` plugin modules,
# coverage), other runners a project may configure (nose, nose2, tox) and the small
# libraries test suites commonly import (attr/attrs, six, typing_extensions, mock).
# `sitecustomize`/`usercustomize` (and `.pth` files) are `build-hook-changed` at any
# depth; `conftest.py` is too.
_TOOL_MODULES = frozenset(
    (
        "pytest _pytest py pluggy iniconfig packaging setuptools pkg_resources "
        "_distutils_hack distutils pip wheel coverage hypothesis _hypothesis_pytestplugin "
        "_hypothesis_globals _hypothesis_ftz_detector sortedcontainers nose nose2 tox attr "
        "attrs six typing_extensions exceptiongroup tomli colorama mock pygments "
        "importlib_metadata importlib_resources zipp xdist execnet"
    ).split()
)
# A top-level module file: `X.py`, a sourceless `X.pyc`, `X.pyw`, or an extension module
# `X.so` / `X.<abi tag>.so` / `X.pyd`. `X/__init__.<same>` makes package X.
_MODULE_FILE = re.compile(
    rb"^([A-Za-z_][A-Za-z0-9_]*)(?:\.py[cw]?|(?:\.[A-Za-z0-9_-]+)?\.(?:so|pyd))$"
)

_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def shadowed_module(name: bytes) -> str | None:
    """What a top-level module named `name` would shadow ("standard-library" or "test
    tooling"), or None when it shadows nothing the policy knows of."""
    text = name.decode("ascii", "replace")
    if text in _STDLIB_MODULES:
        return "standard-library"
    if text in _TOOL_MODULES or text.startswith("pytest_"):
        return "test-tooling"
    return None


def _module_of(path: bytes) -> tuple[bytes, bytes] | None:
    """(top-level name, directory it is importable from) for a module file or a
    package's `__init__`; None for anything else."""
    parts = path.split(b"/")
    m = _MODULE_FILE.match(parts[-1])
    if m is None:
        return None
    if m.group(1) == b"__init__":
        if len(parts) < 2:
            return None
        return parts[-2], b"/".join(parts[:-2])
    return m.group(1), b"/".join(parts[:-1])


_EXEC_DIRS = frozenset({b"scripts", b"script", b"bin", b"tools", b"sbin", b".bin"})


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
_MIXED_MANIFESTS = frozenset(
    {b"pyproject.toml", b"package.json", b"Cargo.toml", b"composer.json", b"setup.cfg", b"tox.ini"}
)
_REQUIREMENTS = re.compile(rb"^(?:requirements|constraints)[\w.-]*\.(?:txt|in)$")
_PURE_MANIFESTS = frozenset({b"Pipfile", b"go.mod", b"Gemfile", b"environment.yml"})


def _ecosystem(path: bytes) -> tuple[str, bool] | None:
    """(ecosystem, is_lockfile) for a manifest or lockfile path."""
    b = _base(path)
    for name, (manifests, locks) in _ECOSYSTEMS.items():
        if b in locks or (name == "python-project" and re.match(rb"^pylock\.[\w-]+\.toml$", b)):
            return name, True
        if b in manifests:
            return name, False
    return None


def _is_lockfile(path: bytes) -> bool:
    eco = _ecosystem(path)
    return (eco is not None and eco[1]) or bool(
        re.match(rb"^requirements[\w.-]*\.lock$", _base(path))
    )


def _is_pure_manifest(path: bytes) -> bool:
    b = _base(path)
    in_req_dir = b"requirements" in _dirs(path) and b.endswith((b".txt", b".in"))
    return b in _PURE_MANIFESTS or bool(_REQUIREMENTS.match(b)) or in_req_dir


# --- sections of structured manifests ----------------------------------------------

_TOML_HEADER = re.compile(r"^\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")
_JSON_KEY = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"\s*:')


def _indent(s: str) -> int:
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
    level = _indent(line) if line.strip() else 1 << 30
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
        ind = _indent(prev)
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


def _manifest_sections(
    diff: FileDiff, new_content: bytes | None
) -> Iterator[tuple[HunkLine, str | None]]:
    """(changed line, its section or None when it cannot be told) for a structured file."""
    json = diff.path.endswith(b".json")
    full = _text(new_content).split("\n") if new_content is not None else None
    if full is not None and not all(
        0 < ln.new <= len(full) and full[ln.new - 1] == _text(ln.text)
        for hunk in diff.hunks
        for ln in hunk
        if ln.kind != "-"
    ):
        full = None  # the supplied content is not this patch's new side: do not trust it
    for hunk in diff.hunks:
        seen: list[str] = []  # new-side lines (context, added) of this hunk so far
        gone: list[str] = []  # deleted lines since the last new-side line
        for ln in hunk:
            text = _text(ln.text)
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


_PY_HOOK_SECTIONS = re.compile(
    r"^(?:build-system|project\.(?:scripts|gui-scripts|entry-points)|tool\.setuptools\.cmdclass"
    r"|tool\.hatch\.(?:build|metadata\.hooks)|tool\.pdm\.build|tool\.poetry\.(?:build|scripts|plugins)"
    r"|tool\.scikit-build|tool\.maturin|tool\.setuptools-rust|package\.build|package\.links"
    r"|scripts)(?:\.|$)|(?:^|\.)(?:hooks?|cmdclass)(?:\.|$)"
)
_NPM_LIFECYCLE = re.compile(
    r'^\s*"(?:pre|post)?(?:install|uninstall|prepare|prepublish|prepublishOnly|publish|pack|'
    r'test|build|start|restart|stop|version|dependencies)"\s*:'
)
_DEP_SECTIONS = re.compile(
    r"^(?:project\.(?:dependencies|optional-dependencies)|dependency-groups|build-system\.requires"
    r"|tool\.poetry\.(?:dependencies|dev-dependencies|group|source)|tool\.pdm\.dev-dependencies"
    r"|tool\.uv|tool\.pixi\.(?:dependencies|pypi-dependencies)"
    r"|(?:target\..+\.|workspace\.)?(?:dev-|build-)?dependencies|patch|replace"
    r"|(?:dev|peer|optional|bundled?)?[dD]ependencies|overrides|resolutions|require(?:-dev)?"
    r"|repositories|packageManager|pnpm\.overrides)(?:\.|$)"
)
# setup.cfg / tox.ini (INI): only the sections that run or install something.
_INI_HOOK_SECTIONS: dict[bytes, re.Pattern[str]] = {
    b"setup.cfg": re.compile(r"^options\.(?:entry_points|cmdclass|setup_requires)(?:\.|$)"),
    b"tox.ini": re.compile(r"^(?:tox|testenv)"),  # tox runs these commands in CI
}
_INI_DEP_SECTIONS: dict[bytes, re.Pattern[str]] = {
    b"setup.cfg": re.compile(
        r"^options\.(?:install_requires|setup_requires|tests_require|extras_require)(?:\.|$)"
    ),
    b"tox.ini": re.compile(r"^(?:tox|testenv[^.]*)\.(?:deps|requires)(?:\.|$)"),
}


def _section_hits(
    ctx: Context, entry: InventoryEntry, rx: re.Pattern[str], npm_lifecycle: bool
) -> Iterator[tuple[HunkLine, str | None]]:
    """Changed lines of a structured manifest whose section matches rx (or is unknown)."""
    diff = ctx.diff_of(entry)
    if diff is None:
        return
    content = ctx.tree_files.get(entry.path) if ctx.tree_files is not None else None
    for ln, section in _manifest_sections(diff, content):
        if not ln.text.strip():
            continue
        if section is None:
            yield ln, None
        elif rx.search(section) or (npm_lifecycle and _NPM_LIFECYCLE.match(_text(ln.text))):
            yield ln, section


def _describe(ln: HunkLine, section: str | None, what: str) -> RawFinding:
    verb = "added" if ln.kind == "+" else "deleted"
    where = f"in [{section}]" if section else "in a section the patch does not show"
    line = ln.new if ln.kind == "+" else None
    return RawFinding(None, f"{what}: line {verb} {where}", line)


# --- secrets -----------------------------------------------------------------------

_PEM_BEGIN = re.compile(rb"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----")
_B64_RUN = re.compile(rb"[A-Za-z0-9+/=]{40,}")
_TOKENS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("GitHub token", re.compile(rb"\b(gh[pousr]_[A-Za-z0-9]{36,255})\b")),
    ("GitHub fine-grained token", re.compile(rb"\b(github_pat_[A-Za-z0-9_]{22,255})\b")),
    ("AWS access key id", re.compile(rb"\b((?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})\b")),
    ("Slack token", re.compile(rb"\b(xox[abprse]-[A-Za-z0-9-]{10,250})\b")),
    ("Google API key", re.compile(rb"\b(AIza[0-9A-Za-z_\-]{35})")),
    ("Stripe live key", re.compile(rb"\b((?:sk|rk)_live_[0-9A-Za-z]{16,247})\b")),
    ("GitLab token", re.compile(rb"\b(glpat-[0-9A-Za-z_\-]{20,})")),
    ("npm token", re.compile(rb"\b(npm_[A-Za-z0-9]{36})\b")),
    ("PyPI token", re.compile(rb"\b(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,})")),
    ("Anthropic API key", re.compile(rb"\b(sk-ant-[A-Za-z0-9_\-]{32,})")),
    ("OpenAI API key", re.compile(rb"\b(sk-(?:proj-)?[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})\b")),
)
# NAME = "value" / NAME: value / "name": "value" where NAME ends in a secret-ish word.
_ASSIGN = re.compile(
    rb"""(?i)([A-Za-z0-9_.-]*(?:token|secret|passwd|password|pwd|api_?key|access_?key|"""
    rb"""private_?key|auth_?key|_key|credentials?))["']?\s*(?::=|=>|=|:)\s*[rbuf]?["'`]?"""
    rb"""([A-Za-z0-9+/=_\-.~]{20,})(?:["'`\s,;)]|$)"""
)
ENTROPY_BITS = 3.5  # per character; random base64/alnum is ~4-6, English and identifiers ~3
SECRET_MIN_LEN = 20


def shannon_entropy(s: bytes) -> float:
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def redact(secret: bytes) -> str:
    """The only form in which a secret may appear: its length and a short digest."""
    return f"{len(secret)} chars, sha256 {hashlib.sha256(secret).hexdigest()[:8]}"


def _looks_random(v: bytes) -> bool:
    has_digit = any(48 <= c <= 57 for c in v)
    has_alpha = any((65 <= c <= 90) or (97 <= c <= 122) for c in v)
    return has_digit and has_alpha and shannon_entropy(v) >= ENTROPY_BITS


# --- rule checks -------------------------------------------------------------------

Check = Callable[[Context], Iterator[RawFinding]]


def _gate_config(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        for p in _paths(e):
            if p == ctx.config_path:
                yield RawFinding(
                    p,
                    f"the gate's configuration is {e.status.value}; this run is judged by the "
                    "base's configuration and the change takes effect only after merge",
                )


def _ci(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        for p in _paths(e):
            if is_ci_path(p):
                yield RawFinding(p, f"CI workflow or action file {e.status.value}")


def _build_hook(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        for p in _paths(e):
            if _is_build_file(p):
                yield RawFinding(p, f"build/install-time file {e.status.value}")
        b = _base(e.path)
        if b in _MIXED_MANIFESTS and e.status is not ChangeStatus.DELETED:
            if e.status is ChangeStatus.ADDED:
                yield RawFinding(e.path, "build manifest added")
                continue
            npm = b == b"package.json"
            rx = _INI_HOOK_SECTIONS.get(b, _PY_HOOK_SECTIONS)
            for ln, section in _section_hits(ctx, e, rx, npm):
                f = _describe(ln, section, "build hook or script changed")
                yield RawFinding(e.path, f.message, f.line)


def _package_dirs(ctx: Context) -> set[bytes]:
    """Directories of the proven tree that are regular packages (have an `__init__`).

    Known from `tree_files` and from what the patch itself adds; without `tree_files` a
    directory the patch does not give an `__init__` counts as no package (conservative).
    """
    present = set(ctx.tree_files) if ctx.tree_files is not None else set()
    present |= {e.path for e in ctx.inventory if e.status is not ChangeStatus.DELETED}
    present -= {e.path for e in ctx.inventory if e.status is ChangeStatus.DELETED}
    present -= {e.old_path for e in ctx.inventory if e.old_path not in (None, e.path)}
    out: set[bytes] = set()
    for p in present:
        mod = _module_of(p)
        if mod is not None and _base(p).startswith(b"__init__."):
            out.add(p.rsplit(b"/", 1)[0])
    return out


def _on_path(d: bytes, packages: set[bytes]) -> bool:
    """Whether a directory may be on sys.path: the root always is; any other directory
    that is not a package is when a test file or conftest.py lives in it or below it."""
    return d == b"" or d not in packages


def _module_shadowing(ctx: Context) -> Iterator[RawFinding]:
    packages = _package_dirs(ctx)

    def hit(path: bytes, name: bytes, d: bytes, how: str) -> RawFinding | None:
        kind = shadowed_module(name)
        if kind is None or not _on_path(d, packages):
            return None
        where = f"{_text(d)}/" if d else "the repository root"
        return RawFinding(
            path,
            f"{how}: top-level module '{_text(name)}' in {where} shadows the {kind} "
            f"module of that name for code run from there",
        )

    for e in ctx.inventory:
        if e.status in (ChangeStatus.ADDED, ChangeStatus.RENAMED):
            mod = _module_of(e.path)
            if mod is not None:
                f = hit(e.path, mod[0], mod[1], f"module file {e.status.value}")
                if f is not None:
                    yield f
            if e.new_mode == 0o120000 and _IDENTIFIER.fullmatch(_base(e.path)):
                # a symlink named like a package may point at a directory with __init__.py
                d = e.path.rsplit(b"/", 1)[0] if b"/" in e.path else b""
                f = hit(e.path, _base(e.path), d, "symlink added")
                if f is not None:
                    yield f
        # An `__init__` removed turns its directory into a sys.path entry: modules
        # already in it now shadow (seen only through `tree_files` or the patch).
        gone = e.path if e.status is ChangeStatus.DELETED else None
        if e.status is ChangeStatus.RENAMED and e.old_path not in (None, e.path):
            gone = e.old_path
        if gone is None or not _base(gone).startswith(b"__init__."):
            continue
        if _module_of(gone) is None:
            continue
        d = gone.rsplit(b"/", 1)[0] if b"/" in gone else b""
        if d == b"" or d in packages:
            continue
        present = set(ctx.tree_files or ()) | {
            x.path for x in ctx.inventory if x.status is not ChangeStatus.DELETED
        }
        for p in sorted(present):
            mod = _module_of(p)
            if mod is not None and mod[1] == d and mod[0] != b"__init__":
                f = hit(p, mod[0], d, f"package marker {_text(gone)} removed")
                if f is not None:
                    yield f


def _git_plumbing(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.gitlink:
            yield RawFinding(
                e.path,
                f"submodule pointer {e.status.value}; submodule contents are outside the "
                "evidence (not materialized, not proven)",
            )
        for p in _paths(e):
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


def _symlink(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        why = _symlink_escape_reason(e)
        if why is not None:
            yield RawFinding(e.path, f"{why} symlink: its target lies outside the repository")


def _new_executable(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.new_mode != 0o100755 or e.old_mode == 0o100755:
            continue
        if any(d in _EXEC_DIRS for d in _dirs(e.path)):
            continue
        how = "added as executable" if e.old_mode is None else "made executable"
        yield RawFinding(e.path, f"file {how} outside scripts/, bin/, tools/")


def _text_diffs(ctx: Context) -> Iterator[FileDiff]:
    for path in sorted(ctx.diffs):
        d = ctx.diffs[path]
        if not d.binary:
            yield d


def _private_key(ctx: Context) -> Iterator[RawFinding]:
    for d in _text_diffs(ctx):
        for hunk in d.hunks:
            added = [ln for ln in hunk if ln.kind == "+"]
            for i, ln in enumerate(added):
                m = _PEM_BEGIN.search(ln.text)
                if m is None:
                    continue
                # A BEGIN marker alone (a PEM parser's constant) is not a key: want a body.
                rest = [ln.text[m.end() :]] + [x.text for x in added[i + 1 : i + 4]]
                if any(_B64_RUN.search(r) for r in rest):
                    kind = _text(m.group(1)).strip() or "PKCS#8"
                    yield RawFinding(d.path, f"{kind} private key block added", ln.new)


def _secret_token(ctx: Context) -> Iterator[RawFinding]:
    for d in _text_diffs(ctx):
        for ln in d.added:
            hits: set[tuple[str, bytes]] = set()
            for kind, rx in _TOKENS:
                for m in rx.finditer(ln.text):
                    hits.add((kind, m.group(1)))
            for m in _ASSIGN.finditer(ln.text):
                value = m.group(2)
                if len(value) >= SECRET_MIN_LEN and _looks_random(value):
                    name = _text(m.group(1))[:64]
                    hits.add((f"high-entropy value assigned to {name}", value))
            for kind, secret in sorted(hits):
                yield RawFinding(d.path, f"{kind} added ({redact(secret)})", ln.new)


_TEST_DEF = re.compile(
    rb"^\s*(?:(?:async\s+)?def\s+(test\w*)|class\s+(Test\w*)|func\s+(Test\w*)"
    rb"|(?:it|test|describe)\s*\(\s*[\"'`]([^\"'`]*))"
)


def _test_names(lines: Iterator[HunkLine] | tuple[HunkLine, ...]) -> set[bytes]:
    out: set[bytes] = set()
    for ln in lines:
        m = _TEST_DEF.match(ln.text)
        if m:
            out.add(next(g for g in m.groups() if g is not None))
    return out


def _tests_deleted(ctx: Context) -> Iterator[RawFinding]:
    # Tests moved to another file are not deleted: a deleted test file whose every test
    # name is added again elsewhere in the patch is a move (a refactor, not a weakening).
    readded = _test_names(
        ln
        for d in _text_diffs(ctx)
        if d.new_path is not None and is_test_path(d.new_path)
        for ln in d.added
    )
    for e in ctx.inventory:
        if e.status is ChangeStatus.DELETED and is_test_path(e.path):
            d = ctx.diff_of(e)
            names = _test_names(d.deleted) if d is not None else set()
            if names and names <= readded:
                continue
            yield RawFinding(e.path, "test file deleted")
        elif e.old_path is not None and is_test_path(e.old_path) and not is_test_path(e.path):
            yield RawFinding(e.old_path, "test file renamed to a name tests are not collected from")
    # A test removed or renamed inside a file that stays: held unless its name is added
    # again somewhere in the patch (moved). Matching is by name, as for whole files.
    for d in _text_diffs(ctx):
        if d.old_path is None or d.new_path is None:
            continue
        if not (is_test_path(d.old_path) and is_test_path(d.new_path)):
            continue
        reported: set[bytes] = set()
        for ln in d.deleted:
            m = _TEST_DEF.match(ln.text)
            if m is None:
                continue
            name = next(g for g in m.groups() if g is not None)
            if name in readded or name in reported:
                continue
            reported.add(name)
            yield RawFinding(
                d.path, f"test {_text(name)!r} removed and not added back anywhere in the patch"
            )


_SKIP_MARKERS = re.compile(
    rb"(pytest\.mark\.(?:skip|skipif|xfail)\b|pytest\.(?:skip|xfail)\s*\(|unittest\.skip\w*"
    rb"|@skip(?:If|Unless)?\b|\bskipTest\s*\(|expectedFailure|\b(?:it|test|describe|context)\."
    rb"(?:skip|todo)\s*\(|\bx(?:it|test|describe)\s*\(|\bt\.Skip(?:f|Now)?\s*\(|#\[ignore\]"
    rb"|@Disabled\b|@Ignore\b)"
)
_PYTEST_CONFIG = frozenset(
    {
        b"pytest.ini",
        b".pytest.ini",
        b"pytest.toml",
        b".pytest.toml",
        b"setup.cfg",
        b"tox.ini",
        b"pyproject.toml",
    }
)
_DESELECT = re.compile(rb"(--deselect\b|--ignore(?:-glob)?[= ]|(?:^|\s)-k[= ]\S*\bnot\b)")
_DEF_LINE = re.compile(
    rb"^\s*(?:(?:async\s+)?def\s|class\s|func\s|fn\s|(?:it|test|describe)\s*\(|"
    rb"(?:public\s+)?(?:void|fun)\s)"
)


def _skips_new_test(hunk: tuple[HunkLine, ...], i: int) -> bool:
    """Whether the skip marker at hunk[i] belongs to a test that the patch adds.

    A decorator/attribute applies to the next definition below it; an inline call to the
    nearest definition above. Only when that definition is itself an added line is the
    test new; an unknown definition (outside the hunk) counts as an existing test.
    """
    text = hunk[i].text.lstrip()
    step = 1 if text.startswith((b"@", b"#[")) else -1
    j = i + step
    while 0 <= j < len(hunk):
        if hunk[j].kind != "-" and _DEF_LINE.match(hunk[j].text):
            return hunk[j].kind == "+"
        j += step
    return False


_MODULE_ASSIGN = re.compile(rb"^[A-Za-z_]\w*\s*(?::[^=]*)?=[^=]")
# Collection switched off without a skip marker: `__test__ = False` (module, class or an
# attribute of another object, or via setattr) and conftest's `collect_ignore[_glob]`.
# Any mention counts except `__test__ = True` and comparisons.
_NOT_COLLECTED = re.compile(
    rb"(\b__test__\b(?!['\"]?\s*(?::[^=]*)?=\s*True\b)(?!['\"]?\s*[=!]=)"
    rb"|\bcollect_ignore(?:_glob)?\b)"
)
_FOREIGN_TEST_FLAG = re.compile(rb"(?:\.\s*__test__\b|setattr\s*\(.*['\"]__test__['\"])")


def _in_new_class(hunk: tuple[HunkLine, ...], i: int) -> bool:
    """Whether the indented line hunk[i] sits in a class that the patch adds."""
    level = _indent(_text(hunk[i].text))
    if level == 0:
        return False
    for j in range(i - 1, -1, -1):
        ln = hunk[j]
        if ln.kind == "-" or not ln.text.strip():
            continue
        if _indent(_text(ln.text)) < level:
            if ln.text.lstrip().startswith(b"class "):
                return ln.kind == "+"
            level = _indent(_text(ln.text))
            if level == 0:
                return False
    return False


def _not_collected(d: FileDiff) -> Iterator[RawFinding]:
    """`__test__` / `collect_ignore` lines a modified test file adds (net of deletions)."""
    removed = Counter(m.group(1) for ln in d.deleted for m in _NOT_COLLECTED.finditer(ln.text))
    for hunk in d.hunks:
        for i, ln in enumerate(hunk):
            if ln.kind != "+":
                continue
            for m in _NOT_COLLECTED.finditer(ln.text):
                key = m.group(1)
                if removed[key] > 0:
                    removed[key] -= 1
                elif key.startswith(b"collect_ignore") or not _in_new_class(hunk, i):
                    what = _text(key)
                    yield RawFinding(
                        d.path, f"existing tests excluded from collection ({what})", ln.new
                    )


def _tests_skipped(ctx: Context) -> Iterator[RawFinding]:
    for d in _text_diffs(ctx):
        if d.new_path is None:
            continue
        if is_test_path(d.new_path) and d.old_path is not None:
            # A marker that was only rewritten (deleted and re-added) is not a new skip;
            # a new test that is skipped somewhere weakens no test that existed.
            removed = Counter(
                m.group(1) for ln in d.deleted for m in _SKIP_MARKERS.finditer(ln.text)
            )
            yield from _not_collected(d)
            for hunk in d.hunks:
                for i, ln in enumerate(hunk):
                    if ln.kind != "+":
                        continue
                    module_mark = ln.text.startswith(b"pytestmark")
                    if _MODULE_ASSIGN.match(ln.text) and not module_mark:
                        # `needs_x = pytest.mark.skipif(...)` defines a marker; where it
                        # is applied under another name is not followed (documented edge).
                        # A module-level `pytestmark = ...` applies to every test: held.
                        continue
                    for m in _SKIP_MARKERS.finditer(ln.text):
                        if removed[m.group(1)] > 0:
                            removed[m.group(1)] -= 1
                        elif module_mark or not _skips_new_test(hunk, i):
                            what = _text(m.group(1))
                            yield RawFinding(
                                d.path, f"existing test newly skipped ({what})", ln.new
                            )
        elif is_test_path(d.new_path):
            # A new test file may switch off collection of objects it imports.
            for ln in d.added:
                if _FOREIGN_TEST_FLAG.search(ln.text):
                    yield RawFinding(
                        d.path, "existing tests excluded from collection (__test__)", ln.new
                    )
        if _base(d.new_path) in _PYTEST_CONFIG:
            removed_opts = Counter(
                m.group(1) for ln in d.deleted for m in _DESELECT.finditer(ln.text)
            )
            for ln in d.added:
                for m in _DESELECT.finditer(ln.text):
                    if removed_opts[m.group(1)] > 0:
                        removed_opts[m.group(1)] -= 1
                        continue
                    opt = _text(m.group(1)).strip()
                    yield RawFinding(d.path, f"test selection narrowed ({opt})", ln.new)


# Where pytest reads its configuration: whole files, and sections of shared files.
# Every changed line there (comments and blank lines included) can change which tests
# run or how their outcome is counted, so any change is held.
_PYTEST_FILES = frozenset({b"pytest.ini", b".pytest.ini", b"pytest.toml", b".pytest.toml"})
_PYTEST_SECTIONS: dict[bytes, re.Pattern[str]] = {
    b"pyproject.toml": re.compile(r"^tool\.pytest(?:\.|$)"),  # ini_options, and pytest 9's table
    b"setup.cfg": re.compile(r"^tool:pytest(?:\.|$)"),
    b"tox.ini": re.compile(r"^pytest(?:\.|$)"),
}


def _test_config(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        for p in _paths(e):
            if _base(p) in _PYTEST_FILES:
                yield RawFinding(
                    p, f"pytest configuration file {e.status.value}: it decides which tests run"
                )
        rx = _PYTEST_SECTIONS.get(_base(e.path))
        d = ctx.diff_of(e)
        if rx is None or d is None:
            continue
        content = ctx.tree_files.get(e.path) if ctx.tree_files is not None else None
        for ln, section in _manifest_sections(d, content):
            if section is None or rx.search(section):
                f = _describe(ln, section, "pytest configuration changed")
                yield RawFinding(e.path, f.message, f.line)


_ASSERTION = re.compile(
    rb"^\s*(?:assert\b|self\.assert\w*\s*\(|self\.fail\w*\s*\(|expect\s*\(|assert\.\w+\s*\("
    rb"|(?:require|assert)\.\w+\(\s*t\b|t\.(?:Error|Fatal)f?\s*\(|assert_\w*!?\s*\(|with\s+pytest"
    rb"\.raises\b|pytest\.raises\s*\()"
)
ASSERTIONS_REMOVED_MIN = 5


def _assertions_removed(ctx: Context) -> Iterator[RawFinding]:
    # Counted over the whole patch: assertions moved between test files cancel out.
    # Whole test files deleted count too (tests-deleted names those files separately).
    per_file: list[tuple[bytes, int, int]] = []
    for d in _text_diffs(ctx):
        side = d.new_path if d.new_path is not None else d.old_path
        if side is None or not is_test_path(side):
            continue
        gone = sum(1 for ln in d.deleted if _ASSERTION.match(ln.text))
        came = sum(1 for ln in d.added if _ASSERTION.match(ln.text))
        per_file.append((d.path, gone, came))
    total_gone = sum(g for _, g, _ in per_file)
    total_came = sum(c for _, _, c in per_file)
    if total_gone - total_came < ASSERTIONS_REMOVED_MIN:
        return
    for path, gone, came in per_file:
        if gone > came:
            yield RawFinding(
                path,
                f"{gone - came} assertions removed here ({gone} deleted, {came} added); "
                f"{total_gone - total_came} fewer in the whole patch",
            )


def _budget_files(ctx: Context) -> Iterator[RawFinding]:
    limit = ctx.spec.budgets.files
    n = len(ctx.inventory)
    if limit is not None and n > limit:
        yield RawFinding(None, f"{n} files changed; budget is {limit}")


def _budget_lines(ctx: Context) -> Iterator[RawFinding]:
    limit = ctx.spec.budgets.lines
    n = sum(e.lines_added + e.lines_deleted for e in ctx.inventory)
    if limit is not None and n > limit:
        yield RawFinding(None, f"{n} lines added+deleted; budget is {limit}")


def _binary_added(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.binary and e.status is ChangeStatus.ADDED:
            yield RawFinding(
                e.path, f"binary file added ({e.size if e.size is not None else '?'} bytes)"
            )


def _binary_changed(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        if e.binary and e.status in (
            ChangeStatus.MODIFIED,
            ChangeStatus.RENAMED,
            ChangeStatus.TYPE_CHANGED,
        ):
            yield RawFinding(e.path, f"binary file {e.status.value}")


def _dependency(ctx: Context) -> Iterator[RawFinding]:
    for e in _dependency_entries(ctx):
        yield RawFinding(e[0].path, e[1])


def _dependency_entries(ctx: Context) -> Iterator[tuple[InventoryEntry, str]]:
    """Inventory entries that change dependencies, with a one-line description."""
    for e in ctx.inventory:
        if _is_lockfile(e.path):
            yield e, f"lockfile {e.status.value}"
        elif _is_pure_manifest(e.path):
            yield e, f"dependency manifest {e.status.value}"
        elif _base(e.path) in _MIXED_MANIFESTS:
            if e.status in (ChangeStatus.ADDED, ChangeStatus.DELETED):
                yield e, f"dependency manifest {e.status.value}"
                continue
            rx = _INI_DEP_SECTIONS.get(_base(e.path), _DEP_SECTIONS)
            sections = sorted({s or "?" for _, s in _section_hits(ctx, e, rx, False)})
            if sections:
                where = ", ".join(
                    f"[{s}]" if s != "?" else "a section the patch does not show" for s in sections
                )
                yield e, f"dependencies changed in {where}"


def _lockfile_drift(ctx: Context) -> Iterator[RawFinding]:
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
        d = posixpath.dirname(e.path)
        if is_lock and e.status is not ChangeStatus.DELETED:
            if not any(
                _base(p) in manifests and (posixpath.dirname(p) == d or under(d, p))
                for p in changed
            ):
                yield RawFinding(e.path, "lockfile changed without its manifest")
        elif not is_lock and e.path in dep_changed and e.status is ChangeStatus.MODIFIED:
            # Only where a lockfile is known to exist (in the patch or the proven tree):
            # many projects have none, and the patch alone cannot tell.
            lock_dirs = {posixpath.dirname(p) for p in known if _base(p) in locks}
            ancestors = [x for x in lock_dirs if x == d or under(x, e.path)]
            if ancestors and not any(
                _base(p) in locks and posixpath.dirname(p) in ancestors for p in changed
            ):
                yield RawFinding(e.path, "dependencies changed without their lockfile")


def _glob_rule(globs: Callable[[PolicySpec], tuple[str, ...]], what: str) -> Check:
    def check(ctx: Context) -> Iterator[RawFinding]:
        for e in ctx.inventory:
            for p in _paths(e):
                for g in globs(ctx.spec):
                    if glob_match(g, p):
                        yield RawFinding(p, f"{what} path {e.status.value} (matches {g!r})")

    return check


def _threshold_rule(name: str) -> Check:
    def check(ctx: Context) -> Iterator[RawFinding]:
        limit = ctx.thresholds.get(name)
        score = ctx.blast_scores.get(name, 0)
        if limit is not None and score > limit:
            yield RawFinding(None, f"{name} blast radius {score} is over the threshold {limit}")

    return check


def _rule(rid: str, default: Decision, rationale: str, check: Check) -> tuple[Rule, Check]:
    return Rule(id=rid, default=default, rationale=rationale), check


A, H, D = Decision.ALLOW, Decision.HOLD, Decision.DENY

# The catalog. Order is presentation only; ids are the contract (policy.rules keys).
CATALOG: tuple[tuple[Rule, Check], ...] = (
    _rule("gate-config-changed", H,
          "the gate's own config changed; it takes effect only after merge", _gate_config),
    _rule("ci-workflow-changed", H,
          "CI workflows and actions run with secrets and tokens outside the clean room", _ci),
    _rule("build-hook-changed", H,
          "code that runs at install/build/test time changed", _build_hook),
    _rule("module-shadowing", H,
          "a module added where the test run imports from shadows a stdlib or tooling module",
          _module_shadowing),
    _rule("git-plumbing-changed", H,
          "attributes, submodules and hooks change what a checkout means", _git_plumbing),
    _rule("symlink-escapes", H,
          "a symlink points outside the repository or to an absolute path", _symlink),
    _rule("new-executable", A,
          "a file became executable outside scripts/, bin/, tools/", _new_executable),
    _rule("private-key", D, "a private key was added to the repository", _private_key),
    _rule("secret-token", H,
          "a credential-like token or high-entropy secret was added", _secret_token),
    _rule("tests-deleted", H,
          "test files or tests were deleted, or renamed away, and not added back",
          _tests_deleted),
    _rule("tests-skipped", H,
          "tests were newly skipped, xfail'ed, deselected or excluded from collection",
          _tests_skipped),
    _rule("test-config-changed", H,
          "pytest's configuration changed: it decides which tests run and how", _test_config),
    _rule("assertions-removed", H,
          f"at least {ASSERTIONS_REMOVED_MIN} assertions were removed from a test file",
          _assertions_removed),
    _rule("budget-files", H, "more files changed than policy.budgets.files", _budget_files),
    _rule("budget-lines", H,
          "more lines added+deleted than policy.budgets.lines", _budget_lines),
    _rule("binary-added", A, "a binary file was added (inventoried)", _binary_added),
    _rule("binary-changed", A, "a binary file was changed (inventoried)", _binary_changed),
    _rule("dependency-changed", H,
          "dependency manifests or lockfiles changed what gets installed", _dependency),
    _rule("lockfile-drift", H,
          "a lockfile changed without its manifest, or dependencies without the lockfile",
          _lockfile_drift),
    _rule("protected-path", H, "a path matching policy.protected was touched",
          _glob_rule(lambda s: s.protected, "protected")),
    _rule("denied-path", D, "a path matching policy.deny was touched",
          _glob_rule(lambda s: s.deny, "denied")),
    _rule("blast-radius-immediate", H,
          "the immediate blast radius is over policy.thresholds.immediate",
          _threshold_rule("immediate")),
    _rule("blast-radius-future", H,
          "the future blast radius is over policy.thresholds.future",
          _threshold_rule("future")),
)  # fmt: skip
