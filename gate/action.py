"""The GitHub Action: `python -m gate.action` (SPEC §6).

A thin shim. It reads its inputs from the plain `PROOFGATE_*` names that `action.yml`'s
`runs.env` sets, works out base and head from the event, fetches the pull request's objects
into a private bare repository (never into the workspace, never checked out), calls
`prove()`, and reports: `$GITHUB_OUTPUT`, the job summary, `::error::` lines and the check
run on the head SHA.

Facts of GitHub this relies on:
- `pull_request`: GITHUB_SHA is a test merge commit; the check goes on the PR's head SHA,
  and base is the base branch's *current* tip (`pull_request.base.sha` goes stale).
- Forks under `pull_request` get a read-only token; `pull_request_target` is the supported
  trigger for them. Untrusted code only ever runs in the clean room, so that is safe.
- `check_run.pull_requests` is empty for forks: the PR number travels in `external_id`.
- Container actions get the Docker socket, must not set USER, and run in /github/workspace.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gate.errors import GateError, UsageError
from gate.github.checks import (
    CHECK_NAME,
    OUTPUT_LIMIT_BYTES,
    GitHubChecks,
    embed_envelope,
)
from gate.github.interface import (
    Annotation,
    CheckAction,
    ChecksAPI,
    GitHubError,
    PullInfo,
)
from gate.model import Approval, Sha256, Verdict

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from gate.prove import ProofRun

log = logging.getLogger("gate")

APPROVE_ACTION = "approve"
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})  # GitHub reports maintain as write
SUMMARY_LIMIT_BYTES = 1024 * 1024  # GitHub's limit for one step's summary
_HEX40 = re.compile(r"[0-9a-f]{40}")


# --- inputs ---------------------------------------------------------------------------


def _truthy(value: str, *, name: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"input {name}: expected true or false, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionInputs:
    """The Action's inputs (from `runs.env`) and the runner's GITHUB_* variables."""

    token: str
    config_path: str
    signing_key: bytes | None
    pull_request: str
    fail_on_unproven: bool
    mode: str  # prove | verify
    verify_keys: str
    offer_approve: bool
    event_name: str
    event_path: str
    repository: str
    api_url: str
    server_url: str
    workspace: str
    output_file: str
    summary_file: str
    run_id: str
    sha: str
    origin_url: str  # test override: a local bare repository standing in for GitHub
    out_dir: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ActionInputs:
        """Raises: UsageError for a malformed input."""
        mode = (env.get("PROOFGATE_MODE") or "prove").strip()
        if mode not in ("prove", "verify"):
            raise UsageError(f"input mode: expected prove or verify, got {mode!r}")
        key = env.get("PROOFGATE_SIGNING_KEY") or ""
        return cls(
            token=env.get("PROOFGATE_GITHUB_TOKEN") or env.get("GITHUB_TOKEN") or "",
            config_path=env.get("PROOFGATE_CONFIG") or ".github/proofgate.yml",
            signing_key=key.encode() if key.strip() else None,
            pull_request=(env.get("PROOFGATE_PULL_REQUEST") or "").strip(),
            fail_on_unproven=_truthy(
                env.get("PROOFGATE_FAIL_ON_UNPROVEN") or "true", name="fail-on-unproven"
            ),
            mode=mode,
            verify_keys=env.get("PROOFGATE_VERIFY_KEYS") or "",
            offer_approve=_truthy(
                env.get("PROOFGATE_APPROVE_BUTTON") or "false", name="approve-button"
            ),
            event_name=env.get("GITHUB_EVENT_NAME") or "",
            event_path=env.get("GITHUB_EVENT_PATH") or "",
            repository=env.get("GITHUB_REPOSITORY") or "",
            api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
            server_url=env.get("GITHUB_SERVER_URL") or "https://github.com",
            workspace=env.get("GITHUB_WORKSPACE") or os.getcwd(),
            output_file=env.get("GITHUB_OUTPUT") or "",
            summary_file=env.get("GITHUB_STEP_SUMMARY") or "",
            run_id=env.get("GITHUB_RUN_ID") or "",
            sha=env.get("PROOFGATE_COMMIT") or env.get("GITHUB_SHA") or "",
            origin_url=env.get("PROOFGATE_ORIGIN_URL") or "",
            out_dir=env.get("PROOFGATE_OUT_DIR") or "",
        )

    @property
    def run_url(self) -> str | None:
        if not self.run_id or not self.repository:
            return None
        return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"


# --- what to prove --------------------------------------------------------------------


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
    clicked: ClickedApproval | None = None
    author: str | None = None  # the pull request's author, who cannot approve it
    base_branch: str | None = None  # the branch the change would land on (None: unknown)


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


def _pr_target(pull: PullInfo, clicked: ClickedApproval | None = None) -> Target:
    return Target(
        head_sha=pull.head_sha,
        head_ref=f"refs/pull/{pull.number}/head",
        base_ref=f"refs/heads/{pull.base_ref}",
        base_sha=None,
        pr=pull.number,
        external_id=pr_external_id(pull.number),
        clicked=clicked,
        author=pull.author or None,
        base_branch=pull.base_ref,
    )


def resolve_target(
    inputs: ActionInputs, event: Mapping[str, object], api: ChecksAPI
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
        pr = _obj(event.get("pull_request"), "pull_request")
        head = _obj(pr.get("head"), "pull_request.head")
        base = _obj(pr.get("base"), "pull_request.base")
        number = _int(pr.get("number"), "pull_request.number")
        return Target(
            head_sha=_str(head.get("sha"), "pull_request.head.sha"),
            head_ref=f"refs/pull/{number}/head",
            # the base branch's tip now, not base.sha: that goes stale as the branch moves
            base_ref=f"refs/heads/{_str(base.get('ref'), 'pull_request.base.ref')}",
            base_sha=None,
            pr=number,
            external_id=pr_external_id(number),
            base_branch=_str(base.get("ref"), "pull_request.base.ref"),
        )
    if name == "merge_group":
        group = _obj(event.get("merge_group"), "merge_group")
        return Target(
            head_sha=_str(group.get("head_sha"), "merge_group.head_sha"),
            head_ref=_str(group.get("head_ref"), "merge_group.head_ref"),
            base_ref=None,
            base_sha=_str(group.get("base_sha"), "merge_group.base_sha"),
            pr=None,
            external_id="proofgate;merge-group",
            base_branch=str(group.get("base_ref") or "").removeprefix("refs/heads/") or None,
        )
    if name == "workflow_dispatch":
        wanted = inputs.pull_request
        if wanted.isdigit():
            return _pr_target(api.get_pull(int(wanted)))
        if _HEX40.fullmatch(wanted.lower()):
            default = api.default_branch()
            return Target(
                head_sha=wanted.lower(),
                head_ref="refs/heads/*",
                base_ref=f"refs/heads/{default}",
                base_sha=None,
                pr=None,
                external_id="proofgate;commit",
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
        return _pr_target(api.get_pull(number))  # the head now: a new push voids old reviews
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
        return _pr_target(api.get_pull(found), clicked)
    raise UsageError(
        f"unsupported event {name!r}: use pull_request, pull_request_target, merge_group, "
        "workflow_dispatch, pull_request_review or check_run"
    )


# --- approvals (SPEC §6) ----------------------------------------------------------------


class ReviewApprover:
    """Approvals of a HOLD (SPEC §6), as `prove()`'s approver.

    Counts each reviewer's latest review if it is APPROVED on exactly the head SHA by a user
    with write access, or a click on "Approve" by such a user while the head is unchanged.
    Approvals that do not count are not errors (a review of an older push is ordinary): the
    result stays HELD and `refusals` says why, for the check run and the job summary.
    """

    def __init__(self, api: ChecksAPI, target: Target, clock: Callable[[], float]) -> None:
        self.api = api
        self.target = target
        self.clock = clock
        self.refusals: list[str] = []

    def __call__(self, patch_sha256: Sha256, policy_fingerprint: Sha256) -> Approval | None:
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
            candidates.append((login, "review", submitted_at or _rfc3339(self.clock())))
        if target.clicked is not None:
            if target.clicked.head_sha != target.head_sha:
                self.refusals.append(
                    f"{target.clicked.login} pressed Approve on {target.clicked.head_sha[:12]}, "
                    f"not the head {target.head_sha[:12]}"
                )
            else:
                candidates.append(
                    (target.clicked.login, "requested-action", _rfc3339(self.clock()))
                )
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
        return None

    def note(self) -> str:
        """Markdown for the check run and summary; empty when nothing was refused."""
        if not self.refusals:
            return ""
        lines = "\n".join(f"- {r}" for r in self.refusals)
        return f"**Approval refused** (the result stays HELD):\n\n{lines}\n\n"


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the private object store ---------------------------------------------------------


def _git(args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> str:
    try:
        done = subprocess.run(  # noqa: S603 (fixed argv, no shell)
            ["git", *args],  # noqa: S607 (git from PATH, as everywhere on a runner)
            cwd=cwd,
            env=dict(env),
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
    except FileNotFoundError as e:
        raise UsageError("git is not installed; the action image must provide it") from e
    if done.returncode != 0:
        raise UsageError(f"git {args[0]} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


def fetch_private(inputs: ActionInputs, target: Target, dest: Path) -> tuple[str, str]:
    """Fetch base and head into a new bare repository at `dest` (never the workspace).

    Returns (base commit, head commit), both present in `dest`.

    Raises:
        UsageError: the fetch failed or the head moved away from the event's SHA.
    """
    origin = inputs.origin_url or f"{inputs.server_url.rstrip('/')}/{inputs.repository}.git"
    env: dict[str, str] = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(dest),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
    }
    if inputs.token and origin.startswith(("https://", "http://")):
        # the token goes in an env-carried header, never on a command line or in a URL
        basic = base64.b64encode(f"x-access-token:{inputs.token}".encode()).decode()
        env.update(
            GIT_CONFIG_COUNT="2",
            GIT_CONFIG_KEY_1="http.extraheader",
            GIT_CONFIG_VALUE_1=f"AUTHORIZATION: basic {basic}",
        )
    _git(["init", "--bare", "-q", str(dest)], cwd=dest.parent, env=env)
    refspecs = []
    if target.head_ref.endswith("/*"):
        refspecs.append(f"+{target.head_ref}:refs/proofgate/heads/*")
    else:
        refspecs.append(f"+{target.head_ref}:refs/proofgate/head")
    if target.base_ref is not None:
        refspecs.append(f"+{target.base_ref}:refs/proofgate/base")
    _git(["fetch", "--no-tags", "--quiet", origin, *refspecs], cwd=dest, env=env)
    for sha, what in ((target.head_sha, "head"), (target.base_sha, "base")):
        if sha is None:
            continue
        check = subprocess.run(  # noqa: S603
            ["git", "cat-file", "-e", f"{sha}^{{commit}}"],  # noqa: S607
            cwd=dest,
            env=env,
            capture_output=True,
            check=False,
        )
        if check.returncode != 0:
            raise UsageError(
                f"the {what} commit {sha} is not in {target.head_ref}: it moved since the "
                "event; the newer push triggers its own run"
            )
    base = target.base_sha or _git(["rev-parse", "refs/proofgate/base^{commit}"], cwd=dest, env=env)
    return base, target.head_sha


# --- reporting --------------------------------------------------------------------------


def escape_data(value: str) -> str:
    """Workflow-command data escaping (% CR LF)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _append(path: str, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)


