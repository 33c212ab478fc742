"""The private fetch: a pull request's base and head objects into a new bare repository.

Never into the workspace and never checked out: the objects are read by `GitRepository`
as evidence, and untrusted code only ever runs in the clean room.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from gate.errors import UsageError

__all__ = ["fetch_private"]


def _git(args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> str:
    try:
        done = subprocess.run(  # noqa: S603 (fixed argv, no shell)
            ["git", *args],  # noqa: S607 (git from PATH, as everywhere on a runner)
            cwd=cwd,
            env=dict(env),
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
    except FileNotFoundError as e:
        raise UsageError("git is not installed; the action image must provide it") from e
    if done.returncode != 0:
        raise UsageError(f"git {args[0]} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


def fetch_private(
    origin: str,
    dest: Path,
    *,
    token: str,
    head_ref: str,
    head_sha: str,
    base_ref: str | None,
    base_sha: str | None,
) -> tuple[str, str]:
    """Fetch `head_ref` (and `base_ref`) from `origin` into a new bare repository at `dest`.

    `head_ref` ending in `/*` fetches every matching ref. The base is `base_sha` when given,
    else `base_ref`'s tip now. Returns (base commit, head commit), both present in `dest`.

    Raises:
        UsageError: the fetch failed or the head moved away from the event's SHA.
    """
    env: dict[str, str] = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(dest),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
    }
    if token and origin.startswith(("https://", "http://")):
        # the token goes in an env-carried header, never on a command line or in a URL
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env.update(
            GIT_CONFIG_COUNT="2",
            GIT_CONFIG_KEY_1="http.extraheader",
            GIT_CONFIG_VALUE_1=f"AUTHORIZATION: basic {basic}",
        )
    _git(["init", "--bare", "-q", str(dest)], cwd=dest.parent, env=env)
    refspecs = []
    if head_ref.endswith("/*"):
        refspecs.append(f"+{head_ref}:refs/proofgate/heads/*")
    else:
        refspecs.append(f"+{head_ref}:refs/proofgate/head")
    if base_ref is not None:
        refspecs.append(f"+{base_ref}:refs/proofgate/base")
    _git(["fetch", "--no-tags", "--quiet", origin, *refspecs], cwd=dest, env=env)
    for sha, what in ((head_sha, "head"), (base_sha, "base")):
        if sha is None:
            continue
        check = subprocess.run(  # noqa: S603
            ["git", "cat-file", "-e", f"{sha}^{{commit}}"],  # noqa: S607
            cwd=dest,
            env=env,
            capture_output=True,
            check=False,
        )
        if check.returncode != 0:
            raise UsageError(
                f"the {what} commit {sha} is not in {head_ref}: it moved since the "
                "event; the newer push triggers its own run"
            )
    base = base_sha or _git(["rev-parse", "refs/proofgate/base^{commit}"], cwd=dest, env=env)
    return base, head_sha
