"""Approvals of a HOLD from GitHub (SPEC §6): reviews and the check run's Approve button."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gate.github.events import Target
from gate.github.interface import ChecksAPI
from gate.model import Approval, Sha256
from gate.receipt.render import inline_code

__all__ = ["WRITE_PERMISSIONS", "ReviewApprover", "how_to_approve"]

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})  # GitHub reports maintain as write


class ReviewApprover:
    """Approvals of a HOLD (SPEC §6), as `prove()`'s approver.

    Counts each reviewer's latest review if it is APPROVED on exactly the head SHA by a user
    with write access, or a click on "Approve" by such a user while the head is unchanged.
    When approvals were offered and none counts, it raises `ApprovalRejected` with every
    refusal, so the signed receipt records `approval-invalid` exactly as for an approval
    file (SPEC §6); `refusals` keeps them for the job log.
    """

    def __init__(self, api: ChecksAPI, target: Target, clock: Callable[[], float]) -> None:
        self.api = api
        self.target = target
        self.clock = clock
        self.refusals: list[str] = []

    def __call__(self, patch_sha256: Sha256, policy_fingerprint: Sha256) -> Approval | None:
        from gate.util.timefmt import rfc3339

        target = self.target
        if target.pr is None:
            return None
        latest: dict[str, tuple[str, str, str | None]] = {}
        for r in self.api.list_reviews(target.pr):
            if r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
                latest[r.login] = (r.state, r.commit_id, r.submitted_at)
        candidates: list[tuple[str, str, str]] = []
        for login, (state, commit_id, submitted_at) in sorted(latest.items()):
            if state != "APPROVED":
                continue
            if commit_id != target.head_sha:
                self.refusals.append(
                    f"{login} approved {commit_id[:12]}, not the head {target.head_sha[:12]}"
                )
                continue
            candidates.append((login, "review", submitted_at or rfc3339(self.clock())))
        if target.clicked is not None:
            if target.clicked.head_sha != target.head_sha:
                self.refusals.append(
                    f"{target.clicked.login} pressed Approve on {target.clicked.head_sha[:12]}, "
                    f"not the head {target.head_sha[:12]}"
                )
            else:
                candidates.append((target.clicked.login, "requested-action", rfc3339(self.clock())))
        for login, method, when in candidates:
            if target.author is not None and login.lower() == target.author.lower():
                # A HOLD asks for a second person; GitHub refuses self-reviews, and the
                # Approve button must not be a way around that.
                self.refusals.append(f"{login} wrote this pull request and cannot approve it")
                continue
            permission = self.api.collaborator_permission(login)
            if permission not in WRITE_PERMISSIONS:
                self.refusals.append(f"{login} has {permission} permission; approving needs write")
                continue
            return Approval(
                approver=login,
                method=method,
                approved_at=when,
                patch_sha256=patch_sha256,
                policy_fingerprint=policy_fingerprint,
            )
        if self.refusals:
            from gate.errors import ApprovalRejected

            raise ApprovalRejected("approval refused: " + "; ".join(self.refusals))
        return None


def how_to_approve(
    predicate: Mapping[str, object], target: Target, *, repository: str, button: bool
) -> str:
    """Markdown that opens a HELD check run: who may approve, how, on which SHA, and the
    files the policy holds. Empty for other verdicts."""
    if predicate.get("verdict") != "HELD":
        return ""
    policy = predicate.get("policy")
    findings = policy.get("findings") if isinstance(policy, dict) else None
    held: dict[str, list[str]] = {}
    for f in findings if isinstance(findings, list) else []:
        if isinstance(f, dict) and f.get("decision") == "HOLD":
            held.setdefault(str(f.get("rule")), []).append(str(f.get("path") or "(the change)"))
    files = "".join(
        f"- {inline_code(rule)}: "
        + ", ".join(inline_code(p) for p in paths[:10])
        + (f" (+{len(paths) - 10} more)" if len(paths) > 10 else "")
        + "\n"
        for rule, paths in held.items()
    )
    if target.pr is None:
        how = (
            "This run is not for a pull request, so nothing here can approve it: approve "
            "the pull request itself (its own proofgate run records the approval) and "
            "re-run, or prove it with an approval file (`proofgate prove --approval`)."
        )
    else:
        author = f" other than its author ({inline_code(target.author)})" if target.author else ""
        click = (
            " or press **Approve** on this check run (same rules; a new push voids it)"
            if button
            else ""
        )
        how = (
            f"A person with write access to {repository}{author} approves pull request "
            f"#{target.pr} on GitHub (Files changed → Review changes → Approve) **on the "
            f"head commit `{target.head_sha}`**{click}. A review of an older push does not "
            "count; proofgate re-runs on the review and the verdict becomes PROVEN when "
            "every check passes. The approval is bound to this patch and policy."
        )
    return f"**To approve this HOLD:** {how}\n\nHeld by the policy:\n\n{files}\n"