def _set_outputs(inputs: ActionInputs, values: Mapping[str, str]) -> None:
    lines = []
    for key, value in values.items():
        if "\n" in value:
            raise ValueError(f"output {key} must be one line")
        lines.append(f"{key}={value}\n")
    _append(inputs.output_file, "".join(lines))


def _title(verdict: Verdict, reasons: Sequence[object]) -> str:
    if verdict is Verdict.PROVEN or not reasons:
        return verdict.value
    first = getattr(reasons[0], "message", str(reasons[0]))
    line = " ".join(str(first).split())
    title = f"{verdict.value}: {line}"
    return title if len(title) <= 200 else title[:199] + "…"


def annotations_from(predicate: Mapping[str, object]) -> tuple[Annotation, ...]:
    """Check-run annotations for the policy findings that name a path."""
    policy = predicate.get("policy")
    findings = policy.get("findings") if isinstance(policy, dict) else None
    out: list[Annotation] = []
    levels = {"DENY": "failure", "HOLD": "warning", "ALLOW": "notice"}
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict) or not isinstance(f.get("path"), str):
            continue
        raw_line = f.get("line")
        line = raw_line if isinstance(raw_line, int) else 1
        out.append(
            Annotation(
                path=f["path"],
                start_line=max(1, line),
                end_line=max(1, line),
                level=levels.get(str(f.get("decision")), "warning"),
                message=str(f.get("message") or f.get("rule")),
                title=f"proofgate {f.get('rule')}",
            )
        )
    return tuple(out)


