"""The port the Action uses to talk to GitHub, and the adapter's error type.

`GitHubChecks` (checks.py) implements it with PyGithub. The values here are plain data so
the Action's decisions (which review approves what) stay testable without HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gate.errors import GateError
from gate.model import Verdict
from gate.policy import TagAnswer

__all__ = [
    "Annotation",
    "CheckAction",
    "ChecksAPI",
    "GitHubError",
    "PullInfo",
    "ReviewInfo",
]


class GitHubError(GateError):
    """The GitHub API refused or failed a call we cannot do without (exit 2, no verdict).

    The message says what happened and what to do (e.g. which `permissions:` to add).
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class PullInfo:
    """A pull request as the API reports it now (not as the triggering event saw it)."""

    number: int
    head_sha: str
    head_ref: str
    head_repo: str  # owner/name of the head repository; differs from the base for forks
    base_ref: str
    base_sha: str  # goes stale as the base branch moves: never prove against it
    author: str
    state: str

    @property
    def fork(self) -> bool:
        return self.head_repo.lower() != self.base_repo.lower()

    base_repo: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewInfo:
    id: int
    login: str
    state: str  # upper case as the REST API gives it: APPROVED, CHANGES_REQUESTED, ...
    commit_id: str
    submitted_at: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Annotation:
    """One check-run annotation (a policy finding on a path)."""

    path: str
    start_line: int
    end_line: int
    level: str  # notice | warning | failure
    message: str
    title: str | None = None

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "annotation_level": self.level,
            "message": self.message,
        }
        if self.title is not None:
            d["title"] = self.title
        return d

    @property
    def key(self) -> tuple[str, int, int, str, str]:
        """What makes two annotations the same (a re-run must not add it again)."""
        return (self.path, self.start_line, self.end_line, self.level, self.message)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckAction:
    """A requested-action button (label ≤ 20, description ≤ 40, identifier ≤ 20 chars)."""

    label: str
    description: str
    identifier: str

    def __post_init__(self) -> None:
        if len(self.label) > 20 or len(self.description) > 40 or len(self.identifier) > 20:
            raise ValueError(f"check-run action too long for the API: {self!r}")

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "description": self.description,
            "identifier": self.identifier,
        }


class ChecksAPI(Protocol):
    """What the Action needs from GitHub, for one repository."""

    repository: str

    def find_check(self, head_sha: str, *, name: str, external_id: str) -> int | None:
        """The id of the newest check run on `head_sha` with this name and external id."""
        ...

    def start_check(
        self, head_sha: str, *, name: str, external_id: str, details_url: str | None = None
    ) -> int:
        """Create the check run `in_progress`, or put the existing one for this head SHA and
        external id back in progress (a re-run). Returns its id.

        Raises:
            GitHubError: the token may not write checks (names the permissions to add),
                or the API kept failing after retries.
        """
        ...

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
        """Complete the run: conclusion from the verdict (None: the run ended in an error,
        `failure`). Summary and text are cut to the API's byte limits with a note;
        annotations go in batches of 50 and are not repeated on a re-run.

        Raises:
            GitHubError: as for `start_check`.
        """
        ...

    def collaborator_permission(self, login: str) -> str:
        """admin | write | read | none (GitHub reports `maintain` as write)."""
        ...

    def get_pull(self, number: int) -> PullInfo:
        """Raises: GitHubError when the pull request does not exist."""
        ...

    def list_reviews(self, number: int) -> tuple[ReviewInfo, ...]:
        """Every review of the pull request, oldest first."""
        ...

    def default_branch(self) -> str: ...

    def tag(self, repository: str, tag: str) -> TagAnswer:
        """What another repository calls a tag (pin bumps' verification).

        Raises:
            TagLookupError: the look-up could not be made.
        """
        ...

    def commit_tree(self, sha: str) -> str:
        """The tree id of commit `sha`. Raises: GitHubError when it cannot be read."""
        ...

    def check_external_ids(self, sha: str) -> list[str]:
        """The external ids of the check runs on `sha` (proofgate's name a pull request)."""
        ...

    def receipts_for_commit(self, sha: str) -> list[bytes]:
        """The DSSE envelopes attached to check runs on `sha`, newest first (unverified)."""
        ...
