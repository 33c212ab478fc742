"""Patch reading and glob semantics of the policy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.policy.patch import parse_patch
from gate.policy.paths import glob_match, glob_problem

GLOBS = [
    # pattern, path, matches
    ("Dockerfile", b"Dockerfile", True),
    ("Dockerfile", b"docker/Dockerfile", True),
    ("/Dockerfile", b"docker/Dockerfile", False),
    (".github/**", b".github/workflows/ci.yml", True),
    (".github/**", b"x/.github/workflows/ci.yml", False),
    ("**/*.pem", b"a/b/c.pem", True),
    ("**/*.pem", b"c.pem", True),
    ("*.pem", b"a/b/c.pem", True),
    ("*.pem", b"a/b/c.pem.bak", False),
    ("src/*.py", b"src/a.py", True),
    ("src/*.py", b"src/sub/a.py", False),
    ("a/**/b", b"a/b", True),
    ("a/**/b", b"a/x/y/b", True),
    ("a/**/b", b"a/x/y/bc", False),
    ("vendor", b"vendor/x/y.c", True),
    ("vendor/", b"vendor", False),
    ("vendor/", b"vendor/y.c", True),
    ("f?.txt", b"f1.txt", True),
    ("f?.txt", b"f12.txt", False),
    ("[ab].txt", b"a.txt", True),
    ("[!ab].txt", b"a.txt", False),
    ("[!ab].txt", b"c.txt", True),
    ("\\*.txt", b"*.txt", True),
    ("\\*.txt", b"a.txt", False),
    ("docs/*", b"docs/\xff.md", True),  # non-UTF-8 bytes match wildcards
    ("docs/\udcff.md", b"docs/\xff.md", True),  # and surrogateescape literals exactly
    ("*.MD", b"a.md", False),  # case-sensitive
    ("a**b", b"aXb", True),  # `**` inside a segment is `*`
    ("a**b", b"a/b", False),
    ("f[!]]x", b"fax", True),  # `]` first in a class is literal
    ("f[!]]x", b"f]x", False),
    ("a/**/", b"a/k.pem", False),  # directories below a/ only
    ("a/**/", b"a/x/k.pem", True),
    ("/a/*", b"a/b", True),  # a leading `/` only anchors
    ("#x", b"#x", True),  # a leading `#` is literal (gitignore files read a comment)
    ("x ", b"x ", True),  # so are trailing spaces
    ("x ", b"x", False),
]


@pytest.mark.parametrize(
    ("pattern", "path", "matches"), GLOBS, ids=[f"{g[0]}|{g[1]!r}" for g in GLOBS]
)
def test_glob_semantics(pattern: str, path: bytes, matches: bool) -> None:
    assert glob_match(pattern, path) is matches


_ASCII_GLOBS = [g for g in GLOBS if g[1].isascii() and not g[0].startswith("#")]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    _ASCII_GLOBS,
    ids=[f"{g[0]}|{g[1]!r}" for g in _ASCII_GLOBS],
)
def test_glob_semantics_are_gits_own(
    tmp_path: Path, pattern: str, path: bytes, matches: bool
) -> None:
    """The documented semantics are gitignore's: git itself agrees with every case."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    escaped = pattern.rstrip(" ") + "\\ " * (len(pattern) - len(pattern.rstrip(" ")))
    (tmp_path / ".gitignore").write_text(escaped + "\n")
    proc = subprocess.run(
        ["git", "-C", str(tmp_path), "check-ignore", "--no-index", "-q", path.decode()],
        check=False,
    )
    assert proc.returncode in (0, 1)
    assert (proc.returncode == 0) is matches


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [("", True), ("/", True), ("!a", True), ("[a", True), ("a/**", False), ("*.pem", False)],
)
def test_glob_problems_for_the_config_loader(pattern: str, problem: bool) -> None:
    assert (glob_problem(pattern) is not None) is problem


