"""proofgate's per-user cache directory, and its writes: atomic and best effort (a cache
that cannot be written only makes the next run slower). Used by the differential's
base-run cache, the image bytecode listings and the per-file analyses (`BlobIndex`:
the blast radius's imports by git blob id)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import TypeVar

__all__ = ["BlobIndex", "root", "write_atomic"]

V = TypeVar("V")


def root() -> Path:
    """$XDG_CACHE_HOME/proofgate (default ~/.cache/proofgate)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "proofgate"


def write_atomic(path: Path, data: bytes) -> None:
    """`path` holds `data` or what it held before, never a part (its directory is made).

    Raises:
        OSError: the cache cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class BlobIndex(MutableMapping[str, V]):
    """A per-file analysis remembered across runs: git blob id -> its result, one JSON
    file per analysis and version (`root()/analyses/NAME-vVERSION.json`).

    A result is a function of the blob's bytes, and the cache is as trusted as the machine
    (anyone who can write it can also replace proofgate itself), so a hit is used as it
    is. What is unreadable or of the wrong shape is ignored: the index starts empty and the
    files are analyzed again. `save` keeps the `MAX_ENTRIES` used last (two proofs saving
    at once: the last one wins, and the other's new entries are analyzed again later).
    """

    MAX_ENTRIES = 200_000  # a 50,000-file tree and its history (issue 46)

    def __init__(
        self,
        name: str,
        version: int | str,
        *,
        decode: Callable[[object], V],
        encode: Callable[[V], object],
        directory: Path | None = None,
    ) -> None:
        self.path = (directory or root() / "analyses") / f"{name}-v{version}.json"
        self._encode = encode
        self._entries: dict[str, V] = {}
        self._used: dict[str, None] = {}  # keys read or added in this run, in that order
        self._added = 0
        try:
            raw = json.loads(self.path.read_bytes())
            if isinstance(raw, dict):
                self._entries = {str(k): decode(v) for k, v in raw.items()}
        except (OSError, ValueError, TypeError):
            self._entries = {}

    def __getitem__(self, key: str) -> V:
        value = self._entries[key]
        self._used[key] = None
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __setitem__(self, key: str, value: V) -> None:
        self._entries[key] = value
        self._used[key] = None
        self._added += 1

    def __delitem__(self, key: str) -> None:
        del self._entries[key]
        self._used.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def added(self) -> int:
        """Entries added since the index was read (what `save` would write anew)."""
        return self._added

    def save(self) -> None:
        """Write the index if anything was added; best effort (an OSError is ignored)."""
        if not self._added:
            return
        unused = [k for k in self._entries if k not in self._used]
        order = [*unused, *self._used][-self.MAX_ENTRIES :]  # the least recently used go
        doc = {k: self._encode(self._entries[k]) for k in order}
        try:
            write_atomic(self.path, json.dumps(doc, separators=(",", ":")).encode())
        except OSError:
            return
        self._added = 0
