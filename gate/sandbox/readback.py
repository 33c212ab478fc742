"""Read-back: the JUnit report out of a finished check, by the Docker daemon (SPEC §3.2).

By the time this runs every process of the check is gone: its last container was killed
and removed. The report lives in the check's workspace volume (a tmpfs, mounted while a
container using it runs), and the daemon reads it through a *reader* container: started
from the configured image, in which nothing of the check ever ran, running only that
image's idle command, before the check's last container was killed. No program of the
image or of the tree takes part in the reading (`get_archive` is the daemon's). The
daemon's archive API does not follow a symlink in the last component; only a single
regular file of at most `JUNIT_MAX_BYTES` is accepted. Every request has the client's
deadline; nothing here can wait on the checked code.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator

from docker import APIClient

from gate.differential.paths import WORKSPACE
from gate.sandbox.copy_in import close_iterator
from gate.sandbox.errors import DockerRefused, docker_errors
from gate.sandbox.execs import non_root
from gate.util.journal import Journal

JUNIT_MAX_BYTES = 16 * 1024 * 1024


def read_report(
    api: APIClient, reader: str, rel: str, journal: Journal, *, check: str
) -> bytes | None:
    """The report at `rel` (normalized, relative to /workspace) seen through the stopped
    container `reader`, or None when it is absent, not a regular file or too big.

    Raises:
        SandboxError: the daemon does not answer.
    """
    path = f"{WORKSPACE}/{rel}"
    try:
        with docker_errors("read the JUnit report"):
            stream, stat = api.get_archive(reader, path)
            try:
                if stat.get("linkTarget") or int(stat.get("size", 0)) > JUNIT_MAX_BYTES:
                    journal.append("junit-refused", check=check, path=rel)
                    return None
                data = _read_bounded(stream, JUNIT_MAX_BYTES + 1024 * 1024)
            finally:
                close_iterator(stream)
    except DockerRefused as e:
        detail = None if e.not_found else e.explanation
        journal.append("junit-missing", check=check, path=rel, error=detail)
        return None
    report = _single_regular_file(data, JUNIT_MAX_BYTES)
    journal.append(
        "junit-read" if report is not None else "junit-refused",
        check=check,
        path=rel,
        bytes=None if report is None else len(report),
    )
    return report


def read_file(api: APIClient, container: str, path: str, limit: int) -> bytes | None:
    """A regular file of a container that is not running, read by the daemon; None when
    it is absent, refused, not a regular file or over `limit` bytes.

    Raises:
        SandboxError: the daemon does not answer.
    """
    try:
        with docker_errors(f"read {path}"):
            stream, _ = api.get_archive(container, path)
            try:
                data = _read_bounded(stream, limit + 1024 * 1024)
            finally:
                close_iterator(stream)
    except DockerRefused:
        return None
    return _single_regular_file(data, limit)


def _read_bounded(stream: Iterator[bytes], limit: int) -> bytes | None:
    buf = bytearray()
    for chunk in stream:
        buf += chunk
        if len(buf) > limit:
            return None
    return bytes(buf)


def _single_regular_file(data: bytes | None, limit: int) -> bytes | None:
    if data is None:
        return None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            member = tar.next()
            if member is None or not member.isreg() or member.size > limit:
                return None
            extracted = tar.extractfile(member)
            return extracted.read() if extracted is not None else None
    except tarfile.TarError:
        return None


def passwd_home(api: APIClient, container: str, user: str) -> str | None:
    """HOME of the check's `user` from the image's /etc/passwd, read by the daemon through
    `container` before anything of the check ran."""
    if not non_root(user):
        return "/root"
    data = read_file(api, container, "/etc/passwd", 1 << 20)
    name, _, _ = user.partition(":")
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        fields = line.split(":")
        if len(fields) >= 6 and name in (fields[0], fields[2]):
            return fields[5] or None
    return None
