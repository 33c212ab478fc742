"""The fast tar stream: `git archive` run in the private object store (SPEC §1).

Reading every blob through libgit2 from Python costs ~20 µs a file; `git archive` does
the same work in C. It is only allowed to because its conversions are switched off, so
its output is still the tree *as committed*:

- `$GIT_DIR/info/attributes` of the private store unsets every attribute that rewrites
  content or drops entries (`text`, `crlf`, `eol`, `ident`, `filter`,
  `working-tree-encoding`, `export-ignore`, `export-subst`). That file outranks every
  `.gitattributes` in the tree, whatever its patterns or macros say.
- git runs with a scrubbed environment (no inherited `GIT_*` variable, no global or
  system config, `HOME` inside the store, replace refs off) and `-c` settings that fix
  the rest: `tar.umask` (022 by default: files 0644/0755, directories 0755; the clean
  room asks for 0: everything writable for a non-root user), `core.autocrlf=false`.
- Entries get a fixed mtime: git takes it from the commit it archives, so a commit with
  that date (author and committer fixed) is written to the private store for the tree.
  The pax global header git then writes (a `comment=<commit id>` record) is removed, so
  the archive holds the tree's entries and nothing else.
- Owner and group are always 0 (`root`) in git's headers; callers that need another
  owner use the pure-Python stream (`gate.git.tarstream.stream_tar`).

Names are *not* checked here: the caller checks every entry first
(`gate.git.tarstream.tree_entries`). The stream is verified before its last chunk is
handed out: git must exit 0 and the archive must end with tar's end-of-archive blocks,
so a consumer never receives a silently truncated tar. Stopping early (closing the
generator, or an exception in the consumer) kills and reaps the git process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pygit2

from gate.errors import RepoError
from gate.git.store import git_env

__all__ = ["ATTRIBUTES", "MAX_MTIME", "git_available", "git_archive"]

# Unset every attribute `git archive` would act on; `crlf` is the old name of `text`.
ATTRIBUTES = (
    b"* -text -crlf -eol -ident -filter -working-tree-encoding -export-ignore -export-subst\n"
)
# git writes larger times into a pax global header instead of each entry's mtime field
MAX_MTIME = 0o77777777777

_CHUNK = 1 << 20
_BLOCK = 512
_END = b"\0" * (2 * _BLOCK)
_PIPE_SIZE = 1 << 20  # fewer wake-ups between git and the reader (Linux only)


def git_available() -> str | None:
    """The git executable on PATH, or None."""
    return shutil.which("git")


def _prepare(repo: pygit2.Repository, store: Path, tree: pygit2.Oid, mtime: int) -> str:
    """Neutralize attributes in `store` and write the commit that carries `mtime`."""
    attributes = store / "info" / "attributes"
    try:
        current = attributes.read_bytes()
    except FileNotFoundError:
        current = None
    if current != ATTRIBUTES:
        attributes.parent.mkdir(parents=True, exist_ok=True)
        attributes.write_bytes(ATTRIBUTES)
    sig = pygit2.Signature("proofgate", "proofgate@invalid", mtime, 0)
    return str(repo.create_commit(None, sig, sig, "proofgate archive\n", tree, []))


def git_archive(
    repo: pygit2.Repository,
    store: Path,
    tree: pygit2.Oid,
    *,
    mtime: int,
    git: str,
    umask: int = 0o022,
) -> Iterator[bytes]:
    """Yield `tree` as an uncompressed tar (entries owned by 0:0, times `mtime`).

    `repo` is the private store opened with pygit2 and `store` its directory; `git`
    the executable. `0 <= mtime <= MAX_MTIME`.

    Raises:
        RepoError: git failed, or its archive was cut short.
    """
    commit = _prepare(repo, store, tree, mtime)
    argv = [
        git,
        "-c",
        f"tar.umask=0{umask:o}",
        "-c",
        "core.autocrlf=false",
        "-c",
        "core.eol=lf",
        "-c",
        "core.useReplaceRefs=false",
        "-c",
        "core.attributesFile=" + os.devnull,
        "archive",
        "--format=tar",
        commit,
    ]
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(  # noqa: S603 (fixed argv, no shell)
            argv,
            env=git_env(store, git_dir=store),
            cwd=store,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        out = proc.stdout
        if out is None:  # pragma: no cover (stdout=PIPE always gives a pipe)
            raise RepoError("git archive gave no output pipe")
        try:
            with contextlib.suppress(OSError):
                fcntl.fcntl(out.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
            head = out.read(_CHUNK)
            if not _has_global_header(head, commit):
                _raise_failure(proc, errors, tree)
                raise RepoError(
                    f"git archive of tree {tree} began with an unexpected header; "
                    "refusing its output"
                )
            pending = head[2 * _BLOCK :]
            while True:
                chunk = out.read(_CHUNK)
                if not chunk:
                    break
                yield pending
                pending = chunk
            _raise_failure(proc, errors, tree)
            if not pending.endswith(_END):
                raise RepoError(f"git archive of tree {tree} ended without the end-of-archive")
            # the stripped global header was two blocks: keep the whole-record length
            yield pending + _END
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            out.close()


def _raise_failure(proc: subprocess.Popen[bytes], errors: IO[bytes], tree: pygit2.Oid) -> None:
    """Wait for git; raise RepoError with its message unless it exited 0."""
    rc = proc.wait()
    if rc != 0:
        errors.seek(0)
        detail = errors.read().decode("utf-8", "backslashreplace").strip()
        raise RepoError(f"git archive of tree {tree} failed (exit {rc}): {detail}")


def _has_global_header(head: bytes, commit: str) -> bool:
    """Whether `head` starts with git's pax global header (`comment=<commit>`): one
    header block and one data block, dropped by the caller."""
    record = b"52 comment=" + commit.encode("ascii") + b"\n"
    return (
        len(head) >= 2 * _BLOCK
        and head[156:157] == b"g"
        and head[_BLOCK : _BLOCK + len(record)] == record
        and not head[_BLOCK + len(record) : 2 * _BLOCK].strip(b"\0")
    )
