"""The trusted run's environment, by construction (SPEC §3.2): what setup and build left,
path by path and byte by byte, against what the base's setup and build left.

Setup and build run the change's code (a `setup.py`, an in-tree build backend, a build
step that imports the package), as root, in the container the test phase then starts
from, and in the workspace the tests then run in. So after they have ended, with every
process of the container frozen, the Docker daemon reads (gate/sandbox/envdiff.py):

- outside `/workspace`, every file, link and directory they added, changed or removed
  against the image (the daemon's `changes` of the container, each path's bytes through
  its archive API): site-packages, entry points, `.pth` hooks, programs, `/etc`, `/run`,
  `/var/tmp`, anything. Only what no test container sees is left out: the kernel's
  filesystems, the per-container tmpfs mounts of the test phase (`/tmp`, `HOME`),
  proofgate's own volumes and the daemon's init;
- under `/workspace`, every entry that is not the committed tree as it was materialized:
  build outputs the tree did not contain, committed files changed or removed.

Nothing is matched against a list of dangerous kinds. The base run records the same for
the base's tree; every entry of the judging run (the trusted run, or the head run where
it is the trusted run) that the base run's record does not have, at the same path with
the same bytes, is `environment-changed` (HELD, every path and digest in the receipt). A
record that is incomplete (more entries or bytes than are read, a file the daemon will
not read) counts as changed.

What varies for an honest reason, and nothing else, is normalised before the
comparison (`normalise`), each side with its own values:

- the project's own install artefacts, which the install writes from the change's
  committed files: the version in the names and contents of its metadata directory
  (`NAME-VERSION.dist-info`, `NAME.egg-info`, found by its `direct_url.json` naming
  `file:///workspace`, or under `/workspace`), of its editable hook (`__editable__.NAME-
  VERSION.pth`, `__editable___NAME_VERSION_finder.py`) and of the build outputs under
  `/workspace` (a generated `_version.py`); of that metadata, `METADATA`/`PKG-INFO` but
  for the project's name (every field is written from the committed `pyproject.toml` or
  `setup.cfg`, the change's code that the policy judges, and nothing executes it),
  `RECORD` (the list of what the install wrote: each file is compared itself),
  `SOURCES.txt` (the tree's file list) and copies of committed files it carries (a
  licence) are left out. Everything else in those files, `entry_points.txt` (what loads
  plugins) included, is compared byte for byte;
- a file setup or build wrote outside the tree that is a byte-for-byte copy of a
  committed file of the run's own tree (a non-editable install, setuptools' `build/lib`)
  is that committed file: the change's code, judged as the tree is;
- a compiled artefact (ELF) at the same path on both sides whose stem is the stem of a
  committed file the change edits (`_speedups.c` -> `_speedups.cpython-311-...so`) is the
  change's code too.

Pure: the sandbox reads the daemon; this module decides.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterable, Set
from dataclasses import dataclass

from gate.differential.paths import MOUNT, PYCACHE, WORKSPACE
from gate.model import EnvChange, EnvRecord

__all__ = [
    "ADDED",
    "MAX_RECORDED",
    "MODIFIED",
    "REMOVED",
    "EnvChange",
    "EnvRecord",
    "Project",
    "RawEntry",
    "merge",
    "new_in",
    "normalise",
    "project_of",
    "volatile",
]

MODIFIED, ADDED, REMOVED = "modified", "added", "removed"
KINDS = {0: MODIFIED, 1: ADDED, 2: REMOVED}  # the daemon's `changes` Kind values
MAX_RECORDED = 20_000  # entries per run; past that the record is incomplete
MAX_HASHED_BYTES = 1 << 30  # bytes read per run; past that the record is incomplete
MAX_KEPT_BYTES = 256 * 1024  # a file's bytes kept for normalising (larger: digest only)

# What no test container sees as setup and build left it: the kernel's filesystems, the
# test phase's per-container tmpfs mounts (HOME is added by the caller), the workspace
# (compared with the tree instead), proofgate's volumes and the daemon's own init, which
# it bind-mounts over its mount point in every container.
_VOLATILE = (
    "/proc",
    "/sys",
    "/dev",
    "/tmp",  # noqa: S108 - a path in the container
    WORKSPACE,
    MOUNT,
    PYCACHE,
    "/sbin/docker-init",
    "/usr/sbin/docker-init",
    "/etc/hostname",
    "/etc/hosts",
    "/etc/resolv.conf",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RawEntry:
    """One path setup or build left, as the daemon read it."""

    path: str  # absolute in the container
    kind: str  # added | modified | removed
    type: str  # file | exec | elf | symlink | dir | other | removed | unread
    sha256: str | None = None  # of the bytes (a link: of `symlink\0TARGET`)
    data: bytes | None = None  # a small file's bytes, for `normalise`


@dataclass(frozen=True, slots=True)
class Project:
    """The project as its own install names it (its metadata directory)."""

    name: str
    version: str
    metadata: str  # the metadata directory's path


def volatile(path: str, extra: Iterable[str] = ()) -> bool:
    """Whether a path is one no test container sees as setup and build left it."""
    return any(path == v or path.startswith(v.rstrip("/") + "/") for v in (*_VOLATILE, *extra))


_DIST_INFO = re.compile(r"^(?P<name>[^/-]+)-(?P<version>[^/-]+)\.dist-info$")


def project_of(entries: Iterable[RawEntry]) -> Project | None:
    """The project's own metadata among what setup and build wrote: a `*.dist-info`
    whose `direct_url.json` names the workspace, else a `*.egg-info` under it."""
    found: Project | None = None
    for e in entries:
        base = posixpath.basename(e.path)
        parent = posixpath.dirname(e.path)
        if base == "direct_url.json" and e.data is not None:
            match = _DIST_INFO.match(posixpath.basename(parent))
            if match and b'"file://' + WORKSPACE.encode() in e.data:
                return Project(match["name"], match["version"], parent)
        if (
            base == "PKG-INFO"
            and parent.endswith(".egg-info")
            and parent.startswith(WORKSPACE + "/")
            and e.data is not None
            and found is None
        ):
            version = _header(e.data, b"Version")
            name = _header(e.data, b"Name")
            if version and name:
                found = Project(name, version, parent)
    return found


def _header(data: bytes, key: bytes) -> str | None:
    for line in data.split(b"\n"):
        if not line.strip():
            return None
        k, sep, v = line.partition(b":")
        if sep and k.strip() == key:
            return v.strip().decode("utf-8", "replace")
    return None


def _replace_version(text: str, project: Project) -> str:
    """The project's version put aside where it stands as a token: as written (`1.0` in
    `calc-1.0.dist-info`, not in `1.0.1` or `11.0`) and as module names spell it (`1_0` in
    `__editable___calc_1_0_finder`)."""
    dotted = re.escape(project.version)
    text = re.sub(rf"(?<![\w.]){dotted}(?!\w|\.\d)", "{version}", text)
    underscored = re.escape(re.sub(r"[-.]", "_", project.version))
    if underscored != dotted:
        text = re.sub(rf"(?<=_){underscored}(?=_)", "{version_}", text)
    return text


def _own_artefact(path: str, project: Project) -> bool:
    """The project's metadata, its editable hook, or a build output in the workspace."""
    name = posixpath.basename(path)
    under = path.startswith(project.metadata + "/")
    editable = name.startswith("__editable__") and (
        project.name in name or project.name.replace("-", "_") in name
    )
    return under or editable or path.startswith(WORKSPACE + "/")


