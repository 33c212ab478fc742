"""GitRepository.archive: exact tar streams, and hostile trees refused before any byte.

Two writers produce the stream: `git archive` in the private store (the fast path) and
the pure-Python writer (another owner than root). Both must extract to the tree as
committed, whatever its `.gitattributes` ask for (SPEC §1).
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import tempfile
from pathlib import Path

import docker
import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.errors import RepoError
from gate.git.interface import UnsafeTreeError
from gate.git.repo import GitRepository
from gate.git.tarstream import DEFAULT_MTIME, stream_tar, tree_entries
from tests.conftest import own_labels
from tests.gitutil import (
    EXEC,
    Content,
    Gitlink,
    Symlink,
    commit,
    make_repo,
    no_dir_file_clash,
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


# -- the fast path (`git archive` in the private store) --------------------------------

# Every conversion `.gitattributes` can ask for; none may reach the archive (SPEC §1).
ATTRIBUTE_LINES = [
    b"* text eol=crlf",
    b"* text=auto",
    b"* ident",
    b"* export-ignore",
    b"* export-subst",
    b"* filter=lfs diff=lfs merge=lfs -text",
    b"* working-tree-encoding=UTF-16",
    b"*.txt crlf",
    b"[attr]conv text eol=crlf ident\n* conv",
]
ODD_NAMES = [
    b"a",
    b"b.txt",
    b"-rf",
    b"sp ace",
    b"new\nline",
    b"\xff\xfe",
    b"caf\xc3\xa9",
    "ünï".encode(),
    b'quo"te',
    b"back\\slash",
    b"*glob?[x]",
    b":(top)magic",
    b"n" * 101,
    "é".encode() * 60,
]
ATTR_TEXT = [b"$Id$\n", b"$Format:%H$\n", b"one\ntwo\n", b"crlf\r\n", "h\u00e9llo\n".encode()]


def _attributes(lines: list[bytes]) -> bytes:
    return b"\n".join(lines) + b"\n"


@st.composite
def _archive_contents(draw: st.DrawFn) -> Content:
    kind = draw(st.sampled_from(["text", "text", "exec", "binary", "empty", "link", "gitlink"]))
    if kind == "exec":
        return (draw(st.sampled_from(ATTR_TEXT)), EXEC)
    if kind == "binary":
        return draw(st.binary(max_size=2000).map(lambda b: b"\0" + b))
    if kind == "empty":
        return b""
    if kind == "link":
        target = draw(
            st.lists(st.sampled_from(ODD_NAMES), min_size=1, max_size=3).map(b"/".join)
            | st.sampled_from([b"../up", b"/abs", b"t" * 150])
        )
        return Symlink(target)
    if kind == "gitlink":
        return Gitlink(draw(st.sampled_from(["11", "22"])) * 20)
    return draw(st.sampled_from(ATTR_TEXT))


_paths = st.lists(st.sampled_from(ODD_NAMES), min_size=1, max_size=6).map(b"/".join)


@st.composite
def _archive_trees(draw: st.DrawFn) -> dict[bytes, Content]:
    files: dict[bytes, Content] = draw(
        st.dictionaries(_paths, _archive_contents(), min_size=1, max_size=14)
    )
    for where in draw(st.lists(st.sampled_from([b"", b"a/", b"sp ace/"]), max_size=2)):
        lines = draw(st.lists(st.sampled_from(ATTRIBUTE_LINES), min_size=1, max_size=4))
        files[where + b".gitattributes"] = _attributes(lines)
    return no_dir_file_clash(files)


def _everything(root: Path) -> dict[bytes, tuple[str, int, bytes]]:
    """Every entry under `root`: kind, permission bits, content or link target."""
    out: dict[bytes, tuple[str, int, bytes]] = {}
    base = os.fsencode(root)
    for dirpath, dirs, files in os.walk(base):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, base)
            st_ = os.lstat(full)
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("link", 0, os.readlink(full))
            elif stat.S_ISDIR(st_.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st_.st_mode), b"")
            else:
                with open(full, "rb") as f:
                    out[rel] = ("file", stat.S_IMODE(st_.st_mode), f.read())
    return out


def _expected(files: dict[bytes, tuple[int, bytes]]) -> dict[bytes, tuple[str, int, bytes]]:
    """What extracting the tree as committed must give (umask 022 applied by tarfile)."""
    out: dict[bytes, tuple[str, int, bytes]] = {}
    for path, (mode, data) in files.items():
        parts = path.split(b"/")
        for i in range(1, len(parts)):
            out[b"/".join(parts[:i])] = ("dir", 0o755, b"")
        if mode == 0o120000:
            out[path] = ("link", 0, data)
        elif mode == 0o160000:
            out[path] = ("dir", 0o755, b"")  # a submodule is an empty directory
        else:
            out[path] = ("file", 0o755 if mode == EXEC else 0o644, data)
    return out


def _members(data: bytes) -> dict[str, tuple[bytes, int, str, int, float, int, int]]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:", errors="surrogateescape") as tf:
        return {
            m.name.rstrip("/"): (m.type, m.mode, m.linkname, m.size, m.mtime, m.uid, m.gid)
            for m in tf.getmembers()
        }


def _extract_to(data: bytes, dest: Path) -> dict[bytes, tuple[str, int, bytes]]:
    dest.mkdir()
    old = os.umask(0o022)
    try:
        _extract([data], dest)
    finally:
        os.umask(old)
    return _everything(dest)


def _is_git_written(data: bytes) -> bool:
    """git's headers name the owner `root`; the Python writer leaves it empty."""
    return data[265:269] == b"root"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_archive_trees())
