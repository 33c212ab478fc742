"""Read a git patch for the policy. Pure; total over all inputs.

`parse_patch` reads the bytes of `git diff --binary --full-index` (what the evidence
adapter captures) into per-file added/deleted lines with their line numbers. It never
raises on malformed input: what it cannot read it skips. Binary sections (`GIT binary
patch`, `Binary files ... differ`) are recorded as binary and their payload skipped.
Quoted paths (git's C-style quoting for odd bytes) are unquoted back to exact bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "FileDiff",
    "HunkLine",
    "parse_patch",
    "path_text",
]


@dataclass(frozen=True, slots=True)
class HunkLine:
    """One line of a hunk: kind is ' ' (context), '+' (added) or '-' (deleted).

    `new` is the new-file line number for context/added lines; for a deleted line it is
    the new-file line number of the line that follows it (where it used to sit).
    `old` is the old-file line number for context/deleted lines.
    """

    kind: str
    old: int
    new: int
    text: bytes


@dataclass(frozen=True, slots=True)
class FileDiff:
    old_path: bytes | None  # None when added
    new_path: bytes | None  # None when deleted
    binary: bool
    hunks: tuple[tuple[HunkLine, ...], ...]

    @property
    def path(self) -> bytes:
        """The identity used to match the inventory: new path, old path for deletions."""
        return self.new_path if self.new_path is not None else (self.old_path or b"")

    @property
    def added(self) -> tuple[HunkLine, ...]:
        return tuple(ln for h in self.hunks for ln in h if ln.kind == "+")

    @property
    def deleted(self) -> tuple[HunkLine, ...]:
        return tuple(ln for h in self.hunks for ln in h if ln.kind == "-")


def path_text(path: bytes) -> str:
    """Lossless text form of a path, for matching only (never for display)."""
    return path.decode("utf-8", "surrogateescape")


# --- patch -------------------------------------------------------------------------

_ESCAPES = {
    ord("a"): 7,
    ord("b"): 8,
    ord("t"): 9,
    ord("n"): 10,
    ord("v"): 11,
    ord("f"): 12,
    ord("r"): 13,
    ord('"'): 34,
    ord("\\"): 92,
}
_OCTAL = frozenset(b"01234567")
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _unquote(s: bytes, start: int = 0) -> tuple[bytes, int]:
    """Read a C-quoted token starting at s[start] == '"'; return (bytes, index after)."""
    out = bytearray()
    i = start + 1
    n = len(s)
    while i < n:
        c = s[i]
        if c == 34:  # closing quote
            return bytes(out), i + 1
        if c == 92 and i + 1 < n:
            nxt = s[i + 1]
            if nxt in _OCTAL:
                j = i + 1
                while j < n and j < i + 4 and s[j] in _OCTAL:
                    j += 1
                out.append(int(s[i + 1 : j], 8) & 0xFF)
                i = j
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out), n


def _strip_prefix(p: bytes) -> bytes:
    return p[2:] if p[:2] in (b"a/", b"b/") else p


def _side_path(raw: bytes) -> bytes | None:
    """Path of a `--- `/`+++ ` line's remainder; None for /dev/null."""
    if raw.startswith(b'"'):
        value, _ = _unquote(raw)
    else:
        value = raw[:-1] if raw.endswith(b"\t") else raw
    if value == b"/dev/null":
        return None
    return _strip_prefix(value)


def _header_paths(rest: bytes) -> tuple[bytes | None, bytes | None]:
    """Paths of `diff --git <rest>`; best effort, refined by ---/+++/rename lines."""
    if rest.startswith(b'"'):
        old, i = _unquote(rest)
        tail = rest[i:].lstrip(b" ")
        new = _unquote(tail)[0] if tail.startswith(b'"') else tail
        return _strip_prefix(old), _strip_prefix(new)
    n = len(rest)
    if (n - 5) % 2 == 0 and rest.startswith(b"a/"):
        p = (n - 5) // 2
        if rest[2 + p : 5 + p] == b" b/" and rest[2 : 2 + p] == rest[5 + p :]:
            return rest[2 : 2 + p], rest[2 : 2 + p]
    if rest.endswith(b'"'):
        j = rest.rfind(b' "')
        if j >= 0:
            return _strip_prefix(rest[:j]), _strip_prefix(_unquote(rest, j + 1)[0])
    j = rest.find(b" b/")
    if j >= 0:
        return _strip_prefix(rest[:j]), rest[j + 3 :]
    return None, None


