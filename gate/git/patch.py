"""The patch (SPEC §1): capture merge-base -> head exactly, inventory it, re-apply it.

The patch is git's format as `git diff --full-index --binary -M` writes it: `diff --git`
headers, full 40-hex `index` lines, `GIT binary patch` literal sections for binary
files (from `git diff --binary`, streamed: issue 46), mode changes, symlinks (target as the blob
text), renames, deletions, and `Subproject commit` lines for gitlinks. Type changes
appear as a deletion followed by an addition of the same path (like `git diff` without
`-B`); the inventory folds them into one `type-changed` entry.

Re-application hands the captured bytes to `git apply --cached` in the private store
(see `apply_patch`).
"""

from __future__ import annotations

import posixpath
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import pygit2
from pygit2.enums import DeltaStatus, DiffFind, DiffOption, FileMode

from gate.errors import RepoError
from gate.git.store import git_env
from gate.git.symlinks import LinkFaults, link_faults
from gate.model import ChangeStatus, InventoryEntry, path_display

__all__ = [
    "CapturedPatch",
    "PatchApplyError",
    "apply_patch",
    "capture_patch",
    "split_sections",
]

_MODE_LINK = int(FileMode.LINK)
_MODE_COMMIT = int(FileMode.COMMIT)
_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
_LFS_MAX = 1024  # git-lfs pointer files are far smaller than this
_NO_ID = "0" * 40
# a side larger than this is told binary from its first bytes, not read whole (issue 46)
_LARGE = 4 << 20
_BINARY_PREFIX = 8000  # git and libgit2: binary when a NUL lies in the first 8000 bytes
_NUL = b"\0"

_STATUS = {
    DeltaStatus.ADDED: ChangeStatus.ADDED,
    DeltaStatus.DELETED: ChangeStatus.DELETED,
    DeltaStatus.MODIFIED: ChangeStatus.MODIFIED,
    DeltaStatus.RENAMED: ChangeStatus.RENAMED,
    DeltaStatus.TYPECHANGE: ChangeStatus.TYPE_CHANGED,
}

_SECTION = re.compile(rb"\ndiff --git ")


class PatchApplyError(Exception):
    """The captured patch did not apply to the base tip (becomes `patch-mismatch`)."""


@dataclass(frozen=True, slots=True)
class CapturedPatch:
    data: bytes
    inventory: tuple[InventoryEntry, ...]
    notes: tuple[str, ...]  # coverage notes (SPEC §1 last paragraph)
    complete: bool


def capture_patch(
    repo: pygit2.Repository, old_tree: pygit2.Tree, new_tree: pygit2.Tree
) -> CapturedPatch:
    """Diff `old_tree` -> `new_tree` in `repo` (the private store, `core.abbrev=40`).

    Raises:
        pygit2.GitError: an object cannot be read (the caller translates it).
    """
    # Binary contents are not libgit2's (issue 46): its binary patch of a 100 MB blob held
    # about 5 times the blob in this process; git writes them in a child, streamed into an
    # unlinked temporary file that is read back once as the patch's bytes, so a large
    # binary costs this process its encoded size (a fifth more than the blob) once
    with tempfile.TemporaryFile(prefix="proofgate-patch-") as out:
        entries, notes, complete = _write_patch(repo, _patches(repo, old_tree, new_tree), out)
        out.seek(0)
        data = out.read()
    merged = _fold_type_changes(entries)
    if any(e.new_mode == _MODE_LINK for e in merged):
        # a chain of links can leave the tree where no single link's text does, or loop
        faults = link_faults(repo, new_tree)
        merged = [_with_link_faults(e, faults) if e.new_mode == _MODE_LINK else e for e in merged]
    return CapturedPatch(
        data=data,
        inventory=tuple(merged),
        notes=tuple(dict.fromkeys(notes)),
        complete=complete,
    )


def _patches(
    repo: pygit2.Repository, old_tree: pygit2.Tree, new_tree: pygit2.Tree
) -> Iterator[pygit2.Patch]:
    """The patch of every delta of `old_tree` -> `new_tree`, renames found.

    libgit2 reads both sides of a delta whole to tell whether it is binary (a loose object
    twice over: compressed and inflated). A delta with a side larger than `_LARGE` is told
    from its sides' first bytes instead, as git and libgit2 tell it (a NUL among the first
    8000); a binary one then takes its patch from the same diff made with every file
    binary, which reads no content. When the change both adds and deletes files, rename
    detection could pair the two diffs' files differently: libgit2's patches are taken.

    Raises:
        pygit2.GitError: an object cannot be read (the caller translates it).
    """
    diff = old_tree.diff_to_tree(new_tree)
    diff.find_similar(flags=DiffFind.FIND_RENAMES)
    quick = [
        p for p in old_tree.diff_to_tree(new_tree, flags=DiffOption.FORCE_BINARY) if p is not None
    ]
    statuses = {p.delta.status for p in quick}
    paired = DeltaStatus.ADDED in statuses and DeltaStatus.DELETED in statuses
    same = not paired and len(quick) == len(diff)  # then the two diffs' deltas are alike
    for i in range(len(diff)):
        if same and _large_binary(repo, quick[i].delta):
            yield quick[i]
        elif (patch := diff[i]) is not None:  # None: an unchanged entry, never with these flags
            yield patch


