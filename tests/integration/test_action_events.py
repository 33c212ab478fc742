"""The Action's event handling and approvals against the stand-in (no Docker needed)."""

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gate.errors import ApprovalRejected, UsageError
from gate.faces.action import ActionInputs, main
from gate.github.approvals import ReviewApprover, how_to_approve
from gate.github.checks import GitHubChecks, RetryPolicy
from gate.github.events import ClickedApproval, Target, check_name, resolve_target
from gate.github.notes import trigger_note
from gate.github.workflow import escape_data, escape_property
from gate.model import Sha256, Trigger, TriggerKind
from tests.github_standin.fixtures import REPO, TOKEN, running_standin
from tests.github_standin.server import GitHubStandIn

HEAD = "a" * 40
OLD = "b" * 40
STALE_BASE = "c" * 40
DIGEST = Sha256("d" * 64)
FINGERPRINT = Sha256("e" * 64)
FAST = RetryPolicy(attempts=2, backoff=0.01, max_wait=1, timeout=5, write_interval=0)


@pytest.fixture
def standin() -> Iterator[GitHubStandIn]:
    yield from running_standin()


def api_for(standin: GitHubStandIn) -> GitHubChecks:
    return GitHubChecks(REPO, TOKEN, api_url=standin.api_url, retry=FAST)


def inputs(event_name: str, **env: str) -> ActionInputs:
    return ActionInputs.from_env({"GITHUB_EVENT_NAME": event_name, **env})


def pr_payload(number: int = 5) -> dict[str, object]:
    return {
        "pull_request": {
            "number": number,
            "head": {"sha": HEAD, "ref": "feature"},
            "base": {"sha": STALE_BASE, "ref": "main"},
        }
    }


@pytest.mark.parametrize("event_name", ["pull_request", "pull_request_target"])
def test_pr_events_prove_the_head_against_the_base_branch_tip(
    standin: GitHubStandIn, event_name: str
) -> None:
    target = resolve_target(inputs(event_name), pr_payload(), api_for(standin))
    assert target is not None
    assert (target.head_sha, target.head_ref) == (HEAD, "refs/pull/5/head")
    # the base branch's current tip, fetched; never the event's stale base.sha
    assert (target.base_ref, target.base_sha) == ("refs/heads/main", None)
    assert target.external_id == "proofgate;pr=5"
    assert target.trigger == Trigger(
        kind=TriggerKind.PULL_REQUEST, base_ref="refs/heads/main", pull_request=5
    )


def test_pr_events_and_the_api_build_the_same_target(standin: GitHubStandIn) -> None:
    """One builder: the payload's pull request and the API's give the same target, author
    included (the self-approval guard needs it on every event)."""
    standin.add_pull(REPO, 5, head_sha=HEAD, base_sha=STALE_BASE, user="alice")
    payload = pr_payload()
    payload["pull_request"]["user"] = {"login": "alice"}  # type: ignore[index]
    from_event = resolve_target(inputs("pull_request"), payload, api_for(standin))
    review = {**payload, "review": {"state": "approved", "commit_id": HEAD}}
    from_api = resolve_target(inputs("pull_request_review"), review, api_for(standin))
    assert from_event is not None
    assert from_event == from_api
    assert from_event.author == "alice"


def test_merge_group_uses_the_queue_base_and_head(standin: GitHubStandIn) -> None:
    event = {
        "merge_group": {
            "head_sha": HEAD,
            "head_ref": "refs/heads/gh-readonly-queue/main/pr-5-x",
            "base_sha": OLD,
            "base_ref": "refs/heads/main",
        }
    }
    target = resolve_target(inputs("merge_group"), event, api_for(standin))
    assert target is not None
    assert (target.head_sha, target.base_sha, target.base_ref) == (HEAD, OLD, None)
    assert target.trigger == Trigger(kind=TriggerKind.MERGE_GROUP, base_ref="refs/heads/main")


