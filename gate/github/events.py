"""What to prove for a GitHub event (SPEC §1, §6): the event payload → a `Target`.

Facts of GitHub this relies on:
- `pull_request`: GITHUB_SHA is a test merge commit; the check goes on the PR's head SHA,
  and base is the base branch's *current* tip (`pull_request.base.sha` goes stale).
- Forks under `pull_request` get a read-only token; `pull_request_target` is the supported
  trigger for them. Untrusted code only ever runs in the clean room, so that is safe.
- `check_run.pull_requests` is empty for forks: the PR number travels in `external_id`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gate.errors import UsageError
from gate.github.checks import CHECK_NAME
from gate.github.interface import ChecksAPI, PullInfo
from gate.model import Trigger, TriggerKind

__all__ = [
    "APPROVE_ACTION",
    "ClickedApproval",
    "EventInputs",
    "Target",
    "check_name",
    "pr_external_id",
    "pr_from_external_id",
    "pr_target",
    "resolve_target",
]

APPROVE_ACTION = "approve"
HEX40 = re.compile(r"[0-9a-f]{40}")


class EventInputs(Protocol):
    """What `resolve_target` reads from the Action's inputs."""

    @property
    def event_name(self) -> str: ...

    @property
    def pull_request(self) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ClickedApproval:
    """Someone pressed the check run's "Approve" button (check_run requested_action)."""

    login: str
    head_sha: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Base and head to prove, how to fetch them, and where the check run goes."""

    head_sha: str
    head_ref: str  # remote ref to fetch for the head objects
    base_ref: str | None  # remote ref whose current tip is the base (None: base_sha given)
    base_sha: str | None  # merge_group: the queue's base_sha
    pr: int | None
    external_id: str
    kind: TriggerKind = TriggerKind.PULL_REQUEST
    clicked: ClickedApproval | None = None
    author: str | None = None  # the pull request's author, who cannot approve it
    base_branch: str | None = None  # the branch the change would land on (None: unknown)

    @property
    def trigger(self) -> Trigger:
        """What the receipt vouches for (SPEC §4 `trigger`)."""
        return Trigger(
            kind=self.kind,
            base_ref=f"refs/heads/{self.base_branch}" if self.base_branch else None,
            pull_request=self.pr,
        )


def _obj(value: object, what: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise UsageError(f"the event payload has no {what}")
    return value


def _str(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise UsageError(f"the event payload has no {what}")
    return value


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"the event payload has no {what}")
    return value


def check_name(base_branch: str | None, default_branch: str) -> str:
    """The check run's name: `proofgate` for changes that land on the default branch, and
    `proofgate (base: X)` otherwise.

    Branch protection matches required checks by name on the head SHA. Were every run
    named alike, a PROVEN for the same head against a laxer branch (another pull request,
    or this one before it was retargeted) could satisfy the required `proofgate` check of
    a pull request into the default branch."""
    if base_branch is None or base_branch == default_branch:
        return CHECK_NAME
    return f"{CHECK_NAME} (base: {base_branch})"


def pr_external_id(number: int) -> str:
    return f"proofgate;pr={number}"


def pr_from_external_id(external_id: str) -> int | None:
    m = re.fullmatch(r"proofgate;pr=(\d+)", external_id)
    return int(m.group(1)) if m else None


def pr_target(pull: PullInfo, clicked: ClickedApproval | None = None) -> Target:
    """The one pull-request target builder: every event about a pull request goes here."""
    return Target(
        head_sha=pull.head_sha,
        head_ref=f"refs/pull/{pull.number}/head",
        # the base branch's tip now, not base.sha: that goes stale as the branch moves
        base_ref=f"refs/heads/{pull.base_ref}",
        base_sha=None,
        pr=pull.number,
        external_id=pr_external_id(pull.number),
        clicked=clicked,
        author=pull.author or None,
        base_branch=pull.base_ref,
    )


def _pull_from_payload(event: Mapping[str, object]) -> PullInfo:
    """The pull request as a `pull_request`/`pull_request_target` payload describes it."""
    pr = _obj(event.get("pull_request"), "pull_request")
    head = _obj(pr.get("head"), "pull_request.head")
    base = _obj(pr.get("base"), "pull_request.base")
    user = pr.get("user")
    head_repo = head.get("repo")
    base_repo = base.get("repo")
    return PullInfo(
        number=_int(pr.get("number"), "pull_request.number"),
        head_sha=_str(head.get("sha"), "pull_request.head.sha"),
        head_ref=str(head.get("ref") or ""),
        head_repo=str(head_repo.get("full_name") or "") if isinstance(head_repo, dict) else "",
        base_ref=_str(base.get("ref"), "pull_request.base.ref"),
        base_sha=str(base.get("sha") or ""),
        author=str(user.get("login") or "") if isinstance(user, dict) else "",
        state=str(pr.get("state") or "open"),
        base_repo=str(base_repo.get("full_name") or "") if isinstance(base_repo, dict) else "",
    )


def resolve_target(
    inputs: EventInputs, event: Mapping[str, object], api: ChecksAPI
) -> Target | None:
    """Base/head for this event (SPEC §1, §6); None when the event asks for nothing.

    Raises:
        UsageError: an unsupported event or a payload without what it needs.
        GitHubError: the API cannot be read.
    """
    name = inputs.event_name
    if name in ("pull_request", "pull_request_target"):
        changes = event.get("changes")
        if event.get("action") == "edited" and not (
            isinstance(changes, dict) and "base" in changes
        ):
            return None  # a title or body edit; only a retargeted base needs a new proof
        return pr_target(_pull_from_payload(event))
    if name == "merge_group":
        group = _obj(event.get("merge_group"), "merge_group")
        return Target(
            head_sha=_str(group.get("head_sha"), "merge_group.head_sha"),
            head_ref=_str(group.get("head_ref"), "merge_group.head_ref"),
            base_ref=None,
            base_sha=_str(group.get("base_sha"), "merge_group.base_sha"),
            pr=None,
            external_id="proofgate;merge-group",
            kind=TriggerKind.MERGE_GROUP,
            base_branch=str(group.get("base_ref") or "").removeprefix("refs/heads/") or None,
        )
    if name == "workflow_dispatch":
        wanted = inputs.pull_request
        if wanted.isdigit():
            return pr_target(api.get_pull(int(wanted)))
        if HEX40.fullmatch(wanted.lower()):
            default = api.default_branch()
            return Target(
                head_sha=wanted.lower(),
                head_ref="refs/heads/*",
                base_ref=f"refs/heads/{default}",
                base_sha=None,
                pr=None,
                external_id="proofgate;commit",
                kind=TriggerKind.COMMIT,
                base_branch=default,
            )
        raise UsageError(
            "workflow_dispatch needs the `pull-request` input: a pull request number or a "
            f"40-hex commit SHA (got {wanted!r})"
        )
    if name == "pull_request_review":
        review = _obj(event.get("review"), "review")
        if str(review.get("state", "")).lower() != "approved":
            return None  # only an approval can change a verdict
        number = _int(_obj(event.get("pull_request"), "pull_request").get("number"), "PR number")
        return pr_target(api.get_pull(number))  # the head now: a new push voids old reviews
    if name == "check_run":
        if event.get("action") != "requested_action":
            return None
        requested = _obj(event.get("requested_action"), "requested_action")
        if requested.get("identifier") != APPROVE_ACTION:
            return None
        run = _obj(event.get("check_run"), "check_run")
        # never check_run.pull_requests: it is empty for forks
        found = pr_from_external_id(str(run.get("external_id") or ""))
        if found is None:
            raise UsageError("the check run's external_id names no pull request")
        clicked = ClickedApproval(
            login=_str(_obj(event.get("sender"), "sender").get("login"), "sender.login"),
            head_sha=_str(run.get("head_sha"), "check_run.head_sha"),
        )
        return pr_target(api.get_pull(found), clicked)
    if name == "workflow_run":
        return _review_rerun(event, api)
    raise UsageError(
        f"unsupported event {name!r}: use pull_request, pull_request_target, merge_group, "
        "workflow_dispatch, pull_request_review, check_run or workflow_run"
    )


def _review_rerun(event: Mapping[str, object], api: ChecksAPI) -> Target | None:
    """`workflow_run` after a review workflow: the re-proof that lets a fork's pull request
    be approved by review. It runs in the base repository's context (a token that can
    write checks), unlike `pull_request_review` on a fork.

    The payload's `pull_requests` is empty for forks, so the pull request comes from the
    external id of proofgate's own check run on the head SHA; either way the pull
    request's head as the API reports it now must be that SHA (a newer push runs its own
    proof). Only completed runs of a `pull_request_review` workflow ask for anything."""
    run = _obj(event.get("workflow_run"), "workflow_run")
    if event.get("action") != "completed" or run.get("event") != "pull_request_review":
        return None
    head_sha = _str(run.get("head_sha"), "workflow_run.head_sha")
    listed = run.get("pull_requests")
    numbers = [
        n
        for p in (listed if isinstance(listed, list) else [])
        if isinstance(p, dict) and isinstance(n := p.get("number"), int)
    ]
    if not numbers:
        numbers = [
            n for e in api.check_external_ids(head_sha) if (n := pr_from_external_id(e)) is not None
        ]
    for number in dict.fromkeys(numbers):
        pull = api.get_pull(number)
        if pull.head_sha == head_sha and pull.state == "open":
            return pr_target(pull)
    raise UsageError(
        f"workflow_run: no open pull request has head {head_sha} (it moved, or proofgate "
        "never ran on it: its pull_request_target run names the pull request)"
    )
