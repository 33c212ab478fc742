"""The Action end to end, run as GitHub's runner runs a container action.

The image is built from the repository's Dockerfile (scripts/build-action-image, no
registry). Each scenario runs `docker run` with the Docker socket mounted, the workspace at
/github/workspace, GITHUB_EVENT_PATH / GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files and the
inputs as env, on the host network so the container reaches the GitHub stand-in on
127.0.0.1. A local bare "origin" repository holds `refs/pull/N/head` like GitHub does, also
for fork pull requests. The clean room inside is `proofgate/cleanroom:latest`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from gate import receipt
from gate.github.checks import RECEIPT_MARKER, GitHubChecks, RetryPolicy
from gate.github.events import pr_external_id
from gate.github.receipts import LocalTrees, find_valid_receipt
from gate.model import Verdict
from tests.github_standin.fixtures import REPO, TOKEN, running_standin
from tests.github_standin.server import Fault, GitHubStandIn

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "tests" / "assets" / "keys"
CHECKOUT = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
IMAGE = "proofgate/cleanroom:latest"
CONFIG = f"""version: 1
image: {IMAGE}
defaults: {{timeout: 60, memory: 256m, pids: 64}}
checks:
  - name: unit
    test: [["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=junit.xml"]]
    junit: junit.xml
policy:
  protected: ["ops/**"]
