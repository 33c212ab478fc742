"""The image's own bytecode, reachable through the prefix: one symlink per `.pyc`.

Every command runs with `PYTHONPYCACHEPREFIX` (never the tree's `__pycache__`), and with
a prefix Python looks for the bytecode of *every* module there only. A fresh prefix per
check therefore made each test command compile the standard library and every installed
package it imports, although the image carries that bytecode beside the sources (about
0.6 s of click's suite). So before anything of the check runs, proofgate lists the
`__pycache__/*.pyc` files under the configured image's `sys.path` and site directories
(`python3 -I -S -B` in a container of that image in which nothing of the check runs:
no environment, no `.pth` file, nothing written; once per image id, cached in
`$XDG_CACHE_HOME/proofgate/bytecode`), and the prefix gets for each one a
symlink `pycache/D/M.cpython-311.pyc -> D/__pycache__/M.cpython-311.pyc`, owned like the
witness by `PROTECTED_UID`.

Why a link decides nothing:
- Python checks the bytecode against its source as always (mtime and size, or hash);
  bytecode for a changed source is compiled again.
- A link leads into the root filesystem, which setup and build can change anyway (they
  run with it writable, and the test phase starts from their commit): a link changes
  which of its files Python reads, never a file the change cannot already write. Nothing
  under `/workspace` or `/opt/proofgate` is ever linked, and those parts of the prefix
  stay proofgate's (gate/witness/host.py), so the base's tests and the witness
  always run from their sources. The listing comes from the configured image only (never
  from an environment setup made), and every path is checked here before it is linked
  anyway: no `//`, `..` or reserved part, no link where a directory goes.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import tarfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from docker import APIClient

from gate.differential.tarprotect import PROTECTED_UID
from gate.sandbox.copy_in import close_iterator
from gate.sandbox.errors import DockerRefused, docker_errors
from gate.util import usercache

log = logging.getLogger("gate.sandbox")

__all__ = ["LISTING", "farm_entries", "links", "listing"]

# Run as `python3 -I -S -B -c LISTING`: no environment, no `.pth` file processed, nothing
# written; prints NUL-separated absolute paths.
LISTING = r"""
import os, sys, site
skip = ("/workspace", "/opt/proofgate", "/proc", "/sys", "/dev", "/tmp")
seen, out = set(), []
for entry in sys.path + site.getsitepackages():
    entry = os.path.normpath(entry) if entry.startswith("/") else ""
    if not entry or entry == "/" or not os.path.isdir(entry):
        continue
    if any(entry == s or entry.startswith(s + "/") for s in skip):
        continue
    for d, dirs, files in os.walk(entry):
        if os.path.basename(d) != "__pycache__":
            continue
        for f in files:
            p = os.path.join(d, f)
            if f.endswith(".pyc") and p not in seen and len(out) < 20000:
                seen.add(p)
                out.append(p)
sys.stdout.write("\0".join(out))
"""
_MAX_OUTPUT = 8 << 20
_MAX_FILES = 20_000
_MAX_PATH = 512
_MAX_PART = 255
_MAX_DEPTH = 32
_LIST_S = 20.0  # a listing that takes longer is given up (the check goes on without it)
_PROTECTED = ("/workspace", "/opt/proofgate")
_SYSTEM = ("/proc", "/sys", "/dev", "/tmp")  # noqa: S108 - paths in the container
_lock = threading.Lock()
_known: dict[str, tuple[str, ...]] = {}


def links(raw: bytes) -> tuple[str, ...]:
    """The paths of a listing that may be linked, in order, each once. A path qualifies
    when it is absolute and normal (no `//`, `.` or `..` part), a `.pyc` directly in a
    `__pycache__` directory, of bounded length and depth, and outside `/workspace`,
    `/opt/proofgate` and the kernel's and scratch file systems."""
    out: dict[str, None] = {}
    for item in raw.split(b"\0"):
        if len(out) >= _MAX_FILES:
            break
        try:
            path = item.decode("utf-8")
        except UnicodeDecodeError:
            continue
        parts = path.split("/")
        if (
            not path.startswith("/")
            or posixpath.normpath(path) != path
            or "" in parts[1:]
            or any(not p.isprintable() or len(p.encode()) > _MAX_PART for p in parts)
            or len(path) > _MAX_PATH
            or len(parts) > _MAX_DEPTH
            or not path.endswith(".pyc")
            or parts[-2:-1] != ["__pycache__"]
            or any(path.startswith(p + "/") for p in _PROTECTED + _SYSTEM)
            or len(parts) < 4
        ):
            continue
        out[path] = None
    return tuple(out)


