"""What setup and build changed outside /workspace, read by the Docker daemon (SPEC §3.2;
the judgement is gate/differential/environment.py).

Called with every process of the container frozen (`pause`): the daemon's `changes` of
the container against its image, then, for each change a test could execute, the file's
bytes through the daemon's archive API, hashed as they stream. Nothing of the container
takes part: the cgroup is frozen and the daemon reads the filesystem itself. Every
archive response is closed; each request has the client's deadline.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterator

from docker import APIClient

from gate.differential import environment
from gate.differential.environment import MAX_HASHED_BYTES, MAX_RECORDED, EnvChange, EnvRecord
from gate.sandbox.copy_in import close_iterator
from gate.sandbox.errors import DockerRefused, docker_errors

__all__ = ["record"]


def record(api: APIClient, container: str) -> EnvRecord:
    """The changes of `container` against its image that a test could execute.

    Raises:
        SandboxError: the daemon does not answer.
        DockerRefused: the daemon refused to list the changes.
    """
    with docker_errors("list what setup and build changed"):
        raw = api.diff(container) or []
    rows = environment.from_daemon(raw)
    complete = len(rows) <= MAX_RECORDED
    changes: list[EnvChange] = []
    for path, kind, why in rows[:MAX_RECORDED]:
        sha = None if kind == environment.REMOVED else _digest(api, container, path)
        complete = complete and (sha is not None or kind == environment.REMOVED)
        changes.append(EnvChange(path=path, kind=kind, sha256=sha, why=why))
    return EnvRecord(changes=tuple(changes), complete=complete)


def _digest(api: APIClient, container: str, path: str) -> str | None:
    """SHA-256 of a regular file's bytes (of `symlink\\0TARGET` for a link); None when
    the daemon refuses, it is neither, or it is over the bound."""
    try:
        with docker_errors(f"read {path}"):
            stream, stat = api.get_archive(container, path)
            try:
                target = stat.get("linkTarget")
                if target:
                    return hashlib.sha256(b"symlink\0" + str(target).encode()).hexdigest()
                return _hash_single(stream)
            finally:
                close_iterator(stream)
    except DockerRefused:
        return None


class _Stream:
    """A file-like view of the archive's chunks for `tarfile`'s stream mode."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._rest) < n:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                break
            self.read_bytes += len(chunk)
            if self.read_bytes > MAX_HASHED_BYTES + (1 << 20):
                raise tarfile.ReadError("over the bound")
            self._rest += chunk
        if n < 0:
            out, self._rest = self._rest, b""
        else:
            out, self._rest = self._rest[:n], self._rest[n:]
        return out


def _hash_single(chunks: Iterator[bytes]) -> str | None:
    try:
        with tarfile.open(fileobj=_Stream(chunks), mode="r|") as tar:  # type: ignore[call-overload]
            member = tar.next()
            if member is None or not member.isreg() or member.size > MAX_HASHED_BYTES:
                return None
            body = tar.extractfile(member)
            if body is None:
                return None
            h = hashlib.sha256()
            while block := body.read(1 << 20):
                h.update(block)
            return h.hexdigest()
    except tarfile.TarError:
        return None