class _Builder:
    def __init__(self, old: bytes | None, new: bytes | None) -> None:
        self.old = old
        self.new = new
        self.added_file = False
        self.deleted_file = False
        self.binary = False
        self.hunks: list[tuple[HunkLine, ...]] = []

    def build(self) -> FileDiff:
        old = None if self.added_file else self.old
        new = None if self.deleted_file else self.new
        return FileDiff(old_path=old, new_path=new, binary=self.binary, hunks=tuple(self.hunks))


_CHUNK = 1 << 20


def _lines(data: bytes, chunk: int = _CHUNK) -> Iterator[bytes]:
    """`data.split(b"\n")`, about `chunk` bytes at a time: a patch that carries a large
    binary file is not held a second time as a list of its lines (issue 46)."""
    start = 0
    while True:
        end = data.find(b"\n", min(start + chunk, len(data)))
        if end < 0:
            yield from data[start:].split(b"\n")
            return
        yield from data[start:end].split(b"\n")
        start = end + 1


@lru_cache(maxsize=1)  # the policy's pin look-ups and its evaluation read the same patch
def parse_patch(data: bytes) -> tuple[FileDiff, ...]:
    """Per-file diffs of a git patch, in patch order. Never raises."""
    files: list[FileDiff] = []
    cur: _Builder | None = None
    hunk: list[HunkLine] = []
    old_left = new_left = 0
    old_no = new_no = 0
    skipping_binary = False

    def end_hunk() -> None:
        nonlocal hunk
        if cur is not None and hunk:
            cur.hunks.append(tuple(hunk))
        hunk = []

    for line in _lines(data):
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag == b"\\":  # "\ No newline at end of file"
                continue
            if tag in (b" ", b"") and old_left > 0 and new_left > 0:
                hunk.append(HunkLine(" ", old_no, new_no, line[1:]))
                old_no += 1
                new_no += 1
                old_left -= 1
                new_left -= 1
                continue
            if tag == b"+" and new_left > 0:
                hunk.append(HunkLine("+", old_no, new_no, line[1:]))
                new_no += 1
                new_left -= 1
                continue
            if tag == b"-" and old_left > 0:
                hunk.append(HunkLine("-", old_no, new_no, line[1:]))
                old_no += 1
                old_left -= 1
                continue
            old_left = new_left = 0  # malformed: the hunk ends here
        if line.startswith(b"\\") and hunk:
            continue
        end_hunk()
        if line.startswith(b"diff --git "):
            if cur is not None:
                files.append(cur.build())
            cur = _Builder(*_header_paths(line[11:]))
            skipping_binary = False
            continue
        if cur is None or skipping_binary:
            continue
        if line.startswith(b"@@ "):
            m = _HUNK.match(line)
            if m is None:
                continue
            old_no = int(m.group(1))
            old_left = int(m.group(2)) if m.group(2) is not None else 1
            new_no = int(m.group(3))
            new_left = int(m.group(4)) if m.group(4) is not None else 1
            # A zero-length side starts *after* the given line number.
            if old_left == 0:
                old_no += 1
            if new_left == 0:
                new_no += 1
        elif line.startswith(b"--- "):
            p = _side_path(line[4:])
            if p is None:
                cur.added_file = True
            else:
                cur.old = p
        elif line.startswith(b"+++ "):
            p = _side_path(line[4:])
            if p is None:
                cur.deleted_file = True
            else:
                cur.new = p
        elif line.startswith((b"rename from ", b"copy from ")):
            cur.old = _side_path(line.split(b" from ", 1)[1])
        elif line.startswith((b"rename to ", b"copy to ")):
            cur.new = _side_path(line.split(b" to ", 1)[1])
        elif line.startswith(b"new file mode"):
            cur.added_file = True
        elif line.startswith(b"deleted file mode"):
            cur.deleted_file = True
        elif line.startswith(b"GIT binary patch"):
            cur.binary = True
            skipping_binary = True
        elif line.startswith(b"Binary files ") and line.endswith(b" differ"):
            cur.binary = True
    end_hunk()
    if cur is not None:
        files.append(cur.build())
    return tuple(files)
