"""What setup and build left, read by the Docker daemon (SPEC §3.2; the judgement is
gate/differential/environment.py).

Outside `/workspace` (`outside`): with every process of the container frozen (`pause`),
the daemon's `changes` of the container against its image, then the bytes of every path
added or modified, through the daemon's archive API: one archive per added directory
(what is below it came with it), a modified file's directory when many of its files
changed, the file itself otherwise. Under `/workspace` (`workspace`): one archive of the
volume, through the holder (a container of the configured image in which nothing of the
check runs), compared entry by entry with what was materialized (the tree's manifest,
gate/differential/tarprotect.py). Nothing of the container takes part: the cgroup is
frozen or the container is proofgate's, and the daemon reads the filesystem itself.
Every archive response is closed; each request has the client's deadline. Reading is
bounded (entries, bytes); past the bounds the record is incomplete, which counts as
changed.
"""

from __future__ import annotations

import hashlib
import posixpath
import tarfile
from collections.abc import Iterable, Iterator

from docker import APIClient

from gate.differential import environment
from gate.differential.environment import (
    ADDED,
    KINDS,
    MAX_HASHED_BYTES,
    MAX_KEPT_BYTES,
    MAX_RECORDED,
    MODIFIED,
    REMOVED,
    RawEntry,
)
from gate.differential.paths import WORKSPACE
from gate.differential.tarprotect import Manifest, digest_link
from gate.sandbox.copy_in import close_iterator
from gate.sandbox.errors import DockerRefused, docker_errors

__all__ = ["outside", "workspace"]

_GROUP = 16  # modified files of one directory past which the directory is read once
_KEPT_TOTAL = 64 << 20  # small files' bytes kept per run for normalising


class _Budget:
    def __init__(self) -> None:
        self.read = 0
        self.kept = 0
        self.complete = True

    def spend(self, n: int) -> bool:
        self.read += n
        if self.read > MAX_HASHED_BYTES:
            self.complete = False
        return self.complete


def outside(
    api: APIClient, container: str, *, excluded: Iterable[str] = ()
) -> tuple[list[RawEntry], bool]:
    """Every path setup and build added, modified or removed outside /workspace (and the
    other places no test container sees as they left them), with its bytes' digest;
    and whether that is all of them.

    Raises:
        SandboxError: the daemon does not answer.
        DockerRefused: the daemon refused to list the changes.
    """
    extra = tuple(excluded)
    with docker_errors("list what setup and build changed"):
        raw = api.diff(container) or []
    listed = [
        (str(change.get("Path") or ""), KINDS.get(int(str(change.get("Kind", -1))), ""))
        for change in raw
    ]
    # a directory is reported modified whenever an entry below it changes (a mount point
    # included): its entries are what counts
    parents = {posixpath.dirname(p) for p, _ in listed}
    rows: dict[str, str] = {
        path: kind
        for path, kind in listed
        if kind
        and path.startswith("/")
        and not environment.volatile(path, extra)
        and not (kind == MODIFIED and path in parents)
    }
    budget = _Budget()
    if len(rows) > MAX_RECORDED:
        budget.complete = False
    entries = [
        RawEntry(path=p, kind=REMOVED, type="removed") for p, k in rows.items() if k == REMOVED
    ]
    wanted = {p: k for p, k in rows.items() if k != REMOVED}
    for target in _targets(wanted):
        entries.extend(_read(api, container, target, wanted, budget))
    found = {e.path for e in entries}
    entries.extend(  # listed, never read back (a race, a refusal): not known, not equal
        RawEntry(path=p, kind=k, type="unread") for p, k in wanted.items() if p not in found
    )
    return sorted(entries, key=lambda e: e.path), budget.complete


def _targets(wanted: dict[str, str]) -> list[str]:
    """What to read: each topmost added path (what is below it came with it), and each
    modified file, or its directory when it holds many of them."""
    added = {p for p, k in wanted.items() if k == ADDED}
    tops = [p for p in wanted if not _under_any(p, added)]
    by_dir: dict[str, list[str]] = {}
    for p in tops:
        by_dir.setdefault(posixpath.dirname(p), []).append(p)
    out: list[str] = []
    for directory, paths in sorted(by_dir.items()):
        if len(paths) >= _GROUP and directory != "/":
            out.append(directory)
        else:
            out.extend(sorted(paths))
    return out


def _under_any(path: str, dirs: set[str]) -> bool:
    parent = posixpath.dirname(path)
    while parent not in ("/", ""):
        if parent in dirs:
            return True
        parent = posixpath.dirname(parent)
    return False


