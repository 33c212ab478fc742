"""The working tree as evidence: `--worktree` and `apply` (issue 20).

`snapshot` captures the working tree's Git-visible state -- every tracked path as the
filesystem has it now (staged and unstaged changes alike: the file on disk wins), plus
every untracked file that `.gitignore`, `.git/info/exclude` and `core.excludesFile` do not
ignore -- as a synthetic tree and commit in the private object store. Symlinks are
recorded as symlinks and exec bits as the filesystem has them (not `core.fileMode`); bytes
are recorded raw (no clean filters, no eol conversion), as the clean room materializes
them. Submodules and nested repositories are recorded as gitlinks, never descended.

Read-only towards the user's repository. git lists the paths with a *copy* of the index
(`GIT_INDEX_FILE` in a temporary directory, `GIT_OPTIONAL_LOCKS=0`), so no refresh of
stat data and no untracked cache ever reaches `.git/index`; objects are hashed first and
written to the private store only when the store (with the user's objects as alternates)
does not have them already, so not even an existing object's mtime is touched.

A file that changes while it is read (lstat before and after: size, mtime_ns, inode,
mode) or a path list that changes during the capture makes the snapshot *unstable*: the
run is INCONCLUSIVE (`coverage-incomplete`) and no proven tree is claimed, never a tree
mixing two states. The detection is as fine as the filesystem's timestamps.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, ObjectType

from gate.errors import RepoError
from gate.git.patch import PatchApplyError, apply_patch
from gate.git.store import PrivateStore, objects_dir
from gate.model import (
    CommitId,
    Coverage,
    Evidence,
    Reason,
    ReasonCode,
    Revision,
    TreeId,
    WorktreeCapture,
    path_display,
)

__all__ = [
    "Checkout",
    "OnRead",
    "Snapshot",
    "annotate",
    "git_command",
    "snapshot",
    "tree_differences",
]

OnRead = Callable[[bytes], None]
"""Called with each path after its bytes were read and before its second lstat (tests
use it to change a file mid-capture deterministically)."""

# Identical states give identical commits: fixed author, committer, time and message.
_SIGNATURE = ("proofgate worktree", "worktree@proofgate.invalid")
_MESSAGE = "proofgate: the working tree, captured\n"
_LINK = int(FileMode.LINK)
_GITLINK = int(FileMode.COMMIT)
_TREE = int(FileMode.TREE)
_REGULAR = int(FileMode.BLOB)
_EXEC = int(FileMode.BLOB_EXECUTABLE)
_MAX_SHOWN = 10
_CONFIG_VARS = frozenset({"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"})

_Key = tuple[int, int, int, int]  # size, mtime_ns, inode, mode


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """The working tree as a synthetic commit in the private store."""

    commit: CommitId
    tree: TreeId
    parent: CommitId  # HEAD when the snapshot was taken
    head_ref: str | None  # HEAD's branch ("refs/heads/..."), None when detached
    untracked: tuple[bytes, ...]  # non-ignored untracked paths that are in the tree
    unstable: tuple[bytes, ...]  # paths that changed while they were captured
    notes: tuple[str, ...]  # what the tree does not hold (special files, submodules)
    ignored_only: frozenset[str]  # top-level module names that exist only as ignored files

    def revision(self, spec: str) -> Revision:
        return Revision(spec=spec, commit=self.commit, tree=self.tree)


def git_command(repo: pygit2.Repository, index_file: Path) -> tuple[str, dict[str, str]]:
    """The git executable and an environment aimed at `repo` with a private index file.

    The user's own configuration stays in force (core.excludesFile lives there, so the
    variables choosing the global and system files are kept); every other inherited
    `GIT_*` variable is dropped so nothing redirects git elsewhere.

    Raises:
        RepoError: git is not installed.
    """
    git = shutil.which("git")
    if git is None:
        raise RepoError("the git command-line tool is not installed; install git")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _CONFIG_VARS}
    env.update(
        GIT_DIR=repo.path,
        GIT_WORK_TREE=str(repo.workdir),
        GIT_INDEX_FILE=str(index_file),
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_REPLACE_OBJECTS="1",
        LC_ALL="C",
    )
    return git, env


def _run(git: str, env: dict[str, str], *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(  # noqa: S603 (fixed argv, no shell)
        [git, "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false", *args],
        input=stdin,
        env=env,
        cwd=env["GIT_WORK_TREE"],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "backslashreplace").strip()
        raise RepoError(f"git {args[0]} failed in {env['GIT_WORK_TREE']}: {err}")
    return proc.stdout


def _zsplit(out: bytes) -> list[bytes]:
    return [p for p in out.split(b"\0") if p]


@dataclass(frozen=True, slots=True)
class _Tracked:
    mode: int
    oid: str
    skip_worktree: bool


def _listing(git: str, env: dict[str, str]) -> tuple[dict[bytes, _Tracked], list[bytes]]:
    """Tracked entries (one per path; conflicted paths once) and untracked, non-ignored
    paths (`dir/` for a nested repository)."""
    tracked: dict[bytes, _Tracked] = {}
    for row in _zsplit(_run(git, env, "ls-files", "-z", "-s", "-t")):
        meta, _, path = row.partition(b"\t")
        tag, mode, oid, _stage = meta.split(b" ")
        tracked.setdefault(path, _Tracked(int(mode, 8), oid.decode(), tag == b"S"))
    others = _zsplit(_run(git, env, "ls-files", "-z", "--others", "--exclude-standard"))
    return tracked, others


def _ignored_only(
    git: str, env: dict[str, str], root: bytes, visible: set[bytes]
) -> frozenset[str]:
    """Top-level importable names present only as ignored files or packages (cheap:
    `--directory` lists an ignored directory once, without descending into it)."""
    names: set[str] = set()
    args = ("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    for row in _zsplit(_run(git, env, *args)):
        top = row.split(b"/", 1)[0]
        if top in visible:
            continue
        name = top.decode("utf-8", "replace")
        if row == top + b"/" and os.path.isfile(os.path.join(root, top, b"__init__.py")):
            names.add(name)
        elif row == top and name.endswith(".py"):
            names.add(name.removesuffix(".py"))
    return frozenset(n for n in names if n.isidentifier())


def _key(st: os.stat_result) -> _Key:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)


class _Unstable(Exception):
    pass


def _read(root: bytes, path: bytes, on_read: OnRead | None) -> tuple[int, bytes] | None:
    """(mode, bytes) of `path` as the filesystem has it, None if it is not a file.

    Raises:
        _Unstable: it changed between the two lstat calls.
    """
    full = os.path.join(root, path)
    try:
        before = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(before.st_mode):
        data = os.readlink(full)
        mode = _LINK
    elif stat.S_ISREG(before.st_mode):
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            raise _Unstable from e
        try:
            if _key(os.fstat(fd)) != _key(before):
                raise _Unstable
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read()
        finally:
            os.close(fd)
        mode = _EXEC if before.st_mode & stat.S_IXUSR else _REGULAR
        if len(data) != before.st_size:
            raise _Unstable
    else:
        return None
    if on_read is not None:
        on_read(path)
    try:
        after = os.lstat(full)
    except OSError as e:
        raise _Unstable from e
    if _key(after) != _key(before):
        raise _Unstable
    return mode, data


def _put(odb: pygit2.Odb, kind: ObjectType, name: bytes, data: bytes) -> pygit2.Oid:
    """Write an object unless some store already has it (never freshen the user's)."""
    header = b"%s %d\0" % (name, len(data))
    oid = pygit2.Oid(hex=hashlib.sha1(header + data, usedforsecurity=False).hexdigest())
    if oid not in odb:
        odb.write(kind, data)
    return oid


def _sort_key(row: tuple[bytes, int, pygit2.Oid]) -> bytes:
    name, mode, _ = row
    return name + b"/" if mode == _TREE else name


def _write_tree(odb: pygit2.Odb, node: dict[bytes, object]) -> pygit2.Oid | None:
    rows: list[tuple[bytes, int, pygit2.Oid]] = []
    for name, value in node.items():
        if isinstance(value, dict):
            sub = _write_tree(odb, value)
            if sub is not None:
                rows.append((name, _TREE, sub))
        else:
            assert isinstance(value, tuple)  # noqa: S101 - built below
            rows.append((name, value[0], value[1]))
    if not rows and node:
        return None
    rows.sort(key=_sort_key)
    body = b"".join(b"%o %s\0%s" % (mode, name, oid.raw) for name, mode, oid in rows)
    return _put(odb, ObjectType.TREE, b"tree", body)


def _nest(entries: dict[bytes, tuple[int, pygit2.Oid]]) -> dict[bytes, object]:
    root: dict[bytes, object] = {}
    for path in sorted(entries):
        *dirs, leaf = path.split(b"/")
        node = root
        for d in dirs:
            child = node.setdefault(d, {})
            if not isinstance(child, dict):  # a file where a directory is wanted
                child = node[d] = {}
            node = child
        node[leaf] = entries[path]
    return root


def _gitlink(root: bytes, path: bytes) -> str | None:
    """The checked-out commit of a submodule or nested repository, if it has one."""
    try:
        sub = pygit2.Repository(os.fsdecode(os.path.join(root, path)))
        return None if sub.head_is_unborn else str(sub.head.target)
    except (pygit2.GitError, KeyError, ValueError):
        return None


def snapshot(
    repo: pygit2.Repository,
    store: pygit2.Repository,
    *,
    on_read: OnRead | None = None,
    also: frozenset[bytes] = frozenset(),
) -> Snapshot:
    """Capture the working tree of `repo` as a commit in `store` (the private store).

    `also` names paths to capture when they exist even if ignored (`apply` checks its
    result with the patch's paths: a committed file may match an ignore rule).

    Raises:
        RepoError: a bare repository, no commit yet, or git fails.
    """
    if repo.workdir is None:
        raise RepoError(f"{repo.path}: a bare repository has no working tree to capture")
    if repo.head_is_unborn:
        raise RepoError(f"{repo.workdir}: HEAD has no commit yet; commit a base first")
    head = repo.head
    parent = CommitId(str(head.peel(pygit2.Commit).id))
    head_ref = None if repo.head_is_detached else head.name
    root = os.fsencode(repo.workdir)
    index = Path(repo.path) / "index"
    with tempfile.TemporaryDirectory(prefix="proofgate-index-") as tmp:
        copy = Path(tmp) / "index"
        before = _index_key(index)
        if index.exists():
            shutil.copyfile(index, copy)
        git, env = git_command(repo, copy)
        tracked, others = _listing(git, env)
        extra = sorted(also - tracked.keys() - set(others))
        entries, untracked, unstable, notes = _capture(
            root, store, tracked, [*others, *extra], on_read
        )
        visible = {p.split(b"/", 1)[0] for p in entries}
        ignored = _ignored_only(git, env, root, visible)
        if _index_key(index) != before or _listing(git, env) != (tracked, others):
            unstable.append(b"(the list of files)")
    tree = _write_tree(store.odb, _nest(entries)) or _put(store.odb, ObjectType.TREE, b"tree", b"")
    sig = pygit2.Signature(*_SIGNATURE, 0, 0)
    commit = store.create_commit(None, sig, sig, _MESSAGE, tree, [pygit2.Oid(hex=parent)])
    return Snapshot(
        commit=CommitId(str(commit)),
        tree=TreeId(str(tree)),
        parent=parent,
        head_ref=head_ref,
        untracked=tuple(sorted(p for p in untracked if p in entries)),
        unstable=tuple(unstable),
        notes=tuple(notes),
        ignored_only=ignored,
    )


def _index_key(index: Path) -> _Key | None:
    try:
        return _key(index.stat())
    except FileNotFoundError:
        return None


def _capture(
    root: bytes,
    store: pygit2.Repository,
    tracked: dict[bytes, _Tracked],
    others: list[bytes],
    on_read: OnRead | None,
) -> tuple[dict[bytes, tuple[int, pygit2.Oid]], list[bytes], list[bytes], list[str]]:
    entries: dict[bytes, tuple[int, pygit2.Oid]] = {}
    unstable: list[bytes] = []
    notes: list[str] = []
    untracked: list[bytes] = []

    def record_gitlink(path: bytes, fallback: str | None) -> None:
        target = _gitlink(root, path) or fallback
        if target is None:
            notes.append(f"{path_display(path)}: a nested repository without a commit, left out")
            return
        entries[path] = (_GITLINK, pygit2.Oid(hex=target))
        notes.append(
            f"{path_display(path)}: submodule recorded at {target[:12]}, its files not captured"
        )

    real_dirs: dict[bytes, bool] = {b"": True}

    def under_real_dirs(path: bytes) -> bool:
        """No parent of `path` is a symlink: never read through one out of the tree."""
        parent = os.path.dirname(path)
        if parent not in real_dirs:
            try:
                is_dir = stat.S_ISDIR(os.lstat(os.path.join(root, parent)).st_mode)
            except OSError:
                is_dir = False
            real_dirs[parent] = is_dir and under_real_dirs(parent)
        return real_dirs[parent]

    def record_file(path: bytes) -> bool:
        """Store `path` as the filesystem has it; False when no file or symlink is there."""
        if not under_real_dirs(path):
            return False
        try:
            got = _read(root, path, on_read)
        except _Unstable:
            unstable.append(path)
            return True
        if got is None:
            full = os.path.join(root, path)
            if os.path.lexists(full) and not os.path.isdir(full):  # fifo, socket, device
                notes.append(f"{path_display(path)}: not a file or symlink, left out")
            return False
        entries[path] = (got[0], _put(store.odb, ObjectType.BLOB, b"blob", got[1]))
        return True

    for path, info in tracked.items():
        if info.mode == _GITLINK:
            record_gitlink(path, info.oid)
        elif not record_file(path):
            # deleted, or replaced by a directory (whose files are listed as untracked);
            # a sparse checkout's skipped path keeps its index entry
            if info.skip_worktree and not os.path.lexists(os.path.join(root, path)):
                entries[path] = (info.mode, pygit2.Oid(hex=info.oid))
    for path in others:
        if path.endswith(b"/"):  # git lists a nested repository as `dir/`
            record_gitlink(path.rstrip(b"/"), None)
            untracked.append(path.rstrip(b"/"))
        elif record_file(path):
            untracked.append(path)
    return entries, untracked, unstable, notes


# -- the snapshot as evidence ----------------------------------------------------------


def _shown(paths: Iterable[bytes]) -> str:
    items = [path_display(p) for p in paths]
    more = f" and {len(items) - _MAX_SHOWN} more" if len(items) > _MAX_SHOWN else ""
    return ", ".join(items[:_MAX_SHOWN]) + more


def _imported_names(source: bytes) -> set[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".", 1)[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".", 1)[0])
    return names


