"""Check runs, pull requests, reviews and permissions through PyGithub (SPEC §6).

Retries: reads (GET) go through PyGithub's `GithubRetry` (5xx and secondary rate limits,
with backoff). Writes are not left to it: a POST that reached GitHub but whose answer was
lost would be sent again and create a second check run. Writes run in our own loop instead,
and after every failed attempt we look for what the attempt may have done (the run by head
SHA + name + external id; an annotation batch by its contents) before trying again.

Limits (GitHub's, not the OpenAPI schema's): output `summary` and `text` are at most 65,535
*bytes*; at most 50 annotations per request; requested actions at most 3.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

import requests
from github import Auth, Github, GithubException, GithubRetry
from github.CheckRun import CheckRun
from github.GithubObject import NotSet
from github.Repository import Repository
from github.Requester import Requester

from gate.errors import TagLookupError
from gate.github.envelope import RECEIPT_MARKER, embed_envelope, extract_envelopes
from gate.github.interface import (
    Annotation,
    CheckAction,
    GitHubError,
    PullInfo,
    ReviewInfo,
)
from gate.model import Verdict
from gate.policy import TagAnswer
from gate.util.timefmt import rfc3339

__all__ = [
    "ANNOTATIONS_PER_REQUEST",
    "CHECK_NAME",
    "OUTPUT_LIMIT_BYTES",
    "RECEIPT_MARKER",
    "GitHubChecks",
    "RetryPolicy",
    "embed_envelope",
    "extract_envelopes",
    "fit_bytes",
]

log = logging.getLogger("gate")

CHECK_NAME = "proofgate"
OUTPUT_LIMIT_BYTES = 65535
ANNOTATIONS_PER_REQUEST = 50
_CHECKS_PERMISSIONS = "permissions: { checks: write, contents: read, pull-requests: read }"

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How hard to try. Tests shrink the waits; production keeps GitHub's guidance."""

    attempts: int = 5
    backoff: float = 1.0  # seconds before the 2nd attempt, doubled each time
    max_wait: float = 60.0  # cap on any single wait, including a `retry-after`
    timeout: int = 30  # seconds per HTTP request
    # No fixed spacing between writes: one run makes a handful, and GitHub says when to
    # slow down (403/429 with `retry-after`, secondary limits), which `_call` obeys.
    write_interval: float = 0.0


