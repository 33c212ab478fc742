"""Trusted files the check reads and cannot change (SPEC §3.1, §3.2; docs/security.md).

In every run of a check with a differential, the files the base's tests judge with
(the `tests` globs and the harness: conftest.py, pytest.ini, ...) reach the container
owned by `PROTECTED_UID`, mode 0444, and every directory is owned by it with mode 1777
(sticky, like /tmp). The check runs as root without capabilities, or as another user: it
may add files anywhere, change the other files of the tree, and remove what it owns,
but it cannot write, chmod, remove or rename a protected file. So code imported while
the tests are collected cannot rewrite a test module pytest has not read yet, and an
earlier test command cannot rewrite a test a later one runs.

The rewrite patches ustar headers in place as the archive streams past (no re-parse of
the data): path from the ustar name/prefix, a preceding pax `path` record or a GNU long
name; mode, uid, gid and the checksum rewritten. Anything it does not understand is an
error (the archive is git's or our own, so that would be a defect).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

__all__ = ["protect"]

BLOCK = 512
PROTECTED_UID = 2_000_000
_FILE_TYPES = (b"0", b"\0", b"7")
_DIR = b"5"


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def _header(block: bytearray, *, mode: int, uid: int) -> None:
    block[100:108] = _octal(mode, 8)
    block[108:116] = _octal(uid, 8)
    block[116:124] = _octal(uid, 8)
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)


def _size(block: bytes | bytearray) -> int:
    field = block[124:136]
    if field[0] & 0x80:  # base-256
        return int.from_bytes(field[1:], "big")
    text = field.rstrip(b"\0 ").strip()
    return int(text, 8) if text else 0


def _pax_path(data: bytes) -> bytes | None:
    path = None
    i = 0
    while i < len(data):
        space = data.index(b" ", i)
        length = int(data[i:space])
        record = data[space + 1 : i + length - 1]
        key, _, value = record.partition(b"=")
        if key == b"path":
            path = value
        i += length
    return path


def protect(stream: Iterator[bytes], selected: Callable[[bytes], bool]) -> Iterator[bytes]:
    """`stream` (a tar) with `selected` files and every directory protected."""
    buf = bytearray()
    pending_path: bytes | None = None
    skip = 0  # data bytes (padded) of the current entry still to pass through
    collect = 0  # data bytes of a pax / long-name entry to read (then padding)
    collected = bytearray()
    collect_kind = b""
    collected_size = 0
    for chunk in stream:
        buf += chunk
        out = bytearray()
        while True:
            if skip:
                n = min(skip, len(buf))
                out += buf[:n]
                del buf[:n]
                skip -= n
                if skip:
                    break
            if collect:
                n = min(collect, len(buf))
                collected += buf[:n]
                out += buf[:n]
                del buf[:n]
                collect -= n
                if collect:
                    break
                body = bytes(collected[:collected_size])
                if collect_kind in (b"x",):
                    pending_path = _pax_path(body) or pending_path
                elif collect_kind == b"L":
                    pending_path = body.rstrip(b"\0")
                collected.clear()
            if len(buf) < BLOCK:
                break
            block = bytearray(buf[:BLOCK])
            del buf[:BLOCK]
            if not any(block):
                out += block
                continue
            kind = bytes(block[156:157])
            size = _size(block)
            padded = -(-size // BLOCK) * BLOCK
            if kind in (b"x", b"L"):
                out += block
                collect, collect_kind, collected_size = padded, kind, size
                continue
            if kind == b"g":
                out += block
                skip = padded
                continue
            name = block[0:100].split(b"\0", 1)[0]
            prefix = block[345:500].split(b"\0", 1)[0]
            path = pending_path or bytes(prefix + b"/" + name if prefix else name)
            pending_path = None
            if kind == _DIR:
                _header(block, mode=0o1777, uid=PROTECTED_UID)
            elif kind in _FILE_TYPES and selected(path.rstrip(b"/")):
                mode = int(block[100:108].rstrip(b"\0 ").strip() or b"0", 8)
                _header(block, mode=0o555 if mode & 0o111 else 0o444, uid=PROTECTED_UID)
            out += block
            skip = padded
        if out:
            yield bytes(out)
    if buf:
        yield bytes(buf)
