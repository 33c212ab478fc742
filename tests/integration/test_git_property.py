"""Property (SPEC §1): for random trees and random edits, the re-applied patch is head.

And when the base moved on with changes of its own to other paths, the proven tree is the
three-way merge. Text, binary, exec bits, symlinks, gitlinks, deletions, renames and odd
names (newlines, non-UTF-8, leading dashes, quotes, spaces) are all in the mix.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.git.repo import GitRepository
from tests.gitutil import (
    EXEC,
    Content,
    Gitlink,
    Symlink,
    commit,
    make_repo,
    no_dir_file_clash,
    repo_dir,
    tree_files,
)

NAMES = [
    b"a",
    b"b.txt",
    b"-rf",
    b"sp ace",
    b"new\nline",
    b"\xff\xfe",
    b"caf\xc3\xa9",
    b'quo"te',
    b"back\\slash",
    b"tab\t",
    b"--",
]
LINES = [b"alpha\n", b"beta\n", b"gamma\n", b"\n", b"crlf\r\n", b"no-newline"]

names = st.sampled_from(NAMES)
paths = st.lists(names, min_size=1, max_size=3).map(b"/".join)
text = st.lists(st.sampled_from(LINES[:-1]), max_size=30).map(b"".join) | st.lists(
    st.sampled_from(LINES), min_size=1, max_size=30
).map(b"".join)
binary = st.binary(max_size=600).map(lambda b: b"\0" + b)


@st.composite
def contents(draw: st.DrawFn) -> Content:
    kind = draw(st.sampled_from(["text", "text", "text", "exec", "binary", "link", "gitlink"]))
    if kind == "exec":
        return (draw(text), EXEC)
    if kind == "binary":
        return draw(binary)
    if kind == "link":
        return Symlink(draw(paths | st.sampled_from([b"../up", b"/abs"])))
    if kind == "gitlink":
        return Gitlink(draw(st.sampled_from(["11", "22", "33"])) * 20)
    return draw(text)


trees = st.dictionaries(paths, contents(), min_size=1, max_size=12).map(no_dir_file_clash)


@st.composite
def edits(draw: st.DrawFn, base: dict[bytes, Content]) -> dict[bytes, Content]:
    head: dict[bytes, Content] = dict(base)
    for path in sorted(base):
        action = draw(st.sampled_from(["keep", "keep", "modify", "mode", "delete", "rename"]))
        old = base[path]
        if action == "modify":
            head[path] = draw(contents())
        elif action == "mode" and isinstance(old, bytes):
            head[path] = (old, EXEC)
        elif action == "mode" and isinstance(old, tuple):
            head[path] = old[0]
        elif action == "delete":
            del head[path]
        elif action == "rename":
            del head[path]
            new = draw(paths)
            if isinstance(old, bytes) and draw(st.booleans()):
                old = old + b"\nrenamed and edited\n"
            head[new] = old
    for _ in range(draw(st.integers(0, 3))):
        head[draw(paths)] = draw(contents())
    return no_dir_file_clash(head)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[bytes, Content], dict[bytes, Content]]:
    base = draw(trees)
    return base, draw(edits(base))


def _changes(old: dict[bytes, Content], new: dict[bytes, Content]) -> dict[bytes, Content]:
    out: dict[bytes, Content] = {p: None for p in old if p not in new}
    out.update(new)
    return out


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(scenarios())
def test_reapplied_patch_is_head_tree(scenario: tuple[dict[bytes, Content], ...]) -> None:
    base_files, head_files = scenario
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        base = commit(repo, base_files, replace=True)
        head = commit(repo, head_files, branch="pr", parent=base, replace=True)
        with GitRepository(repo_dir(repo)) as git:
            ev = git.capture("main", "pr")
        assert ev.reasons == ()
        assert ev.coverage.complete
        assert ev.proven_tree == str(repo[head].peel(pygit2.Tree).id)
        changed = {
            p for p in _changes(base_files, head_files) if base_files.get(p) != head_files.get(p)
        }
        listed = {e.path for e in ev.inventory} | {
            e.old_path for e in ev.inventory if e.old_path is not None
        }
        assert changed <= listed


@settings(max_examples=30, deadline=None)
@given(scenarios(), st.sampled_from([b"zz-base-only", b"zz dir/base\nonly"]), text)
def test_base_moved_on_proves_the_merge(
    scenario: tuple[dict[bytes, Content], ...], extra: bytes, body: bytes
) -> None:
    base_files, head_files = scenario
    if any(p == extra or p.startswith(extra.split(b"/")[0]) for p in head_files):
        return
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        base = commit(repo, base_files, replace=True)
        head = commit(repo, head_files, branch="pr", parent=base, replace=True)
        moved = commit(repo, {extra: body})
        with GitRepository(repo_dir(repo)) as git:
            ev = git.capture("main", "pr")
            assert ev.reasons == ()
            assert ev.proven_tree is not None
            got = tree_files(pygit2.Repository(str(git.store_path)), ev.proven_tree)
        want = tree_files(repo, repo[head].peel(pygit2.Tree).id)
        want[extra] = (0o100644, body)
        assert got == want
        assert str(moved) != ev.merge_base
