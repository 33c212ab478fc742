"""`GitRepository`: the pygit2 implementation of `EvidenceSource` (SPEC §1).

Reads the user's repository and never writes to it: revisions are resolved and blobs
read there, while the diff, the re-application of the patch and the three-way merge run
in a `PrivateStore` that lives until `close()` (the proven tree is streamed from it).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

import pygit2
from pygit2.enums import FileMode

from gate.errors import RepoError
from gate.git import fastarchive, worktree
from gate.git.interface import UnsafeTreeError
from gate.git.overlay import overlay
from gate.git.patch import CapturedPatch, PatchApplyError, apply_patch, capture_patch
from gate.git.store import PrivateStore, objects_dir
from gate.git.tarstream import DEFAULT_MTIME, TarEntry, stream_tar, tree_entries
from gate.model import (
    BlobId,
    CommitId,
    Coverage,
    Evidence,
    PatchCapture,
    Reason,
    ReasonCode,
    Revision,
    Sha256,
    TreeId,
    path_display,
)

__all__ = ["GitRepository"]

log = logging.getLogger("gate")

_REGULAR = (int(FileMode.BLOB), int(FileMode.BLOB_EXECUTABLE))


class GitRepository:
    """Evidence from a local git repository, read-only towards that repository.

    Use as a context manager (or call `close()`): the private object store holding the
    proven tree is deleted on exit, also on Ctrl-C. Re-applying the patch needs the git
    command-line tool (`git apply`, git >= 2.32) on PATH.

    Raises:
        RepoError: `path` is not inside a git repository.
    """

    def __init__(self, path: str | Path, *, name: str | None = None) -> None:
        try:
            self._repo = pygit2.Repository(str(path))
        except pygit2.GitError as e:
            raise RepoError(
                f"{path}: not a git repository ({e}). "
                "Run proofgate inside a clone, or pass the clone's path."
            ) from e
        top = Path(self._repo.workdir or self._repo.path)
        default = top.name.removesuffix(".git") or top.name
        self.name = name or default
        self._store: PrivateStore | None = None
        # validated entry lists by tree id: capture() checks the proven tree, and every
        # check's archive() of it then skips the walk
        self._entries: dict[str, list[TarEntry]] = {}
        self._worktree: worktree.Snapshot | None = None  # set by capture_worktree()

    # -- context management ------------------------------------------------------------

    def __enter__(self) -> GitRepository:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Delete the private object store. Safe to call twice."""
        store, self._store = self._store, None
        self._entries.clear()
        if store is not None:
            store.dispose()

    @property
    def workdir(self) -> Path | None:
        """The repository's work tree (None for a bare repository)."""
        return Path(self._repo.workdir) if self._repo.workdir else None

    @property
    def store_path(self) -> Path | None:
        """Where the private object store lives (None before `capture` or after `close`)."""
        return None if self._store is None else self._store.path

    # -- revisions ---------------------------------------------------------------------

    def resolve(self, spec: str) -> Revision:
        """Resolve a branch, tag, SHA or expression such as `HEAD~2` to a commit.

        Raises:
            RepoError: the revision is unknown, ambiguous or not a commit.
        """
        if self._worktree is not None and spec == self._worktree.commit:
            return self._worktree.revision(spec)  # lives in the private store only
        try:
            obj = self._repo.revparse_single(spec)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise RepoError(
                f"unknown revision {spec!r} in {self.name}: {e}. "
                "Check the name, or fetch it first (git fetch origin <ref>)."
            ) from e
        return Revision(
            spec=spec, commit=CommitId(str(commit.id)), tree=TreeId(str(commit.tree_id))
        )

    def merge_base(self, base: Revision, head: Revision) -> CommitId:
        """The merge-base of two resolved revisions.

        Raises:
            RepoError: none exists (unrelated histories, or a shallow clone cut it off).
        """
        try:
            mb = self._repo.merge_base(base.commit, head.commit)
        except pygit2.GitError as e:
            mb = None
            detail = f" ({e})"
        else:
            detail = ""
        if mb is not None:
            return CommitId(str(mb))
        if self._repo.is_shallow:
            raise RepoError(
                f"no merge-base of {base.spec!r} and {head.spec!r}: this is a shallow clone "
                f"and its history stops before they meet{detail}. Fetch more history: "
                "`git fetch --unshallow`, or `git fetch --deepen=<n>` (in GitHub Actions: "
                "actions/checkout with `fetch-depth: 0`)."
            )
        raise RepoError(
            f"no merge-base of {base.spec!r} and {head.spec!r}: the histories are "
            f"unrelated{detail}. Choose a base that shares history with the head."
        )

    # -- EvidenceSource ----------------------------------------------------------------

    def capture(self, base: str, head: str) -> Evidence:
        """Resolve, capture the patch, inventory it, re-apply it privately, merge, compare.

        Raises:
            RepoError: unknown revision, no merge-base (shallow clone), unreadable objects.
        """
        base_rev = self.resolve(base)
        head_rev = self.resolve(head)
        snap = self._worktree
        if snap is not None and head_rev.commit != snap.commit:
            snap = None
        # the synthetic commit's one parent is HEAD, which the user's repository has
        mb = self.merge_base(base_rev, head_rev if snap is None else self.resolve(snap.parent))
        if self._store is None:
            self._store = PrivateStore(objects_dir(self._repo))
        try:
            ev = self._capture(self._store, base_rev, head_rev, mb)
            return ev if snap is None else worktree.annotate(ev, snap, self._store.git)
        except BaseException:
            # SPEC §1: the store is disposable; an interrupted capture leaves nothing behind
            self.close()
            raise

    def _capture(
        self, private: PrivateStore, base: Revision, head: Revision, mb: CommitId
    ) -> Evidence:
        store = private.git
        try:
            mb_tree = store[mb].peel(pygit2.Tree)
            base_tree = store[base.tree].peel(pygit2.Tree)
            head_tree = store[head.tree].peel(pygit2.Tree)
            captured = capture_patch(store, mb_tree, head_tree)
        except (KeyError, pygit2.GitError) as e:
            raise RepoError(
                f"cannot read the objects between {base.spec!r} and {head.spec!r}: {e}. "
                "The clone may be partial or shallow; fetch the full history."
            ) from e
        reasons: list[Reason] = []
        proven: TreeId | None = None
        applied = self._reapply(private.path, base_tree, captured, reasons)
        merged = self._merge(store, mb_tree, base_tree, head_tree, reasons)
        if applied is None or merged is None:
            # libgit2 refuses hostile names (`.git`, `..`) while applying or merging; say
            # so plainly rather than only as a mismatch
            try:
                tree_entries(store, head_tree.id)
            except UnsafeTreeError as e:
                reasons.insert(0, Reason(code=ReasonCode.UNSAFE_TREE, message=str(e)))
        if applied is not None and merged is not None:
            if applied != merged:
                reasons.append(
                    Reason(
                        code=ReasonCode.PATCH_MISMATCH,
                        message=(
                            f"the patch applied to the base tip gives tree {applied}, the "
                            f"three-way merge gives {merged}"
                        ),
                    )
                )
            elif base.commit == mb and applied != head.tree:
                reasons.append(
                    Reason(
                        code=ReasonCode.PATCH_MISMATCH,
                        message=(
                            f"base is the merge-base, but the re-applied patch gives tree "
                            f"{applied}, not head's tree {head.tree}"
                        ),
                    )
                )
            else:
                proven = applied
        if proven is not None:
            try:
                self._entries[proven] = tree_entries(store, pygit2.Oid(hex=proven))
            except UnsafeTreeError as e:
                reasons.append(Reason(code=ReasonCode.UNSAFE_TREE, message=str(e)))
                proven = None
        if not captured.complete:
            reasons.append(
                Reason(
                    code=ReasonCode.COVERAGE_INCOMPLETE,
                    message="the patch could not be captured whole: " + "; ".join(captured.notes),
                )
            )
        return Evidence(
            repository=self.name,
            base=base,
            head=head,
            merge_base=mb,
            patch=PatchCapture(
                data=captured.data,
                sha256=Sha256(hashlib.sha256(captured.data).hexdigest()),
                files=len(captured.inventory),
            ),
            inventory=captured.inventory,
            coverage=Coverage(complete=captured.complete, notes=captured.notes),
            proven_tree=proven,
            reasons=tuple(reasons),
        )

    @staticmethod
    def _reapply(
        store_path: Path,
        base_tree: pygit2.Tree,
        captured: CapturedPatch,
        reasons: list[Reason],
    ) -> TreeId | None:
        try:
            return TreeId(apply_patch(store_path, str(base_tree.id), captured.data))
        except PatchApplyError as e:
            reasons.append(Reason(code=ReasonCode.PATCH_MISMATCH, message=str(e)))
            return None

    @staticmethod
    def _merge(
        store: pygit2.Repository,
        mb_tree: pygit2.Tree,
        base_tree: pygit2.Tree,
        head_tree: pygit2.Tree,
        reasons: list[Reason],
    ) -> TreeId | None:
        try:
            index = store.merge_trees(mb_tree, base_tree, head_tree)
        except pygit2.GitError as e:
            reasons.append(
                Reason(code=ReasonCode.MERGE_CONFLICT, message=f"the three-way merge failed: {e}")
            )
            return None
        conflicts = index.conflicts
        if conflicts is not None:
            paths = sorted(
                {
                    path_display(_raw(side.path))
                    for triple in conflicts
                    for side in triple
                    if side is not None
                }
            )
            more = f" and {len(paths) - 10} more" if len(paths) > 10 else ""
            shown = ", ".join(paths[:10]) + more
            reasons.append(
                Reason(
                    code=ReasonCode.MERGE_CONFLICT,
                    message=f"base and head conflict in {len(paths)} path(s): {shown}. "
                    "Rebase or merge the base into the head and push again.",
                )
            )
            return None
        return TreeId(str(index.write_tree(store)))

    def local_branch(self, spec: str) -> str | None:
        """`refs/heads/<name>` when `spec` names a local branch (`main` or
        `refs/heads/main`), else None (a commit id, a tag, an expression)."""
        ref = f"refs/heads/{spec.removeprefix('refs/heads/')}"
        try:
            found = self._repo.references.get(ref)
        except (ValueError, pygit2.GitError):  # not a valid reference name
            return None
        return ref if found is not None else None

    def capture_worktree(self, *, on_read: worktree.OnRead | None = None) -> worktree.Snapshot:
        """Capture the working tree as a synthetic commit in the private store (see
        `gate.git.worktree`); `capture(base, snapshot.commit)` then proves it.

        Raises:
            RepoError: a bare repository, no commit yet, or git fails.
        """
        if self._store is None:
            self._store = PrivateStore(objects_dir(self._repo))
        try:
            self._worktree = worktree.snapshot(self._repo, self._store.git, on_read=on_read)
        except BaseException:
            self.close()
            raise
        return self._worktree

    def overlay(self, onto: TreeId, source: TreeId, selected: Callable[[bytes], bool]) -> TreeId:
        """`onto` with its `selected` paths taken from `source` (SPEC §3.1 trusted and
        proving trees), written into the private object store only.

        Raises:
            RepoError: no capture yet, or a tree is not readable.
            UnsafeTreeError: the new tree has an entry that could escape the workspace.
        """
        if self._store is None:
            raise RepoError("overlay() needs a capture first (no private object store)")
        store = self._store.git
        try:
            oid = overlay(store, pygit2.Oid(hex=onto), pygit2.Oid(hex=source), selected)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise RepoError(f"cannot build a tree from {onto} and {source}: {e}") from e
        self._entries[str(oid)] = tree_entries(store, oid)
        return TreeId(str(oid))

    def read_blob_at(self, commit: CommitId, path: str) -> tuple[BlobId, bytes] | None:
        """The regular-file blob at `path` in `commit`'s tree (user's repo), or None.

        Symlinks, gitlinks and directories give None: a configuration must be a file.

        Raises:
            RepoError: `commit` is not a commit in the repository.
        """
        try:
            tree = self._repo[commit].peel(pygit2.Tree)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise RepoError(f"unknown commit {commit} in {self.name}: {e}") from e
        try:
            entry = tree[path]
        except KeyError:
            return None
        if int(entry.filemode) not in _REGULAR or not isinstance(entry, pygit2.Blob):
            return None
        return BlobId(str(entry.id)), bytes(entry.data)

    def entry_mode(self, tree: TreeId, path: bytes) -> int | None:
        """The git mode of the entry at `path` in `tree` (private store), or None."""
        repo = self._store.git if self._store is not None else self._repo
        try:
            entry = repo[tree].peel(pygit2.Tree)[path.decode("utf-8", "surrogateescape")]
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return int(entry.filemode)

    def read_tree_files(
        self, tree: TreeId, wanted: Callable[[bytes], bool], *, max_bytes: int
    ) -> dict[bytes, bytes] | None:
        """Regular files of `tree` (private store) selected by `wanted`, for the policy's
        analyzers; None when their total size exceeds `max_bytes`.

        Raises:
            RepoError: the tree is not readable.
        """
        repo = self._evidence_git()
        out: dict[bytes, bytes] = {}
        total = 0
        for path, oid in self._regular_files(tree, wanted):
            data = repo.odb.read(oid)[1]
            total += len(data)
            if total > max_bytes:
                return None
            out[path] = bytes(data)
        return out

    def read_tree_blob_ids(
        self, tree: TreeId, wanted: Callable[[bytes], bool]
    ) -> dict[bytes, BlobId]:
        """The blob ids of the regular files of `tree` (private store) that `wanted`
        selects; no file is read.

        Raises:
            RepoError: the tree is not readable.
        """
        return {path: BlobId(str(oid)) for path, oid in self._regular_files(tree, wanted)}

    def read_blob(self, blob: BlobId) -> bytes:
        """One blob of the private store (or the user's repository before a capture).

        Raises:
            RepoError: no such blob.
        """
        try:
            return bytes(self._evidence_git().odb.read(pygit2.Oid(hex=blob))[1])
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise RepoError(f"blob {blob} is not in the object store: {e}") from e

    def _evidence_git(self) -> pygit2.Repository:
        return self._store.git if self._store is not None else self._repo

    def _regular_files(
        self, tree: TreeId, wanted: Callable[[bytes], bool]
    ) -> Iterator[tuple[bytes, pygit2.Oid]]:
        repo = self._evidence_git()
        try:
            root = repo[pygit2.Oid(hex=tree)].peel(pygit2.Tree)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise RepoError(f"tree {tree} is not in the object store: {e}") from e
        stack: list[tuple[bytes, pygit2.Tree]] = [(b"", root)]
        while stack:
            prefix, node = stack.pop()
            for entry in node:
                path = prefix + (entry.raw_name or b"")
                mode = int(entry.filemode)
                if mode == int(FileMode.TREE):
                    stack.append((path + b"/", repo[entry.id].peel(pygit2.Tree)))
                elif mode in _REGULAR and wanted(path):
                    yield path, entry.id

    def archive(
        self,
        tree: TreeId,
        *,
        mtime: int = DEFAULT_MTIME,
        uid: int = 0,
        gid: int = 0,
        umask: int = 0o022,
    ) -> Iterator[bytes]:
        """Stream `tree` from the private object store as an uncompressed tar.

        `umask` takes bits away from 0666/0777 (files) and 0777 (directories); the clean
        room asks for 0, so a non-root user can write the tree it is given.

        Every name is checked before this returns, so a hostile tree raises here and no
        byte is produced. The result is an iterator of ~1 MiB chunks; docker SDK's
        `container.put_archive(path, data)` accepts it as `data` directly (requests sends
        it chunked), or join it for a bytes object. Entries are owned by `uid:gid` and
        carry a fixed `mtime` so the archive of a tree is deterministic.

        With git on PATH and owner 0:0 the bytes come from `git archive` in the private
        store with every `.gitattributes` conversion switched off (see
        `gate.git.fastarchive`); otherwise from the pure-Python writer. Both extract to
        the same files, modes and symlinks. The stream raises RepoError rather than end
        short if git fails; closing it early stops git.

        Raises:
            UnsafeTreeError: an entry could write outside the extraction directory.
            RepoError: the tree is not readable (no capture yet, or closed).
        """
        repo = self._store.git if self._store is not None else self._repo
        try:
            oid = pygit2.Oid(hex=tree)
        except ValueError as e:
            raise RepoError(f"{tree!r} is not a tree id: {e}") from e
        entries = self._entries.get(str(oid))
        if entries is None:
            try:
                entries = tree_entries(repo, oid)
            except (KeyError, pygit2.GitError) as e:
                raise RepoError(f"tree {tree} is not in the object store: {e}") from e
            self._entries[str(oid)] = entries
        # Every name is checked above. The fast path is `git archive` in the private store
        # with all attributes neutralized (gate/git/fastarchive.py); it writes owner 0:0
        # only, so another owner (or no git on PATH) takes the pure-Python stream.
        git = fastarchive.git_available()
        if git is None or uid != 0 or gid != 0 or not 0 <= mtime <= fastarchive.MAX_MTIME:
            return stream_tar(repo, entries, mtime=mtime, uid=uid, gid=gid, umask=umask)
        if self._store is None:  # never write the archive's commit into the user's repo
            self._store = PrivateStore(objects_dir(self._repo))
        return fastarchive.git_archive(
            self._store.git, self._store.path, oid, mtime=mtime, git=git, umask=umask
        )


def _raw(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")
