"""Release verification (SPEC §5): find the receipts on a commit's check runs and accept
one only if it vouches for that commit as released.

Besides the signature, a receipt counts only when, in one composable verification
(`gate.receipt.verify`):
- its subjects name exactly the commit and, as proven tree, exactly that commit's own tree
  (a pull request proven against a base that has since moved says nothing about its head);
- its repository is this repository (a receipt of a fork or another project is no evidence);
- its `trigger.base_ref` is the branch releases come from (default: the repository's
  default branch), so a PROVEN against a laxer branch never counts;
- its trigger is `pull_request` or `merge_group`: a re-proof of a commit (`commit`) judged
  no change with a policy and counts only when the caller accepts re-proofs; so does a
  pull request whose proven tree is its base's own tree (an empty change on top of a
  commit pushed straight to the branch);
- its configuration blob is the configuration in the released commit's own tree, so a
  receipt proven under other rules does not count;
- its verdict meets `require`.

The check run's conclusion is never consulted: anyone with write access can set it.

The configuration blob is read from a local copy of the repository (`LocalTrees`): the
REST operations the stand-in implements (and a `checks: read` token) reach commits but not
their files. A tree id names its files in any object store that has it, so a checkout of
the release is as good as the API, once the API has said which tree the commit has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from gate.config import DEFAULT_CONFIG_PATH
from gate.errors import UsageError
from gate.github.interface import ChecksAPI
from gate.model import CommitId, TriggerKind, Verdict
from gate.receipt import (
    AllOf,
    AtLeast,
    Branch,
    Changed,
    ConfigBlob,
    Expectation,
    ReceiptError,
    Repository,
    Signed,
    Subject,
    TriggerIn,
    VerifiedReceipt,
    WholeProof,
    verify,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from gate.git.repo import GitRepository

__all__ = ["RELEASE_TRIGGERS", "LocalTrees", "find_valid_receipt", "release_expectation"]

RELEASE_TRIGGERS = frozenset({TriggerKind.PULL_REQUEST, TriggerKind.MERGE_GROUP})

BlobAt = Callable[[str, str], str | None]
"""(tree id, path) -> the regular-file blob id at that path in that tree, or None."""


class LocalTrees:
    """Blob ids from the trees of a local repository (a checkout of the release)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._repo: GitRepository | None = None

    def blob_at(self, tree: str, path: str) -> str | None:
        """Raises: UsageError when the repository or the tree is not there (exit 2)."""
        from gate.git.interface import RepoError
        from gate.git.repo import GitRepository

        hint = "run verify in a checkout of the released commit (actions/checkout), or --repo DIR"
        try:
            if self._repo is None:
                self._repo = GitRepository(self.path)
            found = self._repo.read_blob_at(CommitId(tree), path)
        except RepoError as e:
            raise UsageError(
                f"cannot read the released commit's tree {tree} in {self.path}: {hint}"
            ) from e
        return str(found[0]) if found is not None else None

    def commit_tree(self, commit: str) -> str:
        """The tree id of `commit` in the local repository.

        Raises: UsageError when the repository or the commit is not there (exit 2)."""
        import pygit2

        try:
            found = pygit2.Repository(str(self.path)).revparse_single(commit)
            return str(found.peel(pygit2.Commit).tree_id)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise UsageError(
                f"cannot read the released commit {commit} in {self.path}: run verify in a "
                "checkout of the released commit, or pass --repo DIR"
            ) from e

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    def __enter__(self) -> LocalTrees:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def release_expectation(
    *,
    keys: Sequence[Ed25519PublicKey],
    repository: str,
    commit: str,
    tree: str,
    branch: str,
    blob_at: Callable[[str], str | None],
    accept_reproof: bool,
    require: Verdict | None,
    config_path: str = DEFAULT_CONFIG_PATH,
) -> Expectation:
    """Everything a receipt must say to vouch for `commit` as released from `branch`."""
    kinds = RELEASE_TRIGGERS | ({TriggerKind.COMMIT} if accept_reproof else set())
    parts: list[Expectation] = [
        Signed(keys),
        WholeProof(),  # SPEC §3.3: a shard receipt never vouches for a release
        Subject(commit=commit, tree=tree),
        Repository(repository),
        Branch(branch),
        TriggerIn(kinds),
        ConfigBlob(blob_at=blob_at, path=config_path),
    ]
    if not accept_reproof:
        parts.append(Changed())  # an empty change is a re-proof of its base in disguise
    if require is not None:
        parts.append(AtLeast(require))
    return AllOf(*parts)


def _describe(verified: VerifiedReceipt, commit: str, repository: str) -> str:
    p = verified.predicate
    trigger = p.trigger
    how = f"{trigger.kind.value} onto {trigger.base_ref}" if trigger is not None else "unknown"
    if trigger is not None and trigger.pull_request is not None:
        how += f", pull request #{trigger.pull_request}"
    text = f"valid {p.verdict} receipt for {commit} in {repository} ({how}"
    if p.builder is not None:
        text += f"; signed by workflow {p.builder.workflow} run {p.builder.run_id}"
    return text + f"; key {verified.keyid[:16]})"


def find_valid_receipt(
    api: ChecksAPI,
    commit: str,
    keys: Sequence[Ed25519PublicKey],
    require: Verdict | None,
    *,
    blob_at: BlobAt,
    branch: str | None = None,
    accept_reproof: bool = False,
    config_path: str = DEFAULT_CONFIG_PATH,
) -> tuple[bytes | None, str]:
    """`proofgate verify --github OWNER/REPO --commit SHA --key PUB...` (SPEC §5): the first
    receipt on `commit`'s check runs that vouches for it as released (see the module
    docstring), and a one-line message; (None, every distinct refusal) otherwise.

    `branch` is a full `refs/heads/...` name; None means the repository's default branch.
    `config_path` is where the repository keeps its configuration: a receipt proven under
    a file at any other path does not count.

    Raises:
        GitHubError: the API cannot be read.
        UsageError: the released commit's tree cannot be read locally.
    """
    commit = commit.lower()
    envelopes = api.receipts_for_commit(commit)
    if not envelopes:
        return None, f"no proofgate receipt on the check runs of {commit} in {api.repository}"
    tree = api.commit_tree(commit).lower()
    expect = release_expectation(
        keys=keys,
        repository=api.repository,
        commit=commit,
        tree=tree,
        branch=branch or f"refs/heads/{api.default_branch()}",
        blob_at=lambda path: blob_at(tree, path),
        accept_reproof=accept_reproof,
        require=require,
        config_path=config_path,
    )
    problems: list[str] = []
    for envelope in envelopes:
        try:
            verified = verify(envelope, expect)
        except ReceiptError as e:
            if str(e) not in problems:
                problems.append(str(e))
            continue
        return envelope, _describe(verified, commit, api.repository)
    return None, (
        f"{len(envelopes)} receipt(s) on {commit} in {api.repository}, none valid: "
        + "; ".join(problems)
    )
