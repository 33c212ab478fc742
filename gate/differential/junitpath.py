"""The configured JUnit path, read as the container will read it (SPEC §3 (7), §3.2).

A report is evidence only if the check wrote it. So the configured path must stay inside
/workspace once normalized (`./`, `a/../` resolved), and must not reach into anything
the proven tree commits: no committed file at the path, no committed symlink on the way
(a directory symlink `reports -> docs` would point the report at a committed file).
Pure: the caller passes a lookup of the proven tree's entries.
"""

from __future__ import annotations

from collections.abc import Callable

_SYMLINK = 0o120000
_TREE = 0o040000


def normalize(raw: str) -> str:
    """`raw` relative to /workspace with `.`, empty and `..` components resolved.

    Raises:
        ValueError: absolute, leaving /workspace, or naming no file (the message says so).
    """
    if raw.startswith("/"):
        raise ValueError("an absolute path")
    parts: list[str] = []
    for part in raw.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise ValueError("a path that leaves /workspace")
            parts.pop()
            continue
        parts.append(part)
    if not parts or "\0" in raw:
        raise ValueError("a path that names no file")
    return "/".join(parts)


def committed_problem(raw: str, mode_of: Callable[[bytes], int | None]) -> str | None:
    """Why the proven tree makes the report at `raw` untrustworthy, or None.

    `mode_of(path)` is the git mode of the proven tree's entry at `path`, None if absent.
    Every prefix the kernel walks is checked, before and after normalizing `..`.
    """
    prefixes: list[str] = []
    walked: list[str] = []
    for part in raw.split("/"):
        if part in ("", "."):
            continue
        walked.append(part)
        if part != "..":
            prefixes.append("/".join(walked))
    path = normalize(raw)
    parts = path.split("/")
    prefixes += ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for prefix in dict.fromkeys(prefixes):
        mode = mode_of(prefix.encode("utf-8", "surrogateescape"))
        if mode == _SYMLINK:
            return f"{prefix} is a symlink committed in the tree"
    mode = mode_of(path.encode("utf-8", "surrogateescape"))
    if mode is not None and mode != _TREE:
        return f"{path} is committed in the tree"
    return None
