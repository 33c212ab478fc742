"""Unit checks of the tar writer and the patch splitter (no repository needed)."""

from __future__ import annotations

import io
import tarfile

import pytest

from gate.git.interface import UnsafeTreeError
from gate.git.patch import PatchApplyError, split_sections
from gate.git.tarstream import _member, _pax_record, check_component

IDS = b"%07o\0%07o\0" % (0, 0)


@pytest.mark.parametrize(
    "name",
    [
        b"..",
        b".",
        b"",
        b".git",
        b".GiT",
        b".git.",
        b".git  ",
        b"GIT~1",
        b"a/b",
        b"a\0b",
        ".gi\u200ct".encode(),
        "\ufeff.git".encode(),
    ],
    ids=[
        "dotdot",
        "dot",
        "empty",
        "dotgit",
        "dotgit-case",
        "dotgit-dot",
        "dotgit-space",
        "ntfs-short",
        "slash",
        "nul",
        "hfs-zwnj",
        "hfs-bom",
    ],
)
def test_escaping_names_are_refused(name: bytes) -> None:
    with pytest.raises(UnsafeTreeError, match="unsafe tree entry"):
        check_component(name, b"dir/")


@pytest.mark.parametrize(
    "name",
    [b".gitignore", b".github", b"git", b"...", b".git-blame", b"-rf", b"\xff", b"a b"],
)
def test_ordinary_names_pass(name: bytes) -> None:
    check_component(name, b"")


def test_pax_record_length_counts_itself() -> None:
    for n in range(0, 300):
        rec = _pax_record(b"path", b"x" * n)
        length, _, _ = rec.partition(b" ")
        assert int(length) == len(rec)


@pytest.mark.parametrize(
    ("path", "link"),
    [
        (b"p" * 99, b""),
        (b"p" * 100, b""),
        (b"p" * 101, b""),
        (b"d/" * 200 + b"f", b""),
        (b"\xff\xfe-not-utf8", b""),
        ("ünï".encode(), b""),
        (b"l", b"t" * 300),
        (b"l", b"\xff-target"),
    ],
    ids=["99", "100", "101", "deep", "non-utf8", "utf8", "long-link", "non-utf8-link"],
)
def test_headers_round_trip_through_tarfile(path: bytes, link: bytes) -> None:
    if link:
        blob = _member(path, 0o777, 0, b"2", link, 1_000_000_000, IDS)
    else:
        blob = _member(path, 0o644, 3, b"0", b"", 1_000_000_000, IDS) + b"abc".ljust(512, b"\0")
    data = blob + b"\0" * 1024
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:", errors="surrogateescape") as tf:
        (m,) = tf.getmembers()
        assert m.name.encode("utf-8", "surrogateescape") == path
        if link:
            assert m.issym()
            assert m.linkname.encode("utf-8", "surrogateescape") == link
        else:
            assert tf.extractfile(m).read() == b"abc"  # type: ignore[union-attr]


def test_split_sections_keeps_every_byte() -> None:
    patch = (
        b"diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n"
        b"-diff --git a/y b/y\n+z\n"
        b'diff --git "a/new\\nline" "b/new\\nline"\nnew file mode 100644\n'
    )
    sections = split_sections(patch)
    assert len(sections) == 2
    assert b"".join(sections) == patch
    assert split_sections(b"") == []
    with pytest.raises(PatchApplyError):
        split_sections(b"garbage\n")
