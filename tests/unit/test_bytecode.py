"""The image's bytecode linked into the prefix (gate/sandbox/bytecode.py): what a
listing may link, and the archive that links it."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from gate.sandbox import bytecode
from gate.witness import host as witness

STDLIB = "/usr/lib/python3.11/__pycache__/json.cpython-311.pyc"


def test_a_listing_links_only_bytecode_outside_the_tree_and_proofgate() -> None:
    raw = b"\0".join(
        p.encode() if isinstance(p, str) else p
        for p in (
            STDLIB,
            "/usr/local/lib/python3.11/dist-packages/pkg/__pycache__/m.cpython-311.pyc",
            STDLIB,  # once
            "/workspace/tests/__pycache__/test_a.cpython-311.pyc",  # the tree's
            "/opt/proofgate/witness/__pycache__/proofgate_witness.cpython-311.pyc",
            "/tmp/__pycache__/x.cpython-311.pyc",
            "/proc/self/root/usr/__pycache__/x.cpython-311.pyc",
            "usr/lib/__pycache__/relative.cpython-311.pyc",
            "/usr/lib/python3.11/../../workspace/__pycache__/up.cpython-311.pyc",
            "/usr/lib/python3.11/json.py",  # not bytecode
            "/usr/lib/python3.11/json.cpython-311.pyc",  # not in __pycache__
            "/__pycache__/root.cpython-311.pyc",
            "/usr/lib/__pycache__/new\nline.cpython-311.pyc",
            b"/usr/lib/__pycache__/\xff.cpython-311.pyc",
            "//workspace/tests/__pycache__/t.cpython-311.pyc",  # normpath keeps the two
            "/usr//lib/__pycache__/double.cpython-311.pyc",
            "/usr/" + "d/" * 40 + "__pycache__/deep.cpython-311.pyc",
            "/usr/" + "x" * 256 + "/__pycache__/long.cpython-311.pyc",
            "",
        )
    )
    assert bytecode.links(raw) == (
        STDLIB,
        "/usr/local/lib/python3.11/dist-packages/pkg/__pycache__/m.cpython-311.pyc",
    )


def test_each_file_is_linked_where_the_prefix_looks_for_it() -> None:
    json_pyc = "/usr/lib/python3.11/json/__pycache__/decoder.cpython-311.pyc"
    venv_pyc = "/opt/venv/lib/__pycache__/a.cpython-311.pyc"
    members = list(
        bytecode.farm_entries([STDLIB, json_pyc, venv_pyc], prefix="pycache", writable=True)
    )
    dirs = {m.name: m.mode for m in members if m.isdir()}
    links = {m.name: m.linkname for m in members if m.issym()}
    assert links == {
        "pycache/usr/lib/python3.11/json.cpython-311.pyc": STDLIB,
        "pycache/usr/lib/python3.11/json/decoder.cpython-311.pyc": json_pyc,
        "pycache/opt/venv/lib/a.cpython-311.pyc": venv_pyc,
    }
    # every parent once, before the links; never the parts of the prefix that are not
    # the check's (the witness's archive sets those)
    assert dirs == {
        "pycache/usr": 0o777,
        "pycache/usr/lib": 0o777,
        "pycache/usr/lib/python3.11": 0o777,
        "pycache/usr/lib/python3.11/json": 0o777,
        "pycache/opt/venv": 0o777,
        "pycache/opt/venv/lib": 0o777,
    }
    names = [m.name for m in members]
    assert max(names.index(d) for d in dirs) < min(names.index(n) for n in links)


def test_where_nothing_writes_bytecode_a_leaf_directory_is_one_link() -> None:
    """No setup or build: a directory without listed bytecode below it is one link to its
    __pycache__, where every lookup in its mirror goes; the others a link per file."""
    json_pyc = "/usr/lib/python3.11/json/__pycache__/decoder.cpython-311.pyc"
    members = list(bytecode.farm_entries([STDLIB, json_pyc], prefix="pycache", writable=False))
    links = {m.name: m.linkname for m in members if m.issym()}
    assert links == {
        "pycache/usr/lib/python3.11/json.cpython-311.pyc": STDLIB,
        "pycache/usr/lib/python3.11/json": "/usr/lib/python3.11/json/__pycache__",
    }
    assert {m.mode for m in members if m.isdir()} == {0o555}


def test_the_witness_volume_carries_the_links_read_only(tmp_path: Path) -> None:
    data = witness.plugin_tar(bytecode=(STDLIB,))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    link = members["links/usr/lib/python3.11"]  # a leaf directory: linked whole
    assert link.issym()
    assert link.linkname == "/usr/lib/python3.11/__pycache__"
    # like the witness: no user of a check owns them, so none can chmod them; and no
    # directory of the test phase's prefix is writable (the volume is read-only besides)
    assert link.uid == members["links/usr"].uid == witness.PROTECTED_UID
    dirs = [m for m in members.values() if m.isdir()]
    assert {m.mode for m in dirs} == {0o555}
    assert {m.uid for m in members.values()} == {witness.PROTECTED_UID}
    for name in ("boot", "witness", "witness/proofgate_witness", "links/workspace"):
        assert members[name].isdir()
    assert not any(n.startswith(("links/workspace/", "links/opt/proofgate/")) for n in members)
    assert members["boot/sitecustomize.py"].mode == 0o444
    assert members["witness/proofgate_witness/__init__.py"].mode == 0o444


def test_setup_and_build_compile_into_a_prefix_of_their_own(tmp_path: Path) -> None:
    data = witness.prefix_tar(bytecode=(STDLIB,))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert witness.PYCACHE == "/opt/proofgate-pycache"  # outside proofgate's volume
    # extracted at the prefix volume's mount point; directories they may add to
    assert members["./usr/lib/python3.11/json.cpython-311.pyc"].linkname == STDLIB
    assert {m.mode for m in members.values() if m.isdir()} == {0o777}


def test_a_cached_listing_is_read_back_through_the_same_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    image = "sha256:" + "ab" * 32
    cache = tmp_path / "proofgate" / "bytecode" / image.replace(":", "-")
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"\0".join([STDLIB.encode(), b"/workspace/__pycache__/t.cpython-311.pyc"]))
    monkeypatch.setattr(bytecode, "_known", {})

    def never(*_: object) -> None:
        raise AssertionError("listed although the listing is cached")

    monkeypatch.setattr(bytecode, "_list", never)
    assert bytecode.listing(None, "container", image) == (STDLIB,)  # type: ignore[arg-type]


def test_no_member_is_extracted_through_a_link_or_into_proofgates_part() -> None:
    """A listing where a link would take a directory's name (its members would then be
    extracted through it), or reach the tree's or the witness's part: neither happens."""
    paths = [
        "/u/x.pyc/__pycache__/a.cpython-311.pyc",  # makes the directory pycache/u/x.pyc
        "/u/__pycache__/x.pyc",  # a link of that name
        "/u/x.pyc/tests/__pycache__/b.cpython-311.pyc",
        "/opt/proofgate/__pycache__/w.cpython-311.pyc",
        "/opt/proofgate/witness/__pycache__/w.cpython-311.pyc",
        "/workspace/__pycache__/t.cpython-311.pyc",
    ]
    members = list(bytecode.farm_entries(paths, prefix="pycache", writable=False))
    names = [m.name for m in members]
    dirs = {m.name for m in members if m.isdir()}
    links = {m.name for m in members if m.issym()}
    assert dirs == {"pycache/u", "pycache/u/x.pyc"}
    assert links == {"pycache/u/x.pyc/a.cpython-311.pyc", "pycache/u/x.pyc/tests"}
    assert not [n for n in names if n.startswith(("pycache/workspace", "pycache/opt/proofgate"))]
    assert max(names.index(d) for d in dirs) < min(names.index(n) for n in links)
    # the same with a writable prefix: a link per file, none through a link either
    writable = list(bytecode.farm_entries(paths, prefix="pycache", writable=True))
    links = {m.name for m in writable if m.issym()}
    assert links == {"pycache/u/x.pyc/a.cpython-311.pyc", "pycache/u/x.pyc/tests/b.cpython-311.pyc"}
