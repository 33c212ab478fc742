"""Stream a git tree as an uncompressed tar, straight from an object store.

SPEC §1: materialization is of the tree as committed — blobs byte for byte, exec bits,
symlinks. Nothing is checked out on disk, no `.gitattributes` conversion is applied, and
submodules (gitlinks) become empty directories.

Safety: every path is checked before the first byte is produced (`tree_entries`), so a
hostile tree fails as a whole instead of half-extracting. A tree can only escape its
extraction directory through a name (`..`, `/`, an absolute path, a `.git` component) or
by writing *through* a symlink; the latter needs two entries with the same name in one
tree (a symlink `a` and a tree `a`), which is refused too. Symlink targets themselves are
kept as committed (the inventory flags absolute and escaping ones; policy decides).

Headers are written by hand (ustar, with a pax extended header for names or link
targets that are long or not plain ASCII; `hdrcharset=BINARY` when they are not UTF-8),
which is several times faster than `tarfile.TarInfo.tobuf` and keeps names exact.
`GitRepository.archive` normally streams with `git archive` instead
(`gate.git.fastarchive`, after the same checks); this writer is the fallback for another
owner than root or when git is not installed.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import pygit2
from pygit2.enums import FileMode

from gate.git.interface import UnsafeTreeError
from gate.model import path_display

__all__ = [
    "DEFAULT_MTIME",
    "TarEntry",
    "check_component",
    "stream_tar",
    "tree_entries",
]

# A fixed, deterministic mtime for every entry: 2001-09-09T01:46:40Z. Not 0, because tools
# that zip the tree (wheel builds) reject timestamps before 1980.
DEFAULT_MTIME = 1_000_000_000

_CHUNK = 1 << 20  # yield roughly 1 MiB at a time
_BLOCK = 512
_RECORD = 10240

_MODE_TREE = int(FileMode.TREE)
_MODE_BLOB = int(FileMode.BLOB)
_MODE_EXEC = int(FileMode.BLOB_EXECUTABLE)
_MODE_LINK = int(FileMode.LINK)
_MODE_COMMIT = int(FileMode.COMMIT)
_MODE_BLOB_GROUP_WRITABLE = 0o100664  # legacy mode still found in old trees

_TYPE_FILE = b"0"
_TYPE_SYMLINK = b"2"
_TYPE_DIR = b"5"
_TYPE_PAX = b"x"

# Code points HFS+ ignores when comparing names (git's is_hfs_dotgit list).
_HFS_IGNORABLE = frozenset(
    "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"
)


@dataclass(frozen=True, slots=True)
class TarEntry:
    """One archive member: a relative path, its git mode and object id (None for dirs)."""

    path: bytes
    mode: int
    oid: pygit2.Oid | None


def check_component(name: bytes, where: bytes) -> None:
    """Refuse a tree entry name that could escape the extraction directory.

    Mirrors git's own checks (verify_path / is_ntfs_dotgit / is_hfs_dotgit): empty, `.`,
    `..`, a `/` or NUL inside, and `.git` in any case, with trailing dots or spaces,
    as the NTFS short name `git~1`, or with HFS+-ignorable code points.

    Raises:
        UnsafeTreeError: the name is unsafe.
    """
    full = where + name if where else name
    if not name:
        raise UnsafeTreeError(f"unsafe tree entry {path_display(full)!r}: empty path component")
    if name in (b".", b".."):
        raise UnsafeTreeError(f"unsafe tree entry {path_display(full)!r}: {name.decode()!r}")
    if b"/" in name or b"\0" in name:
        raise UnsafeTreeError(f"unsafe tree entry {path_display(full)!r}: '/' or NUL inside a name")
    if _is_dotgit(name):
        raise UnsafeTreeError(
            f"unsafe tree entry {path_display(full)!r}: a '.git' component would "
            "let the tree plant repository metadata"
        )


def _is_dotgit(name: bytes) -> bool:
    lowered = name.lower()
    if lowered.rstrip(b". ") in (b".git", b"git~1"):
        return True
    if len(name) < 4 or not any(c >= 0x80 for c in name):
        return False
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    stripped = "".join(ch for ch in text if ch not in _HFS_IGNORABLE)
    return unicodedata.normalize("NFC", stripped).lower().rstrip(". ") == ".git"


def tree_entries(repo: pygit2.Repository, tree_id: pygit2.Oid) -> list[TarEntry]:
    """All entries of `tree_id`, parents before children, every name checked.

    Symlink targets are read here too (there are few): an empty target, or one holding a
    NUL byte, cannot be written to a tar faithfully.

    Raises:
        UnsafeTreeError: an entry could write outside the extraction directory, a name
            appears twice in one tree, an entry has a mode git never writes, or a symlink
            target is empty or holds a NUL byte.
        KeyError: the tree (or a subtree) is not in the object store.
    """
    out: list[TarEntry] = []
    stack: list[tuple[bytes, pygit2.Oid]] = [(b"", tree_id)]
    while stack:
        prefix, oid = stack.pop()
        try:
            tree = repo[oid]
        except pygit2.GitError as e:
            # libgit2 refuses trees it cannot parse (empty names, NUL, bad modes)
            where = path_display(prefix) or "<root>"
            raise UnsafeTreeError(
                f"unsafe tree entry {where!r}: the tree cannot be parsed ({e})"
            ) from e
        if not isinstance(tree, pygit2.Tree):
            raise UnsafeTreeError(
                f"unsafe tree entry {path_display(prefix)!r}: a tree entry points to a non-tree"
            )
        seen: set[bytes] = set()
        subdirs: list[tuple[bytes, pygit2.Oid]] = []
        for obj in tree:
            name = obj.raw_name or b""
            check_component(name, prefix)
            if name in seen:
                raise UnsafeTreeError(
                    f"unsafe tree entry {path_display(prefix + name)!r}: the name appears "
                    "twice in one tree (a later entry could write through the first)"
                )
            seen.add(name)
            mode = int(obj.filemode)
            path = prefix + name
            if mode == _MODE_TREE:
                out.append(TarEntry(path, mode, None))
                subdirs.append((path + b"/", obj.id))
            elif mode in (_MODE_BLOB, _MODE_EXEC, _MODE_BLOB_GROUP_WRITABLE):
                out.append(TarEntry(path, mode, obj.id))
            elif mode == _MODE_LINK:
                _check_link_target(path, repo.odb.read(obj.id)[1])
                out.append(TarEntry(path, mode, obj.id))
            elif mode == _MODE_COMMIT:
                out.append(TarEntry(path, mode, None))
            else:
                raise UnsafeTreeError(
                    f"unsafe tree entry {path_display(path)!r}: unknown mode {mode:06o}"
                )
        # depth-first, in tree order: push reversed so the first subdir is popped first
        stack.extend(reversed(subdirs))
    return out


def _check_link_target(path: bytes, target: bytes) -> None:
    if b"\0" in target or not target:
        raise UnsafeTreeError(
            f"unsafe tree entry {path_display(path)!r}: "
            "symlink target is empty or holds a NUL byte (tar cannot hold it)"
        )


def _pax_record(key: bytes, value: bytes) -> bytes:
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n).encode()) + len(body) != n:
        n = len(str(n).encode()) + len(body)
    return str(n).encode() + body


def _needs_pax(value: bytes, limit: int) -> bool:
    return len(value) > limit or not value.isascii()


def _header(
    name: bytes, mode: int, size: int, typeflag: bytes, linkname: bytes, mtime: int, ids: bytes
) -> bytes:
    """A ustar header; `ids` is the pre-rendered uid+gid fields (16 bytes)."""
    h = b"".join(
        (
            name.ljust(100, b"\0"),
            b"%07o\0" % mode,
            ids,
            b"%011o\0" % size,
            b"%011o\0" % mtime,
            b"        ",
            typeflag,
            linkname.ljust(100, b"\0"),
            b"ustar\x0000",
            b"\0" * 247,
        )
    )
    chksum = sum(h)
    return h[:148] + b"%06o\0 " % chksum + h[156:]


def _member(
    path: bytes,
    mode: int,
    size: int,
    typeflag: bytes,
    linkname: bytes,
    mtime: int,
    ids: bytes,
) -> bytes:
    """Header block(s) for one member, with a pax header when names need it."""
    records: list[bytes] = []
    name = path
    link = linkname
    if _needs_pax(path, 100) or _needs_pax(linkname, 100) or size > 0o77777777777:
        binary = False
        for v in (path, linkname):
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                binary = True
        if binary:
            records.append(_pax_record(b"hdrcharset", b"BINARY"))
        if _needs_pax(path, 100):
            records.append(_pax_record(b"path", path))
            name = _ascii_stub(path)
        if _needs_pax(linkname, 100):
            records.append(_pax_record(b"linkpath", linkname))
            link = _ascii_stub(linkname)
        if size > 0o77777777777:
            records.append(_pax_record(b"size", b"%d" % size))
    if not records:
        return _header(name, mode, size, typeflag, link, mtime, ids)
    pax = b"".join(records)
    pad = -len(pax) % _BLOCK
    return b"".join(
        (
            _header(b"././@PaxHeader", 0o644, len(pax), _TYPE_PAX, b"", mtime, ids),
            pax,
            b"\0" * pad,
            _header(name, mode, min(size, 0o77777777777), typeflag, link, mtime, ids),
        )
    )


def _ascii_stub(value: bytes) -> bytes:
    """A plain-ASCII stand-in for the ustar field; readers use the pax record instead."""
    return value.decode("ascii", "replace").encode("ascii", "replace")[-100:].lstrip(b"/")


def stream_tar(
    repo: pygit2.Repository,
    entries: list[TarEntry],
    *,
    mtime: int = DEFAULT_MTIME,
    uid: int = 0,
    gid: int = 0,
    umask: int = 0o022,
) -> Iterator[bytes]:
    """Yield the tar bytes for `entries` (from `tree_entries`) in chunks of about 1 MiB.

    Regular files get 0666 or 0777, directories 0777, all less `umask` (as `git archive`
    with `tar.umask`); symlinks their raw target; gitlinks become empty directories.

    Raises:
        UnsafeTreeError: a symlink target contains a NUL byte (tar cannot hold it).
    """
    ids = b"%07o\0%07o\0" % (uid, gid)
    read = repo.odb.read
    buf: list[bytes] = []
    buffered = 0
    total = 0
    for entry in entries:
        mode = entry.mode
        if entry.oid is None:  # tree or gitlink
            hdr = _member(entry.path + b"/", 0o777 & ~umask, 0, _TYPE_DIR, b"", mtime, ids)
            buf.append(hdr)
            buffered += len(hdr)
        elif mode == _MODE_LINK:
            _, target = read(entry.oid)
            _check_link_target(entry.path, target)
            hdr = _member(entry.path, 0o777, 0, _TYPE_SYMLINK, target, mtime, ids)
            buf.append(hdr)
            buffered += len(hdr)
        else:
            _, data = read(entry.oid)
            size = len(data)
            perm = (0o777 if mode == _MODE_EXEC else 0o666) & ~umask
            hdr = _member(entry.path, perm, size, _TYPE_FILE, b"", mtime, ids)
            pad = -size % _BLOCK
            if size >= _CHUNK:
                # a large blob goes out as it is, without copying it into the buffer
                buf.append(hdr)
                yield b"".join(buf)
                yield data
                buf.clear()
                total += buffered + len(hdr) + size
                buffered = 0
            else:
                buf.append(hdr)
                buf.append(data)
                buffered += len(hdr) + size
            if pad:
                buf.append(b"\0" * pad)
                buffered += pad
        if buffered >= _CHUNK:
            yield b"".join(buf)
            buf.clear()
            total += buffered
            buffered = 0
    # two zero blocks end the archive; pad to a whole record like git archive and GNU tar
    total += buffered + 2 * _BLOCK
    buf.append(b"\0" * (2 * _BLOCK))
    buf.append(b"\0" * (-total % _RECORD))
    yield b"".join(buf)
