"""The receipt's envelope inside a check run's text: a gzip + base64 block between
HTML-comment markers that a release verifier finds again. Nothing read back is trusted:
`gate.github.receipts` verifies every envelope it finds."""

from __future__ import annotations

import base64
import gzip
import hashlib
import re

__all__ = ["MAX_ENVELOPE_BYTES", "RECEIPT_MARKER", "embed_envelope", "extract_envelopes"]

MAX_ENVELOPE_BYTES = 16 * 1024 * 1024  # a decompressed envelope larger than this is refused
RECEIPT_MARKER = "<!-- proofgate-receipt:v1"
_RECEIPT_END = "<!-- /proofgate-receipt -->"
_RECEIPT_BLOCK = re.compile(
    r"<!-- proofgate-receipt:v1 encoding=gzip\+base64 sha256=(?P<sha>[0-9a-f]{64}) -->\s*"
    r"```[a-z]*\n(?P<b64>[A-Za-z0-9+/=\s]*?)```\s*<!-- /proofgate-receipt -->"
)


def embed_envelope(envelope: bytes, *, limit: int, elsewhere: str) -> str:
    """The envelope as a Markdown block a verifier can find again: gzip + base64 between
    HTML-comment markers. If it does not fit in `limit` bytes, only its SHA-256 and
    `elsewhere` (where to get it)."""
    digest = hashlib.sha256(envelope).hexdigest()
    packed = base64.b64encode(gzip.compress(envelope, mtime=0)).decode("ascii")
    lines = "\n".join(packed[i : i + 76] for i in range(0, len(packed), 76))
    block = (
        "The signed receipt (DSSE envelope; gzip + base64). Verify it with "
        "`proofgate verify --github OWNER/REPO --commit SHA --key KEY.pub`.\n\n"
        f"<!-- proofgate-receipt:v1 encoding=gzip+base64 sha256={digest} -->\n"
        f"```text\n{lines}\n```\n{_RECEIPT_END}\n"
    )
    if len(block.encode("utf-8")) <= limit:
        return block
    return (
        f"The signed receipt is too large to attach here ({len(envelope)} bytes, "
        f"sha256 `{digest}`). {elsewhere}\n"
    )


def extract_envelopes(text: str) -> list[bytes]:
    """Every well-formed receipt block in `text` whose bytes match its stated SHA-256.
    Nothing here is trusted: the caller verifies the signature."""
    found: list[bytes] = []
    for m in _RECEIPT_BLOCK.finditer(text):
        try:
            packed = base64.b64decode("".join(m.group("b64").split()), validate=True)
            envelope = _gunzip_capped(packed, MAX_ENVELOPE_BYTES)
        except (ValueError, OSError, EOFError):
            continue
        if envelope is not None and hashlib.sha256(envelope).hexdigest() == m.group("sha"):
            found.append(envelope)
    return found


def _gunzip_capped(data: bytes, cap: int) -> bytes | None:
    d = gzip.GzipFile(fileobj=_BytesReader(data))
    out = d.read(cap + 1)
    return None if len(out) > cap else out


class _BytesReader:
    """Minimal file object for GzipFile (keeps `io` out of the type surface)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n < 0 else self._pos + n
        chunk = self._data[self._pos : end]
        self._pos += len(chunk)
        return chunk

    def seek(self, pos: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: len(self._data)}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos
