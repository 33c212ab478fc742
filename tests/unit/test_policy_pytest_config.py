"""`test-config-changed` compares pytest's settings as pytest reads them (SPEC §3.2): TOML
with tomllib, INI with configparser, on the base's and the proven tree's copies; a side
that does not parse is a finding. The line patterns remain for when a copy is not at hand."""

from __future__ import annotations

import difflib

import pytest

from gate import policy
from gate.model import ChangeStatus, Decision, InventoryEntry, PolicySpec

BASE_PYPROJECT = b"""[project]
name = "calc"
version = "1.0"

[tool.pytest.ini_options]
testpaths = ["tests"]
filterwarnings = '''
error
'''
"""


def _findings(path: str, old: bytes | None, new: bytes | None) -> list[str]:
    """The `test-config-changed` messages for one file going from `old` to `new`."""
    p = path.encode()
    a = (old or b"").decode().splitlines(keepends=True)
    b = (new or b"").decode().splitlines(keepends=True)
    head = f"diff --git a/{path} b/{path}\n"
    if old is None:
        status, head = ChangeStatus.ADDED, head + "new file mode 100644\n"
    elif new is None:
        status, head = ChangeStatus.DELETED, head + "deleted file mode 100644\n"
    else:
        status = ChangeStatus.MODIFIED
    body = "".join(
        difflib.unified_diff(
            a,
            b,
            "/dev/null" if old is None else f"a/{path}",
            "/dev/null" if new is None else f"b/{path}",
        )
    )
    entry = InventoryEntry(
        path=p,
        status=status,
        old_mode=None if old is None else 0o100644,
        new_mode=None if new is None else 0o100644,
        lines_added=len(b),
        lines_deleted=len(a),
    )
    assert policy.wants_base_file(entry) == (None if old is None else p)
    assert policy.wants_tree_file(p)
    result = policy.evaluate(
        [entry],
        (head + body).encode(),
        PolicySpec(),
        tree_files={p: new} if new is not None else {},
        base_files={p: old} if old is not None else {},
    )
    return [f.message for f in result.findings if f.rule == "test-config-changed"]


def test_a_table_header_with_a_space_and_a_list_form_plugin_are_seen() -> None:
    # `[tool .pytest.ini_options]` is the same table to TOML; `["-p", "x"]` loads x
    new = BASE_PYPROJECT.replace(b'[tool.pytest.ini_options]\ntestpaths = ["tests"]\n', b"")
    base = new
    new += b'\n[tool .pytest.ini_options]\naddopts = ["-p", "calc._speedups"]\n'
    assert _findings("pyproject.toml", base, new) == [
        "pytest configuration changed: ini_options.addopts (loads plugin calc._speedups)"
    ]


def test_a_header_inside_a_multiline_string_hides_nothing() -> None:
    new = BASE_PYPROJECT.replace(
        b"error\n'''\n", b"error\n[tool.ruff]\n'''\npythonpath = ['stubs']\n"
    )
    assert _findings("pyproject.toml", BASE_PYPROJECT, new) == [
        "pytest configuration changed: ini_options.filterwarnings",
        "pytest configuration changed: ini_options.pythonpath",
    ]


def test_pytest_9s_native_table_counts() -> None:
    new = BASE_PYPROJECT + b'\n[tool.pytest]\naddopts = ["-pgreen"]\n'
    assert _findings("pyproject.toml", BASE_PYPROJECT, new) == [
        "pytest configuration changed: addopts (loads plugin green)"
    ]


@pytest.mark.parametrize(
    "new",
    [
        BASE_PYPROJECT.replace(b'version = "1.0"', b'version = "1.1"'),
        BASE_PYPROJECT.replace(
            b"[tool.pytest.ini_options]\n", b"[tool.pytest.ini_options]\n# why\n"
        ),
        BASE_PYPROJECT + b"\n[tool.ruff]\nline-length = 100\n",
        BASE_PYPROJECT.replace(b'testpaths = ["tests"]', b'testpaths = [ "tests" ]'),
    ],
    ids=["version-bump", "comment-in-the-table", "other-tool", "same-value-respelled"],
)
def test_a_pyproject_edit_that_changes_no_pytest_setting_is_no_finding(new: bytes) -> None:
    assert _findings("pyproject.toml", BASE_PYPROJECT, new) == []


def test_a_side_that_does_not_parse_is_a_finding() -> None:
    [message] = _findings("pyproject.toml", BASE_PYPROJECT, BASE_PYPROJECT + b"[tool\n")
    assert message.startswith("the change's pyproject.toml does not parse as pytest reads it")


@pytest.mark.parametrize(
    ("path", "old", "new", "want"),
    [
        (
            "setup.cfg",
            b"[metadata]\nname = calc\n\n[tool:pytest]\ntestpaths = tests\n",
            b"[metadata]\nname = calc\n\n[tool:pytest]\ntestpaths = tests\naddopts = -p calc.x\n",
            ["pytest configuration changed: addopts (loads plugin calc.x)"],
        ),
        (
            "setup.cfg",
            b"[metadata]\nname = calc\n",
            b"[metadata]\nname = calc\nversion = 2\n\n[flake8]\nmax-line-length = 100\n",
            [],
        ),
        (
            "tox.ini",
            b"[tox]\nenvlist = py3\n",
            b"[tox]\nenvlist = py3\n\n[pytest]\npython_files = nothing_*.py\n",
            ["pytest configuration changed: python_files"],
        ),
        (
            "tox.ini",
            b"[pytest]\nAddopts = -q\n",
            b"[pytest]\naddopts = -q\n",  # keys are case-sensitive, as iniconfig's
            ["pytest configuration changed: Addopts", "pytest configuration changed: addopts"],
        ),
        (
            "pytest.ini",
            b"[pytest]\ntestpaths = tests\n",
            b"[pytest]\ntestpaths = tests\ntestpaths = docs\n",  # iniconfig refuses it too
            [
                "pytest configuration file modified: it decides which tests run",
                "the change's pytest.ini does not parse as pytest reads it (not INI: While "
                "reading from '<string>' [line  3]: option 'testpaths' in section 'pytest' "
                "already exists)",
            ],
        ),
        (
            "pytest.ini",  # pytest's own file: any change is held
            b"[pytest]\n# a\ntestpaths = tests\n",
            b"[pytest]\ntestpaths = tests\n",
            ["pytest configuration file modified: it decides which tests run"],
        ),
    ],
    ids=[
        "setup-cfg-plugin",
        "setup-cfg-no-pytest",
        "tox-section-added",
        "ini-key-case",
        "ini-duplicate-key",
        "ini-comment-only",
    ],
)
def test_ini_files_are_read_as_pytest_reads_them(
    path: str, old: bytes, new: bytes, want: list[str]
) -> None:
    assert _findings(path, old, new) == want


def test_a_pytest_ini_added_or_removed_is_always_a_finding() -> None:
    added = _findings("pytest.ini", None, b"")
    assert added == ["pytest configuration file added: it decides which tests run"]
    removed = _findings("pytest.ini", b"[pytest]\naddopts = -q\n", None)
    assert "pytest configuration changed: addopts" in removed


def test_the_rule_holds() -> None:
    assert policy.RULES["test-config-changed"].default is Decision.HOLD