def test_workflow_dispatch_takes_a_pr_number_or_a_sha(standin: GitHubStandIn) -> None:
    standin.add_pull(REPO, 8, head_sha=HEAD, base_sha=STALE_BASE, base_ref="release")
    by_pr = resolve_target(
        inputs("workflow_dispatch", PROOFGATE_PULL_REQUEST="8"), {}, api_for(standin)
    )
    assert by_pr is not None
    assert (by_pr.head_sha, by_pr.base_ref, by_pr.pr) == (HEAD, "refs/heads/release", 8)
    assert by_pr.trigger == Trigger(
        kind=TriggerKind.PULL_REQUEST, base_ref="refs/heads/release", pull_request=8
    )
    assert trigger_note(by_pr) == ""
    by_sha = resolve_target(
        inputs("workflow_dispatch", PROOFGATE_PULL_REQUEST=OLD.upper()), {}, api_for(standin)
    )
    assert by_sha is not None
    assert (by_sha.head_sha, by_sha.base_ref, by_sha.pr) == (OLD, "refs/heads/main", None)
    assert by_sha.trigger == Trigger(kind=TriggerKind.COMMIT, base_ref="refs/heads/main")
    note = trigger_note(by_sha)
    assert note.startswith(f"**Re-proof of commit `{OLD[:12]}`**")
    assert "It does not prove a pull request" in note
    with pytest.raises(UsageError, match="pull request number or a 40-hex"):
        resolve_target(inputs("workflow_dispatch", PROOFGATE_PULL_REQUEST="main"), {}, None)  # type: ignore[arg-type]


def test_review_that_is_not_an_approval_does_nothing(standin: GitHubStandIn) -> None:
    event = {**pr_payload(), "review": {"state": "commented", "commit_id": HEAD}}
    assert resolve_target(inputs("pull_request_review"), event, api_for(standin)) is None


def test_requested_action_takes_the_pr_from_external_id_not_pull_requests(
    standin: GitHubStandIn,
) -> None:
    standin.add_pull(REPO, 12, head_sha=HEAD, base_sha=STALE_BASE, head_repo="forker/widgets")
    event = {
        "action": "requested_action",
        "requested_action": {"identifier": "approve"},
        "check_run": {"external_id": "proofgate;pr=12", "head_sha": HEAD, "pull_requests": []},
        "sender": {"login": "maint"},
    }
    target = resolve_target(inputs("check_run"), event, api_for(standin))
    assert target is not None
    assert target.pr == 12
    assert target.clicked == ClickedApproval(login="maint", head_sha=HEAD)


def test_unsupported_event_is_a_usage_error(standin: GitHubStandIn) -> None:
    with pytest.raises(UsageError, match="unsupported event 'push'"):
        resolve_target(inputs("push"), {}, api_for(standin))


def target(clicked: ClickedApproval | None = None) -> Target:
    return Target(
        head_sha=HEAD,
        head_ref="refs/pull/5/head",
        base_ref="refs/heads/main",
        base_sha=None,
        pr=5,
        external_id="proofgate;pr=5",
        clicked=clicked,
    )


def test_approve_button_by_a_maintainer_approves(standin: GitHubStandIn) -> None:
    standin.add_pull(REPO, 5, head_sha=HEAD, base_sha=STALE_BASE)
    standin.set_permission(REPO, "maint", "write", "maintain")
    approver = ReviewApprover(
        api_for(standin), target(ClickedApproval(login="maint", head_sha=HEAD)), lambda: 0.0
    )
    approval = approver(DIGEST, FINGERPRINT)
    assert approval is not None
    assert (approval.approver, approval.method) == ("maint", "requested-action")
    assert (approval.patch_sha256, approval.policy_fingerprint) == (DIGEST, FINGERPRINT)
    assert approval.approved_at == "1970-01-01T00:00:00Z"


def test_author_approving_own_held_pr_is_refused(standin: GitHubStandIn) -> None:
    """A HOLD wants a second person: the author's own click does not approve it."""
    standin.add_pull(REPO, 5, head_sha=HEAD, base_sha=STALE_BASE)
    standin.set_permission(REPO, "author", "admin")
    held = dataclasses.replace(
        target(ClickedApproval(login="author", head_sha=HEAD)), author="Author"
    )
    approver = ReviewApprover(api_for(standin), held, lambda: 0.0)
    with pytest.raises(ApprovalRejected, match="author wrote this pull request"):
        approver(DIGEST, FINGERPRINT)
    assert approver.refusals == ["author wrote this pull request and cannot approve it"]


def test_approve_button_on_an_older_push_is_refused(standin: GitHubStandIn) -> None:
    standin.add_pull(REPO, 5, head_sha=HEAD, base_sha=STALE_BASE)
    standin.set_permission(REPO, "maint", "admin")
    approver = ReviewApprover(
        api_for(standin), target(ClickedApproval(login="maint", head_sha=OLD)), lambda: 0.0
    )
    with pytest.raises(ApprovalRejected, match="not the head"):
        approver(DIGEST, FINGERPRINT)
    assert approver.refusals == [f"maint pressed Approve on {OLD[:12]}, not the head {HEAD[:12]}"]