def _ignored_imports(ev: Evidence, snap: Snapshot, store: pygit2.Repository) -> list[str]:
    """Changed Python modules importing a top-level name that only an ignored file has."""
    if not snap.ignored_only:
        return []
    notes: list[str] = []
    tree = store[pygit2.Oid(hex=snap.tree)].peel(pygit2.Tree)
    for entry in ev.inventory:
        if entry.new_mode is None or not entry.path.endswith(b".py") or entry.binary:
            continue
        try:
            blob = tree[entry.path.decode("utf-8", "surrogateescape")]
        except (KeyError, UnicodeEncodeError):
            continue
        if not isinstance(blob, pygit2.Blob):
            continue
        hidden = sorted(_imported_names(bytes(blob.data)) & snap.ignored_only)
        if hidden:
            notes.append(
                f"{entry.display} imports {', '.join(hidden)}, which exists only as an "
                "ignored file in the working tree: the clean room does not have it"
            )
    return notes


def annotate(ev: Evidence, snap: Snapshot, store: pygit2.Repository) -> Evidence:
    """The evidence of a `--worktree` run: which files were untracked, what the capture
    left out, and INCONCLUSIVE when a file changed while it was captured."""
    notes = [
        "head is the working tree captured as a synthetic commit (tracked and non-ignored "
        f"untracked files; {len(snap.untracked)} untracked); ignored files are not evidence",
        *snap.notes,
        *_ignored_imports(ev, snap, store),
    ]
    reasons = list(ev.reasons)
    proven = ev.proven_tree
    complete = ev.coverage.complete
    if snap.unstable:
        message = (
            f"files changed while the working tree was captured: {_shown(snap.unstable)}; "
            "nothing was proven. Wait until the working tree is quiet and run again."
        )
        reasons.append(Reason(code=ReasonCode.COVERAGE_INCOMPLETE, message=message))
        notes.append(message)
        proven, complete = None, False
    return replace(
        ev,
        coverage=Coverage(complete=complete, notes=(*ev.coverage.notes, *notes)),
        proven_tree=proven,
        reasons=tuple(reasons),
        worktree=WorktreeCapture(untracked=snap.untracked),
    )