def test_fast_archive_is_the_tree_as_committed(files: dict[bytes, Content]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        tip = commit(repo, files, replace=True)
        tree = repo[tip].peel(pygit2.Tree).id
        with GitRepository(repo_dir(repo)) as git:
            ev = git.capture("main", "main")
            assert ev.proven_tree == str(tree)
            fast = b"".join(git.archive(ev.proven_tree))
            store = pygit2.Repository(str(git.store_path))
            slow = b"".join(stream_tar(store, tree_entries(store, tree)))
        assert _is_git_written(fast)
        assert not _is_git_written(slow)
        assert len(fast) % 10240 == 0
        assert _members(fast) == _members(slow)
        want = _expected(tree_files(repo, tree))
        assert _extract_to(fast, root / "fast") == want
        assert _extract_to(slow, root / "slow") == want


def test_fast_archive_applies_no_attribute_even_with_drivers_configured(tmp_path: Path) -> None:
    """Even a store configured to convert (autocrlf, an LFS smudge filter) writes blobs
    byte for byte: the store's info/attributes unsets every attribute."""
    repo = make_repo(tmp_path)
    files: dict[bytes, Content] = {
        b".gitattributes": _attributes(
            [
                b"crlf.txt text eol=crlf",
                b"auto.txt text=auto",
                b"ident.txt ident",
                b"gone.txt export-ignore",
                b"subst.txt export-subst",
                b"lfs.bin filter=lfs -text",
                b"utf16.txt working-tree-encoding=UTF-16",
                b"legacy.txt crlf",
                b"sub/** export-ignore",
            ]
        ),
        b"crlf.txt": b"one\ntwo\n",
        b"auto.txt": b"one\ntwo\n",
        b"legacy.txt": b"one\ntwo\n",
        b"ident.txt": b"$Id$\n",
        b"gone.txt": b"still here\n",
        b"subst.txt": b"$Format:%H$\n",
        b"lfs.bin": b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 3\n",
        b"utf16.txt": "h\u00e9llo\n".encode(),
        b"sub/.gitattributes": b"* text eol=crlf ident\n",
        b"sub/x.txt": b"$Id$\nx\n",
    }
    tip = commit(repo, files)
    tree = repo[tip].peel(pygit2.Tree).id
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "main")
        assert ev.proven_tree is not None
        config = pygit2.Repository(str(git.store_path)).config
        config["core.autocrlf"] = "true"
        config["filter.lfs.smudge"] = "sed s/version/SMUDGED/"
        config["filter.lfs.required"] = "true"
        data = b"".join(git.archive(ev.proven_tree))
    assert _is_git_written(data)
    got = _extract_to(data, tmp_path / "out")
    assert got == _expected(tree_files(repo, tree))


def _children() -> list[int]:
    """This process's children, zombies included (a reaped child is gone)."""
    me = str(os.getpid())
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[1].decode() == me:
            out.append(int(pid))
    return out


