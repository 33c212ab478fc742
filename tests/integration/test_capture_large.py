"""A large binary side is told binary from its first bytes, never read whole by libgit2
(issue 46): the captured patch is the same byte for byte as when libgit2 reads every
side, and it re-applies to the head's tree."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
import pytest

from gate.git import patch as patch_module
from gate.git.repo import GitRepository
from gate.model import Evidence
from tests.gitutil import EXEC, Symlink, commit, make_repo, repo_dir

BINARY = bytes(range(256)) * 40
ODD = b"-rf \n\xff\xfe name.bin"


def _capture(path: Path) -> Evidence:
    with GitRepository(path) as git:
        return git.capture("main", "pr")


def _repo(tmp_path: Path, *, deletes: bool) -> tuple[Path, pygit2.Oid]:
    repo = make_repo(tmp_path)
    base = commit(
        repo,
        {
            b"bin/a": BINARY,
            b"bin/b": BINARY + b"becomes text",
            b"text.txt": b"one\ntwo\n",
            b"to-binary.txt": b"text for now\n",
            b"run.bin": BINARY + b"run",
            b"link": Symlink(b"text.txt"),
            b"gone.bin": BINARY + b"gone",
        },
    )
    change: dict[bytes, bytes | tuple[bytes, int] | Symlink | None] = {
        b"bin/a": BINARY + os.urandom(64),
        b"bin/b": b"text now\n" * 100,
        b"bin/c": b"\0" + os.urandom(20_000),
        b"late-nul.bin": b"x" * 9000 + b"\0",  # a NUL past the first 8000 bytes: text
        b"text.txt": b"one\nthree\n",
        b"to-binary.txt": BINARY,
        b"run.bin": (BINARY + b"run", EXEC),
        b"link": Symlink(b"bin/a"),
        ODD: BINARY + b"odd",
        b"empty": b"",
    }
    if deletes:
        change[b"gone.bin"] = None
    head = commit(repo, change, branch="pr", parent=base)
    return repo_dir(repo), head


@pytest.mark.parametrize("deletes", [False, True], ids=["adds-only", "adds-and-deletes"])
def test_large_binary_told_from_its_first_bytes_gives_the_same_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deletes: bool
) -> None:
    path, head = _repo(tmp_path, deletes=deletes)
    want = _capture(path)
    taken: list[bool] = []
    told = patch_module._large_binary

    def spy(repo: pygit2.Repository, delta: pygit2.DiffDelta) -> bool:
        taken.append(told(repo, delta))
        return taken[-1]

    monkeypatch.setattr(patch_module, "_LARGE", 0)  # every side is "large"
    monkeypatch.setattr(patch_module, "_large_binary", spy)
    got = _capture(path)
    assert got.reasons == ()
    assert got.patch.data == want.patch.data
    assert got.inventory == want.inventory
    head_tree = str(pygit2.Repository(str(path))[head].peel(pygit2.Tree).id)
    assert got.proven_tree == want.proven_tree == head_tree
    if deletes:
        assert taken == []  # renames could pair files: libgit2 reads every side
    else:
        assert taken.count(True) == 6  # bin/a, bin/b, bin/c, to-binary, run.bin, ODD
