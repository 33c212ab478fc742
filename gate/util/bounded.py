"""Reading a file someone handed us, never more than its limit.

A receipt, a key, an approval, a patch or a configuration named on the command line may be
anything: a 2 GiB file, a sparse one, `/dev/zero`. `read_bounded` reads at most `limit + 1`
bytes of it, so what a command holds in memory is bounded by the limit of what it expects,
whatever the file is; `sha256_bounded` hashes one as it reads (a patch only compared by its
digest is never held). A regular file whose size already says too much is refused before
anything is read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["FileTooLarge", "read_bounded", "sha256_bounded", "size_text"]

_CHUNK = 1 << 20


def size_text(n: int) -> str:
    """`64 MiB`, `256 KiB`, `100 bytes`: a limit as people read it."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


class FileTooLarge(OSError):
    """The file holds more than the limit for its kind. An `OSError` (EFBIG), so callers'
    handling of unreadable files covers it; `str(e)` names the file, its kind and the limit:
    "/dev/zero is larger than 64 MiB, the limit for a receipt"."""

    def __init__(self, path: Path, limit: int, kind: str) -> None:
        super().__init__(
            errno.EFBIG, f"larger than {size_text(limit)}, the limit for {kind}", str(path)
        )
        self.limit = limit
        self.kind = kind

    def __str__(self) -> str:
        return f"{self.filename} is {self.strerror}"


@contextmanager
def _opened(path: Path, limit: int, kind: str) -> Iterator[tuple[BinaryIO, int | None]]:
    """The open file and its announced size (None: a device, a pipe, a /proc file; a
    regular file may still grow). A regular file already larger is refused unread."""
    with open(path, "rb", buffering=0) as f:
        st = os.fstat(f.fileno())
        size = st.st_size if stat.S_ISREG(st.st_mode) and st.st_size > 0 else None
        if size is not None and size > limit:
            raise FileTooLarge(path, limit, kind)
        yield f, size


def _rest(f: BinaryIO, limit: int, got: int) -> Iterator[bytes]:
    """The chunks after the first `got` bytes, until EOF or past `limit`."""
    while got <= limit:
        chunk = f.read(min(_CHUNK, limit + 1 - got))
        if not chunk:
            return
        got += len(chunk)
        yield chunk


def read_bounded(path: Path, limit: int, kind: str) -> bytes:
    """The whole content of `path`, which must be at most `limit` bytes (`kind` says what it
    should be, for the message: "a receipt").

    Raises:
        FileTooLarge: it holds more than `limit` bytes (at most `limit + 1` were read).
        OSError: it cannot be opened or read (missing, a directory, no permission).
    """
    with _opened(path, limit, kind) as (f, size):
        # one read of the announced size; anything after it (a device, a file that grew or
        # came short) in chunks, never joined when too large
        chunks = [f.read(size + 1)] if size is not None else []
        got = sum(map(len, chunks))
        for chunk in _rest(f, limit, got):
            chunks.append(chunk)
            got += len(chunk)
    if got > limit:
        raise FileTooLarge(path, limit, kind)
    return b"".join(chunks)  # one chunk (a regular file) is returned as it is, not copied


def sha256_bounded(path: Path, limit: int, kind: str) -> str:
    """The SHA-256 (hex) of `path`'s bytes, hashed as they are read, at most `limit` of them.

    Raises:
        FileTooLarge: it holds more than `limit` bytes.
        OSError: it cannot be opened or read.
    """
    digest = hashlib.sha256()
    got = 0
    with _opened(path, limit, kind) as (f, _):
        for chunk in _rest(f, limit, 0):
            digest.update(chunk)
            got += len(chunk)
    if got > limit:
        raise FileTooLarge(path, limit, kind)
    return digest.hexdigest()