def test_parse_added_deleted_with_line_numbers() -> None:
    patch = (
        b"diff --git a/f.py b/f.py\n"
        b"index 1111111..2222222 100644\n"
        b"--- a/f.py\n"
        b"+++ b/f.py\n"
        b"@@ -10,3 +10,3 @@ def f():\n"
        b" a\n"
        b"-b\n"
        b"+B\n"
        b" c\n"
        b"\\ No newline at end of file\n"
    )
    (d,) = parse_patch(patch)
    assert d.path == b"f.py"
    assert [(ln.new, ln.text) for ln in d.added] == [(11, b"B")]
    assert [(ln.old, ln.text) for ln in d.deleted] == [(11, b"b")]


def test_lines_that_look_like_headers_inside_a_hunk_are_content() -> None:
    patch = (
        b"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n"
        b"--- a/evil\n"
        b"+++ b/evil\n"
        b"-diff --git a/x b/x\n"
        b"+diff --git a/y b/y\n"
    )
    (d,) = parse_patch(patch)
    assert [ln.text for ln in d.deleted] == [b"-- a/evil", b"diff --git a/x b/x"]
    assert [ln.text for ln in d.added] == [b"++ b/evil", b"diff --git a/y b/y"]


def test_quoted_paths_are_unquoted_to_exact_bytes() -> None:
    patch = (
        b'diff --git "a/\\303\\251 \\"q\\".txt" "b/\\303\\251 \\"q\\".txt"\n'
        b"new file mode 100644\n--- /dev/null\n"
        b'+++ "b/\\303\\251 \\"q\\".txt"\n@@ -0,0 +1 @@\n+x\n'
    )
    (d,) = parse_patch(patch)
    assert d.new_path == 'é "q".txt'.encode()
    assert d.old_path is None


def test_binary_sections_are_skipped() -> None:
    patch = (
        b"diff --git a/img.png b/img.png\nnew file mode 100644\n"
        b"index 0000000..1111111\nGIT binary patch\nliteral 5\n"
        b"McmZQzU|?-000mG5dZ)H\n\nliteral 0\nHcmV?d00001\n\n"
        b"diff --git a/t.txt b/t.txt\n--- a/t.txt\n+++ b/t.txt\n@@ -1 +1 @@\n-a\n+b\n"
    )
    img, txt = parse_patch(patch)
    assert img.binary
    assert img.hunks == ()
    assert [ln.text for ln in txt.added] == [b"b"]


def test_rename_paths() -> None:
    patch = (
        b"diff --git a/old name.py b/new name.py\nsimilarity index 90%\n"
        b"rename from old name.py\nrename to new name.py\n"
    )
    (d,) = parse_patch(patch)
    assert (d.old_path, d.new_path) == (b"old name.py", b"new name.py")


@given(st.binary(max_size=2000))
def test_parser_never_crashes_on_random_bytes(data: bytes) -> None:
    parse_patch(data)
    parse_patch(b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n" + data)


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        env={"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo), "PATH": "/usr/bin:/bin"},
    ).stdout


@pytest.mark.skipif(
    shutil.which("git") is None, reason="needs the git CLI (absent from slim clean-room images)"
)
def test_parser_reads_a_real_git_patch(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "keep.txt").write_bytes(b"1\n2\n3\n")
    (repo / "gone.txt").write_bytes(b"bye\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (repo / "keep.txt").write_bytes(b"1\ntwo\n3\n")
    (repo / "gone.txt").unlink()
    (repo / "bin.dat").write_bytes(bytes(range(256)))
    odd = "tab\there é.txt"
    (repo / odd).write_bytes(b"new\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "change")
    patch = _git(repo, "diff", "--binary", "--full-index", "-M", "HEAD~1", "HEAD")
    diffs = {d.path: d for d in parse_patch(patch)}
    assert set(diffs) == {b"keep.txt", b"gone.txt", b"bin.dat", odd.encode()}
    assert diffs[b"bin.dat"].binary
    assert diffs[b"gone.txt"].new_path is None
    assert [(ln.new, ln.text) for ln in diffs[b"keep.txt"].added] == [(2, b"two")]
    assert [ln.text for ln in diffs[odd.encode()].added] == [b"new"]
