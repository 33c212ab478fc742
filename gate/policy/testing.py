"""Rules on how tests are found and run, and on the tests themselves (issue 6). Pure.

A test run's verdict is only as good as what runs the tests, so these rules read changes
to *how* tests are found and run, not only to the tests themselves: `module-shadowing`
(a module placed where the runner imports from, replacing pytest, its dependencies or
the standard library — e.g. a root `pytest.py` that prints "2 passed" and exits 0),
`test-config-changed` (any line of pytest's configuration, which decides what is
collected), `tests-skipped` (skip markers, deselection, `__test__`, `collect_ignore`,
module-level `pytestmark`), `tests-deleted` (test files, and tests inside kept files,
that are not added back elsewhere) and `assertions-removed`. Code that the tests import
can still misbehave at run time; that is for the checks' evidence (JUnit counts and the
differential), not for this static policy.
"""

from __future__ import annotations

import configparser
import re
import shlex
import tomllib
from collections import Counter
from collections.abc import Iterator

from gate.model import ChangeStatus, InventoryEntry
from gate.policy.context import Context, RawFinding, as_text, basename, paths_of, text_diffs
from gate.policy.manifests import describe_line, indent, manifest_sections
from gate.policy.patch import FileDiff, HunkLine
from gate.policy.paths import is_test_path
from gate.policy.skips import SkipSite, new_skips
from gate.util.lazyre import lazy

__all__ = [
    "check_assertions_removed",
    "check_module_shadowing",
    "check_test_config",
    "check_test_plugin",
    "check_tests_deleted",
    "check_tests_skipped",
    "pytest_collects",
    "is_pytest_config",
    "pytest_settings",
    "shadowed_module",
]


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
_MODULE_FILE = lazy(rb"^([A-Za-z_][A-Za-z0-9_]*)(?:\.py[cw]?|(?:\.[A-Za-z0-9_-]+)?\.(?:so|pyd))$")

_IDENTIFIER = lazy(rb"[A-Za-z_][A-Za-z0-9_]*")


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
        if mod is not None and basename(p).startswith(b"__init__."):
            out.add(p.rsplit(b"/", 1)[0])
    return out


def _on_path(d: bytes, packages: set[bytes]) -> bool:
    """Whether a directory may be on sys.path: the root always is; any other directory
    that is not a package is when a test file or conftest.py lives in it or below it."""
    return d == b"" or d not in packages


def check_module_shadowing(ctx: Context) -> Iterator[RawFinding]:
    packages = _package_dirs(ctx)

    def hit(path: bytes, name: bytes, d: bytes, how: str) -> RawFinding | None:
        kind = shadowed_module(name)
        if kind is None or not _on_path(d, packages):
            return None
        where = f"{as_text(d)}/" if d else "the repository root"
        return RawFinding(
            path,
            f"{how}: top-level module '{as_text(name)}' in {where} shadows the {kind} "
            f"module of that name for code run from there",
        )

    for e in ctx.inventory:
        if e.status in (ChangeStatus.ADDED, ChangeStatus.RENAMED):
            mod = _module_of(e.path)
            if mod is not None:
                f = hit(e.path, mod[0], mod[1], f"module file {e.status.value}")
                if f is not None:
                    yield f
            if e.new_mode == 0o120000 and _IDENTIFIER.fullmatch(basename(e.path)):
                # a symlink named like a package may point at a directory with __init__.py
                d = e.path.rsplit(b"/", 1)[0] if b"/" in e.path else b""
                f = hit(e.path, basename(e.path), d, "symlink added")
                if f is not None:
                    yield f
        # An `__init__` removed turns its directory into a sys.path entry: modules
        # already in it now shadow (seen only through `tree_files` or the patch).
        gone = e.path if e.status is ChangeStatus.DELETED else None
        if e.status is ChangeStatus.RENAMED and e.old_path not in (None, e.path):
            gone = e.old_path
        if gone is None or not basename(gone).startswith(b"__init__."):
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
                f = hit(p, mod[0], d, f"package marker {as_text(gone)} removed")
                if f is not None:
                    yield f