def fit_bytes(text: str, limit: int = OUTPUT_LIMIT_BYTES, *, note: str) -> str:
    """`text` if its UTF-8 form fits in `limit` bytes; else cut on a character boundary
    and ended with `note` (which is kept whole)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    tail = "\n\n" + note
    room = limit - len(tail.encode("utf-8"))
    if room < 0:
        raise ValueError("the note alone is over the limit")
    return data[:room].decode("utf-8", "ignore") + tail


def _header(headers: Mapping[str, object] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            return str(value)
    return None


def _message(exc: GithubException) -> str:
    data = exc.data
    if isinstance(data, dict):
        msg = data.get("message")
        if isinstance(msg, str):
            return msg
    return str(data) if data else ""


class GitHubChecks:
    """One repository's checks, pulls, reviews and permissions.

    Raises (every method): GitHubError with a message saying what to do.
    """

    def __init__(
        self,
        repository: str,
        token: str,
        *,
        api_url: str = "https://api.github.com",
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        event_name: str = "",
    ) -> None:
        if "/" not in repository:
            raise GitHubError(f"repository must be OWNER/NAME, got {repository!r}")
        self.repository = repository
        self.event_name = event_name  # GITHUB_EVENT_NAME: which fix a 403 needs
        self._policy = retry or RetryPolicy()
        self._sleep = sleep
        get_retry = GithubRetry(
            total=self._policy.attempts - 1,
            backoff_factor=self._policy.backoff / 2,
            backoff_max=self._policy.max_wait,
            allowed_methods=frozenset({"GET"}),
            secondary_rate_wait=min(self._policy.max_wait, 60.0),
            max_rate_limit_wait=self._policy.max_wait,
        )
        self._gh = Github(
            auth=Auth.Token(token),
            base_url=api_url.rstrip("/"),
            timeout=self._policy.timeout,
            retry=get_retry,
            per_page=100,
            seconds_between_requests=None,
            seconds_between_writes=self._policy.write_interval or None,
        )
        self._repo: Repository = self._gh.withLazy(True).get_repo(repository)
        self._runs: dict[int, CheckRun] = {}
        self._duplicates: dict[int, list[int]] = {}  # check run -> our extra runs of it

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, retry: RetryPolicy | None = None) -> GitHubChecks:
        """From the Action's environment: GITHUB_REPOSITORY, GITHUB_API_URL (GHES works),
        and the token in PROOFGATE_GITHUB_TOKEN (or GITHUB_TOKEN).

        Raises:
            GitHubError: no token or no repository.
        """
        token = env.get("PROOFGATE_GITHUB_TOKEN") or env.get("GITHUB_TOKEN") or ""
        repository = env.get("GITHUB_REPOSITORY") or ""
        if not token:
            raise GitHubError(
                "no GitHub token: pass `github-token: ${{ github.token }}` to the action"
            )
        if not repository:
            raise GitHubError("GITHUB_REPOSITORY is not set: run inside GitHub Actions")
        api_url = env.get("GITHUB_API_URL") or "https://api.github.com"
        return cls(
            repository,
            token,
            api_url=api_url,
            retry=retry,
            event_name=env.get("GITHUB_EVENT_NAME") or "",
        )

    # --- the retry loop --------------------------------------------------------------

    def _transient_wait(self, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before trying again, or None when retrying cannot help."""
        backoff = float(min(self._policy.backoff * (2.0**attempt), self._policy.max_wait))
        if isinstance(exc, requests.exceptions.RequestException):
            return backoff  # timeout, connection reset: the call may or may not have landed
        if isinstance(exc, GithubException):
            if exc.status is not None and exc.status >= 500:
                return backoff
            if exc.status in (403, 429):
                retry_after = _header(exc.headers, "retry-after")
                if retry_after is not None and retry_after.strip().isdigit():
                    return min(float(retry_after), self._policy.max_wait)
                if Requester.isRateLimitError(_message(exc)):
                    return float(self._policy.max_wait)
        return None

    def _call(
        self,
        what: str,
        call: Callable[[], T],
        *,
        recover: Callable[[], T | None] | None = None,
        permission_hint: bool = False,
    ) -> T:
        last: Exception | None = None
        for attempt in range(self._policy.attempts):
            try:
                return call()
            except (GithubException, requests.exceptions.RequestException) as exc:
                last = exc
                wait = self._transient_wait(exc, attempt)
                if wait is None:
                    raise self._translate(what, exc, permission_hint=permission_hint) from exc
                if attempt + 1 == self._policy.attempts:
                    break
                log.warning("GitHub: %s failed (%s); retrying in %.1fs", what, exc, wait)
                self._sleep(wait)
                if recover is not None:
                    done = recover()
                    if done is not None:
                        return done
        raise GitHubError(
            f"cannot {what}: GitHub kept failing after {self._policy.attempts} attempts "
            f"({_describe(last) if last else 'no answer'}). Re-run the job later."
        ) from last

    def _translate(self, what: str, exc: Exception, *, permission_hint: bool) -> GitHubError:
        if isinstance(exc, GithubException) and exc.status == 403 and permission_hint:
            return GitHubError(
                f"cannot {what} (HTTP 403: {_message(exc) or 'forbidden'}).\n"
                "  The workflow token lacks `checks: write`. Add to the job:\n"
                f"    {_CHECKS_PERMISSIONS}\n"
                + (
                    "  A review runs with the reviewer's event context: for a fork's pull "
                    "request the token is read-only whatever you grant. Approve forks "
                    'through the `workflow_run` re-proof (docs/action.md, "Fork '
                    "approvals\"), or with the check run's Approve button."
                    if self.event_name == "pull_request_review"
                    else "  On `pull_request` from a fork the token is read-only whatever you "
                    "grant; use `pull_request_target` for forks."
                )
            )
        if isinstance(exc, GithubException) and exc.status in (401, 403):
            return GitHubError(
                f"cannot {what} (HTTP {exc.status}: {_message(exc)}). Check the "
                "`github-token` input and the job's `permissions:` "
                f"(at least: {_CHECKS_PERMISSIONS})."
            )
        if isinstance(exc, GithubException) and exc.status == 404:
            return GitHubError(f"cannot {what}: not found in {self.repository} (HTTP 404)")
        return GitHubError(f"cannot {what}: {_describe(exc)}")

    # --- check runs ------------------------------------------------------------------

    def _list_runs(self, sha: str, *, name: str | None) -> list[CheckRun]:
        def fetch() -> list[CheckRun]:
            commit = self._repo.get_commit(sha)
            if name is None:
                return list(commit.get_check_runs(filter="all"))
            return list(commit.get_check_runs(check_name=name, filter="all"))

        return self._call(f"list the check runs of {sha}", fetch)

    def find_check(self, head_sha: str, *, name: str, external_id: str) -> int | None:
        runs = [r for r in self._list_runs(head_sha, name=name) if r.external_id == external_id]
        if not runs:
            return None
        newest = max(runs, key=lambda r: r.id)
        self._runs[newest.id] = newest
        return newest.id

    def start_check(
        self, head_sha: str, *, name: str, external_id: str, details_url: str | None = None
    ) -> int:
        existing = self.find_check(head_sha, name=name, external_id=external_id)
        output: dict[str, str | list[dict[str, str | int]]] = {
            "title": "Proving…",
            "summary": "proofgate is re-applying the patch and running the configured checks "
            "in a clean room.",
        }
        if existing is not None:
            run = self._runs[existing]
            self._call(
                "update a check run",
                lambda: run.edit(
                    status="in_progress",
                    started_at=datetime.now(UTC),
                    output=dict(output),
                    details_url=details_url or NotSet,
                ),
                permission_hint=True,
            )
            return existing

        def create() -> int:
            run = self._repo.create_check_run(
                name=name,
                head_sha=head_sha,
                status="in_progress",
                external_id=external_id,
                started_at=datetime.now(UTC),
                output=output,
                details_url=details_url or NotSet,
            )
            self._runs[run.id] = run
            return run.id

        def landed() -> int | None:
            # the failed POST may have created the run after all: never create a second
            return self.find_check(head_sha, name=name, external_id=external_id)

        ours = self._call("create a check run", create, recover=landed, permission_hint=True)
        return self._settle_duplicates(head_sha, name=name, external_id=external_id, ours=ours)

    def _settle_duplicates(self, head_sha: str, *, name: str, external_id: str, ours: int) -> int:
        """After a create, look again: a concurrent run for the same head may have created
        one too. The oldest is the check run; ours, if newer, becomes a duplicate that
        `complete_check` completes with the same conclusion and a pointer (a conclusion is
        never `neutral` or `skipped`, SPEC §3). Returns the id to report on."""
        twins = [r.id for r in self._list_runs(head_sha, name=name) if r.external_id == external_id]
        first = min([*twins, ours])
        if first != ours:
            log.warning("another run created check run %d for %s; using it", first, head_sha)
            self._duplicates.setdefault(first, []).append(ours)
        return first

    def _run(self, run_id: int) -> CheckRun:
        run = self._runs.get(run_id)
        if run is None:
            run = self._call("read a check run", lambda: self._repo.get_check_run(run_id))
            self._runs[run_id] = run
        return run

    def _annotation_keys(self, run: CheckRun) -> set[tuple[str, int, int, str, str]]:
        def fetch() -> set[tuple[str, int, int, str, str]]:
            return {
                (a.path, a.start_line, a.end_line, a.annotation_level or "", a.message or "")
                for a in run.get_annotations()
            }

        return self._call("list check-run annotations", fetch)

    def complete_check(
        self,
        run_id: int,
        *,
        verdict: Verdict | None,
        title: str,
        summary: str,
        text: str,
        annotations: tuple[Annotation, ...] = (),
        actions: tuple[CheckAction, ...] = (),
        details_url: str | None = None,
    ) -> None:
        run = self._run(run_id)
        cut = "*(cut to fit GitHub's 65,535-byte limit; the full receipt is in the job summary)*"
        output: dict[str, object] = {
            "title": title,
            "summary": fit_bytes(summary, note=cut),
            "text": fit_bytes(text, note=cut),
        }
        pending = _dedupe(annotations)
        if pending:
            present = self._annotation_keys(run)
            pending = [a for a in pending if a.key not in present]
        batches = [
            pending[i : i + ANNOTATIONS_PER_REQUEST]
            for i in range(0, len(pending), ANNOTATIONS_PER_REQUEST)
        ] or [[]]
        # every batch but the last while the run is still in progress, so a crash midway
        # leaves a visibly unfinished run rather than a finished one missing findings
        for batch in batches[:-1]:
            self._patch_annotations(run, {"title": title, "summary": output["summary"]}, batch)
        last = batches[-1]
        final_output = dict(output)
        if last:
            final_output["annotations"] = [a.to_dict() for a in last]
        conclusion = verdict.conclusion if verdict is not None else "failure"
        if conclusion in ("neutral", "skipped"):  # SPEC §3: GitHub counts them as passing
            raise ValueError(f"refusing conclusion {conclusion!r}")
        extra: dict[str, object] = {}
        if details_url:
            extra["details_url"] = details_url
        if actions:
            extra["actions"] = [a.to_dict() for a in actions[:3]]

        def finish() -> bool:
            run.edit(
                status="completed",
                conclusion=conclusion,
                completed_at=datetime.now(UTC),
                output=final_output,
                **extra,  # type: ignore[arg-type]
            )
            return True

        def finished() -> bool | None:
            if not last:
                return None  # nothing appends: sending it again is harmless
            # annotations append: if this batch landed, do not send it twice
            return True if {a.key for a in last} <= self._annotation_keys(run) else None

        self._call("complete the check run", finish, recover=finished)
        for twin in self._duplicates.pop(run_id, []):
            self._complete_duplicate(twin, of=run, conclusion=conclusion, title=title)

    def _complete_duplicate(
        self, run_id: int, *, of: CheckRun, conclusion: str, title: str
    ) -> None:
        pointer = (
            f"A concurrent proofgate run for this commit created this check run too. The "
            f"result, with its evidence and receipt, is on check run {of.id}"
            + (f" ({of.html_url})" if of.html_url else "")
            + "; this one carries the same conclusion so neither reads as missing."
        )
        duplicate = self._run(run_id)
        self._call(
            "complete a duplicate check run",
            lambda: duplicate.edit(
                status="completed",
                conclusion=conclusion,
                completed_at=datetime.now(UTC),
                output={"title": f"Duplicate — {title}"[:200], "summary": pointer},
            ),
        )

    def _patch_annotations(
        self, run: CheckRun, output: dict[str, object], batch: list[Annotation]
    ) -> None:
        body = dict(output)
        body["annotations"] = [a.to_dict() for a in batch]

        def send() -> bool:
            run.edit(output=body)
            return True

        def landed() -> bool | None:
            return True if {a.key for a in batch} <= self._annotation_keys(run) else None

        self._call("add check-run annotations", send, recover=landed)

    # --- pulls, reviews, permissions -------------------------------------------------

    def collaborator_permission(self, login: str) -> str:
        def fetch() -> str:
            try:
                return self._repo.get_collaborator_permission(login)
            except GithubException as exc:
                if exc.status == 404:
                    return "none"  # not a collaborator
                raise

        return self._call(f"read {login}'s permission", fetch)

    def get_pull(self, number: int) -> PullInfo:
        def fetch() -> PullInfo:
            pr = self._repo.get_pull(number)
            head_repo = pr.head.repo.full_name if pr.head.repo is not None else ""
            return PullInfo(
                number=pr.number,
                head_sha=pr.head.sha,
                head_ref=pr.head.ref,
                head_repo=head_repo,
                base_ref=pr.base.ref,
                base_sha=pr.base.sha,
                base_repo=self.repository,
                author=pr.user.login if pr.user is not None else "",
                state=pr.state,
            )

        return self._call(f"read pull request #{number}", fetch)

    def list_reviews(self, number: int) -> tuple[ReviewInfo, ...]:
        def fetch() -> tuple[ReviewInfo, ...]:
            pr = self._repo.get_pull(number)
            return tuple(
                ReviewInfo(
                    id=r.id,
                    login=r.user.login if r.user is not None else "",
                    state=(r.state or "").upper(),
                    commit_id=r.commit_id or "",
                    submitted_at=(rfc3339(r.submitted_at) if r.submitted_at else None),
                )
                for r in pr.get_reviews()
            )

        return self._call(f"list the reviews of pull request #{number}", fetch)

    def default_branch(self) -> str:
        return self._call(
            "read the repository", lambda: self._gh.get_repo(self.repository)
        ).default_branch

    def commit_tree(self, sha: str) -> str:
        """The tree id of commit `sha` (repos/get-commit)."""

        def fetch() -> str:
            return str(self._repo.get_commit(sha).commit.tree.sha)

        return self._call(f"read commit {sha[:12]}", fetch)

    def tag(self, repository: str, tag: str) -> TagAnswer:
        """What `repository` (owner/name, any public repository) calls `tag`: the commit
        that `repos/get-commit` resolves `tags/TAG` to; exists=False when it has no such
        tag (HTTP 404 or 422). A pin bump's verification (gate.policy.pinbump) reads it.

        Raises:
            TagLookupError: the look-up could not be made (the policy then holds the bump).
        """

        def fetch() -> TagAnswer:
            try:
                upstream = self._gh.withLazy(True).get_repo(repository)  # no repos/get
                found = upstream.get_commit(f"tags/{tag}").raw_data  # the one request
                return TagAnswer(exists=True, commit=str(found["sha"]))
            except GithubException as exc:
                if exc.status in (404, 422):
                    return TagAnswer(exists=False)
                raise

        try:
            return self._call(f"look up tag {tag} of {repository}", fetch)
        except GitHubError as e:
            raise TagLookupError(str(e)) from e

    def check_external_ids(self, sha: str) -> list[str]:
        return [
            r.external_id
            for r in self._list_runs(sha, name=None)
            if r.head_sha == sha and r.external_id
        ]

    def receipts_for_commit(self, sha: str) -> list[bytes]:
        envelopes: list[bytes] = []
        for run in sorted(self._list_runs(sha, name=None), key=lambda r: -r.id):
            if run.head_sha != sha:
                continue
            text = run.output.text if run.output is not None else None
            if text:
                envelopes.extend(extract_envelopes(text))
        return envelopes


def _dedupe(annotations: tuple[Annotation, ...]) -> list[Annotation]:
    seen: set[tuple[str, int, int, str, str]] = set()
    out: list[Annotation] = []
    for a in annotations:
        if a.key not in seen:
            seen.add(a.key)
            out.append(a)
    return out


def _describe(exc: Exception) -> str:
    if isinstance(exc, GithubException):
        return f"HTTP {exc.status}: {_message(exc)}"
    return f"{type(exc).__name__}: {exc}"