def _out_dir(inputs: ActionInputs) -> Path:
    """Receipt files go under the workspace: the one directory a container action shares
    with later steps (RUNNER_TEMP is not mounted into the container)."""
    if inputs.out_dir:
        path = Path(inputs.out_dir)
    elif inputs.workspace and Path(inputs.workspace).is_dir():
        path = Path(inputs.workspace) / ".proofgate"
    else:
        path = Path(tempfile.mkdtemp(prefix="proofgate-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _shown_path(inputs: ActionInputs, path: Path) -> str:
    """Relative to the workspace when inside it: the host sees the workspace elsewhere."""
    try:
        return str(path.relative_to(inputs.workspace))
    except ValueError:
        return str(path)


def write_receipt(inputs: ActionInputs, run: ProofRun) -> tuple[Path, str]:
    out = _out_dir(inputs)
    receipt_path = out / "receipt.json"
    receipt_path.write_bytes(run.envelope)
    (out / "receipt.md").write_text(run.markdown, encoding="utf-8")
    (out / "patch.diff").write_bytes(run.patch)
    return receipt_path, hashlib.sha256(run.envelope).hexdigest()


# --- prove mode -------------------------------------------------------------------------


def run_prove(
    inputs: ActionInputs,
    event: Mapping[str, object],
    api: ChecksAPI,
    *,
    clock: Callable[[], float] = time.time,
) -> int:
    """One proof for this event; returns the step's exit code.

    Raises:
        GateError: usage/config errors (the check run, once started, is completed first).
    """
    from gate.git.repo import GitRepository
    from gate.prove import ProveRequest, prove
    from gate.sandbox.docker import DockerSandbox

    target = resolve_target(inputs, event, api)
    if target is None:
        print(f"proofgate: nothing to do for this {inputs.event_name} event", file=sys.stderr)
        return 0
    name = check_name(target.base_branch, api.default_branch())
    run_id = api.start_check(
        target.head_sha, name=name, external_id=target.external_id, details_url=inputs.run_url
    )
    approver = ReviewApprover(api, target, clock)
    try:
        with tempfile.TemporaryDirectory(prefix="proofgate-objects-") as tmp:
            private = Path(tmp) / "repo.git"
            base, head = fetch_private(inputs, target, private)
            request = ProveRequest(
                base=base,
                head=head,
                config_path=inputs.config_path,
                signing_key_pem=inputs.signing_key,
            )
            with GitRepository(private, name=inputs.repository) as evidence:
                run = prove(
                    request,
                    evidence=evidence,
                    sandbox=lambda: DockerSandbox(),
                    approver=approver,
                    clock=clock,
                )
    except GateError as e:
        api.complete_check(
            run_id,
            verdict=None,
            title="proofgate could not run",
            summary=f"proofgate stopped before a verdict:\n\n```\n{e}\n```\n",
            text="",
            details_url=inputs.run_url,
        )
        raise
    receipt_path, digest = write_receipt(inputs, run)
    shown = _shown_path(inputs, receipt_path)
    where = (
        f"Download it from the workflow run ({inputs.run_url}): `{shown}`."
        if inputs.run_url
        else f"It was written to `{shown}`."
    )
    text = (
        embed_envelope(run.envelope, limit=OUTPUT_LIMIT_BYTES, elsewhere=where)
        if run.signed
        else "This receipt is not signed: no `signing-key` was given to the action.\n"
    )
    actions: tuple[CheckAction, ...] = ()
    if run.verdict is Verdict.HELD and inputs.offer_approve and target.pr is not None:
        actions = (
            CheckAction(
                label="Approve", description="Approve this exact patch", identifier=APPROVE_ACTION
            ),
        )
    api.complete_check(
        run_id,
        verdict=run.verdict,
        title=_title(run.verdict, run.reasons),
        summary=approver.note() + run.markdown,
        text=text,
        annotations=annotations_from(run.predicate),
        actions=actions,
        details_url=inputs.run_url,
    )
    _set_outputs(inputs, {"verdict": run.verdict.value, "receipt": shown, "receipt-sha256": digest})
    summary = approver.note() + run.markdown
    if len(summary.encode()) > SUMMARY_LIMIT_BYTES:
        from gate.github.checks import fit_bytes

        summary = fit_bytes(
            summary, SUMMARY_LIMIT_BYTES - 1024, note=f"*(cut; the full receipt is `{shown}`)*"
        )
    _append(inputs.summary_file, summary + "\n")
    for refusal in approver.refusals:
        print(f"::warning title=proofgate approval::{escape_data(refusal)}")
    for reason in run.reasons:
        print(
            f"::error title={escape_property('proofgate ' + reason.code.value)}::"
            f"{escape_data(reason.message)}"
        )
    print(f"proofgate: {run.verdict.value} (receipt {shown}, sha256 {digest})", file=sys.stderr)
    if run.verdict is Verdict.PROVEN or not inputs.fail_on_unproven:
        return 0
    return 1


# --- verify mode (issue 8: release jobs) ------------------------------------------------


def load_keys(pem_text: str, *, source: str) -> list[Ed25519PublicKey]:
    """Every PEM public key in `pem_text`.

    Raises:
        SigningKeyError: a block is not an Ed25519 public key.
        UsageError: no key at all.
    """
    from gate import receipt

    blocks = re.findall(
        r"-----BEGIN PUBLIC KEY-----.*?-----END PUBLIC KEY-----", pem_text, flags=re.DOTALL
    )
    if not blocks:
        raise UsageError(f"{source}: no PEM public key (-----BEGIN PUBLIC KEY-----) found")
    return [receipt.load_public_key(b.encode(), source=source) for b in blocks]


def find_valid_receipt(
    api: ChecksAPI, commit: str, keys: Sequence[Ed25519PublicKey], require: Verdict | None
) -> tuple[bytes | None, str]:
    """The first receipt on `commit`'s check runs that verifies (signature by one of `keys`,
    subjects naming exactly `commit` and, as proven tree, exactly that commit's own tree,
    verdict meeting `require`), and a one-line message.

    The tree matters: a pull request proven against a base that has since moved has a
    proven tree other than its head's, so its receipt says nothing about the head commit
    as released. The check run's conclusion is never consulted: anyone with write access
    can set it."""
    from gate import receipt

    commit = commit.lower()
    envelopes = api.receipts_for_commit(commit)
    if not envelopes:
        return None, f"no proofgate receipt on the check runs of {commit} in {api.repository}"
    tree = api.commit_tree(commit).lower()
    problems: list[str] = []
    for envelope in envelopes:
        try:
            statement = receipt.verify(envelope, keys, commit=commit, tree=tree, require=require)
        except receipt.ReceiptError as e:
            if str(e) not in problems:
                problems.append(str(e))
            continue
        predicate = statement.get("predicate")
        verdict = predicate.get("verdict") if isinstance(predicate, dict) else None
        repository = predicate.get("repository") if isinstance(predicate, dict) else None
        if repository != api.repository:
            problem = f"receipt is for repository {repository!r}, not {api.repository!r}"
            if problem not in problems:
                problems.append(problem)
            continue
        return envelope, f"valid {verdict} receipt for {commit} in {api.repository}"
    return None, (
        f"{len(envelopes)} receipt(s) on {commit} in {api.repository}, none valid: "
        + "; ".join(problems)
    )


def verify_from_github(
    api: ChecksAPI, commit: str, keys: Sequence[Ed25519PublicKey], require: Verdict | None
) -> tuple[bool, str]:
    """`proofgate verify --github OWNER/REPO --commit SHA --key PUB...` (SPEC §5).

    True only if one valid receipt exists for exactly that commit. Raises GitHubError
    when the API cannot be read."""
    envelope, message = find_valid_receipt(api, commit, keys, require)
    return envelope is not None, message


def run_verify(inputs: ActionInputs, api: ChecksAPI) -> int:
    if not _HEX40.fullmatch(inputs.sha.lower()):
        raise UsageError(f"verify mode needs a 40-hex commit (GITHUB_SHA), got {inputs.sha!r}")
    keys = load_keys(inputs.verify_keys, source="the verify-keys input")
    envelope, message = find_valid_receipt(api, inputs.sha, keys, Verdict.PROVEN)
    if envelope is None:
        print(f"::error title=proofgate verify::{escape_data(message)}")
        _set_outputs(inputs, {"verdict": "UNVERIFIED"})
        return 1
    out = _out_dir(inputs) / "verified-receipt.json"
    out.write_bytes(envelope)
    _set_outputs(
        inputs,
        {
            "verdict": Verdict.PROVEN.value,
            "receipt": _shown_path(inputs, out),
            "receipt-sha256": hashlib.sha256(envelope).hexdigest(),
        },
    )
    _append(inputs.summary_file, f"proofgate verify: {message}\n")
    print(f"proofgate: {message}", file=sys.stderr)
    return 0


# --- entry point ------------------------------------------------------------------------


def main(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    logging.basicConfig(
        level=env.get("PROOFGATE_LOGLEVEL", "INFO").upper(),
        format="proofgate: %(message)s",
        stream=sys.stderr,
    )
    try:
        inputs = ActionInputs.from_env(env)
        api = GitHubChecks.from_env(
            {**env, "PROOFGATE_GITHUB_TOKEN": inputs.token} if inputs.token else env
        )
        if inputs.mode == "verify":
            return run_verify(inputs, api)
        if not inputs.event_path:
            raise UsageError("GITHUB_EVENT_PATH is not set: run inside GitHub Actions")
        try:
            event = json.loads(Path(inputs.event_path).read_bytes())
        except (OSError, ValueError) as e:
            raise UsageError(f"cannot read the event {inputs.event_path}: {e}") from e
        if not isinstance(event, dict):
            raise UsageError(f"the event {inputs.event_path} is not a JSON object")
        return run_prove(inputs, event, api)
    except GitHubError as e:
        print(f"::error title=proofgate::{escape_data(str(e))}")
        print(f"proofgate: {e}", file=sys.stderr)
        return e.exit_code
    except GateError as e:
        print(f"::error title=proofgate::{escape_data(str(e))}")
        print(f"proofgate: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    from gate.signals import sigterm_raises_interrupt

    sigterm_raises_interrupt()
    sys.exit(main())
