"""Binary files in the patch are streamed, not held whole (issue 46): the binary sections
proofgate writes itself re-apply exactly, and the patch's lines are read a chunk at a
time. Real git repositories."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pygit2
from hypothesis import given
from hypothesis import strategies as st

from gate.git.repo import GitRepository
from gate.policy.patch import _lines, parse_patch
from tests.gitutil import commit, make_repo, repo_dir

MiB = 2**20


def test_binary_files_added_changed_and_deleted_re_apply_exactly(tmp_path: Path) -> None:
    rng = random.Random(46)  # noqa: S311 (test data)
    repo = make_repo(tmp_path)
    big = b"\0" + rng.randbytes(3 * MiB)  # over a chunk: read from git in pieces
    base = commit(
        repo,
        {b"big.bin": big, b"gone.bin": b"\0gone", b"same.bin": b"\0same", b"a.txt": b"a\n"},
        message="base",
    )
    files = {
        b"big.bin": big[:MiB] + b"\0changed" + big[MiB:],
        b"new.bin": b"\0" * 27 + b"x",  # one full line of 52 deflated bytes or less
        b"gone.bin": None,
        b"same.bin": (b"\0same", 0o100755),  # a mode change only: no binary section
        b"a.txt": b"b\n",
    }
    head = commit(repo, files, branch="pr", parent=base, message="head")  # type: ignore[arg-type]
    with GitRepository(repo_dir(repo)) as evidence:
        ev = evidence.capture("main", "pr")
    assert ev.reasons == ()
    assert ev.proven_tree == str(repo[head].peel(pygit2.Commit).tree_id)
    data = ev.patch.data
    assert data.count(b"GIT binary patch\n") == 3
    assert b"Binary files " not in data
    diffs = {d.path: d for d in parse_patch(data)}
    assert [p for p, d in sorted(diffs.items()) if d.binary] == [
        b"big.bin",
        b"gone.bin",
        b"new.bin",
    ]
    assert diffs[b"a.txt"].added[0].text == b"b"
    # git itself reads the reverse side too: the patch un-applies onto head
    checkout = tmp_path / "co"
    subprocess.run(
        ["git", "clone", "-q", "-b", "pr", str(repo_dir(repo)), str(checkout)], check=True
    )
    subprocess.run(
        ["git", "apply", "--check", "-R", "--binary", "-"], cwd=checkout, input=data, check=True
    )


@given(st.binary(max_size=300).map(lambda b: b.replace(b"\r", b"\n")), st.integers(1, 40))
def test_lines_a_chunk_at_a_time_are_the_lines(data: bytes, chunk: int) -> None:
    assert list(_lines(data, chunk)) == data.split(b"\n")