"""
LAX_CONFIG = CONFIG.replace(
    '[["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=junit.xml"]]\n'
    "    junit: junit.xml",
    '[["true"]]',
)
assert LAX_CONFIG != CONFIG  # noqa: S101 - the lax branch must really be laxer
CALC = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def write_commit(work: Path, files: dict[str, str], message: str) -> str:
    for name, content in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    return git(work, "rev-parse", "HEAD")


@dataclass
class Origin:
    path: Path
    stale_base: str  # main's tip when the PRs were opened
    main: str  # main's tip now (it moved on)
    pulls: dict[int, str]  # PR number -> head SHA
    queue_ref: str
    queue_head: str


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Origin:
    return build_origin(tmp_path_factory.mktemp("origin"), CONFIG)


def build_origin(root: Path, config: str) -> Origin:
    """A bare origin whose main has `config` as .github/proofgate.yml, PRs 1-5, 6 into lax,
    7 empty on top of main."""
    work = root / "work"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    base = write_commit(
        work,
        {".github/proofgate.yml": config, "calc.py": CALC, "test_calc.py": TEST},
        "base",
    )
    pulls: dict[int, str] = {}
    changes = {
        1: {"calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n"},  # honest
        2: {"calc.py": "def add(a, b):\n    return a - b\n"},  # breaks the test
        3: {"ops/deploy.sh": "echo deploy\n"},  # protected path: HELD
        4: {"README.md": "from a fork\n"},  # a fork's honest change
        5: {"calc.py": "def add(a, b):\n    return a - b\n", "ops/x.sh": "echo\n"},  # both
    }
    for number, files in changes.items():
        git(work, "checkout", "-q", "-b", f"pr{number}", base)
        pulls[number] = write_commit(work, files, f"pr {number}")
    # a branch whose configuration is laxer (its test is `true`) and a PR into it that
    # breaks what main's configuration tests
    git(work, "checkout", "-q", "-b", "lax", base)
    write_commit(work, {".github/proofgate.yml": LAX_CONFIG}, "lax checks")
    git(work, "checkout", "-q", "-b", "pr6")
    pulls[6] = write_commit(work, {"calc.py": "def add(a, b):\n    return a - b\n"}, "pr 6")
    git(work, "checkout", "-q", "main")
    main = write_commit(work, {"NOTES.md": "main moved on\n"}, "main moves")
    # a pull request that changes nothing on top of a commit pushed straight to main
    git(work, "checkout", "-q", "-b", "pr7", main)
    git(work, "commit", "-q", "--allow-empty", "-m", "pr 7: an empty commit")
    pulls[7] = git(work, "rev-parse", "HEAD")
    git(work, "checkout", "-q", "main")
    # the merge queue's commit: main + PR 1
    git(work, "checkout", "-q", "-b", "queue", main)
    git(work, "merge", "-q", "--no-ff", "-m", "queue: pr 1", "pr1")
    queue_head = git(work, "rev-parse", "HEAD")
    bare = root / "origin.git"
    git(root, "init", "-q", "--bare", str(bare))
    queue_ref = f"refs/heads/gh-readonly-queue/main/pr-1-{pulls[1]}"
    refspecs = ["main:refs/heads/main", f"queue:{queue_ref}", "lax:refs/heads/lax"]
    refspecs += [f"pr{n}:refs/pull/{n}/head" for n in pulls]
    git(work, "push", "-q", str(bare), *refspecs)
    return Origin(bare, base, main, pulls, queue_ref, queue_head)


@pytest.fixture(scope="session")
def action_image() -> str:
    done = subprocess.run(
        # one tag per checkout: worktrees sharing a daemon must not run each other's image
        [str(ROOT / "scripts" / "build-action-image"), f"proofgate/action:test-{CHECKOUT}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        pytest.fail(f"building the action image failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def standin(origin: Origin) -> Iterator[GitHubStandIn]:
    for server in running_standin():
        # repos/get-commit answers with each commit's real tree (release verification)
        for sha in [origin.main, origin.queue_head, *origin.pulls.values()]:
            tree = git(origin.path, "rev-parse", f"{sha}^{{tree}}")
            server.set_commit_tree(REPO, sha, tree)
        yield server


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    workspace: Path


def run_action(
    image: str,
    standin: GitHubStandIn,
    origin: Origin,
    tmp: Path,
    event_name: str,
    event: dict[str, object],
    **inputs: str,
) -> Result:
    tmp.mkdir(parents=True, exist_ok=True)
    workspace = tmp / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "checkout-of-base.txt").write_text("the runner's checkout\n")
    files = tmp / "file_commands"
    files.mkdir(exist_ok=True)
    (files / "output").write_text("")
    (files / "summary").write_text("")
    workflow = tmp / "workflow"
    workflow.mkdir(exist_ok=True)
    (workflow / "event.json").write_text(json.dumps(event))
    env = {
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": "/github/workflow/event.json",
        "GITHUB_OUTPUT": "/github/file_commands/output",
        "GITHUB_STEP_SUMMARY": "/github/file_commands/summary",
        "GITHUB_WORKSPACE": "/github/workspace",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": standin.api_url,
        "GITHUB_SERVER_URL": standin.web_url,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/proofgate.yml@refs/heads/main",
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_SHA": origin.main,
        "GITHUB_ACTIONS": "true",
        "PROOFGATE_ORIGIN_URL": "/github/origin",
        "PROOFGATE_GITHUB_TOKEN": TOKEN,
        "PROOFGATE_CONFIG": ".github/proofgate.yml",
        "PROOFGATE_SIGNING_KEY": (KEYS / "trusted.key").read_text(),
        "PROOFGATE_FAIL_ON_UNPROVEN": "true",
        "PROOFGATE_MODE": "prove",
        **inputs,
    }
    argv = ["docker", "run", "--rm", "--network", "host"]
    argv += ["-v", "/var/run/docker.sock:/var/run/docker.sock"]
    argv += ["-v", f"{workspace}:/github/workspace", "-w", "/github/workspace"]
    argv += ["-v", f"{files}:/github/file_commands", "-v", f"{workflow}:/github/workflow"]
    argv += ["-v", f"{origin.path}:/github/origin:ro"]
    for name in env:
        argv += ["-e", name]  # values come from the environment, not the command line
    done = subprocess.run(
        [*argv, image],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    outputs = dict(
        line.split("=", 1) for line in (files / "output").read_text().splitlines() if line
    )
    return Result(
        done.returncode,
        done.stdout,
        done.stderr,
        outputs,
        (files / "summary").read_text(),
        workspace,
    )


def pr_event(
    origin: Origin,
    number: int,
    *,
    fork: bool = False,
    base_ref: str = "main",
    author: str = "contributor",
) -> dict[str, object]:
    head_repo = "forker/widgets" if fork else REPO
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "user": {"login": author},
            "head": {
                "sha": origin.pulls[number],
                "ref": "feature",
                "repo": {"full_name": head_repo},
            },
            # base.sha is stale on purpose: the action must use main's current tip
            "base": {"sha": origin.stale_base, "ref": base_ref, "repo": {"full_name": REPO}},
        },
    }


def add_pull(standin: GitHubStandIn, origin: Origin, number: int, *, fork: bool = False) -> None:
    standin.add_pull(
        REPO,
        number,
        head_sha=origin.pulls[number],
        base_sha=origin.stale_base,
        head_repo="forker/widgets" if fork else None,
    )


def predicate_of(result: Result) -> dict[str, object]:
    envelope = (result.workspace / result.outputs["receipt"]).read_bytes()
    pub = receipt.load_public_key((KEYS / "trusted.pub").read_bytes(), source="test key")
    statement = receipt.verify_statement(envelope, [pub])
    predicate = statement["predicate"]
    assert isinstance(predicate, dict)
    return predicate


def release_check(
    standin: GitHubStandIn, origin: Origin, sha: str, *, accept_reproof: bool = False
) -> tuple[bool, str]:
    """Release verification of `sha`, its configuration read from the origin's objects."""
    pub = receipt.load_public_key((KEYS / "trusted.pub").read_bytes(), source="test key")
    with LocalTrees(origin.path) as trees:
        envelope, message = find_valid_receipt(
            api_for(standin),
            sha,
            [pub],
            Verdict.PROVEN,
            blob_at=trees.blob_at,
            accept_reproof=accept_reproof,
        )
    return envelope is not None, message