def test_stopping_early_kills_and_reaps_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    commit(repo, {b"f%d" % i: os.urandom(1 << 20) for i in range(12)})
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "main")
        assert ev.proven_tree is not None
        stream = git.archive(ev.proven_tree)
        assert _children() == []  # nothing runs before the stream is read
        first = next(stream)
        assert first
        assert len(_children()) == 1  # git is blocked on its full pipe
        stream.close()  # type: ignore[attr-defined]
        assert _children() == []


def test_git_failing_midway_raises_instead_of_a_short_tar(tmp_path: Path) -> None:
    """A blob missing from the store makes git die after some output: the consumer gets
    RepoError, and never the end of the archive."""
    repo = make_repo(tmp_path)
    good = [(0o100644, b"a%02d" % i, repo.create_blob(os.urandom(300_000))) for i in range(10)]
    missing = pygit2.Oid(hex="42" * 20)
    top = raw_tree(repo, [*good, (0o100644, b"zz-missing", missing)])
    with GitRepository(repo_dir(repo)) as git:
        stream = git.archive(str(top))  # type: ignore[arg-type]
        got: list[bytes] = []
        with pytest.raises(RepoError, match="git archive of tree .* failed"):
            got.extend(stream)
    data = b"".join(got)
    assert len(data) > 0  # git did write part of the archive before it failed
    assert not data.endswith(b"\0" * 1024)


def test_archive_without_capture_writes_nothing_to_the_users_repository(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    tip = commit(repo, {b"a": b"1\n", b"d/b": (b"2\n", EXEC)})
    tree = str(repo[tip].peel(pygit2.Tree).id)
    before = snapshot(repo_dir(repo))
    with GitRepository(repo_dir(repo)) as git:
        data = b"".join(git.archive(tree))  # type: ignore[arg-type]
    assert _is_git_written(data)
    assert snapshot(repo_dir(repo)) == before
    assert _extract_to(data, tmp_path / "out") == _expected(tree_files(repo, tree))


@pytest.mark.docker
def test_fast_archive_lands_exactly_in_a_container(
    tmp_path: Path, docker_client: docker.DockerClient, cleanroom_image: str
) -> None:
    """Docker's own extractor takes git's tar: names, modes, links, mtime, owner, bytes."""
    repo = make_repo(tmp_path)
    files: dict[bytes, Content] = {
        b".gitattributes": b"* text eol=crlf ident export-ignore\n",
        b"a.txt": b"$Id$\none\n",
        b"run.sh": (b"#!/bin/sh\necho ran\n", EXEC),
        b"l": Symlink(b"a.txt"),
        b"long-link": Symlink(b"t" * 150),
        LONG: b"long\n",
        b"\xff\xfe": b"odd\n",
        b"sub": Gitlink("11" * 20),
    }
    commit(repo, files)
    container = docker_client.containers.create(
        cleanroom_image,
        ["sleep", "60"],
        network_mode="none",
        labels=own_labels(),
    )
    try:
        with GitRepository(repo_dir(repo)) as git:
            ev = git.capture("main", "main")
            assert ev.proven_tree is not None
            assert container.put_archive("/tmp", git.archive(ev.proven_tree))
        container.start()
        script = (
            "cd /tmp && ./run.sh && stat -c '%a %u:%g %Y' a.txt run.sh sub && "
            "readlink l long-link && sha256sum a.txt .gitattributes $(printf '\\377\\376') "
            "&& find sub -mindepth 1 | wc -l && cat " + LONG.decode()
        )
        code, out = container.exec_run(["sh", "-c", script])
    finally:
        container.remove(force=True)
    assert code == 0, out
    lines = out.decode("utf-8", "surrogateescape").splitlines()
    assert lines[0] == "ran"
    assert lines[1:4] == [
        f"644 0:0 {DEFAULT_MTIME}",
        f"755 0:0 {DEFAULT_MTIME}",
        f"755 0:0 {DEFAULT_MTIME}",
    ]
    assert lines[4:6] == ["a.txt", "t" * 150]
    digests = [line.split()[0] for line in lines[6:9]]
    assert digests == [
        hashlib.sha256(b"$Id$\none\n").hexdigest(),
        hashlib.sha256(b"* text eol=crlf ident export-ignore\n").hexdigest(),
        hashlib.sha256(b"odd\n").hexdigest(),
    ]
    assert lines[9:] == ["0", "long"]
