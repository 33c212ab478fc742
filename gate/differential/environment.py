"""The trusted run's environment (SPEC §3.2): what setup and build changed outside
/workspace, and which of those changes the base's own setup and build did not make.

Setup and build run the change's code (a `setup.py`, an in-tree build backend, a build
step that imports the package), as root, in the container that the test phase then
starts from. Whatever that code writes outside /workspace would run inside the judge:
a patched `_pytest/python.py`, a `.pth` startup hook that patches pytest before any
plugin loads, a module planted ahead of the image's. proofgate asks the Docker daemon
what changed in the container's filesystem against its image, with every process of
the container frozen, before the container becomes the test phase's image, and keeps
the changes a test could execute:

- `modified` / `removed`: a file the image shipped (directories excepted: they change
  whenever something is added below them);
- startup hooks added anywhere: `*.pth`, `sitecustomize.py`, `usercustomize.py`;
- programs added to the PATH directories (they can shadow the test command);
- top-level modules added to a Python library directory that carry the name of a module
  of the standard library.

Each kept change has the SHA-256 of the file's bytes as the container held them. The
base run records the same for the base's tree; a change the trusted run has and the
base run has not, byte for byte, is `environment-changed` (HELD: a person confirms
the new environment, e.g. a dependency bump; the receipt lists path, kind and digest).

Pure: the sandbox (gate/sandbox/envdiff.py) reads the daemon; this module decides.
"""

from __future__ import annotations

import posixpath
import re
import sys
from collections.abc import Iterable, Mapping

from gate.differential.paths import MOUNT, PYCACHE, WORKSPACE
from gate.model import EnvChange, EnvRecord

__all__ = [
    "ADDED",
    "MAX_RECORDED",
    "MODIFIED",
    "REMOVED",
    "EnvChange",
    "EnvRecord",
    "from_daemon",
    "merge",
    "new_in",
]

MODIFIED, ADDED, REMOVED = "modified", "added", "removed"
_KINDS = {0: MODIFIED, 1: ADDED, 2: REMOVED}  # the daemon's `changes` Kind values
MAX_RECORDED = 500  # kept changes per run; past that the record is incomplete
MAX_HASHED_BYTES = 64 * 1024 * 1024  # per file

# Kernel and per-container filesystems and the check's own mounts: never the image's
# files, and nothing of them reaches a test container (fresh tmpfs or proofgate's).
# The daemon's own init (`init=True`) is bind-mounted over its mount point in every
# container: whatever a commit holds there never runs.
_VOLATILE = (
    "/proc",
    "/sys",
    "/dev",
    "/tmp",  # noqa: S108
    "/var/tmp",  # noqa: S108
    "/run",
    WORKSPACE,
    MOUNT,
    PYCACHE,
    "/sbin/docker-init",
    "/usr/sbin/docker-init",
)
_PATH_DIRS = frozenset(
    {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}
)
_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
_LIBDIR = re.compile(
    r"^/(?:usr/(?:local/)?)?lib(?:64)?/python3[.0-9]*/(?:(?:site|dist)-packages/)?"
)
_MODULE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\.py|\.[A-Za-z0-9_.-]*\.so|/__init__\.py)$")
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))


def _volatile(path: str) -> bool:
    return any(path == v or path.startswith(v + "/") for v in _VOLATILE)


def classify(path: str, kind: str) -> str | None:
    """Why a change matters to the test phase, or None when it cannot run there."""
    if _volatile(path):
        return None
    name = posixpath.basename(path)
    if kind in (ADDED, MODIFIED) and (name.endswith(".pth") or name in _HOOKS):
        return "startup-hook"
    if kind in (MODIFIED, REMOVED):
        return "image-file"
    if posixpath.dirname(path) in _PATH_DIRS:
        return "on-path"
    lib = _LIBDIR.match(path)
    if lib is not None:
        module = _MODULE.match(path[lib.end() :])
        if module is not None and module.group(1) in _STDLIB:
            return "shadows-stdlib"
    return None


def from_daemon(changes: Iterable[Mapping[str, object]]) -> list[tuple[str, str, str]]:
    """The daemon's `changes` of a container -> (path, kind, why) of those that matter.

    A modified entry that is the parent of another entry is a directory (Docker reports
    a directory as modified whenever an entry below it is added or removed): dropped.
    """
    rows = [
        (str(c.get("Path") or ""), _KINDS.get(int(str(c.get("Kind", -1))), "")) for c in changes
    ]
    parents = {posixpath.dirname(p) for p, _ in rows}
    out: list[tuple[str, str, str]] = []
    for path, kind in sorted(rows):
        if not kind or not path.startswith("/") or (kind == MODIFIED and path in parents):
            continue
        why = classify(path, kind)
        if why is not None:
            out.append((path, kind, why))
    return out


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
            by_path[c.path] = EnvChange(path=c.path, kind=ADDED, sha256=c.sha256, why=c.why)
        else:
            by_path[c.path] = c
    return EnvRecord(
        changes=tuple(sorted(by_path.values())), complete=lower.complete and upper.complete
    )


def new_in(judged: EnvRecord, base: EnvRecord) -> tuple[EnvChange, ...]:
    """The changes of `judged` that the base's environment does not have, byte for byte.

    An incomplete record on either side proves nothing: every change of `judged` that is
    not matched counts, and an incomplete `judged` adds one entry that says so.
    """
    known = {(c.path, c.kind, c.sha256) for c in base.changes if c.sha256 or c.kind == REMOVED}
    fresh = [c for c in judged.changes if (c.path, c.kind, c.sha256) not in known]
    if not judged.complete:
        fresh.append(EnvChange(path="", kind="unrecorded", why="more changes than recorded"))
    return tuple(fresh)