def normalise_path(path: str, project: Project | None) -> str:
    if project is None:
        return path
    parts = path.split("/")
    for i, part in enumerate(parts):
        if project.name in part or project.name.replace("-", "_") in part:
            parts[i] = _replace_version(part, project)
    return "/".join(parts)


def normalise_bytes(path: str, data: bytes, project: Project | None) -> bytes:
    """`data` of `path` with only what varies for an honest reason put aside."""
    if project is None or not _own_artefact(path, project):
        return data
    name = posixpath.basename(path)
    if path.startswith(project.metadata + "/"):
        if name in ("METADATA", "PKG-INFO"):
            # every field is written from the committed pyproject.toml / setup.cfg (the
            # change's code, which the policy judges) and nothing executes it: which
            # project it describes is what counts
            head = data.split(b"\n\n", 1)[0]
            lines = [ln for ln in head.split(b"\n") if ln.startswith((b"Name:", b"Version:"))]
            data = b"\n".join(lines)
        elif name in ("RECORD", "SOURCES.txt"):
            return b""  # lists of what was written (each compared itself) and of the tree
    text = data.decode("utf-8", "surrogateescape")
    return _replace_version(text, project).encode("utf-8", "surrogateescape")


TREE_COPY = "a copy of a committed file"


def normalise(
    entries: Iterable[RawEntry], committed: Set[tuple[str, str]], *, complete: bool
) -> EnvRecord:
    """The record of one run: each entry's path and digest with only what varies for an
    honest reason put aside (the module's docstring). `committed` holds the (file name,
    SHA-256) of each file of the run's tree, as materialized: a file setup or build wrote
    with the name and bytes of one of them is a copy of the change's committed code."""
    rows = list(entries)
    project = project_of(rows)
    changes: list[EnvChange] = []
    for e in rows[:MAX_RECORDED]:
        norm = e.sha256
        if e.type in ("file", "exec") and (posixpath.basename(e.path), e.sha256) in committed:
            if project is not None and e.path.startswith(project.metadata + "/"):
                continue  # a committed file the metadata carries (a licence): the tree's
            norm = TREE_COPY
        elif e.data is not None and e.type in ("file", "exec"):
            norm = hashlib.sha256(normalise_bytes(e.path, e.data, project)).hexdigest()
        changes.append(
            EnvChange(
                path=e.path,
                kind=e.kind,
                sha256=e.sha256,
                why=e.type,
                key=normalise_path(e.path, project),
                norm=norm,
            )
        )
    complete = complete and len(rows) <= MAX_RECORDED and all(e.type != "unread" for e in rows)
    return EnvRecord(changes=tuple(sorted(changes)), complete=complete)


