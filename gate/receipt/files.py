"""The three receipt files (SPEC §5 `prove --out`): written in one place for the CLI, the
Action and the demo."""

from __future__ import annotations

import hashlib
from pathlib import Path

RECEIPT_JSON = "receipt.json"
RECEIPT_MD = "receipt.md"
PATCH_DIFF = "patch.diff"
# The most a patch.diff read back (`verify --patch`, `apply`, `aggregate`) may hold: a
# proof keeps its whole patch in memory, and so does whoever reads it back.
MAX_PATCH_BYTES = 1024 * 1024 * 1024


def write_receipt_files(out: Path, *, envelope: bytes, markdown: str, patch: bytes) -> str:
    """Write `out/receipt.json` (the envelope), `out/receipt.md` and `out/patch.diff`
    into an existing directory; returns the envelope's SHA-256 (hex).

    Raises:
        OSError: a file cannot be written (callers say which flag or input was wrong).
    """
    (out / RECEIPT_JSON).write_bytes(envelope)
    (out / RECEIPT_MD).write_text(markdown, encoding="utf-8")
    (out / PATCH_DIFF).write_bytes(patch)
    return hashlib.sha256(envelope).hexdigest()
