"""proofgate's per-user cache directory, and its writes: atomic and best effort (a cache
that cannot be written only makes the next run slower). Used by the differential's
base-run cache and the image bytecode listings."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["root", "write_atomic"]


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
