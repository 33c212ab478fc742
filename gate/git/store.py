"""The private, disposable object store (SPEC §1: never the user's repository database).

A temporary bare repository whose `objects/info/alternates` names the user's object
directory: every object of the user's repository is readable, and every write (merged
blobs, trees, the index used to apply the patch) lands in the temporary directory only.
The user's repository gets no new objects, refs, index, config or worktree changes.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from pathlib import Path

import pygit2

__all__ = ["PrivateStore", "git_env", "objects_dir"]

log = logging.getLogger("gate")

# libgit2 maps pack files in windows of 1 GiB and keeps up to 8 GiB mapped; the pages it
# reads stay resident, so reading one 100 MB blob from a pack costs its size once more for
# the rest of the process (issue 46). Smaller windows, fewer kept: the memory is bounded.
pygit2.settings.mwindow_size = 8 * 2**20
pygit2.settings.mwindow_mapped_limit = 32 * 2**20


def git_env(home: Path, *, git_dir: Path | None = None, **extra: str) -> dict[str, str]:
    """The whole environment of a git subprocess, built from scratch.

    Nothing is inherited but PATH: no `GIT_*` variable of the caller (a `GIT_DIR`,
    `GIT_INDEX_FILE` or `GIT_CONFIG_*` would redirect or reconfigure git), no system or
    global config (`apply.whitespace=fix` would rewrite content), `HOME` and the XDG
    config home at `home`, replace refs off, no terminal prompt, the C locale. `extra`
    adds or overrides variables (an index file, `GIT_CONFIG_COUNT` settings).
    """
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
    env.update(extra)
    return env


def objects_dir(repo: pygit2.Repository) -> Path:
    """The object directory of `repo`, following a linked worktree to its common dir."""
    gitdir = Path(repo.path)
    commondir = gitdir / "commondir"
    if commondir.is_file():
        gitdir = (gitdir / commondir.read_text().strip()).resolve()
    return gitdir / "objects"


class PrivateStore:
    """A temporary bare repository reading the user's objects through alternates.

    Delete it with `dispose()` (idempotent); a finalizer removes it at interpreter exit
    if the owner forgot, so no store outlives the process.
    """

    def __init__(self, source_objects: Path) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="proofgate-store-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)
        try:
            pygit2.init_repository(str(self.path), bare=True)
            alternates = self.path / "objects" / "info" / "alternates"
            alternates.parent.mkdir(parents=True, exist_ok=True)
            alternates.write_bytes(bytes(source_objects.resolve()) + b"\n")
            self.repo: pygit2.Repository | None = pygit2.Repository(str(self.path))
            # Full object ids in the patch's `index` lines (`git diff --full-index`).
            self.repo.config["core.abbrev"] = 40
        except BaseException:
            self.dispose()
            raise

    @property
    def git(self) -> pygit2.Repository:
        if self.repo is None:
            raise RuntimeError("the private object store has been disposed")
        return self.repo

    def dispose(self) -> None:
        """Free the repository handle and delete the directory. Safe to call twice."""
        if self.repo is not None:
            self.repo.free()
            self.repo = None
        if self._finalizer.alive:
            self._finalizer()
            log.debug("private object store %s removed", self.path)
