"""GitRepository.archive: exact tar streams, and hostile trees refused before any byte."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pygit2
import pytest

from gate.git.interface import UnsafeTreeError
from gate.git.repo import GitRepository
from gate.git.tarstream import DEFAULT_MTIME
from tests.gitutil import (
    EXEC,
    Content,
    Gitlink,
    Symlink,
    commit,
    make_repo,
    raw_tree,
    repo_dir,
    snapshot,
    tree_files,
)

LONG = b"d" * 120 + b"/" + "ünïcödé-".encode() * 20 + b".txt"


def _extract(chunks: list[bytes], dest: Path) -> None:
    with tarfile.open(
        fileobj=io.BytesIO(b"".join(chunks)), mode="r:", errors="surrogateescape"
    ) as tf:
        tf.extractall(dest, filter="fully_trusted")  # noqa: S202 (our own archive, tmp dir)


def _disk_files(root: Path) -> dict[bytes, tuple[int, bytes]]:
    out: dict[bytes, tuple[int, bytes]] = {}
    base = os.fsencode(root)
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, base)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = (0o120000, os.readlink(full))
            else:
                mode = 0o100755 if st.st_mode & 0o100 else 0o100644
                out[rel] = (mode, Path(os.fsdecode(full)).read_bytes())
    return out


def test_archive_extracts_to_exact_blobs_modes_and_symlinks(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    big = os.urandom(3 * 1024 * 1024 + 7)  # crosses the 1 MiB chunking
    files: dict[bytes, Content] = {
        b"README.md": b"hello\n",
        b"src/pkg/mod.py": b"x = 1\n",
        b"run.sh": (b"#!/bin/sh\n", EXEC),
        b"link": Symlink(b"README.md"),
        b"abs": Symlink(b"/etc/passwd"),
        b"up": Symlink(b"../outside"),
        b"long-link": Symlink(b"t" * 150),
        b"-rf \n\xff\xfe name": b"odd\n",
        b"sp ace/ta\tb": b"tab\n",
        LONG: b"long\n",
        b"big.bin": big,
        b"empty": b"",
        b"sub": Gitlink("33" * 20),
    }
    tip = commit(repo, files)
    tree = repo[tip].peel(pygit2.Tree).id
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "main")
        assert ev.proven_tree == str(tree)
        chunks = list(git.archive(ev.proven_tree))
    assert len(chunks) >= 3
    assert sum(len(c) for c in chunks) % 10240 == 0
    out = tmp_path / "out"
    out.mkdir()
    _extract(chunks, out)
    want = {p: v for p, v in tree_files(repo, tree).items() if v[0] != 0o160000}
    assert _disk_files(out) == want
    assert (out / "sub").is_dir()
    assert list((out / "sub").iterdir()) == []
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r:") as tf:
        members = tf.getmembers()
    assert all(m.mtime == DEFAULT_MTIME and m.uid == 0 and m.gid == 0 for m in members)
    assert all(not m.name.startswith("/") for m in members)
    modes = {m.name: m.mode for m in members}
    assert modes["run.sh"] == 0o755
    assert modes["README.md"] == 0o644
    assert modes["src"] == 0o755


def test_archive_is_deterministic_and_takes_owner(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    tip = commit(repo, {b"a": b"1", b"b/c": b"2"})
    tree = str(repo[tip].peel(pygit2.Tree).id)
    with GitRepository(repo_dir(repo)) as git:
        git.capture("main", "main")
        one = b"".join(git.archive(tree))  # type: ignore[arg-type]
        two = b"".join(git.archive(tree))  # type: ignore[arg-type]
        owned = b"".join(git.archive(tree, uid=1000, gid=1000))  # type: ignore[arg-type]
    assert one == two
    with tarfile.open(fileobj=io.BytesIO(owned), mode="r:") as tf:
        assert {(m.uid, m.gid) for m in tf.getmembers()} == {(1000, 1000)}


HOSTILE = [
    b"..",
    b".",
    b"",
    b".git",
    b".GIT",
    b".Git.",
    b".git ",
    b".git. .",
    b"git~1",
    b"GIT~1",
    ".g\u200cit".encode(),
    b"a/b",
    b"/etc",
    b"nul\0byte",
]


@pytest.mark.parametrize("name", HOSTILE, ids=[repr(n)[2:-1] or "empty" for n in HOSTILE])
def test_hostile_tree_entry_is_refused_before_any_byte(tmp_path: Path, name: bytes) -> None:
    repo = make_repo(tmp_path)
    blob = repo.create_blob(b"pwned\n")
    inner = raw_tree(repo, [(0o100644, name, blob)])
    # hide the hostile entry one level down, next to an honest file
    top = raw_tree(repo, [(0o100644, b"a-honest", blob), (0o40000, b"dir", inner)])
    before = snapshot(repo_dir(repo))
    with GitRepository(repo_dir(repo)) as git, pytest.raises(UnsafeTreeError, match="unsafe"):
        git.archive(str(top))  # type: ignore[arg-type]
    assert snapshot(repo_dir(repo)) == before


def test_symlink_and_directory_with_one_name_is_refused(tmp_path: Path) -> None:
    """A symlink `a` -> /tmp and a tree `a` would write `a/x` through the link."""
    repo = make_repo(tmp_path)
    link = repo.create_blob(b"/tmp")
    blob = repo.create_blob(b"pwned\n")
    inner = raw_tree(repo, [(0o100644, b"x", blob)])
    top = raw_tree(repo, [(0o120000, b"a", link), (0o40000, b"a", inner)])
    with GitRepository(repo_dir(repo)) as git, pytest.raises(UnsafeTreeError, match="twice"):
        git.archive(str(top))  # type: ignore[arg-type]


def test_hostile_tree_in_head_is_unsafe_tree_evidence(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    base = commit(repo, {b"ok": b"1"})
    blob = repo.create_blob(b"[core]\n\thooksPath = /tmp\n")
    gitdir = raw_tree(repo, [(0o100644, b"config", blob)])
    top = raw_tree(repo, [(0o40000, b".GIT", gitdir), (0o100644, b"ok", repo.create_blob(b"1"))])
    sig = pygit2.Signature("t", "t@example.invalid", 0, 0)
    repo.create_commit("refs/heads/pr", sig, sig, "hostile", top, [base])
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "pr")
    assert ev.proven_tree is None
    assert ev.reasons[0].code.value == "unsafe-tree"
    assert ".GIT" in ev.reasons[0].message