def farm_entries(paths: Iterable[str], *, prefix: str, writable: bool) -> Iterator[tarfile.TarInfo]:
    """The prefix's directories and links for `paths` (from `links`), as members of a tar
    extracted at the prefix's parent (`prefix` is the prefix's name there, e.g.
    "pycache"), all owned by `PROTECTED_UID`: directories are 0777 when setup or build
    may add bytecode, else 0555, so no test command can change them.

    Where nothing of the check writes bytecode (no setup or build), a source directory
    D none of whose subdirectories has listed bytecode is one link, `prefix/D ->
    D/__pycache__` (the prefix keeps a module's bytecode in the mirror of its source's
    directory, so every lookup in `prefix/D` is for a module of D): half the members
    for a typical image. Any other directory gets a directory with a link per file, so
    setup and build can still add or replace bytecode there (a package that setup
    upgrades loses its `__pycache__`: a link to it would lead nowhere). `prefix` itself,
    `prefix/workspace` and `prefix/opt` are not among the members (the witness's part of
    the archive sets those), nothing goes under `prefix/workspace` or
    `prefix/opt/proofgate`, and no link has the name of a directory: no member is
    extracted through a link."""
    reserved = {prefix, f"{prefix}/workspace", f"{prefix}/opt", f"{prefix}/opt/proofgate"}
    forbidden = (f"{prefix}/workspace", f"{prefix}/opt/proofgate")
    by_dir: dict[str, list[str]] = {}
    for path in paths:
        by_dir.setdefault(posixpath.dirname(posixpath.dirname(path)), []).append(path)
    above: set[str] = set()  # directories with listed bytecode somewhere below them
    for source in by_dir:
        parent = posixpath.dirname(source)
        while parent not in above and parent != "/":
            above.add(parent)
            parent = posixpath.dirname(parent)
    dirs: dict[str, None] = {}
    farm: dict[str, str] = {}
    for source, files in by_dir.items():
        mirror = f"{prefix}{source}"
        if mirror in reserved or any(mirror == f or mirror.startswith(f + "/") for f in forbidden):
            continue
        leaf = not writable and source not in above
        parts = mirror.split("/")
        for depth in range(2, len(parts) + (0 if leaf else 1)):
            dirs.setdefault("/".join(parts[:depth]))
        if leaf:
            farm.setdefault(mirror, posixpath.dirname(files[0]))
        else:
            for path in files:
                farm.setdefault(f"{mirror}/{posixpath.basename(path)}", path)
    for directory in dirs:
        if directory in reserved:
            continue
        info = tarfile.TarInfo(directory)
        info.type, info.mode = tarfile.DIRTYPE, 0o777 if writable else 0o555
        info.uid = info.gid = PROTECTED_UID
        yield info
    for name, target in farm.items():
        if name in dirs:
            continue
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
        info.uid = info.gid = PROTECTED_UID
        yield info


def listed(image_id: str) -> tuple[str, ...] | None:
    """The bytecode files of the image `image_id` to link, as `listing` found them before
    (in this process or in the per-user cache); None when they must be listed."""
    with _lock:
        known = _known.get(image_id)
    if known is not None:
        return known
    try:
        found = links(_cache_file(image_id).read_bytes())
    except OSError:
        return None
    with _lock:
        _known[image_id] = found
    return found


def listing(api: APIClient, container: str, image_id: str) -> tuple[str, ...]:
    """The bytecode files of the image `image_id` to link (see `links`): from the cache,
    or listed in `container`, a started container of that image (the configured one) in
    which nothing of the check has run. An image without `python3`, a listing that fails
    or takes too long: nothing (and a warning)."""
    known = listed(image_id)
    if known is not None:
        return known
    raw = _list(api, container)
    if raw is None:
        return ()
    found = links(raw)
    try:  # best effort: without it the next run lists again
        usercache.write_atomic(_cache_file(image_id), "\0".join(found).encode())
    except OSError as e:
        log.info("cannot cache the bytecode listing: %s", e)
    with _lock:
        _known[image_id] = found
    return found


def _list(api: APIClient, container: str) -> bytes | None:
    """The listing's output, as the image's default user; None when it failed (it is
    tried again next time), b"" when there is nothing to link (not tried again)."""
    argv = ["python3", "-I", "-S", "-B", "-c", LISTING]
    try:
        with docker_errors("list the image's bytecode"):
            exec_id = api.exec_create(container, argv, stdout=True, stderr=False)["Id"]
            stream = api.exec_start(exec_id, stream=True, demux=True)
    except DockerRefused as e:
        log.warning("cannot list the image's bytecode: %s", e)
        return None
    out = bytearray()

    def read() -> None:
        with contextlib.suppress(Exception):
            for stdout, _ in stream:
                out.extend(stdout or b"")
                if len(out) > _MAX_OUTPUT:
                    return

    reader = threading.Thread(target=read, name="proofgate-bytecode", daemon=True)
    reader.start()
    reader.join(_LIST_S)
    if reader.is_alive():
        log.warning("listing the image's bytecode took over %.0f s: none linked", _LIST_S)
        with contextlib.suppress(Exception):
            close_iterator(stream)
        return b""  # not again for this image: it only costs speed
    code = None
    for _ in range(20):  # the stream can end a moment before the exit status is recorded
        try:
            with docker_errors("read the bytecode listing's exit status"):
                info = api.exec_inspect(exec_id)
        except DockerRefused:
            return None
        code = info.get("ExitCode")
        if not info.get("Running") and code is not None:
            break
        time.sleep(0.05)
    if code != 0 or len(out) > _MAX_OUTPUT:
        return b"" if code in (126, 127) else None  # no python3: nothing to link, ever
    return bytes(out)


def _cache_file(image_id: str) -> Path:
    name = image_id.replace(":", "-")
    if not name.replace("-", "").isalnum():
        name = "invalid"
    return usercache.root() / "bytecode" / name


def prune(api: APIClient) -> list[Path]:
    """Remove the cached listings of images the daemon no longer has (`proofgate cache
    prune`); one it cannot judge (the daemon refused) stays. Returns what it removed.

    Raises:
        SandboxError: the daemon does not answer.
    """
    folder = usercache.root() / "bytecode"
    try:
        files = sorted(p for p in folder.iterdir() if p.is_file())
    except OSError:
        return []
    removed: list[Path] = []
    for path in files:
        image_id = path.name.replace("-", ":", 1)
        if not path.name.startswith("."):
            try:
                with docker_errors("inspect an image with a bytecode listing"):
                    api.inspect_image(image_id)
                continue
            except DockerRefused as e:
                if not e.not_found:
                    continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
        with _lock:
            _known.pop(image_id, None)
    return removed