def reasons_with(result: Result, code: str) -> list[str]:
    """The messages of the signed receipt's reasons with this code."""
    reasons = predicate_of(result)["reasons"]
    assert isinstance(reasons, list)
    return [r["message"] for r in reasons if r["code"] == code]


def api_for(standin: GitHubStandIn) -> GitHubChecks:
    policy = RetryPolicy(attempts=2, backoff=0.01, max_wait=1, timeout=5, write_interval=0)
    return GitHubChecks(REPO, TOKEN, api_url=standin.api_url, retry=policy)


def test_proven_pr_then_rerun_updates_the_same_check_run(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    add_pull(standin, origin, 1)
    first = run_action(
        action_image, standin, origin, tmp_path / "a", "pull_request", pr_event(origin, 1)
    )
    assert first.code == 0, first.stderr
    assert first.outputs["verdict"] == "PROVEN"
    assert first.outputs["receipt"] == ".proofgate/receipt.json"
    assert len(first.outputs["receipt-sha256"]) == 64
    assert "PROVEN" in first.summary
    predicate = predicate_of(first)
    # base is main's current tip, not the stale base.sha of the event
    assert predicate["base"]["commit"] == origin.main  # type: ignore[index]
    assert predicate["head"]["commit"] == origin.pulls[1]  # type: ignore[index]
    assert predicate["trigger"] == {
        "kind": "pull_request",
        "base_ref": "refs/heads/main",
        "pull_request": 1,
    }
    assert predicate["builder"] == {
        "workflow": f"{REPO}/.github/workflows/proofgate.yml@refs/heads/main",
        "run_id": "4242",
        "ref": "refs/heads/main",
        "sha": origin.main,
    }
    assert (first.workspace / "checkout-of-base.txt").read_text() == "the runner's checkout\n"
    assert sorted(p.name for p in first.workspace.iterdir()) == [
        ".proofgate",
        "checkout-of-base.txt",
    ]

    (run,) = standin.check_runs()
    assert (run.head_sha, run.conclusion) == (origin.pulls[1], "success")
    assert run.title == "PROVEN: 1 check passed (1 test: 1 passed)"
    assert "## Checks at a glance\n\n- `unit`: passed · 1 test: 1 passed" in (run.summary or "")
    assert run.external_id == pr_external_id(1)
    assert run.details_url == f"{standin.web_url}/{REPO}/actions/runs/4242"

    # release-job verification finds and verifies the receipt on the check run, but main
    # moved on: the proven tree (main + patch) is not the head commit's own tree, so this
    # receipt does not vouch for the head commit as a release
    ok, message = release_check(standin, origin, origin.pulls[1])
    assert not ok
    assert "tree" in message

    again = run_action(
        action_image, standin, origin, tmp_path / "b", "pull_request", pr_event(origin, 1)
    )
    assert again.code == 0, again.stderr
    assert len(standin.check_runs()) == 1
    assert len(standin.calls("checks/create")) == 1
    assert standin.check_runs()[0].conclusion == "success"


@pytest.mark.parametrize(
    ("number", "more"),
    # the differential adds `regression` (test_add passed on the base, fails against the
    # change); 5 also touches a protected path: a HOLD beside them
    [(2, " (+1 more reason)"), (5, " (+2 more reasons)")],
)
def test_failing_pr_fails_the_step_and_the_title_names_the_failing_check(
    action_image: str,
    standin: GitHubStandIn,
    origin: Origin,
    tmp_path: Path,
    number: int,
    more: str,
) -> None:
    add_pull(standin, origin, number)
    result = run_action(
        action_image, standin, origin, tmp_path, "pull_request", pr_event(origin, number)
    )
    assert result.code == 1
    assert result.outputs["verdict"] == "FAILED"
    assert "::error title=proofgate check-failed::" in result.stdout
    (run,) = standin.check_runs()
    assert run.conclusion == "failure"
    assert run.title is not None
    assert run.title.startswith("FAILED: check unit: test: `python3 -m pytest")
    assert run.title.endswith(f"exited 1 (1 test: 0 passed, 1 failed){more}")


def run_fork_pr(
    image: str, standin: GitHubStandIn, origin: Origin, tmp: Path, number: int
) -> Result:
    """Pull request `number` from a fork, proven on `pull_request_target`."""
    add_pull(standin, origin, number, fork=True)
    event = pr_event(origin, number, fork=True)
    return run_action(image, standin, origin, tmp, "pull_request_target", event)


def test_fork_pr_on_pull_request_target(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    result = run_fork_pr(action_image, standin, origin, tmp_path, 4)
    assert result.code == 0, result.stderr
    assert result.outputs["verdict"] == "PROVEN"
    (run,) = standin.check_runs()
    assert (run.head_sha, run.conclusion) == (origin.pulls[4], "success")


def test_merge_group_proves_the_queue_commit(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    event: dict[str, object] = {
        "action": "checks_requested",
        "merge_group": {
            "head_sha": origin.queue_head,
            "head_ref": origin.queue_ref,
            "base_sha": origin.main,
            "base_ref": "refs/heads/main",
        },
    }
    result = run_action(action_image, standin, origin, tmp_path, "merge_group", event)
    assert result.code == 0, result.stderr
    predicate = predicate_of(result)
    assert predicate["head"]["commit"] == origin.queue_head  # type: ignore[index]
    # the proven tree is exactly the tree of the commit that will land
    assert predicate["proven_tree"] == predicate["head"]["tree"]  # type: ignore[index]
    assert predicate["trigger"] == {"kind": "merge_group", "base_ref": "refs/heads/main"}
    (run,) = standin.check_runs()
    assert (run.head_sha, run.external_id) == (origin.queue_head, "proofgate;merge-group")
    # the queue commit is what lands: its receipt verifies for a release of that commit
    assert predicate["trigger"] == {"kind": "merge_group", "base_ref": "refs/heads/main"}
    ok, message = release_check(standin, origin, origin.queue_head)
    assert ok, message
    assert "merge_group onto refs/heads/main" in message
    assert "signed by workflow" in message


def test_reproof_of_a_pushed_commit_says_so_and_does_not_vouch_for_a_release(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    """Issue 15: a commit pushed straight to main, re-proven by workflow_dispatch with its
    SHA, is PROVEN with an empty patch that no policy judged. The receipt and the check run
    say it is a re-proof, and release verification refuses it unless told otherwise."""
    event: dict[str, object] = {"inputs": {"pull-request": origin.main}}
    result = run_action(
        action_image,
        standin,
        origin,
        tmp_path,
        "workflow_dispatch",
        event,
        PROOFGATE_PULL_REQUEST=origin.main,
    )
    assert result.code == 0, result.stderr
    predicate = predicate_of(result)
    assert predicate["trigger"] == {"kind": "commit", "base_ref": "refs/heads/main"}
    (run,) = standin.check_runs()
    assert "Re-proof of a commit" in (run.summary or "")
    ok, message = release_check(standin, origin, origin.main)
    assert not ok
    assert "trigger.kind is 'commit'; 'merge_group or pull_request' is required" in message
    ok, message = release_check(standin, origin, origin.main, accept_reproof=True)
    assert ok, message


def test_pr_into_a_laxer_branch_does_not_vouch_for_a_release(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    """Issue 15: a pull request into `lax` (its test is `true`) is PROVEN and its proven
    tree is the head's own tree; a tag on that head must still not pass release
    verification, which wants a receipt proven for the default branch."""
    standin.add_pull(REPO, 6, head_sha=origin.pulls[6], base_sha=origin.stale_base, base_ref="lax")
    event = pr_event(origin, 6, base_ref="lax")
    result = run_action(action_image, standin, origin, tmp_path, "pull_request", event)
    assert result.code == 0, result.stderr
    predicate = predicate_of(result)
    assert predicate["trigger"] == {
        "kind": "pull_request",
        "base_ref": "refs/heads/lax",
        "pull_request": 6,
    }
    assert predicate["proven_tree"] == predicate["head"]["tree"]  # type: ignore[index]
    (run,) = standin.check_runs()
    assert run.name == "proofgate (base: lax)"
    ok, message = release_check(standin, origin, origin.pulls[6])
    assert not ok
    assert "trigger.base_ref is 'refs/heads/lax'; 'refs/heads/main' is required" in message


def test_empty_pr_on_a_pushed_commit_does_not_vouch_for_a_release(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    """Attack on issue 15's re-proof rule: push a commit straight to main, then open a pull
    request whose head is an empty commit on top of it. The PR is PROVEN with an empty
    patch (base tree = proven tree = head tree) and trigger `pull_request`, so without a
    check its head would pass release verification as if a policy had judged the pushed
    change. It is a re-proof of the base and counts only with --accept-reproof."""
    add_pull(standin, origin, 7)
    result = run_action(
        action_image, standin, origin, tmp_path, "pull_request", pr_event(origin, 7)
    )
    assert result.code == 0, result.stderr
    predicate = predicate_of(result)
    assert predicate["trigger"]["kind"] == "pull_request"  # type: ignore[index]
    assert predicate["proven_tree"] == predicate["base"]["tree"]  # type: ignore[index]
    ok, message = release_check(standin, origin, origin.pulls[7])
    assert not ok, message
    assert "patch is empty" in message
    ok, message = release_check(standin, origin, origin.pulls[7], accept_reproof=True)
    assert ok, message


def review_event(origin: Origin, number: int, *, user: str, commit_id: str) -> dict[str, object]:
    event = pr_event(origin, number)
    event["action"] = "submitted"
    event["review"] = {"state": "approved", "commit_id": commit_id, "user": {"login": user}}
    return event


def run_reviewed(
    image: str,
    standin: GitHubStandIn,
    origin: Origin,
    tmp: Path,
    *,
    user: str,
    permission: str,
    event_name: str = "pull_request_review",
) -> Result:
    """PR 3 (HELD) with an APPROVED review on its head by `user`, then the Action runs."""
    add_pull(standin, origin, 3)
    standin.set_permission(REPO, user, permission)
    standin.add_review(REPO, 3, user=user, state="APPROVED", commit_id=origin.pulls[3])
    event = (
        review_event(origin, 3, user=user, commit_id=origin.pulls[3])
        if event_name == "pull_request_review"
        else pr_event(origin, 3)
    )
    return run_action(image, standin, origin, tmp, event_name, event)


def test_held_pr_approved_by_a_maintainers_review_on_the_head(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    add_pull(standin, origin, 3)
    held = run_action(
        action_image, standin, origin, tmp_path / "a", "pull_request", pr_event(origin, 3)
    )
    assert held.code == 1
    assert held.outputs["verdict"] == "HELD"
    assert standin.check_runs()[0].conclusion == "action_required"
    assert any(a["path"] == "ops/deploy.sh" for a in standin.check_runs()[0].annotations)
    how = standin.check_runs()[0].summary or ""
    assert how.startswith("**To approve this HOLD:** A person with write access to ")
    assert f"**on the head commit `{origin.pulls[3]}`**" in how
    assert "other than its author (`contributor`)" in how
    assert "Held by the policy:\n\n- `protected-path`: `ops/deploy.sh`" in how

    standin.set_permission(REPO, "maint", "write", "maintain")
    standin.add_review(REPO, 3, user="maint", state="APPROVED", commit_id=origin.pulls[3])
    approved = run_action(
        action_image,
        standin,
        origin,
        tmp_path / "b",
        "pull_request_review",
        review_event(origin, 3, user="maint", commit_id=origin.pulls[3]),
    )
    assert approved.code == 0, approved.stderr
    assert approved.outputs["verdict"] == "PROVEN"
    approval = predicate_of(approved)["approval"]
    assert isinstance(approval, dict)
    assert (approval["approver"], approval["method"]) == ("maint", "review")
    (run,) = standin.check_runs()
    assert run.conclusion == "success"
    assert "Approval refused" not in (run.summary or "")
    assert "To approve this HOLD" not in (run.summary or "")


def test_review_on_an_older_sha_is_not_an_approval(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    add_pull(standin, origin, 3)
    standin.set_permission(REPO, "maint", "admin")
    standin.add_review(REPO, 3, user="maint", state="APPROVED", commit_id=origin.stale_base)
    result = run_action(
        action_image,
        standin,
        origin,
        tmp_path,
        "pull_request_review",
        review_event(origin, 3, user="maint", commit_id=origin.stale_base),
    )
    assert result.code == 1
    assert result.outputs["verdict"] == "HELD"
    (run,) = standin.check_runs()
    assert run.conclusion == "action_required"
    assert "not the head" in (run.summary or "")


def test_approval_by_a_user_without_write_permission_is_refused(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    result = run_reviewed(
        action_image, standin, origin, tmp_path, user="visitor", permission="read"
    )
    assert result.code == 1
    assert result.outputs["verdict"] == "HELD"
    (run,) = standin.check_runs()
    assert run.conclusion == "action_required"
    assert "visitor has read permission; approving needs write" in (run.summary or "")
    # the refusal is evidence in the signed receipt, as for an approval file
    (refused,) = reasons_with(result, "approval-invalid")
    assert "visitor has read permission" in refused


def test_the_authors_own_approval_is_refused_on_pull_request(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    # the author has write access and an APPROVED review on the head (GitHub refuses
    # self-reviews, but a review API or an edited payload is not the guard): on a
    # `pull_request` event, from the payload's user, it must not count
    result = run_reviewed(
        action_image,
        standin,
        origin,
        tmp_path,
        user="contributor",
        permission="write",
        event_name="pull_request",
    )
    assert result.outputs["verdict"] == "HELD"
    (refused,) = reasons_with(result, "approval-invalid")
    assert "contributor wrote this pull request and cannot approve it" in refused
    (run,) = standin.check_runs()
    assert run.conclusion == "action_required"


# --- the image comes from a registry (issue 17) ----------------------------------------


@dataclass
class Registry:
    host: str  # 127.0.0.1:PORT (Docker allows plain HTTP to loopback registries)
    names: list[str]  # image references to drop from the daemon afterwards


def drop_names(*names: str) -> None:
    """Remove image names (not the shared layers) from the daemon; absent ones are fine."""
    for name in names:
        subprocess.run(["docker", "rmi", name], check=False, capture_output=True)  # noqa: S603, S607


def daemon_has(name: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", name], check=False, capture_output=True)  # noqa: S603, S607
    return done.returncode == 0


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    """A registry (Debian's docker-registry, installed by scripts/ensure-registry) on a
    loopback port, with its own storage, for this test only."""
    program = shutil.which("docker-registry")
    if program is None:
        problem = "docker-registry is not installed (make registry)"
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI=true and the registry test cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        f"storage: {{filesystem: {{rootdirectory: {tmp_path / 'registry-data'}}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    log = (tmp_path / "registry.log").open("wb")
    proc = subprocess.Popen([program, "serve", str(config)], stdout=log, stderr=log)  # noqa: S603
    registry = Registry(f"127.0.0.1:{port}", [])
    try:
        for _ in range(200):  # until it answers (bounded), not a fixed sleep
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1):  # noqa: S310
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(
                        f"docker-registry exited: {(tmp_path / 'registry.log').read_text()}"
                    )
                time.sleep(0.05)
        yield registry
    finally:
        drop_names(*registry.names)
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def push_cleanroom(registry: Registry, name: str) -> str:
    """Push the clean-room image as `registry/name`, drop that name from the daemon, and
    return the pushed repo digest (`registry/repo@sha256:...`)."""
    subprocess.run(["docker", "tag", IMAGE, f"{registry.host}/{name}"], check=True)  # noqa: S607
    subprocess.run(  # noqa: S603
        ["docker", "push", "-q", f"{registry.host}/{name}"],  # noqa: S607
        check=True,
        capture_output=True,
    )
    digests = json.loads(
        subprocess.run(  # noqa: S603
            ["docker", "image", "inspect", "-f", "{{json .RepoDigests}}", IMAGE],  # noqa: S607
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    repository = f"{registry.host}/{name.partition(':')[0]}"
    (digest,) = [d for d in digests if d.startswith(repository + "@")]
    # only the names go: the layers are shared with the clean-room image other tests use
    registry.names += [f"{registry.host}/{name}", digest]
    drop_names(*registry.names)
    assert not daemon_has(f"{registry.host}/{name}")
    assert not daemon_has(digest)
    return str(digest)


def prove_with_image(
    image_name: str, digest: str, action_image: str, standin: GitHubStandIn, tmp: Path
) -> str:
    """PR 1 of an origin whose config names `image_name` (absent from the daemon) is
    PROVEN with the pushed image; returns the check run's summary."""
    config = CONFIG.replace(f"image: {IMAGE}", f"image: {image_name}")
    origin = build_origin(tmp / "origin", config)
    add_pull(standin, origin, 1)
    result = run_action(
        action_image, standin, origin, tmp / "run", "pull_request", pr_event(origin, 1)
    )
    assert result.code == 0, result.stdout + result.stderr
    assert result.outputs["verdict"] == "PROVEN"
    checks = predicate_of(result)["checks"]
    assert isinstance(checks, list)
    assert {c["image_digest"] for c in checks} == {digest}  # the receipt names the digest
    assert daemon_has(image_name)  # the Action pulled it
    (run,) = standin.check_runs()
    return run.summary or ""


def test_an_image_named_by_tag_is_pulled_and_the_run_says_it_was_not_pinned(
    action_image: str, standin: GitHubStandIn, registry: Registry, tmp_path: Path
) -> None:
    tag = f"proofgate/pulled:{tmp_path.name[-20:].lower()}"
    digest = push_cleanroom(registry, tag)
    summary = prove_with_image(f"{registry.host}/{tag}", digest, action_image, standin, tmp_path)
    assert "**Image not pinned:**" in summary
    assert f"`image: {digest}`" in summary


def test_an_image_pinned_by_digest_is_pulled_by_digest(
    action_image: str, standin: GitHubStandIn, registry: Registry, tmp_path: Path
) -> None:
    digest = push_cleanroom(registry, "proofgate/pinned:v1")
    summary = prove_with_image(digest, digest, action_image, standin, tmp_path)
    assert "Image not pinned" not in summary


# --- concurrency and GitHub's pacing (issue 17) ----------------------------------------


def test_two_concurrent_runs_for_a_new_pr_report_on_one_check_run(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    """Two workflow runs for the same new pull request, their creates in flight together
    (the stand-in holds both until both arrived): the older check run carries the result,
    the extra one is completed with the same conclusion and a pointer to it."""
    add_pull(standin, origin, 1)
    standin.inject(Fault("checks/create", "together", times=2, delay=120))
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [
            pool.submit(
                run_action,
                action_image,
                standin,
                origin,
                tmp_path / name,
                "pull_request",
                pr_event(origin, 1),
            )
            for name in ("a", "b")
        ]
        results = [r.result() for r in runs]
    assert [r.code for r in results] == [0, 0], [r.stderr for r in results]
    assert len(standin.calls("checks/create")) == 2
    first, extra = sorted(standin.check_runs(), key=lambda r: r.id)
    assert (first.conclusion, extra.conclusion) == ("success", "success")
    assert first.title == "PROVEN: 1 check passed (1 test: 1 passed)"
    assert extra.title == f"Duplicate — {first.title}"
    assert f"is on check run {first.id}" in (extra.summary or "")
    assert RECEIPT_MARKER in (first.text or "")
    assert RECEIPT_MARKER not in (extra.text or "")


def test_annotations_wait_only_when_github_asks(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    """A 403 secondary rate limit and a 429, each with retry-after, on the writes that
    carry annotations: the run waits as told, retries, and loses nothing."""
    add_pull(standin, origin, 3)
    standin.inject(Fault("checks/update", "secondary-rate-limit", retry_after=1))
    standin.inject(Fault("checks/update", "too-many-requests", retry_after=1))
    result = run_action(
        action_image, standin, origin, tmp_path, "pull_request", pr_event(origin, 3)
    )
    assert result.outputs["verdict"] == "HELD", result.stderr
    assert "retrying in 1.0s" in result.stderr
    (run,) = standin.check_runs()
    assert run.conclusion == "action_required"
    assert [a["path"] for a in run.annotations] == ["ops/deploy.sh"]
    statuses = [c.status for c in standin.calls("checks/update")]
    assert statuses.count(403) == statuses.count(429) == 1


def test_an_unsigned_receipt_warns_in_the_job_log_and_summary(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    add_pull(standin, origin, 1)
    result = run_action(
        action_image,
        standin,
        origin,
        tmp_path,
        "pull_request",
        pr_event(origin, 1),
        PROOFGATE_SIGNING_KEY="",
    )
    assert result.code == 0, result.stderr
    assert "::warning title=proofgate unsigned receipt::This receipt is not signed" in (
        result.stdout
    )
    assert result.summary.startswith("> **Warning:** This receipt is not signed")
    (run,) = standin.check_runs()
    assert "UNSIGNED receipt" in (run.summary or "")


# --- fork approvals (issue 17) ---------------------------------------------------------


def test_a_review_of_a_fork_pr_with_a_read_only_token_names_the_fix(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    """GitHub's fork token model: a `pull_request_review` run for a fork gets a read-only
    token whatever the workflow grants. The hint names the workflow_run re-proof."""
    add_pull(standin, origin, 3, fork=True)
    standin.repos[REPO].checks_write = False  # the read-only token of a fork's review
    event = review_event(origin, 3, user="maint", commit_id=origin.pulls[3])
    result = run_action(action_image, standin, origin, tmp_path, "pull_request_review", event)
    assert result.code == 2
    assert "Approve forks through the `workflow_run` re-proof" in result.stderr
    assert "use `pull_request_target` for forks" not in result.stderr


def test_a_fork_pr_held_then_approved_by_review_through_workflow_run(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    held = run_fork_pr(action_image, standin, origin, tmp_path / "a", 3)
    assert held.outputs["verdict"] == "HELD", held.stderr
    standin.set_permission(REPO, "maint", "write", "maintain")
    standin.add_review(REPO, 3, user="maint", state="APPROVED", commit_id=origin.pulls[3])
    # the review workflow ran (read-only, nothing to do); its completion starts this run
    # in the base repository's context. For forks `pull_requests` is empty.
    event: dict[str, object] = {
        "action": "completed",
        "workflow_run": {
            "event": "pull_request_review",
            "conclusion": "success",
            "head_sha": origin.pulls[3],
            "head_branch": "feature",
            "head_repository": {"full_name": "forker/widgets"},
            "pull_requests": [],
        },
    }
    approved = run_action(action_image, standin, origin, tmp_path / "b", "workflow_run", event)
    assert approved.code == 0, approved.stderr
    assert approved.outputs["verdict"] == "PROVEN"
    approval = predicate_of(approved)["approval"]
    assert isinstance(approval, dict)
    assert (approval["approver"], approval["method"]) == ("maint", "review")
    assert predicate_of(approved)["trigger"] == {
        "kind": "pull_request",
        "base_ref": "refs/heads/main",
        "pull_request": 3,
    }
    (run,) = standin.check_runs()
    assert run.conclusion == "success"


def test_workflow_run_for_a_sha_no_pull_request_has_is_refused(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    event: dict[str, object] = {
        "action": "completed",
        "workflow_run": {"event": "pull_request_review", "head_sha": "f" * 40, "pull_requests": []},
    }
    result = run_action(action_image, standin, origin, tmp_path, "workflow_run", event)
    assert result.code == 2
    assert f"no open pull request has head {'f' * 40}" in result.stderr
    assert standin.check_runs() == []


def test_a_pull_request_takes_its_base_outcomes_from_the_base_commits_receipt(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    """SPEC §3.1: on a fresh runner, the receipt on the base commit's check runs (here a
    re-proof of main's tip; in a merge queue, the queue's proof of it) gives the base's
    outcomes, verified with the workflow's own key: the base's tests do not run again,
    and the verdict is the one without it."""
    event: dict[str, object] = {"inputs": {"pull-request": origin.main}}
    first = run_action(
        action_image,
        standin,
        origin,
        tmp_path / "main",
        "workflow_dispatch",
        event,
        PROOFGATE_PULL_REQUEST=origin.main,
    )
    assert first.code == 0, first.stderr
    add_pull(standin, origin, 1)
    result = run_action(
        action_image, standin, origin, tmp_path / "pr", "pull_request", pr_event(origin, 1)
    )
    assert result.code == 0, result.stderr
    tests = predicate_of(result)["checks"][0]["tests"]  # type: ignore[index]
    assert str(tests["reused"]["base"]).startswith("base receipt sha256:"), tests
    events = predicate_of(result)["journal"]["events"]  # type: ignore[index]
    assert not [
        e for e in events if e["data"].get("run") == "base" and e["kind"] == "command-started"
    ]
