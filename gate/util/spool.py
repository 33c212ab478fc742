"""A byte stream kept on disk, not in memory: written once, read back any number of times.

An unlinked temporary file holds it, so nothing is left behind however the process ends,
and each reading has its own offset (`os.pread`): readers in several threads do not
share a file position. Memory is one chunk per reader, whatever the stream's size.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator

__all__ = ["Spool"]

_CHUNK = 1 << 20


class Spool:
    """The bytes of `chunks`, written to an unlinked temporary file."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        """Write every chunk; on failure the file is closed and the error propagates
        (what iterating `chunks` raises, unchanged).

        Raises:
            OSError: the temporary file cannot be written.
        """
        self._file = tempfile.TemporaryFile()
        try:
            for chunk in chunks:
                self._file.write(chunk)
            self._file.flush()
            self.size = self._file.tell()
        except BaseException:
            self._file.close()
            raise

    def chunks(self, size: int = _CHUNK) -> Iterator[bytes]:
        """The bytes from the start, `size` at a time.

        Raises:
            ValueError: the spool is closed.
        """
        fd = self._file.fileno()
        at = 0
        while at < self.size:
            got = os.pread(fd, min(size, self.size - at), at)
            if not got:  # pragma: no cover (the file is ours and unlinked)
                raise OSError(f"spool cut short at {at} of {self.size} bytes")
            at += len(got)
            yield got

    def close(self) -> None:
        self._file.close()
