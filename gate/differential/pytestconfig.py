"""The base's effective pytest configuration (SPEC §3.2). Pure.

What the base's tests depend on comes from the base, pytest's configuration included:
`pyproject.toml`, `setup.cfg` and `tox.ini` are not test files, so the trusted run's tree
has the change's copies, and a change could otherwise add `addopts = ["-p", "x"]` (a
plugin of its own that loads before the witness and turns failures into passes) or
`pythonpath = ["stubs"]` (a correct stub in place of the package). The differential's runs
(base, trusted, proving) therefore all get the file pytest finds in the base tree for the
workdir `/workspace`, copied into proofgate's read-only volume and passed with `-c`, and
`--rootdir /workspace` (gate/witness/host.py `test_environment`): the same options
in every run it compares, whatever the change does to those files. The head run is the
check as configured: the change's tests with the change's configuration (SPEC §3.1,
"do the change's own tests pass?"), with its own effective file passed the same way:
every run of a differential gets the same options (SPEC §3.2).

pytest's rule, for the directory `/workspace` (the first file that matches wins): the
`pytest.toml`, `.pytest.toml` (pytest 9), `pytest.ini` and `.pytest.ini` files, whatever
they hold; `pyproject.toml` with a `[tool.pytest.ini_options]` (or pytest 9's
`[tool.pytest]`) table; `tox.ini` with a `[pytest]` section; `setup.cfg` with
`[tool:pytest]`. A base without any is given an empty `pytest.ini`: no configuration, and
none the change adds. A file that does not parse is taken as it is (pytest then fails the
same way in every run).

Edges, written down (docs/differential.md): `pythonpath`, which pytest resolves against
the configuration file's directory, is given again with `-o` as absolute paths under
`/workspace` (`pythonpath`); a `confcutdir` left unset resolves against the volume's
copy; a configuration pytest would find above a command's own test paths (`pytest sub/`
with `sub/pytest.ini`) is not the one used; a test command that passes `-c` itself
overrides this.
"""

from __future__ import annotations

import configparser
import posixpath
import tomllib
from collections.abc import Mapping

from gate.differential.paths import CONFIG_DIR, WORKSPACE

__all__ = [
    "CANDIDATES",
    "DEFAULT_PYTHON_FILES",
    "EMPTY",
    "effective",
    "path_in_volume",
    "python_files",
    "pythonpath",
]

CANDIDATES = (
    b"pytest.toml",
    b".pytest.toml",
    b"pytest.ini",
    b".pytest.ini",
    b"pyproject.toml",
    b"tox.ini",
    b"setup.cfg",
)
EMPTY = ("pytest.ini", b"")  # no configuration
DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")  # pytest's `python_files` default


def _has_pytest_table(name: bytes, data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
        if name == b"pyproject.toml":
            tool = tomllib.loads(text).get("tool")
            return isinstance(tool, dict) and isinstance(tool.get("pytest"), dict)
        ini = configparser.ConfigParser(interpolation=None, strict=False, default_section="\0")
        ini.read_string(text)
    except (ValueError, configparser.Error):
        return True  # pytest reads it and fails: the same in every run
    return ini.has_section("tool:pytest" if name == b"setup.cfg" else "pytest")


def effective(root_files: Mapping[bytes, bytes]) -> tuple[str, bytes]:
    """(file name, content) of the configuration pytest uses for `/workspace`, from the
    tree's root files named in CANDIDATES (others are ignored); EMPTY when none is one."""
    for name in CANDIDATES:
        data = root_files.get(name)
        if data is None:
            continue
        if name in (b"pyproject.toml", b"tox.ini", b"setup.cfg") and not _has_pytest_table(
            name, data
        ):
            continue
        return name.decode(), data
    return EMPTY


def path_in_volume(name: str) -> str:
    """Where the copy sits in a test container (read-only, proofgate's)."""
    return f"{CONFIG_DIR}/{name}"


def _option(name: str, data: bytes, key: str) -> object:
    """The raw value of an ini option in an `effective` configuration (None: not set, or
    the file does not parse)."""
    try:
        text = data.decode("utf-8")
        if name.endswith(".toml"):
            tool = tomllib.loads(text)
            if name == "pyproject.toml":
                tool = tool.get("tool", {}).get("pytest", {})
            elif "pytest" in tool:
                tool = tool["pytest"]
            table = tool.get("ini_options", tool) if isinstance(tool, dict) else {}
            return table.get(key) if isinstance(table, dict) else None
        ini = configparser.ConfigParser(interpolation=None, strict=False, default_section="\0")
        ini.read_string(text)
        section = "tool:pytest" if name == "setup.cfg" else "pytest"
        return ini.get(section, key) if ini.has_option(section, key) else None
    except (ValueError, configparser.Error, AttributeError):
        return None


def _words(raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        return tuple(raw.split())
    if isinstance(raw, list):
        return tuple(p for p in raw if isinstance(p, str) and p)
    return ()


def pythonpath(name: str, data: bytes) -> tuple[str, ...]:
    """The `pythonpath` entries of an `effective` configuration, as pytest resolves them
    for the file at the root of `/workspace`: absolute paths under it. pytest resolves
    them against the configuration file's directory, which for the copy in proofgate's
    volume is not the tree's: `-o pythonpath=...` with these restores them
    (gate/witness/host.py)."""
    out = []
    for entry in _words(_option(name, data, "pythonpath")):
        joined = entry if entry.startswith("/") else f"{WORKSPACE}/{entry}"
        out.append(posixpath.normpath(joined))
    return tuple(out)


def python_files(name: str, data: bytes) -> tuple[str, ...]:
    """The `python_files` patterns of an `effective` configuration: the files pytest
    collects tests from (SPEC §3.3, a shard's share is a share of what it collects).
    pytest's default when the file sets none or does not parse."""
    got = _words(_option(name, data, "python_files"))
    return got or DEFAULT_PYTHON_FILES