def _read(
    api: APIClient, container: str, target: str, wanted: dict[str, str], budget: _Budget
) -> list[RawEntry]:
    """The wanted entries at and below `target`, from one archive of it."""
    out: list[RawEntry] = []
    base = posixpath.dirname(target)
    try:
        with docker_errors(f"read {target}"):
            stream, _ = api.get_archive(container, target)
            try:
                for name, entry in _members(stream, budget):
                    path = posixpath.join(base, name)
                    kind = wanted.get(path)
                    if kind is not None:
                        out.append(_entry(path, kind, entry))
            finally:
                close_iterator(stream)
    except (DockerRefused, tarfile.TarError):
        return out  # what was not read is `unread`
    return out


def _entry(path: str, kind: str, got: tuple[str, str | None, bytes | None]) -> RawEntry:
    kind_of, digest, data = got
    return RawEntry(path=path, kind=kind, type=kind_of, sha256=digest, data=data)


def _members(
    chunks: Iterator[bytes], budget: _Budget
) -> Iterator[tuple[str, tuple[str, str | None, bytes | None]]]:
    """(name, (type, digest, small bytes)) of each member of an archive, as it streams."""
    with tarfile.open(fileobj=_Stream(chunks), mode="r|") as tar:  # type: ignore[call-overload]
        for member in tar:
            name = member.name.rstrip("/")
            if member.isdir():
                yield name, ("dir", "", None)
            elif member.issym():
                yield name, ("symlink", digest_link(member.linkname.encode()), None)
            elif member.isreg():
                if not budget.spend(member.size):
                    yield name, ("unread", None, None)
                    continue
                body = tar.extractfile(member)
                h = hashlib.sha256()
                keep = member.size <= MAX_KEPT_BYTES and budget.kept < _KEPT_TOTAL
                kept = bytearray()
                first = b""
                while body is not None and (block := body.read(1 << 20)):
                    if not first:
                        first = block[:4]
                    h.update(block)
                    if keep:
                        kept += block
                if keep:
                    budget.kept += len(kept)
                kind = "elf" if first == b"\x7fELF" else "exec" if member.mode & 0o111 else "file"
                yield name, (kind, h.hexdigest(), bytes(kept) if keep else None)
            else:
                yield name, ("other", f"other:{member.type!r}", None)


def workspace(api: APIClient, holder: str, manifest: Manifest) -> tuple[list[RawEntry], bool]:
    """What setup and build made of /workspace: every entry that is not the tree as it
    was materialized (`manifest`): added, changed (bytes, or file type) or removed; read
    through the holder.

    Raises:
        SandboxError: the daemon does not answer.
        DockerRefused: the daemon refused to read the workspace.
    """
    budget = _Budget()
    out: list[RawEntry] = []
    seen: set[str] = set()
    top = posixpath.basename(WORKSPACE)
    with docker_errors("read the workspace after setup and build"):
        stream, _ = api.get_archive(holder, WORKSPACE)
        try:
            for name, (kind_of, digest, data) in _members(stream, budget):
                if name == top or not name.startswith(top + "/"):
                    continue
                rel = name[len(top) + 1 :]
                seen.add(rel)
                was = manifest.get(rel)
                path = f"{WORKSPACE}/{rel}"
                if was is None:
                    out.append(
                        RawEntry(path=path, kind=ADDED, type=kind_of, sha256=digest, data=data)
                    )
                elif was != (kind_of, digest or "") and not _same_file(was, kind_of, digest):
                    out.append(
                        RawEntry(path=path, kind=MODIFIED, type=kind_of, sha256=digest, data=data)
                    )
                if len(out) > MAX_RECORDED:
                    budget.complete = False
                    break
        except tarfile.TarError:
            budget.complete = False
        finally:
            close_iterator(stream)
    if budget.complete:
        out.extend(
            RawEntry(path=f"{WORKSPACE}/{rel}", kind=REMOVED, type="removed")
            for rel in sorted(set(manifest) - seen)
        )
    return out, budget.complete


def _same_file(was: tuple[str, str], kind_of: str, digest: str | None) -> bool:
    """The committed file as materialized: the same bytes; an ELF file is a file (its
    exec bit from the tree), and committed bytecode (made unreadable) is unchanged."""
    types = {"file", "exec", "elf"}
    return was[0] in types and kind_of in types and was[1] == digest


class _Stream:
    """A file-like view of the archive's chunks for `tarfile`'s stream mode."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._rest) < n:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                break
            self._rest += chunk
        if n < 0:
            out, self._rest = self._rest, b""
        else:
            out, self._rest = self._rest[:n], self._rest[n:]
        return out