def _large_binary(repo: pygit2.Repository, delta: pygit2.DiffDelta) -> bool:
    """Whether a side of `delta` is larger than `_LARGE` and the delta is binary."""
    sides = [
        f.id
        for f in (delta.old_file, delta.new_file)
        if str(f.id) != _NO_ID and int(f.mode) not in (_MODE_LINK, _MODE_COMMIT)
    ]
    sizes = [int(repo.odb.read_header(oid)[1]) for oid in sides]
    if all(size <= _LARGE for size in sizes):
        return False
    return any(_NUL in _prefix(repo, oid, size) for oid, size in zip(sides, sizes, strict=True))


def _prefix(repo: pygit2.Repository, oid: pygit2.Oid, size: int) -> bytes:
    """The first `_BINARY_PREFIX` bytes of a blob; a large one from `git cat-file` in a
    child, which stops reading there (this process never holds the blob).

    Raises:
        pygit2.GitError: git could not read the blob (the caller translates it).
    """
    if size <= _LARGE:
        return bytes(repo.odb.read(oid)[1][:_BINARY_PREFIX])
    env = _git_env(Path(repo.path))
    git = shutil.which("git", path=env["PATH"])
    if git is None:
        raise pygit2.GitError("the git command-line tool is not installed")
    got = b""
    with subprocess.Popen(  # noqa: S603 (fixed argv, no shell)
        [git, "cat-file", "blob", str(oid)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        out = proc.stdout
        while out is not None and len(got) < _BINARY_PREFIX:
            chunk = out.read(_BINARY_PREFIX - len(got))
            if not chunk:
                break
            got += chunk
        proc.kill()  # the rest is not wanted
    if len(got) < min(size, _BINARY_PREFIX):
        raise pygit2.GitError(f"git cat-file blob {oid} gave {len(got)} of its first bytes")
    return got


def _write_patch(
    repo: pygit2.Repository, diff: Iterator[pygit2.Patch], out: BinaryIO
) -> tuple[list[InventoryEntry], list[str], bool]:
    """Every section of `diff` into `out`: the inventory entries, coverage notes and
    whether every change could be captured."""
    last = 0  # where the last section written starts
    entries: list[InventoryEntry] = []
    notes: list[str] = []
    complete = True
    for patch in diff:
        data: bytes = patch.data
        delta = patch.delta
        body: Iterator[bytes] = iter(())
        if data.endswith(b" differ\n"):
            # "Binary files a/x and b/x differ": git writes the contents instead, or
            # nothing for a binary file whose mode (or name) changed but whose content
            # did not (the parser refuses the line; the content is identical)
            head, _, line = data[:-1].rpartition(b"\n")
            if line.startswith(b"Binary files "):
                data = head + b"\n"
                if delta.old_file.id != delta.new_file.id:
                    sides = [(str(f.id), int(f.size)) for f in (delta.new_file, delta.old_file)]
                    body = _binary_patch(repo, sides)
        entry = _inventory_entry(repo, patch)
        if entry is None:
            complete = False
            notes.append(
                f"{path_display(delta.new_file.raw_path)}: change of kind "
                f"{delta.status_char()!r} cannot be captured"
            )
            continue
        notes.extend(_coverage_notes(repo, patch, entry))
        del patch, delta  # libgit2's copy of the contents goes before the body is written
        if (
            entry.status is ChangeStatus.DELETED
            and entries
            and entries[-1].status is ChangeStatus.ADDED
            and entries[-1].path == entry.path
        ):
            # libgit2's rename detection splits a type change as addition then deletion;
            # git apply wants the deletion first (as `git diff` writes it)
            out.seek(last)
            added = out.read()
            out.seek(last)
            out.truncate()
            _write(out, data, body)
            out.write(added)
            entries.insert(len(entries) - 1, entry)
        else:
            last = out.tell()
            _write(out, data, body)
            entries.append(entry)
    return entries, notes, complete


def _write(out: BinaryIO, head: bytes, body: Iterator[bytes]) -> None:
    out.write(head)
    for piece in body:
        out.write(piece)


_CHUNK = 1 << 20
_EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def _binary_patch(repo: pygit2.Repository, sides: list[tuple[str, int]]) -> Iterator[bytes]:
    """`GIT binary patch` and its two hunks (new, then old contents), as git writes them:
    `git diff --binary` of the two blobs, its output streamed a chunk at a time, so the
    blobs and their encoding are held by git, never by this process. `sides`: (blob id,
    size) of the new and the old file.

    Raises:
        pygit2.GitError: git could not diff the blobs (the caller translates it).
    """
    if _NO_ID in (sides[0][0], sides[1][0]):
        repo.create_blob(b"")  # the missing side: the empty blob, in the private store
    new, old = (_EMPTY_BLOB if blob == _NO_ID else blob for blob, _ in sides)
    store = Path(repo.path)
    attributes = store / "proofgate-binary-attributes"
    attributes.write_bytes(b"* -diff\n")  # every file binary: libgit2 already said so
    env = _git_env(store)
    git = shutil.which("git", path=env["PATH"])
    if git is None:
        raise pygit2.GitError("the git command-line tool is not installed")
    argv = [git, "-c", f"core.attributesFile={attributes}", "diff", "--no-ext-diff"]
    argv += ["--no-textconv", "--binary", "--full-index", "--no-renames", old, new]
    header: bytes | None = b""
    with subprocess.Popen(  # noqa: S603 (fixed argv, no shell)
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        out = proc.stdout
        while out is not None and (chunk := out.read(_CHUNK)):
            if header is not None:  # git's own diff header, up to its binary patch
                header += chunk
                at = header.find(b"\nGIT binary patch\n")
                if at < 0:
                    continue
                chunk, header = header[at + 1 :], None
            yield chunk
        err = proc.stderr.read() if proc.stderr is not None else b""
    if proc.returncode != 0 or header is not None:
        raise pygit2.GitError(
            f"git diff --binary {old} {new} failed: {err.decode('utf-8', 'replace').strip()}"
        )


def _with_link_faults(entry: InventoryEntry, faults: LinkFaults) -> InventoryEntry:
    """The link's entry as its resolution in the whole new tree ends: outside the root, or
    never (a loop: not escaping, whatever its text alone says)."""
    loop = faults.loops.get(entry.path)
    if loop is not None:
        return replace(entry, symlink_loop=loop, symlink_escapes=False)
    if entry.path in faults.escaping:
        return replace(entry, symlink_escapes=True)
    return entry


def _inventory_entry(repo: pygit2.Repository, patch: pygit2.Patch) -> InventoryEntry | None:
    delta = patch.delta
    status = _STATUS.get(delta.status)
    if status is None:
        return None
    old, new = delta.old_file, delta.new_file
    old_mode = int(old.mode) or None
    new_mode = int(new.mode) or None
    deleted = status is ChangeStatus.DELETED
    if deleted:
        new_mode = None
    if status is ChangeStatus.ADDED:
        old_mode = None
    gitlink = _MODE_COMMIT in (old_mode, new_mode)
    _, added, removed = patch.line_stats
    target: bytes | None = None
    absolute = escapes = False
    path: bytes = old.raw_path if deleted else new.raw_path
    if new_mode == _MODE_LINK:
        target = _blob_bytes(repo, new.id)
        absolute = target.startswith(b"/")
        # an absolute target resolves outside the repository by definition
        escapes = absolute or _escapes(path, target)
    return InventoryEntry(
        path=path,
        status=status,
        old_path=old.raw_path if status is ChangeStatus.RENAMED else None,
        old_mode=old_mode,
        new_mode=new_mode,
        binary=bool(delta.is_binary),
        size=None if deleted or new_mode == _MODE_COMMIT else _blob_size(repo, new),
        old_size=None if old_mode is None or old_mode == _MODE_COMMIT else _blob_size(repo, old),
        symlink_target=target,
        symlink_absolute=absolute,
        symlink_escapes=escapes,
        gitlink=gitlink,
        lines_added=0 if delta.is_binary else int(added),
        lines_deleted=0 if delta.is_binary else int(removed),
    )


def _blob_bytes(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes:
    _, data = repo.odb.read(oid)
    return bytes(data)


def _blob_size(repo: pygit2.Repository, f: pygit2.DiffFile) -> int:
    size = int(f.size)
    if size == 0 and str(f.id) != _NO_ID:
        # libgit2 leaves sizes of unloaded blobs (pure renames) at 0; ask the store
        _, size = repo.odb.read_header(f.id)
    return size


def _escapes(link: bytes, target: bytes) -> bool:
    """Whether a relative symlink target, read from the link's directory, leaves the root."""
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    return resolved == b".." or resolved.startswith(b"../")


def _coverage_notes(
    repo: pygit2.Repository, patch: pygit2.Patch, entry: InventoryEntry
) -> list[str]:
    """SPEC §1: say what the evidence does not cover whenever the change touches it."""
    notes: list[str] = []
    name = entry.display
    if entry.gitlink:
        notes.append(
            f"{name}: submodule pointer changed; submodule contents are not part of the "
            "proven tree or the checks"
        )
    if posixpath.basename(entry.path) == b".gitattributes" or (
        entry.old_path is not None and posixpath.basename(entry.old_path) == b".gitattributes"
    ):
        notes.append(
            f"{name}: .gitattributes changed; eol, working-tree-encoding, ident, filter "
            "(e.g. LFS) and export-ignore attributes are not applied to the proven tree"
        )
    delta = patch.delta
    for f, mode in ((delta.old_file, entry.old_mode), (delta.new_file, entry.new_mode)):
        if mode is None or mode in (_MODE_COMMIT, _MODE_LINK) or str(f.id) == _NO_ID:
            continue
        if _blob_size(repo, f) <= _LFS_MAX and _blob_bytes(repo, f.id).startswith(_LFS_POINTER):
            notes.append(
                f"{name}: a Git LFS pointer changed; the proven tree and the checks hold "
                "the pointer file, not the LFS object"
            )
            break
    return notes


def _fold_type_changes(entries: list[InventoryEntry]) -> list[InventoryEntry]:
    """A deletion and an addition of the same path is one `type-changed` entry."""
    deleted = {e.path: e for e in entries if e.status is ChangeStatus.DELETED}
    added = {e.path for e in entries if e.status is ChangeStatus.ADDED}
    out: list[InventoryEntry] = []
    for e in entries:
        if e.status is ChangeStatus.DELETED and e.path in added:
            continue
        gone = deleted.get(e.path) if e.status is ChangeStatus.ADDED else None
        if gone is not None:
            e = replace(
                e,
                status=ChangeStatus.TYPE_CHANGED,
                old_mode=gone.old_mode,
                old_size=gone.old_size,
                binary=e.binary or gone.binary,
                gitlink=e.gitlink or gone.gitlink,
                lines_deleted=gone.lines_deleted,
            )
        out.append(e)
    return out


def split_sections(data: bytes) -> list[bytes]:
    """Split a patch into its per-file sections, each starting with `diff --git `.

    Safe on git's format: content lines start with ' ', '+', '-' or '\\', base85 lines
    never hold a space, and paths with a newline are quoted, so no line inside a section
    starts with `diff --git `.
    """
    if not data:
        return []
    if not data.startswith(b"diff --git "):
        raise PatchApplyError("the patch does not start with a 'diff --git' header")
    starts = [0] + [m.start() + 1 for m in _SECTION.finditer(data)]
    return [data[a:b] for a, b in zip(starts, [*starts[1:], len(data)], strict=True)]


def apply_patch(store_path: Path, base_tree: str, data: bytes) -> str:
    """Apply the captured patch bytes to `base_tree` in the private store; return the tree.

    git's own parser and applier (`git apply --cached`) re-read the exact bytes: libgit2's
    parser refuses valid git patches (a header-only section whose path holds a space) and
    its applier crashes on gitlink sections. The index and every new object land in the
    store; the user's objects are read through its alternates. The environment is built
    from scratch, so no GIT_* variable, global or system config (e.g. `apply.whitespace=fix`,
    which would rewrite content) can change the result.

    Raises:
        PatchApplyError: the patch does not apply.
        RepoError: the git command-line tool is not installed.
    """
    env = _git_env(store_path)
    _git(["read-tree", base_tree], env)
    if data:
        _git(
            ["apply", "--cached", "--binary", "--whitespace=nowarn", "-p1", "-"],
            env,
            stdin=data,
            failure="the patch does not apply to the base tip",
        )
    return _git(["write-tree"], env).decode("ascii").strip()


def _git_env(store_path: Path) -> dict[str, str]:
    index = str(store_path / "proofgate-apply-index")
    return git_env(store_path, git_dir=store_path, GIT_INDEX_FILE=index)


def _git(
    args: list[str],
    env: dict[str, str],
    *,
    stdin: bytes | None = None,
    failure: str = "git failed in the private object store",
) -> bytes:
    git = shutil.which("git", path=env["PATH"])
    if git is None:
        raise RepoError(
            "the git command-line tool is not installed; proofgate uses `git apply` to "
            "re-apply the patch. Install git (e.g. apt-get install git)."
        )
    proc = subprocess.run(  # noqa: S603 (fixed argv, no shell)
        [git, *args], input=stdin, env=env, capture_output=True, check=False
    )
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "backslashreplace").strip()
        raise PatchApplyError(f"{failure}: {err}")
    return proc.stdout
