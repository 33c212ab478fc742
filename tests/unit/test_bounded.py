"""gate/util/bounded.py: a file is read whole up to its limit, never more than limit + 1
bytes of it (the CLI's refusals: tests/integration/test_input_limits.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gate.util.bounded import FileTooLarge, read_bounded, sha256_bounded, size_text


@pytest.mark.parametrize(
    ("size", "limit", "fits"),
    [(0, 0, True), (10, 10, True), (11, 10, False), ((1 << 20) + 3, 1 << 21, True),
     ((3 << 20) + 1, 3 << 20, False)],
    ids=["empty", "exactly-the-limit", "one-byte-over", "several-chunks", "chunks-one-over"],
)  # fmt: skip
def test_a_regular_file_is_read_whole_or_refused(
    tmp_path: Path, size: int, limit: int, fits: bool
) -> None:
    path = tmp_path / "f"
    data = bytes(i % 251 for i in range(size))
    path.write_bytes(data)
    if fits:
        assert read_bounded(path, limit, "a test file") == data
        assert sha256_bounded(path, limit, "a test file") == hashlib.sha256(data).hexdigest()
        return
    for read in (read_bounded, sha256_bounded):
        with pytest.raises(FileTooLarge) as e:
            read(path, limit, "a test file")
        assert (
            str(e.value) == f"{path} is larger than {size_text(limit)}, the limit for a test file"
        )


def test_a_file_without_a_size_is_read_up_to_its_limit() -> None:
    """/proc files say size 0; devices say nothing: they are read in chunks."""
    status = read_bounded(Path("/proc/self/status"), 1 << 20, "a test file")
    assert status.startswith(b"Name:")
    with pytest.raises(FileTooLarge, match="larger than 10 bytes"):
        read_bounded(Path("/proc/self/status"), 10, "a test file")
    with pytest.raises(FileTooLarge, match="/dev/zero is larger than 1 MiB, the limit for x"):
        read_bounded(Path("/dev/zero"), 1 << 20, "x")


def test_an_unreadable_file_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        read_bounded(tmp_path, 10, "a test file")
    with pytest.raises(FileNotFoundError):
        sha256_bounded(tmp_path / "missing", 10, "a test file")


@pytest.mark.parametrize(
    ("n", "text"),
    [(64 << 20, "64 MiB"), (64 << 10, "64 KiB"), (1 << 30, "1 GiB"), (100, "100 bytes"),
     ((1 << 20) + 1, "1048577 bytes")],
    ids=["mib", "kib", "gib", "bytes", "not-round"],
)  # fmt: skip
def test_limits_read_as_people_read_them(n: int, text: str) -> None:
    assert size_text(n) == text