def test_changes_requested_after_approving_withdraws_the_approval(
    standin: GitHubStandIn,
) -> None:
    standin.add_pull(REPO, 5, head_sha=HEAD, base_sha=STALE_BASE)
    standin.set_permission(REPO, "maint", "write")
    standin.add_review(REPO, 5, user="maint", state="APPROVED", commit_id=HEAD)
    standin.add_review(REPO, 5, user="maint", state="COMMENTED", commit_id=HEAD)
    approver = ReviewApprover(api_for(standin), target(), lambda: 0.0)
    assert approver(DIGEST, FINGERPRINT) is not None  # a comment does not withdraw it
    standin.add_review(REPO, 5, user="maint", state="CHANGES_REQUESTED", commit_id=HEAD)
    assert ReviewApprover(api_for(standin), target(), lambda: 0.0)(DIGEST, FINGERPRINT) is None


def test_workflow_command_escaping() -> None:
    assert escape_data("50%\r\nnext") == "50%25%0D%0Anext"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def test_missing_checks_permission_fails_the_step_with_the_fix(
    standin: GitHubStandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    standin.repos[REPO].checks_write = False
    event = tmp_path / "event.json"
    event.write_text(json.dumps(pr_payload()))
    env = {
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": standin.api_url,
        "GITHUB_WORKSPACE": str(tmp_path),
        "PROOFGATE_GITHUB_TOKEN": TOKEN,
    }
    assert main(env) == 2
    out = capsys.readouterr()
    assert out.out.startswith("::error title=proofgate::cannot create a check run (HTTP 403")
    assert "permissions: { checks: write, contents: read, pull-requests: read }" in out.err
    assert standin.check_runs() == []


def test_proven_against_a_laxer_branch_cannot_satisfy_the_required_check() -> None:
    """Branch protection matches required checks by name on the head SHA: a run for the
    same head against another base must not carry the default branch's check name."""
    assert check_name("main", "main") == "proofgate"
    assert check_name(None, "main") == "proofgate"
    assert check_name("lax", "main") == "proofgate (base: lax)"
    assert check_name("release/1.x", "main") == "proofgate (base: release/1.x)"


def test_pr_event_records_its_base_branch(standin: GitHubStandIn) -> None:
    payload = pr_payload()
    payload["pull_request"]["base"]["ref"] = "lax"  # type: ignore[index]
    target = resolve_target(inputs("pull_request_target"), payload, api_for(standin))
    assert target is not None
    assert target.base_branch == "lax"
    assert check_name(target.base_branch, api_for(standin).default_branch()) != "proofgate"


def test_edited_event_reproves_only_a_retargeted_base(standin: GitHubStandIn) -> None:
    title_edit = {**pr_payload(), "action": "edited", "changes": {"title": {"from": "x"}}}
    assert resolve_target(inputs("pull_request_target"), title_edit, api_for(standin)) is None
    retarget = {**pr_payload(), "action": "edited", "changes": {"base": {"ref": {"from": "x"}}}}
    target = resolve_target(inputs("pull_request_target"), retarget, api_for(standin))
    assert target is not None
    assert target.head_sha == HEAD


def test_how_to_approve_names_who_how_which_sha_and_escapes_the_held_paths() -> None:
    predicate: dict[str, object] = {
        "verdict": "HELD",
        "policy": {
            "findings": [
                {"rule": "protected-path", "decision": "HOLD", "path": "ops/`a`</details>.sh"},
                {"rule": "budget-lines", "decision": "ALLOW", "path": "src/x.py"},
            ]
        },
    }
    held = dataclasses.replace(target(), author="alice")
    note = how_to_approve(predicate, held, repository=REPO, button=True)
    assert note.startswith(f"**To approve this HOLD:** A person with write access to {REPO}")
    assert f"**on the head commit `{HEAD}`**" in note
    assert "other than its author (`alice`)" in note
    assert "press **Approve** on this check run" in note
    assert "- `protected-path`: ``ops/`a`</details>.sh``" in note  # a code span it cannot close
    assert "src/x.py" not in note  # only what the policy holds
    no_pr = dataclasses.replace(held, pr=None)
    assert "nothing here can approve it" in how_to_approve(
        predicate, no_pr, repository=REPO, button=False
    )
    assert how_to_approve({"verdict": "PROVEN"}, held, repository=REPO, button=True) == ""