_TEST_DEF = lazy(
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


# The file names pytest collects tests from unless `python_files` says otherwise.
_PYTEST_COLLECTED = re.compile(rb"^(?:test_.*|.*_test)\.py$")


def pytest_collects(path: bytes) -> bool:
    """Whether pytest's default `python_files` (test_*.py, *_test.py) collects `path`;
    True for anything that is not a Python file (other runners, other rules)."""
    return not path.endswith(b".py") or bool(_PYTEST_COLLECTED.match(basename(path)))


def _renamed_out_of_collection(ctx: Context) -> Iterator[RawFinding]:
    """A test file renamed (or moved) to a name pytest does not collect: its tests stop
    running, although every `.py` under tests/ still counts as a test path."""
    for e in ctx.inventory:
        old = e.old_path
        if e.status is not ChangeStatus.RENAMED or old is None or not old.endswith(b".py"):
            continue
        if not is_test_path(old) or not _PYTEST_COLLECTED.match(basename(old)):
            continue
        if is_test_path(e.path) and not pytest_collects(e.path):
            yield RawFinding(
                old,
                f"test file renamed to {as_text(e.path)!r}, a name pytest does not collect "
                "(test_*.py, *_test.py): its tests no longer run",
            )


def check_tests_deleted(ctx: Context) -> Iterator[RawFinding]:
    # Tests moved to another file are not deleted: a deleted test file whose every test
    # name is added again elsewhere in the patch is a move (a refactor, not a weakening);
    # only a file pytest collects counts as elsewhere.
    readded = _test_names(
        ln
        for d in text_diffs(ctx)
        if d.new_path is not None and is_test_path(d.new_path) and pytest_collects(d.new_path)
        for ln in d.added
    )
    yield from _renamed_out_of_collection(ctx)
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
    for d in text_diffs(ctx):
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
                d.path, f"test {as_text(name)!r} removed and not added back anywhere in the patch"
            )


