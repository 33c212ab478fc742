"""git subprocesses run with an environment built from scratch (gate.git.store.git_env).

The caller's environment may point git elsewhere (`GIT_DIR`, `GIT_INDEX_FILE`), make it
write objects elsewhere (`GIT_OBJECT_DIRECTORY`: into the user's repository) or
reconfigure it (a global config with `apply.whitespace=fix` or `core.autocrlf`): none of
it may change the proven tree, the streamed tree or the user's repository.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from gate.git.repo import GitRepository
from gate.git.store import git_env
from tests.gitutil import commit, make_repo, repo_dir, snapshot


def test_git_env_inherits_nothing_but_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.autocrlf=true'")
    monkeypatch.setenv("PROOFGATE_SIGNING_KEY", "secret")
    env = git_env(tmp_path, git_dir=tmp_path / "store", GIT_INDEX_FILE="idx")
    assert env["GIT_DIR"] == str(tmp_path / "store")
    assert env["GIT_INDEX_FILE"] == "idx"
    assert env["HOME"] == str(tmp_path)
    assert "GIT_CONFIG_PARAMETERS" not in env
    assert "PROOFGATE_SIGNING_KEY" not in env
    assert "GIT_DIR" not in git_env(tmp_path)


def _tar_files(chunks: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(chunks), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def _prove_tree(path: Path) -> tuple[str | None, dict[str, bytes]]:
    with GitRepository(path) as repo:
        ev = repo.capture("main", "pr")
        assert ev.proven_tree is not None
        return ev.proven_tree, _tar_files(b"".join(repo.archive(ev.proven_tree)))


def test_a_hostile_git_environment_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path)
    base = commit(repo, {b"a.txt": b"one  \r\n", b"b.txt": b"x\n"}, message="base")
    commit(repo, {b"a.txt": b"one  \r\ntwo \t\r\n"}, branch="pr", parent=base, message="pr")
    # main moves on, so the proven tree is a new object: written where git is told to
    commit(repo, {b"b.txt": b"y\n"}, parent=base, message="main moves")
    path = repo_dir(repo)
    clean = _prove_tree(path)

    home = tmp_path / "home"
    home.mkdir()
    config = home / ".gitconfig"
    config.write_text("[apply]\n\twhitespace = fix\n[core]\n\tautocrlf = true\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'apply.whitespace=fix'")
    monkeypatch.setenv("GIT_DIR", str(path / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(path / ".git" / "index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(path / ".git" / "objects"))
    before = snapshot(path)
    assert _prove_tree(path) == clean
    assert clean[1]["a.txt"] == b"one  \r\ntwo \t\r\n"
    assert snapshot(path) == before