def merge(lower: EnvRecord, upper: EnvRecord) -> EnvRecord:
    """A cached setup's record (`lower`, against the configured image) with the build's
    on top of it (`upper`, against that cached environment): the build's against the
    configured image."""
    by_path = {c.path: c for c in lower.changes}
    for c in upper.changes:
        was = by_path.get(c.path)
        if was is not None and was.kind == ADDED and c.kind == REMOVED:
            del by_path[c.path]  # setup added it, build removed it: not there at all
        elif was is not None and was.kind == ADDED:
            by_path[c.path] = EnvChange(
                path=c.path, kind=ADDED, sha256=c.sha256, why=c.why, key=c.key, norm=c.norm
            )
        else:
            by_path[c.path] = c
    return EnvRecord(
        changes=tuple(sorted(by_path.values())), complete=lower.complete and upper.complete
    )


def _stem(path: str) -> str:
    return posixpath.basename(path).split(".", 1)[0]


def new_in(
    judged: EnvRecord, base: EnvRecord, edited: Iterable[bytes] = ()
) -> tuple[EnvChange, ...]:
    """The entries of `judged` that the base's record does not have at the same
    (normalised) path with the same (normalised) bytes. A compiled artefact at a path the
    base also has is forgiven when the change edits a committed file of its stem (its
    source). An incomplete record on either side proves nothing: every entry of `judged`
    that is not matched counts, and an incomplete `judged` adds one that says so."""
    known = {(c.key or c.path, c.kind, c.norm or c.sha256) for c in base.changes}
    elf_paths = {c.key or c.path for c in base.changes if c.why == "elf"}
    stems = {_stem(p.decode("utf-8", "surrogateescape")) for p in edited}
    fresh: list[EnvChange] = []
    for c in judged.changes:
        key = c.key or c.path
        if (key, c.kind, c.norm or c.sha256) in known:
            continue
        if c.why == "elf" and key in elf_paths and _stem(key) in stems:
            continue  # built from a source the change edits: the change's code
        fresh.append(c)
    if not judged.complete:
        fresh.append(EnvChange(path="", kind="unrecorded", why="more than was read"))
    return tuple(fresh)
