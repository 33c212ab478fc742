"""Secrets added by the patch: `private-key` and `secret-token` (issue 6). Pure.

Secrets found are never echoed: findings carry the kind of secret, its length and the
first 8 hex digits of its SHA-256 only.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterator

from gate.policy.context import Context, RawFinding, as_text, text_diffs
from gate.util.lazyre import lazy

__all__ = [
    "MAX_BINARY_SCAN_BYTES",
    "check_private_key",
    "check_secret_token",
    "redact",
    "shannon_entropy",
]


# --- secrets -----------------------------------------------------------------------

_PEM_BEGIN = lazy(rb"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----")
_B64_RUN = lazy(rb"[A-Za-z0-9+/=]{40,}")
_TOKENS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("GitHub token", lazy(rb"\b(gh[pousr]_[A-Za-z0-9]{36,255})\b")),
    ("GitHub fine-grained token", lazy(rb"\b(github_pat_[A-Za-z0-9_]{22,255})\b")),
    ("AWS access key id", lazy(rb"\b((?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})\b")),
    ("Slack token", lazy(rb"\b(xox[abprse]-[A-Za-z0-9-]{10,250})\b")),
    ("Google API key", lazy(rb"\b(AIza[0-9A-Za-z_\-]{35})")),
    ("Stripe live key", lazy(rb"\b((?:sk|rk)_live_[0-9A-Za-z]{16,247})\b")),
    ("GitLab token", lazy(rb"\b(glpat-[0-9A-Za-z_\-]{20,})")),
    ("npm token", lazy(rb"\b(npm_[A-Za-z0-9]{36})\b")),
    ("PyPI token", lazy(rb"\b(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,})")),
    ("Anthropic API key", lazy(rb"\b(sk-ant-[A-Za-z0-9_\-]{32,})")),
    ("OpenAI API key", lazy(rb"\b(sk-(?:proj-)?[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})\b")),
)
# NAME = "value" / NAME: value / "name": "value" where NAME ends in a secret-ish word.
_ASSIGN = lazy(
    rb"""(?i)([A-Za-z0-9_.-]*(?:token|secret|passwd|password|pwd|api_?key|access_?key|"""
    rb"""private_?key|auth_?key|_key|credentials?))["']?\s*(?::=|=>|=|:)\s*[rbuf]?["'`]?"""
    rb"""([A-Za-z0-9+/=_\-.~]{20,})(?:["'`\s,;)]|$)"""
)
ENTROPY_BITS = 3.5  # per character; random base64/alnum is ~4-6, English and identifiers ~3
SECRET_MIN_LEN = 20


def shannon_entropy(s: bytes) -> float:
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def redact(secret: bytes) -> str:
    """The only form in which a secret may appear: its length and a short digest."""
    return f"{len(secret)} chars, sha256 {hashlib.sha256(secret).hexdigest()[:8]}"


def _looks_random(v: bytes) -> bool:
    has_digit = any(48 <= c <= 57 for c in v)
    has_alpha = any((65 <= c <= 90) or (97 <= c <= 122) for c in v)
    return has_digit and has_alpha and shannon_entropy(v) >= ENTROPY_BITS


# Binary files are read whole up to this much (git calls a file binary for one NUL byte,
# so a private key with a NUL appended must not slip past as "binary").
MAX_BINARY_SCAN_BYTES = 1 << 20


# Text saved as UTF-16 (each ASCII character beside a NUL byte) is binary to git and
# matches no ASCII pattern: such runs are read as the ASCII they spell.
_UTF16_LE = lazy(rb"(?:[\t\n\r\x20-\x7e]\x00){4,}")
_UTF16_BE = lazy(rb"(?:\x00[\t\n\r\x20-\x7e]){4,}")


def _as_ascii(data: bytes) -> bytes:
    data = _UTF16_LE.sub(lambda m: m.group(0)[::2], data)
    return _UTF16_BE.sub(lambda m: m.group(0)[1::2], data)


def _added_runs(ctx: Context) -> Iterator[tuple[bytes, list[tuple[int | None, bytes]]]]:
    """(path, consecutive added lines with their new line numbers): each hunk's added
    lines of a text diff, and the new content (bounded) of each binary file the patch
    adds or changes, whose lines have no number."""
    for d in text_diffs(ctx):
        for hunk in d.hunks:
            yield d.path, [(ln.new, ln.text) for ln in hunk if ln.kind == "+"]
    if ctx.binary_files is None:
        return
    for path in sorted(ctx.diffs):
        d = ctx.diffs[path]
        data = ctx.binary_files.get(d.new_path) if d.binary and d.new_path is not None else None
        if data is not None:
            text = _as_ascii(data[:MAX_BINARY_SCAN_BYTES])
            yield d.path, [(None, x) for x in text.split(b"\n")]


def check_private_key(ctx: Context) -> Iterator[RawFinding]:
    for path, added in _added_runs(ctx):
        for i, (line, text) in enumerate(added):
            m = _PEM_BEGIN.search(text)
            if m is None:
                continue
            # A BEGIN marker alone (a PEM parser's constant) is not a key: want a body.
            rest = [text[m.end() :]] + [x for _, x in added[i + 1 : i + 4]]
            if any(_B64_RUN.search(r) for r in rest):
                kind = as_text(m.group(1)).strip() or "PKCS#8"
                yield RawFinding(path, f"{kind} private key block added", line)


def check_secret_token(ctx: Context) -> Iterator[RawFinding]:
    for path, added in _added_runs(ctx):
        for line, text in added:
            hits: set[tuple[str, bytes]] = set()
            for kind, rx in _TOKENS:
                for m in rx.finditer(text):
                    hits.add((kind, m.group(1)))
            for m in _ASSIGN.finditer(text):
                value = m.group(2)
                if len(value) >= SECRET_MIN_LEN and _looks_random(value):
                    name = as_text(m.group(1))[:64]
                    hits.add((f"high-entropy value assigned to {name}", value))
            for kind, secret in sorted(hits):
                yield RawFinding(path, f"{kind} added ({redact(secret)})", line)
