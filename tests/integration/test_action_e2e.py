"""The Action end to end, run as GitHub's runner runs a container action.

The image is built from the repository's Dockerfile (scripts/build-action-image, no
registry). Each scenario runs `docker run` with the Docker socket mounted, the workspace at
/github/workspace, GITHUB_EVENT_PATH / GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files and the
inputs as env, on the host network so the container reaches the GitHub stand-in on
127.0.0.1. A local bare "origin" repository holds `refs/pull/N/head` like GitHub does, also
for fork pull requests. The clean room inside is `proofgate/cleanroom:latest`.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gate import receipt
from gate.action import pr_external_id
from gate.github.checks import GitHubChecks, RetryPolicy
from gate.github.receipts import LocalTrees, find_valid_receipt
from gate.model import Verdict
from tests.github_standin.fixtures import REPO, TOKEN, running_standin
from tests.github_standin.server import GitHubStandIn

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "tests" / "assets" / "keys"
IMAGE = "proofgate/cleanroom:latest"
CONFIG = f"""version: 1
image: {IMAGE}
defaults: {{timeout: 60, memory: 256m, pids: 64}}
checks:
  - name: unit
    test: [["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]]
policy:
  protected: ["ops/**"]
"""
LAX_CONFIG = CONFIG.replace(
    '[["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]]', '[["true"]]'
)
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
    root = tmp_path_factory.mktemp("origin")
    work = root / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    base = write_commit(
        work,
        {".github/proofgate.yml": CONFIG, "calc.py": CALC, "test_calc.py": TEST},
        "base",
    )
    pulls: dict[int, str] = {}
    changes = {
        1: {"calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n"},  # honest
        2: {"calc.py": "def add(a, b):\n    return a - b\n"},  # breaks the test
        3: {"ops/deploy.sh": "echo deploy\n"},  # protected path: HELD
        4: {"README.md": "from a fork\n"},  # a fork's honest change
    }
    for number, files in changes.items():
        git(work, "checkout", "-q", "-b", f"pr{number}", base)
        pulls[number] = write_commit(work, files, f"pr {number}")
    # a branch whose configuration is laxer (its test is `true`) and a PR into it that
    # breaks what main's configuration tests
    git(work, "checkout", "-q", "-b", "lax", base)
    write_commit(work, {".github/proofgate.yml": LAX_CONFIG}, "lax checks")
    git(work, "checkout", "-q", "-b", "pr5")
    pulls[5] = write_commit(work, {"calc.py": "def add(a, b):\n    return a - b\n"}, "pr 5")
    git(work, "checkout", "-q", "main")
    main = write_commit(work, {"NOTES.md": "main moved on\n"}, "main moves")
    # a pull request that changes nothing on top of a commit pushed straight to main
    git(work, "checkout", "-q", "-b", "pr6", main)
    git(work, "commit", "-q", "--allow-empty", "-m", "pr 6: an empty commit")
    pulls[6] = git(work, "rev-parse", "HEAD")
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
        [str(ROOT / "scripts" / "build-action-image"), "proofgate/action:test"],
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
    origin: Origin, number: int, *, fork: bool = False, base_ref: str = "main"
) -> dict[str, object]:
    head_repo = "forker/widgets" if fork else REPO
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
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
    assert (run.head_sha, run.conclusion, run.title) == (origin.pulls[1], "success", "PROVEN")
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


def test_failing_pr_fails_the_step(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    add_pull(standin, origin, 2)
    result = run_action(
        action_image, standin, origin, tmp_path, "pull_request", pr_event(origin, 2)
    )
    assert result.code == 1
    assert result.outputs["verdict"] == "FAILED"
    assert "::error title=proofgate check-failed::" in result.stdout
    (run,) = standin.check_runs()
    assert run.conclusion == "failure"
    assert run.title is not None
    assert run.title.startswith("FAILED: ")


def test_fork_pr_on_pull_request_target(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    add_pull(standin, origin, 4, fork=True)
    result = run_action(
        action_image,
        standin,
        origin,
        tmp_path,
        "pull_request_target",
        pr_event(origin, 4, fork=True),
    )
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
    standin.add_pull(REPO, 5, head_sha=origin.pulls[5], base_sha=origin.stale_base, base_ref="lax")
    event = pr_event(origin, 5, base_ref="lax")
    result = run_action(action_image, standin, origin, tmp_path, "pull_request", event)
    assert result.code == 0, result.stderr
    predicate = predicate_of(result)
    assert predicate["trigger"] == {
        "kind": "pull_request",
        "base_ref": "refs/heads/lax",
        "pull_request": 5,
    }
    assert predicate["proven_tree"] == predicate["head"]["tree"]  # type: ignore[index]
    (run,) = standin.check_runs()
    assert run.name == "proofgate (base: lax)"
    ok, message = release_check(standin, origin, origin.pulls[5])
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
    add_pull(standin, origin, 6)
    result = run_action(
        action_image, standin, origin, tmp_path, "pull_request", pr_event(origin, 6)
    )
    assert result.code == 0, result.stderr
    predicate = predicate_of(result)
    assert predicate["trigger"]["kind"] == "pull_request"  # type: ignore[index]
    assert predicate["proven_tree"] == predicate["base"]["tree"]  # type: ignore[index]
    ok, message = release_check(standin, origin, origin.pulls[6])
    assert not ok, message
    assert "patch is empty" in message
    ok, message = release_check(standin, origin, origin.pulls[6], accept_reproof=True)
    assert ok, message


def review_event(origin: Origin, number: int, *, user: str, commit_id: str) -> dict[str, object]:
    event = pr_event(origin, number)
    event["action"] = "submitted"
    event["review"] = {"state": "approved", "commit_id": commit_id, "user": {"login": user}}
    return event


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
    add_pull(standin, origin, 3)
    standin.set_permission(REPO, "visitor", "read")
    standin.add_review(REPO, 3, user="visitor", state="APPROVED", commit_id=origin.pulls[3])
    result = run_action(
        action_image,
        standin,
        origin,
        tmp_path,
        "pull_request_review",
        review_event(origin, 3, user="visitor", commit_id=origin.pulls[3]),
    )
    assert result.code == 1
    assert result.outputs["verdict"] == "HELD"
    (run,) = standin.check_runs()
    assert run.conclusion == "action_required"
    assert "visitor has read permission; approving needs write" in (run.summary or "")
