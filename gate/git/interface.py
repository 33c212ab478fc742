"""The port the orchestrator uses to read git evidence.

Raises `gate.errors.RepoError` (exit 2) for usage problems: not a repository, unknown
revision, shallow clone missing the merge-base. Evidence problems (patch does not apply,
merge conflict, hostile tree entries) are not exceptions: they come back as `Reason`s in
`Evidence.reasons` with `proven_tree=None`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from gate.errors import RepoError
from gate.model import BlobId, CommitId, Evidence, TreeId

__all__ = [
    "EvidenceSource",
    "RepoError",
    "UnsafeTreeError",
    "clean_room_archive",
    "clean_room_mtime",
]


class UnsafeTreeError(Exception):
    """A tree entry could escape the workspace (`..`, absolute, `.git` component, ...)."""


class EvidenceSource(Protocol):
    def capture(self, base: str, head: str) -> Evidence:
        """Resolve base/head, compute merge-base, capture the patch, inventory it, re-apply
        it to the base tip in a private object store and compare with a three-way merge.

        Raises:
            RepoError: unknown revision, shallow clone without the merge-base, not a repo.
        """
        ...

    def read_blob_at(self, commit: CommitId, path: str) -> tuple[BlobId, bytes] | None:
        """The blob at `path` in `commit`'s tree (from the user's repo), or None."""
        ...

    def read_tree_files(
        self, tree: TreeId, wanted: Callable[[bytes], bool], *, max_bytes: int
    ) -> dict[bytes, bytes] | None:
        """Regular files of `tree` whose path `wanted` selects (for the policy analyzers),
        or None when they would exceed `max_bytes` in total."""
        ...

    def read_tree_blob_ids(
        self, tree: TreeId, wanted: Callable[[bytes], bool]
    ) -> dict[bytes, BlobId]:
        """The blob ids of `tree`'s regular files that `wanted` selects (nothing is read)."""
        ...

    def read_blob(self, blob: BlobId) -> bytes:
        """One blob of the object store the evidence was captured into."""
        ...

    def entry_mode(self, tree: TreeId, path: bytes) -> int | None:
        """The git mode of `tree`'s entry at `path` (e.g. 0o120000 a symlink), or None."""
        ...

    def overlay(self, onto: TreeId, source: TreeId, selected: Callable[[bytes], bool]) -> TreeId:
        """`onto` with its `selected` paths taken from `source`, in the private store."""
        ...

    def archive(
        self, tree: TreeId, *, mtime: int = 1_000_000_000, umask: int = 0o022
    ) -> Iterator[bytes]:
        """Stream `tree` (from the private object store) as an uncompressed tar.

        Entries are relative paths (no leading `/`), exec bits and symlinks preserved,
        every entry stamped `mtime`; files 0666/0777 and directories 0777 less `umask`.

        Raises:
            UnsafeTreeError: an entry could write outside the extraction directory.
        """
        ...

    def close(self) -> None:
        """Delete the private object store. Safe to call twice."""
        ...


def clean_room_mtime() -> int:
    """SPEC §3.2: an unpredictable recent time for every entry of a materialized tree, so
    that no committed pyc's header matches its source."""
    return int(time.time()) - secrets.randbelow(86_400)


def clean_room_archive(source: EvidenceSource, tree: TreeId, mtime: int) -> Iterator[bytes]:
    """`tree` as every clean-room run receives it (head, base, trusted and proving runs
    alike): entries at `mtime` (from `clean_room_mtime`), umask 0 so that a non-root
    check user can write into the tree.

    Raises:
        RepoError, UnsafeTreeError: as `EvidenceSource.archive`.
    """
    return source.archive(tree, mtime=mtime, umask=0)
