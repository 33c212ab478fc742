"""Copy-in: the proven tree into a check's workspace volume, by the Docker daemon.

The tree arrives as an uncompressed tar whose entries are already what the container
needs (the git adapter archives with umask 0 for the clean room: files 0666/0777,
directories 0777, owner root), so nothing here re-parses or rewrites it. The daemon
extracts it (`put_archive`) into the check's fresh, empty volume (a tmpfs) through the
check's first container before any command runs: no program of the image or of the tree
takes part, and nothing already in the volume can be overwritten. The request body is
streamed from the caller's thread, so Ctrl-C interrupts it where it is.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator

from docker import APIClient

from gate.differential.paths import WORKSPACE
from gate.sandbox.errors import docker_errors
from gate.util.journal import Journal


class _Counter:
    """Passes tar chunks through, counting bytes and hashing them for the journal."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.size = 0
        self.sha256 = hashlib.sha256()

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.size += len(chunk)
            self.sha256.update(chunk)
            yield chunk

    def close(self) -> None:
        """Close the source stream (stops a `git archive` that is not read to the end)."""
        close_iterator(self._chunks)


def close_iterator(it: Iterable[bytes]) -> None:
    close = getattr(it, "close", None)
    if callable(close):
        close()


def copy_tree(
    api: APIClient,
    container: str,
    tree_tar: Callable[[], Iterator[bytes]],
    journal: Journal,
    *,
    check: str,
) -> None:
    """Extract the tree into `container`'s /workspace (started, before any command).

    Raises:
        DockerRefused: the daemon refused the archive (e.g. an escaping symlink).
        SandboxError: the daemon does not answer.
        UnsafeTreeError, RepoError: from the tree stream, unchanged.
    """
    t0 = time.monotonic()
    counter = _Counter(tree_tar())
    try:
        with docker_errors("copy the tree into the clean room"):
            api.put_archive(container, WORKSPACE, iter(counter))
    finally:
        counter.close()
    journal.append(
        "tree-copied",
        check=check,
        method="put-archive",
        bytes=counter.size,
        sha256=counter.sha256.hexdigest(),
        seconds=round(time.monotonic() - t0, 3),
    )
