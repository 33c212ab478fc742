"""GitRepository.capture against real repositories built in tmp_path (SPEC §1)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest

from gate.errors import RepoError
from gate.git.repo import GitRepository
from gate.model import ChangeStatus, ReasonCode
from tests.gitutil import (
    EXEC,
    SIGNATURE,
    Gitlink,
    Symlink,
    checkout,
    commit,
    make_repo,
    repo_dir,
    snapshot,
    tree_files,
)

ODD = b"-rf \n\xff\xfe name"


def _base_repo(tmp_path: Path) -> tuple[pygit2.Repository, pygit2.Oid]:
    repo = make_repo(tmp_path)
    base = commit(
        repo,
        {
            b"README.md": b"hello\nworld\n",
            b"bin/data": bytes(range(256)) * 40,
            b"run.sh": b"#!/bin/sh\necho hi\n",
            b"link": Symlink(b"README.md"),
            b"gone.txt": b"bye\n",
            b"old/name.txt": b"line\n" * 40,
            b"sub": Gitlink("11" * 20),
            b"kind": b"a file that becomes a symlink\n",
        },
    )
    checkout(repo)
    return repo, base


def _head(repo: pygit2.Repository, base: pygit2.Oid) -> pygit2.Oid:
    return commit(
        repo,
        {
            b"README.md": b"hello\nthere\nworld\n",
            b"bin/data": bytes(range(256)) * 40 + b"\0tail",
            b"run.sh": (b"#!/bin/sh\necho hi\n", EXEC),
            b"link": Symlink(b"../../etc/passwd"),
            b"gone.txt": None,
            b"old/name.txt": None,
            b"new/name.txt": b"line\n" * 40 + b"extra\n",
            b"sub": Gitlink("22" * 20),
            b"kind": Symlink(b"/abs/target"),
            ODD: b"odd\n",
            b"empty": b"",
        },
        branch="pr",
        parent=base,
    )


def test_patch_round_trips_every_kind_of_change(tmp_path: Path) -> None:
    repo, base = _base_repo(tmp_path)
    head = _head(repo, base)
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "pr")
    assert ev.reasons == ()
    assert ev.proven_tree == str(repo[head].peel(pygit2.Tree).id)
    assert ev.merge_base == str(base)
    assert ev.patch.sha256 == hashlib.sha256(ev.patch.data).hexdigest()
    data = ev.patch.data
    assert b"GIT binary patch" in data
    assert b"rename from old/name.txt\nrename to new/name.txt\n" in data
    assert b"old mode 100644\nnew mode 100755\n" in data
    assert b"+Subproject commit " + b"22" * 20 in data
    assert b'"b/-rf \\n\\377\\376 name"' in data  # git's C-quoting of odd paths
    # full index: 40-hex ids on every index line
    for line in data.splitlines():
        if line.startswith(b"index "):
            ids = line.split()[1].split(b"..")
            assert all(len(i) == 40 for i in ids), line


def test_inventory_describes_each_path(tmp_path: Path) -> None:
    repo, base = _base_repo(tmp_path)
    _head(repo, base)
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "pr")
    inv = {e.path: e for e in ev.inventory}
    assert ev.patch.files == len(inv) == 10
    assert inv[b"README.md"].status is ChangeStatus.MODIFIED
    assert (inv[b"README.md"].lines_added, inv[b"README.md"].lines_deleted) == (1, 0)
    assert inv[b"bin/data"].binary
    assert inv[b"bin/data"].size == 256 * 40 + 5
    assert inv[b"bin/data"].old_size == 256 * 40
    assert (inv[b"run.sh"].old_mode, inv[b"run.sh"].new_mode) == (0o100644, 0o100755)
    link = inv[b"link"]
    assert link.symlink_target == b"../../etc/passwd"
    assert link.symlink_escapes
    assert not link.symlink_absolute
    kind = inv[b"kind"]
    assert kind.status is ChangeStatus.TYPE_CHANGED
    assert (kind.old_mode, kind.new_mode) == (0o100644, 0o120000)
    assert kind.symlink_absolute
    assert inv[b"gone.txt"].status is ChangeStatus.DELETED
    assert inv[b"gone.txt"].new_mode is None
    assert inv[b"gone.txt"].size is None
    renamed = inv[b"new/name.txt"]
    assert renamed.status is ChangeStatus.RENAMED
    assert renamed.old_path == b"old/name.txt"
    assert inv[b"sub"].gitlink
    assert inv[b"sub"].size is None
    assert inv[ODD].status is ChangeStatus.ADDED
    assert inv[ODD].to_dict()["path_b64"] == "LXJmIAr//iBuYW1l"
    assert inv[b"empty"].size == 0
    assert any("submodule" in n for n in ev.coverage.notes)
    assert ev.coverage.complete


def test_git_apply_accepts_the_captured_patch(tmp_path: Path) -> None:
    """An independent implementation (git itself) applies our bytes to the same tree."""
    git_cli = shutil.which("git")
    if git_cli is None:
        pytest.skip("git CLI not installed")
    repo, base = _base_repo(tmp_path)
    head = _head(repo, base)
    with GitRepository(repo_dir(repo)) as git:
        data = git.capture("main", "pr").patch.data
    clone = tmp_path / "clone"
    subprocess.run([git_cli, "clone", "-q", str(repo_dir(repo)), str(clone)], check=True)
    subprocess.run(
        [git_cli, "apply", "--index", "--binary", "-"], cwd=clone, input=data, check=True
    )
    out = subprocess.run(
        [git_cli, "write-tree"], cwd=clone, check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == str(repo[head].peel(pygit2.Tree).id)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("main", "base"), ("pr", "head"), ("v1", "base"), ("pr~1", "base"), ("HEAD", "base")],
    ids=["branch", "other-branch", "annotated-tag", "ancestry", "HEAD"],
)
def test_revisions_resolve(tmp_path: Path, spec: str, expected: str) -> None:
    repo, base = _base_repo(tmp_path)
    head = _head(repo, base)
    repo.create_tag("v1", base, pygit2.enums.ObjectType.COMMIT, SIGNATURE, "t")
    want = {"base": base, "head": head}[expected]
    with GitRepository(repo_dir(repo)) as git:
        rev = git.resolve(spec)
        assert rev.commit == str(want)
        assert git.resolve(str(want)[:12]).commit == str(want)


def test_unknown_revision_is_named(tmp_path: Path) -> None:
    repo, _ = _base_repo(tmp_path)
    with GitRepository(repo_dir(repo)) as git, pytest.raises(RepoError, match="'no-such-branch'"):
        git.capture("main", "no-such-branch")


def test_not_a_repository(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(RepoError, match="not a git repository"):
        GitRepository(tmp_path / "plain")


def test_unrelated_histories_have_no_merge_base(tmp_path: Path) -> None:
    repo, _ = _base_repo(tmp_path)
    commit(repo, {b"x": b"y"}, branch="orphan", parents=[])
    with GitRepository(repo_dir(repo)) as git, pytest.raises(RepoError, match="unrelated"):
        git.capture("main", "orphan")


def test_shallow_clone_missing_merge_base_says_how_to_fetch(tmp_path: Path) -> None:
    git_cli = shutil.which("git")
    if git_cli is None:
        pytest.skip("git CLI not installed")
    repo, base = _base_repo(tmp_path)
    for i in range(3):
        commit(repo, {b"main.txt": b"%d\n" % i})
    pr = base
    for i in range(3):
        pr = commit(repo, {b"pr.txt": b"%d\n" % i}, branch="pr", parent=pr)
    shallow = tmp_path / "shallow"
    subprocess.run(
        [
            git_cli,
            "clone",
            "-q",
            "--depth=1",
            "--no-single-branch",
            f"file://{repo_dir(repo)}",
            str(shallow),
        ],
        check=True,
    )
    with GitRepository(shallow) as git, pytest.raises(RepoError, match="--unshallow"):
        git.capture("origin/main", "origin/pr")


def test_base_moved_on_without_conflict_proves_the_merge(tmp_path: Path) -> None:
    repo, base = _base_repo(tmp_path)
    head = _head(repo, base)
    moved = commit(repo, {b"other.txt": b"base moved on\n", b"old/name.txt": b"line\n" * 40})
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "pr")
        assert ev.reasons == ()
        store = pygit2.Repository(str(git.store_path))
        merged = store.merge_trees(
            repo[base].peel(pygit2.Tree),
            repo[moved].peel(pygit2.Tree),
            repo[head].peel(pygit2.Tree),
        )
        assert ev.proven_tree == str(merged.write_tree(store))
        files = tree_files(store, ev.proven_tree)
    assert files[b"other.txt"] == (0o100644, b"base moved on\n")
    assert files[b"README.md"] == (0o100644, b"hello\nthere\nworld\n")
    assert ev.proven_tree != str(repo[head].peel(pygit2.Tree).id)


def test_same_file_changed_apart_on_both_sides_merges(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    lines = [b"%d\n" % i for i in range(50)]
    base = commit(repo, {b"f": b"".join(lines)})
    commit(repo, {b"f": b"".join([b"head\n", *lines[1:]])}, branch="pr", parent=base)
    commit(repo, {b"f": b"".join([*lines[:-1], b"main\n"])})
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "pr")
        assert ev.reasons == ()
        assert ev.proven_tree is not None
        files = tree_files(pygit2.Repository(str(git.store_path)), ev.proven_tree)
    assert files[b"f"][1] == b"".join([b"head\n", *lines[1:-1], b"main\n"])


def test_conflict_is_a_merge_conflict_reason(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    base = commit(repo, {b"f": b"one\n"})
    commit(repo, {b"f": b"head\n"}, branch="pr", parent=base)
    commit(repo, {b"f": b"main\n"})
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "pr")
    assert ev.proven_tree is None
    codes = {r.code for r in ev.reasons}
    assert ReasonCode.MERGE_CONFLICT in codes
    assert any("f" in r.message for r in ev.reasons if r.code is ReasonCode.MERGE_CONFLICT)


def test_head_already_in_base_proves_the_base_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    old = commit(repo, {b"f": b"one\n"})
    tip = commit(repo, {b"f": b"two\n"})
    repo.create_branch("pr", repo[old].peel(pygit2.Commit))
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "pr")
    assert ev.patch.data == b""
    assert ev.inventory == ()
    assert ev.proven_tree == str(repo[tip].peel(pygit2.Tree).id)


def test_lfs_pointer_and_gitattributes_are_noted(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    base = commit(repo, {b"a": b"x"})
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 9\n"
    commit(
        repo,
        {b"big.bin": pointer, b".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n"},
        branch="pr",
        parent=base,
    )
    with GitRepository(repo_dir(repo)) as git:
        ev = git.capture("main", "pr")
    notes = " ".join(ev.coverage.notes)
    assert "LFS pointer" in notes
    assert ".gitattributes changed" in notes
    assert ev.coverage.complete


def test_read_blob_at_reads_the_base_commit(tmp_path: Path) -> None:
    repo, base = _base_repo(tmp_path)
    commit(repo, {b".github/proofgate.yml": b"version: 1\n"}, branch="pr", parent=base)
    commit(repo, {b".github/proofgate.yml": b"version: 2\n"})
    with GitRepository(repo_dir(repo)) as git:
        main = git.resolve("main").commit
        got = git.read_blob_at(main, ".github/proofgate.yml")
        assert got is not None
        assert got[1] == b"version: 2\n"
        assert got[0] == str(repo.create_blob(b"version: 2\n"))
        assert git.read_blob_at(git.resolve("pr~1").commit, ".github/proofgate.yml") is None
        assert git.read_blob_at(main, "link") is None  # symlinks are not configs
        assert git.read_blob_at(main, "bin") is None  # nor directories


def test_repository_name_defaults_to_the_directory(tmp_path: Path) -> None:
    repo, _ = _base_repo(tmp_path)
    with GitRepository(repo_dir(repo)) as git:
        assert git.capture("main", "main").repository == "repo"
    with GitRepository(repo_dir(repo), name="owner/repo") as git:
        assert git.capture("main", "main").repository == "owner/repo"


def test_user_repository_is_byte_identical_after_capture_and_archive(tmp_path: Path) -> None:
    repo, base = _base_repo(tmp_path)
    _head(repo, base)
    commit(repo, {b"other.txt": b"moved\n"})
    before = snapshot(repo_dir(repo))
    git = GitRepository(repo_dir(repo))
    ev = git.capture("main", "pr")
    assert ev.proven_tree is not None
    store = git.store_path
    assert store is not None
    assert store.exists()
    assert b"".join(git.archive(ev.proven_tree))
    git.close()
    git.close()  # idempotent
    assert not store.exists()
    assert snapshot(repo_dir(repo)) == before


def test_interrupted_capture_leaves_no_store_and_no_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, base = _base_repo(tmp_path)
    _head(repo, base)
    before = snapshot(repo_dir(repo))

    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C arrives while the patch is being re-applied
    monkeypatch.setattr("gate.git.repo.apply_patch", interrupt)
    git = GitRepository(repo_dir(repo))
    seen: list[Path] = []
    real_init = GitRepository._capture

    def spy(self: GitRepository, *args: object) -> object:
        assert self.store_path is not None
        seen.append(self.store_path)
        return real_init(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(GitRepository, "_capture", spy)
    with pytest.raises(KeyboardInterrupt):
        git.capture("main", "pr")
    assert seen
    assert not seen[0].exists()
    assert git.store_path is None
    assert snapshot(repo_dir(repo)) == before


def test_context_manager_cleans_up_on_error(tmp_path: Path) -> None:
    repo, base = _base_repo(tmp_path)
    _head(repo, base)
    before = snapshot(repo_dir(repo))
    stores: list[Path | None] = []

    def run() -> None:
        with GitRepository(repo_dir(repo)) as git:
            git.capture("main", "pr")
            stores.append(git.store_path)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run()
    store = stores[0]
    assert store is not None
    assert not store.exists()
    assert snapshot(repo_dir(repo)) == before
