"""Helpers to build real git repositories in tests (pygit2, no git CLI needed).

    repo = make_repo(tmp_path)
    base = commit(repo, {b"a.txt": b"hi\\n", b"run.sh": (b"#!/bin/sh\\n", EXEC),
                         b"link": Symlink(b"a.txt")})
    head = commit(repo, {b"a.txt": b"hello\\n", b"gone": None}, branch="pr", parent=base)
    before = snapshot(repo_dir(repo))
    ...
    assert snapshot(repo_dir(repo)) == before

`commit` takes changes on top of the parent's tree by default (`None` deletes a path);
pass `replace=True` for a dict that is the whole tree.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

__all__ = [
    "BLOB",
    "EXEC",
    "Content",
    "Gitlink",
    "Symlink",
    "checkout",
    "commit",
    "make_repo",
    "no_dir_file_clash",
    "raw_tree",
    "repo_dir",
    "snapshot",
    "tree_files",
]

BLOB = int(FileMode.BLOB)
EXEC = int(FileMode.BLOB_EXECUTABLE)
SIGNATURE = pygit2.Signature("Proof Gate Test", "test@example.invalid", 1_700_000_000, 0)


@dataclass(frozen=True)
class Symlink:
    target: bytes


@dataclass(frozen=True)
class Gitlink:
    commit: str  # 40-hex commit id of the submodule


Content = bytes | tuple[bytes, int] | Symlink | Gitlink | None


def make_repo(tmp_path: Path, name: str = "repo", *, bare: bool = False) -> pygit2.Repository:
    """A fresh repository at `tmp_path/name` with an unborn `main` branch as HEAD."""
    path = tmp_path / name
    repo = pygit2.init_repository(str(path), bare=bare, initial_head="main")
    return repo


def repo_dir(repo: pygit2.Repository) -> Path:
    """The directory to snapshot: the worktree (holding .git) or the bare repository."""
    return Path(repo.workdir or repo.path)


def _entry(repo: pygit2.Repository, content: Content) -> tuple[pygit2.Oid, FileMode]:
    if isinstance(content, Symlink):
        return repo.create_blob(content.target), FileMode.LINK
    if isinstance(content, Gitlink):
        return pygit2.Oid(hex=content.commit), FileMode.COMMIT
    if isinstance(content, tuple):
        data, mode = content
        return repo.create_blob(data), FileMode(mode)
    assert content is not None
    return repo.create_blob(content), FileMode.BLOB


def commit(
    repo: pygit2.Repository,
    files: Mapping[bytes, Content],
    *,
    branch: str = "main",
    parent: pygit2.Oid | None = None,
    parents: list[pygit2.Oid] | None = None,
    replace: bool = False,
    message: str = "change",
) -> pygit2.Oid:
    """Commit `files` onto `branch` and move the branch there; returns the commit id.

    The parent defaults to the branch tip (none for a new branch); changes apply on top
    of the first parent's tree unless `replace` is set. `None` deletes a path.
    """
    if parents is None:
        if parent is None:
            ref = repo.references.get(f"refs/heads/{branch}")
            parents = [] if ref is None else [pygit2.Oid(hex=str(ref.target))]
        else:
            parents = [parent]
    index = pygit2.Index()
    if parents and not replace:
        index.read_tree(repo[parents[0]].peel(pygit2.Tree))
    for path, content in files.items():
        key = path.decode("utf-8", "surrogateescape")
        if content is None:
            index.remove(key)
            continue
        blob, mode = _entry(repo, content)
        index.add(pygit2.IndexEntry(key, blob, mode))
    tree = index.write_tree(repo)
    oid: pygit2.Oid = repo.create_commit(
        f"refs/heads/{branch}", SIGNATURE, SIGNATURE, message, tree, parents
    )
    return oid


def raw_tree(repo: pygit2.Repository, entries: list[tuple[int, bytes, pygit2.Oid]]) -> pygit2.Oid:
    """Write a tree object byte by byte, bypassing libgit2's name checks (hostile trees)."""
    body = b"".join(b"%o %s\0%s" % (mode, name, oid.raw) for mode, name, oid in entries)
    oid: pygit2.Oid = repo.odb.write(pygit2.enums.ObjectType.TREE, body)
    return oid


def checkout(repo: pygit2.Repository, branch: str = "main") -> None:
    """Point HEAD at `branch` and write its files into the worktree and index."""
    repo.set_head(f"refs/heads/{branch}")
    repo.checkout_head(strategy=pygit2.enums.CheckoutStrategy.FORCE)  # type: ignore[no-untyped-call]


def tree_files(repo: pygit2.Repository, tree: pygit2.Oid | str) -> dict[bytes, tuple[int, bytes]]:
    """Every non-tree entry of a tree: path -> (mode, blob bytes or gitlink hex)."""
    out: dict[bytes, tuple[int, bytes]] = {}
    stack: list[tuple[bytes, pygit2.Tree]] = [(b"", repo[tree].peel(pygit2.Tree))]
    while stack:
        prefix, t = stack.pop()
        for obj in t:
            path = prefix + (obj.raw_name or b"")
            mode = int(obj.filemode)
            if mode == int(FileMode.TREE):
                stack.append((path + b"/", repo[obj.id].peel(pygit2.Tree)))
            elif mode == int(FileMode.COMMIT):
                out[path] = (mode, str(obj.id).encode())
            else:
                out[path] = (mode, repo.odb.read(obj.id)[1])
    return out


def no_dir_file_clash(files: dict[bytes, Content]) -> dict[bytes, Content]:
    """Drop paths that would need a file and a directory of the same name (shortest wins),
    so a generated dict of paths can become one tree."""
    out: dict[bytes, Content] = {}
    for path in sorted(files, key=len):
        parts = path.split(b"/")
        prefixes = {b"/".join(parts[:i]) for i in range(1, len(parts))}
        if prefixes & out.keys() or any(k.startswith(path + b"/") for k in out):
            continue
        out[path] = files[path]
    return out


def snapshot(path: Path) -> dict[bytes, tuple[str, int, str]]:
    """Every file, directory and symlink under `path` (including .git): kind, mode, digest.

    Two snapshots compare equal only if the directory is byte-identical: same entries,
    same permission bits, same file contents, same symlink targets.
    """
    root = os.fsencode(path)
    out: dict[bytes, tuple[str, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("symlink", 0, os.readlink(full).hex())
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), "")
            else:
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("file", stat.S_IMODE(st.st_mode), digest)
    return out
