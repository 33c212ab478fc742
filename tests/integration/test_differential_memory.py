"""A differential run's tree is streamed, not held (issue 46): its tar is written to an
unlinked temporary file before the runs start and read back a chunk at a time, so a
large blob in the base or trusted tree costs proofgate's process no memory.

Measured in a fresh interpreter (`ru_maxrss` before and after), so the bound is the
process's own and nothing else in the test session moves it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from tests.gitutil import commit, make_repo

BLOB_MIB = 64

_CHILD = """
import hashlib, io, resource, sys, tarfile
from gate.git.interface import clean_room_archive, clean_room_mtime
from gate.git.repo import GitRepository
from gate.model import TreeId
from gate.proof import runs

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

class Reader(io.RawIOBase):
    def __init__(self, chunks):
        self.chunks, self.rest = iter(chunks), b""
    def readable(self):
        return True
    def readinto(self, buffer):
        while not self.rest:
            self.rest = next(self.chunks, None)
            if self.rest is None:
                return 0
        n = min(len(buffer), len(self.rest))
        buffer[:n], self.rest = self.rest[:n], self.rest[n:]
        return n

def members(chunks):
    # name, type, mode, link, and the content's digest: the tree, whatever the mtime
    out = []
    with tarfile.open(fileobj=io.BufferedReader(Reader(chunks), 1 << 20), mode="r|") as tar:
        for m in tar:
            digest = hashlib.sha256()
            data = tar.extractfile(m) if m.isfile() else None
            while data is not None and (piece := data.read(1 << 20)):
                digest.update(piece)
            out.append((m.name, m.type, m.mode, m.linkname, digest.hexdigest()))
    return out

with GitRepository(sys.argv[1]) as source:
    tree = TreeId(sys.argv[2])
    want = members(clean_room_archive(source, tree, clean_room_mtime()))
    before = peak()
    spool = runs._tar(source, tree)
    got = members(spool.chunks())
    again = members(spool.chunks())  # read twice: each reading starts at the beginning
    spool.close()
    print(before, peak(), want == got == again, spool.size)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB is Linux's")
def test_differential_tar_of_a_large_blob_is_streamed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    oid = commit(repo, {b"calc.py": b"x = 1\n", b"assets/blob.bin": os.urandom(BLOB_MIB << 20)})
    tree = str(repo[oid].peel(pygit2.Tree).id)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "repo"), tree],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    before, after, same, size = done.stdout.split()
    assert same == "True", "the spooled archive differs from the tree's stream"
    assert int(size) > BLOB_MIB << 20
    # held whole, the tar alone would add 64 MiB; streamed, a few chunks of 1 MiB
    assert int(after) - int(before) < BLOB_MIB // 2, done.stdout