def tree_differences(store: pygit2.Repository, old: str, new: str) -> list[str]:
    """`status path` lines for every path that differs between two trees."""
    a = store[pygit2.Oid(hex=old)].peel(pygit2.Tree)
    b = store[pygit2.Oid(hex=new)].peel(pygit2.Tree)
    return [
        f"{delta.status_char()} {delta.new_file.path or delta.old_file.path}"
        for delta in a.diff_to_tree(b).deltas
    ]


class Checkout:
    """The user's checkout, for `proofgate apply`: read-only except `apply`.

    Raises:
        RepoError: `path` is not a git repository with a working tree.
    """

    def __init__(self, path: str | Path) -> None:
        try:
            self.repo = pygit2.Repository(str(path))
        except pygit2.GitError as e:
            raise RepoError(f"{path}: not a git repository ({e})") from e
        if self.repo.workdir is None:
            raise RepoError(f"{path}: a bare repository has no working tree")
        self._store = PrivateStore(objects_dir(self.repo))

    def __enter__(self) -> Checkout:
        return self

    def __exit__(self, *exc: object) -> None:
        self._store.dispose()

    def head_tree(self) -> TreeId | None:
        """HEAD's tree, None when HEAD has no commit."""
        if self.repo.head_is_unborn:
            return None
        return TreeId(str(self.repo.head.peel(pygit2.Commit).tree_id))

    def staged_changes(self) -> list[str]:
        """Paths whose index entry differs from HEAD's tree (read-only: no index write)."""
        head = self.repo.head.peel(pygit2.Tree)
        return [
            f"{d.status_char()} {d.new_file.path or d.old_file.path}"
            for d in self.repo.index.diff_to_tree(head).deltas
        ]

    def snapshot(
        self, *, on_read: OnRead | None = None, also: frozenset[bytes] = frozenset()
    ) -> Snapshot:
        return snapshot(self.repo, self._store.git, on_read=on_read, also=also)

    def differences(self, old: str, new: str) -> list[str]:
        return tree_differences(self._store.git, old, new)

    def reapply(self, base_tree: str, patch: bytes) -> TreeId:
        """The tree the patch gives on `base_tree`, computed in the private store.

        Raises:
            PatchApplyError: it does not apply.
        """
        return TreeId(apply_patch(self._store.path, base_tree, patch))

    def apply(self, patch: bytes) -> None:
        """`git apply` the patch to the working tree in one step, after `--check`: git
        applies all of it or nothing.

        Raises:
            PatchApplyError: the patch does not apply (nothing was written).
        """
        with tempfile.TemporaryDirectory(prefix="proofgate-index-") as tmp:
            git, env = git_command(self.repo, Path(tmp) / "index")
            # --whitespace=nowarn: the user's `apply.whitespace=fix` would rewrite the
            # proven lines on their way in (the private store's reapply reads no such config)
            ws = "--whitespace=nowarn"
            for args in (("apply", ws, "--check", "-"), ("apply", ws, "-")):
                try:
                    _run(git, env, *args, stdin=patch)
                except RepoError as e:
                    raise PatchApplyError(str(e)) from e
