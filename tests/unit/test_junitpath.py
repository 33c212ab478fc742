"""The configured JUnit path read as the container reads it (SPEC §3.2)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gate.config import load_config
from gate.differential import junitpath
from gate.errors import ConfigError

TREE = 0o040000
FILE = 0o100644
LINK = 0o120000


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("reports/junit.xml", "reports/junit.xml"),
        ("./reports/junit.xml", "reports/junit.xml"),
        ("reports//./junit.xml", "reports/junit.xml"),
        ("reports/x/../junit.xml", "reports/junit.xml"),
    ],
    ids=["plain", "dot-slash", "empty-and-dot", "dotdot-inside"],
)
def test_normalize(raw: str, want: str) -> None:
    assert junitpath.normalize(raw) == want


@pytest.mark.parametrize(
    "raw", ["/workspace/junit.xml", "../junit.xml", "a/../../junit.xml", ".", "./"]
)
def test_normalize_refuses_paths_outside_the_workspace(raw: str) -> None:
    with pytest.raises(ValueError, match="absolute|leaves|names no file"):
        junitpath.normalize(raw)


def _tree(entries: dict[str, int]) -> Callable[[bytes], int | None]:
    return lambda path: entries.get(path.decode())


@pytest.mark.parametrize(
    ("raw", "entries", "problem"),
    [
        ("./reports/junit.xml", {"reports": TREE, "reports/junit.xml": FILE}, "committed"),
        ("reports/junit.xml", {"reports": LINK}, "symlink"),
        ("out/../reports/junit.xml", {"out": LINK, "reports": TREE}, "symlink"),
        ("reports/x/junit.xml", {"reports": TREE, "reports/x": LINK}, "symlink"),
        ("reports/junit.xml", {"reports/junit.xml": LINK}, "symlink"),
    ],
    ids=["committed-dot-slash", "dir-symlink", "symlink-before-dotdot", "deep", "file-link"],
)
def test_committed_reports_are_found(raw: str, entries: dict[str, int], problem: str) -> None:
    found = junitpath.committed_problem(raw, _tree(entries))
    assert found is not None
    assert problem in found


def test_a_fresh_report_path_is_fine() -> None:
    assert junitpath.committed_problem("reports/junit.xml", _tree({"src": TREE})) is None
    assert junitpath.committed_problem("./reports/j.xml", _tree({"reports": TREE})) is None


def test_config_junit_naming_no_file_is_a_config_error() -> None:
    text = b"version: 1\nimage: x\nchecks: [{name: u, test: 'true', junit: './'}]\n"
    with pytest.raises(ConfigError) as info:
        load_config(text, source=".github/proofgate.yml")
    assert info.value.key_path == "checks[0].junit"
