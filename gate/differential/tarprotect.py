"""Trusted files the check reads and cannot change (SPEC §3.1, §3.2; docs/security.md).

In every run of a check with a differential, the files the base's tests judge with
(the `tests` globs and the harness: conftest.py, pytest.ini, ...) reach the container
owned by `PROTECTED_UID`, mode 0444, and every directory is owned by it with mode 1777
(sticky, like /tmp). The check runs as root without capabilities, or as another user: it
may add files anywhere, change the other files of the tree, and remove what it owns,
but it cannot write, chmod, remove or rename a protected file. So code imported while
the tests are collected cannot rewrite a test module pytest has not read yet, and an
earlier test command cannot rewrite a test a later one runs.

Bytecode committed under a `__pycache__/` directory reaches every check's container
owned by `PROTECTED_UID` with mode 0000 (SPEC §3.2: committed bytecode never runs in place
of the source it shadows): the file is there, as committed, but no user of the check can
read it, so an interpreter that looks there (a child started with `-E` ignores
`PYTHONPYCACHEPREFIX`) falls back to the source.

The rewrite patches ustar headers in place as the archive streams past (no re-parse of
the data): path from the ustar name/prefix, a preceding pax `path` record or a GNU long
name; mode, uid, gid and the checksum rewritten. Anything it does not understand is an
error (the archive is git's or our own, so that would be a defect). On the way it can
note what it passes (`manifest`): each entry's type and the SHA-256 of its bytes, which
is what the tree was as materialized (gate/sandbox/envdiff.py compares /workspace with it
after setup and build).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

__all__ = ["Manifest", "bytecode", "digest_link", "protect"]

# tree path -> (type, digest): "file" or "exec" with the SHA-256 of its bytes, "symlink"
# with `digest_link`, "dir" with "" (gate/differential/environment.py compares these)
Manifest = dict[str, tuple[str, str]]

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


def _pax(data: bytes) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    i = 0
    while i < len(data):
        space = data.index(b" ", i)
        length = int(data[i:space])
        record = data[space + 1 : i + length - 1]
        key, _, value = record.partition(b"=")
        out[key] = value
        i += length
    return out


def digest_link(target: bytes) -> str:
    """The digest of a symbolic link: of its target, as envdiff hashes one."""
    return hashlib.sha256(b"symlink\0" + target).hexdigest()


def bytecode(path: bytes) -> bool:
    """A file under a `__pycache__` directory: cached bytecode, never the tree's to run."""
    parts = path.split(b"/")
    return len(parts) >= 2 and parts[-2] == b"__pycache__"


def protect(
    stream: Iterator[bytes],
    selected: Callable[[bytes], bool],
    *,
    directories: bool = True,
    manifest: Manifest | None = None,
) -> Iterator[bytes]:
    """`stream` (a tar) with `selected` files protected, every directory too (with
    `directories`), committed bytecode unreadable; each entry noted in `manifest`."""
    buf = bytearray()
    pending_path: bytes | None = None
    pending_link: bytes | None = None
    hasher: hashlib._Hash | None = None
    to_hash = 0  # data bytes of the current file still to hash (the rest is padding)
    noted: tuple[str, str] | None = None  # the current file's manifest key and type
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
                if hasher is not None and to_hash:
                    k = min(n, to_hash)
                    hasher.update(buf[:k])
                    to_hash -= k
                out += buf[:n]
                del buf[:n]
                skip -= n
                if skip:
                    break
            if hasher is not None and not to_hash and noted is not None and manifest is not None:
                manifest[noted[0]] = (noted[1], hasher.hexdigest())
                hasher, noted = None, None
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
                    records = _pax(body)
                    pending_path = records.get(b"path") or pending_path
                    pending_link = records.get(b"linkpath") or pending_link
                elif collect_kind == b"L":
                    pending_path = body.rstrip(b"\0")
                elif collect_kind == b"K":
                    pending_link = body.rstrip(b"\0")
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
            if kind in (b"x", b"L", b"K"):
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
            link = pending_link or bytes(block[157:257].split(b"\0", 1)[0])
            pending_path = pending_link = None
            mode = int(block[100:108].rstrip(b"\0 ").strip() or b"0", 8)
            tree_path = path.rstrip(b"/")
            if kind == _DIR:
                if directories:
                    _header(block, mode=0o1777, uid=PROTECTED_UID)
            elif kind in _FILE_TYPES and bytecode(tree_path):
                _header(block, mode=0, uid=PROTECTED_UID)
            elif kind in _FILE_TYPES and selected(tree_path):
                _header(block, mode=0o555 if mode & 0o111 else 0o444, uid=PROTECTED_UID)
            if manifest is not None:
                key = tree_path.decode("utf-8", "surrogateescape")
                if kind == _DIR:
                    manifest[key] = ("dir", "")
                elif kind == b"2":
                    manifest[key] = ("symlink", digest_link(link))
                elif kind in _FILE_TYPES:
                    hasher, to_hash = hashlib.sha256(), size
                    noted = (key, "exec" if mode & 0o111 else "file")
                    if not size:
                        manifest[key] = (noted[1], hasher.hexdigest())
                        hasher, noted = None, None
            out += block
            skip = padded
        if out:
            yield bytes(out)
    if buf:
        yield bytes(buf)