_SKIP_MARKERS = lazy(
    rb"(pytest\.mark\.(?:skip|skipif|xfail)\b|pytest\.(?:skip|xfail|exit)\s*\(|unittest\.skip\w*"
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


def is_pytest_config(path: bytes) -> bool:
    """A file pytest may read its configuration from (by name, at any depth)."""
    return basename(path) in _PYTEST_CONFIG


_DESELECT = lazy(rb"(--deselect\b|--ignore(?:-glob)?[= ]|(?:^|\s)-k[= ]\S*\bnot\b)")
_DEF_LINE = lazy(
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


_MODULE_ASSIGN = lazy(rb"^[A-Za-z_]\w*\s*(?::[^=]*)?=[^=]")
# Collection switched off without a skip marker: `__test__ = False` (module, class or an
# attribute of another object, or via setattr) and conftest's `collect_ignore[_glob]`.
# Any mention counts except `__test__ = True` and comparisons.
_NOT_COLLECTED = lazy(
    rb"(\b__test__\b(?!['\"]?\s*(?::[^=]*)?=\s*True\b)(?!['\"]?\s*[=!]=)"
    rb"|\bcollect_ignore(?:_glob)?\b)"
)
_FOREIGN_TEST_FLAG = lazy(rb"(?:\.\s*__test__\b|setattr\s*\(.*['\"]__test__['\"])")


def _in_new_class(hunk: tuple[HunkLine, ...], i: int) -> bool:
    """Whether the indented line hunk[i] sits in a class that the patch adds."""
    level = indent(as_text(hunk[i].text))
    if level == 0:
        return False
    for j in range(i - 1, -1, -1):
        ln = hunk[j]
        if ln.kind == "-" or not ln.text.strip():
            continue
        if indent(as_text(ln.text)) < level:
            if ln.text.lstrip().startswith(b"class "):
                return ln.kind == "+"
            level = indent(as_text(ln.text))
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
                    what = as_text(key)
                    yield RawFinding(
                        d.path, f"existing tests excluded from collection ({what})", ln.new
                    )


def _semantic_skips(ctx: Context, d: FileDiff) -> list[SkipSite] | None:
    """New skips of existing tests in a changed Python test file, read with `ast` from
    the base's and the proven tree's copies; None when either copy is not at hand (the
    line patterns judge the file then)."""
    if ctx.scans is not None and d.path in ctx.scans.skips:
        return ctx.scans.skips[d.path]
    if d.old_path is None or d.new_path is None or not d.new_path.endswith(b".py"):
        return None
    if not is_test_path(d.new_path) or ctx.base_files is None or ctx.tree_files is None:
        return None
    old, new = ctx.base_files.get(d.old_path), ctx.tree_files.get(d.new_path)
    if old is None or new is None:
        return None
    return new_skips(old, new)


def check_tests_skipped(ctx: Context) -> Iterator[RawFinding]:
    for d in text_diffs(ctx):
        if d.new_path is None:
            continue
        semantic = _semantic_skips(ctx, d)
        if semantic is not None:
            yield from _not_collected(d)
            for site in semantic:
                what = f"{site.kind} on {site.target or 'every test of the module'}"
                yield RawFinding(d.path, f"existing test newly skipped ({what})", site.line)
        elif is_test_path(d.new_path) and d.old_path is not None:
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
                            what = as_text(m.group(1))
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
        if basename(d.new_path) in _PYTEST_CONFIG:
            removed_opts = Counter(
                m.group(1) for ln in d.deleted for m in _DESELECT.finditer(ln.text)
            )
            for ln in d.added:
                for m in _DESELECT.finditer(ln.text):
                    if removed_opts[m.group(1)] > 0:
                        removed_opts[m.group(1)] -= 1
                        continue
                    opt = as_text(m.group(1)).strip()
                    yield RawFinding(d.path, f"test selection narrowed ({opt})", ln.new)


# Plugins a test run loads that the base's run did not: `pytest_plugins` in a module
# other than a conftest.py (pytest honours it in test modules too; conftest.py is
# `build-hook-changed` anyway), `-p NAME` in a file pytest or tox reads its options
# from, and the PYTEST_PLUGINS / PYTEST_ADDOPTS variables set outside Python sources
# (tox.ini, Makefiles, workflow files, .env). A plugin runs in every test process and
# can rewrite any outcome. `-p no:NAME` switches a plugin off: that is
# `test-config-changed`, not a plugin added.
# Any mention, not only `pytest_plugins = ...`: `globals()["pytest_plugins"] = [...]`,
# `setattr(module, "pytest_plugins", ...)` and `from x import pytest_plugins` bind it too.
_PLUGINS_ASSIGN = lazy(rb"\bpytest_plugins\b")
_PLUGIN_OPT = lazy(rb"(?:^|[\s\"'=,\[])-p[\s=]*(?![\s=]*no:)([A-Za-z_][\w.:-]*)")
_PLUGIN_ENV = lazy(rb"\b(PYTEST_PLUGINS|PYTEST_ADDOPTS)\b")


def check_test_plugin(ctx: Context) -> Iterator[RawFinding]:
    for d in text_diffs(ctx):
        if d.new_path is None:
            continue
        base = basename(d.new_path)
        python = base.endswith((b".py", b".pyi"))
        for ln in d.added:
            if python and base != b"conftest.py" and _PLUGINS_ASSIGN.search(ln.text):
                yield RawFinding(
                    d.path, "pytest plugins loaded from a module (pytest_plugins)", ln.new
                )
            if base in _PYTEST_CONFIG:
                for m in _PLUGIN_OPT.finditer(ln.text):
                    plugin = as_text(m.group(1))
                    yield RawFinding(
                        d.path, f"pytest plugin loaded by option (-p {plugin})", ln.new
                    )
            if not python:
                for m in _PLUGIN_ENV.finditer(ln.text):
                    yield RawFinding(
                        d.path,
                        f"pytest's plugin/option variable set ({as_text(m.group(1))})",
                        ln.new,
                    )


# Where pytest reads its configuration: whole files, and sections of shared files.
# Every changed line there (comments and blank lines included) can change which tests
# run or how their outcome is counted, so any change is held.
_PYTEST_FILES = frozenset({b"pytest.ini", b".pytest.ini", b"pytest.toml", b".pytest.toml"})
_PYTEST_SECTIONS: dict[bytes, re.Pattern[str]] = {
    b"pyproject.toml": lazy(r"^tool\.pytest(?:\.|$)"),  # ini_options, and pytest 9's table
    b"setup.cfg": lazy(r"^tool:pytest(?:\.|$)"),
    b"tox.ini": lazy(r"^pytest(?:\.|$)"),
}


# Parts of pytest's configuration that can neither run code nor change which tests run
# or how they count: registering a marker declares a name (with `--strict-markers`, an
# unregistered one makes its tests *error*, never pass).
_INERT_SECTIONS = frozenset({"tool.pytest.ini_options.markers"})


_INERT_KEYS = frozenset({"markers", "ini_options.markers"})
_ABSENT = b""  # a side without the file: no pytest settings there


def pytest_settings(name: bytes, data: bytes) -> dict[str, object]:
    """pytest's settings in a configuration file named `name`, read as pytest reads it:
    TOML with `tomllib` (pyproject's `[tool.pytest]` table, `ini_options` included, and
    pytest.toml's `[pytest]`), INI with `configparser` (`[pytest]`; setup.cfg's
    `[tool:pytest]`), keys case-sensitive, no interpolation, no defaults section, a
    duplicate section or key an error (as iniconfig's). Keys are dotted paths.

    Raises:
        ValueError: the file does not parse (not UTF-8, not TOML, not INI).
    """
    text = data.decode("utf-8")
    if name.endswith(b".toml"):
        try:
            doc: dict[str, object] = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"not TOML: {e}") from e
        table = doc.get("tool") if name == b"pyproject.toml" else doc
        got = table.get("pytest") if isinstance(table, dict) else None
        return dict(_flatten(got)) if isinstance(got, dict) else {}
    ini = configparser.ConfigParser(
        interpolation=None, strict=True, default_section="\0", comment_prefixes=("#", ";")
    )
    ini.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        ini.read_string(text)
    except configparser.Error as e:
        raise ValueError(f"not INI: {e}".splitlines()[0]) from e
    section = "tool:pytest" if name == b"setup.cfg" else "pytest"
    return dict(ini[section]) if ini.has_section(section) else {}


def _flatten(table: dict[str, object], prefix: str = "") -> Iterator[tuple[str, object]]:
    for key, value in table.items():
        if key == "ini_options" and not prefix and isinstance(value, dict):
            yield from _flatten(value, "ini_options.")
        else:
            yield prefix + key, value


def _plugins(value: object) -> list[str]:
    """Plugins an `addopts` value loads with `-p NAME` (string or list form)."""
    if isinstance(value, str):
        try:
            args = shlex.split(value)
        except ValueError:
            args = value.split()
    elif isinstance(value, list):
        args = [str(a) for a in value]
    else:
        return []
    out: list[str] = []
    for i, a in enumerate(args):
        name = args[i + 1] if a == "-p" and i + 1 < len(args) else None
        if a.startswith("-p") and a != "-p":
            name = a[2:].lstrip("=")
        if name and not name.startswith("no:"):
            out.append(name)
    return out


def _settings_change(ctx: Context, e: InventoryEntry) -> list[str] | None:
    """What a change to a file pytest may read its configuration from changes in pytest's
    settings, compared parsed on both sides; None when a side's content is not at hand."""
    name = basename(e.path)
    old_path = e.old_path or e.path
    if e.status is ChangeStatus.ADDED:
        old: bytes | None = _ABSENT
    else:
        old = ctx.base_files.get(old_path) if ctx.base_files is not None else None
    if e.status is ChangeStatus.DELETED:
        new: bytes | None = _ABSENT
    else:
        new = ctx.tree_files.get(e.path) if ctx.tree_files is not None else None
    if old is None or new is None:
        return None
    sides: list[dict[str, object]] = []
    for side, data, which in ((old_path, old, "base"), (e.path, new, "change")):
        try:
            sides.append(pytest_settings(basename(side), data) if data else {})
        except ValueError as err:
            return [f"the {which}'s {as_text(name)} does not parse as pytest reads it ({err})"]
    before, after = sides
    out: list[str] = []
    for key in sorted(before.keys() | after.keys()):
        if key in _INERT_KEYS or before.get(key) == after.get(key):
            continue
        loads = [p for p in _plugins(after.get(key)) if p not in _plugins(before.get(key))]
        tail = f" (loads plugin {', '.join(loads)})" if key.endswith("addopts") and loads else ""
        out.append(f"pytest configuration changed: {key}{tail}")
    return out


def check_test_config(ctx: Context) -> Iterator[RawFinding]:
    for e in ctx.inventory:
        for p in paths_of(e):
            if basename(p) in _PYTEST_FILES:
                yield RawFinding(
                    p, f"pytest configuration file {e.status.value}: it decides which tests run"
                )
        if basename(e.path) not in _PYTEST_CONFIG:
            continue
        parsed = _settings_change(ctx, e)
        if parsed is not None:
            # SPEC §3.2: compared as pytest reads it, not line by line (a table header
            # `[tool .pytest.ini_options]`, a list `addopts = ["-p", "x"]`, a `"""` string
            # that looks like a header all read as pytest reads them)
            yield from (RawFinding(e.path, message) for message in parsed)
            continue
        rx = _PYTEST_SECTIONS.get(basename(e.path))
        d = ctx.diff_of(e)
        if rx is None or d is None:
            continue
        content = ctx.tree_files.get(e.path) if ctx.tree_files is not None else None
        for ln, section in manifest_sections(d, content):
            if section in _INERT_SECTIONS:
                continue
            if section is None or rx.search(section):
                f = describe_line(ln, section, "pytest configuration changed")
                yield RawFinding(e.path, f.message, f.line)


_ASSERTION = lazy(
    rb"^\s*(?:assert\b|self\.assert\w*\s*\(|self\.fail\w*\s*\(|expect\s*\(|assert\.\w+\s*\("
    rb"|(?:require|assert)\.\w+\(\s*t\b|t\.(?:Error|Fatal)f?\s*\(|assert_\w*!?\s*\(|with\s+pytest"
    rb"\.raises\b|pytest\.raises\s*\()"
)
# One assertion fewer is a weaker test: the replay of 1,200 real commits shows that
# honest history rarely removes one without adding another (docs/policy.md), and a
# cheat needs to remove only the one that catches it. Counted net over the whole patch.
ASSERTIONS_REMOVED_MIN = 1


def check_assertions_removed(ctx: Context) -> Iterator[RawFinding]:
    # Counted over the whole patch: assertions moved between test files cancel out.
    # Whole test files deleted count too (tests-deleted names those files separately).
    per_file: list[tuple[bytes, int, int]] = []
    for d in text_diffs(ctx):
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
                f"{gone - came} assertion(s) removed here ({gone} deleted, {came} added); "
                f"{total_gone - total_came} fewer in the whole patch: the tests check less",
            )
