"""A large tree gets the same rules as a small one, or the verdict says which analysis did
not complete and why (issue 46). Real git repositories; the bounds are lowered so that a
few hundred files stand for the 50,000 of a large repository."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest

from gate.faces.cli import main
from gate.proof import policy_run
from tests.gitutil import commit, make_repo, repo_dir

FILES = 300
Run = tuple[int, dict[str, object]]


def _repo(tmp_path: Path, threshold: int | None = None) -> Path:
    repo = make_repo(tmp_path)
    limit = f"\npolicy:\n  thresholds: {{future: {threshold}}}" if threshold is not None else ""
    config = f"version: 1\nimage: python:3.12-slim\nchecks:\n  - {{name: t, test: 'true'}}{limit}\n"
    files: dict[bytes, object] = {b".github/proofgate.yml": config.encode()}
    files |= {b"pkg/__init__.py": b"", b"pkg/core.py": b"import os\n"}
    for i in range(FILES):
        # a few modules import core, each of the others its neighbour: a chain to follow
        target = b"core" if i % 50 == 0 else b"m%d" % (i - 1)
        files[f"pkg/m{i}.py".encode()] = b"from pkg import %s\n%s" % (target, b"# filler\n" * 40)
    base = commit(repo, files, message="base")  # type: ignore[arg-type]
    commit(repo, {b"pkg/core.py": b"import sys\n"}, branch="pr", parent=base, message="pr")
    return repo_dir(repo)


def _policy(repo: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    argv = ["policy", "--repo", str(repo), "--base", "main", "--head", "pr", "--json"]
    with pytest.MonkeyPatch.context() as m:
        m.setenv("XDG_CACHE_HOME", str(cache))
        code = main(argv)
    policy = json.loads(capsys.readouterr().out)["policy"]
    assert isinstance(policy, dict)
    return code, policy


def _graph(policy: dict[str, object]) -> dict[str, object]:
    graph = policy["blast_radius"]["future"]["analyzers"][0]  # type: ignore[index]
    assert isinstance(graph, dict)
    return graph


def test_the_import_graph_is_complete_past_what_the_policy_holds_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    small = _policy(repo, tmp_path / "c1", capsys)
    # the tree's sources are now far over what the policy may hold at once: before issue
    # 46 the import graph did not run ("the proven tree was not supplied")
    monkeypatch.setattr(policy_run, "MAX_ANALYZED_BYTES", 4096)
    large = _policy(repo, tmp_path / "c2", capsys)
    assert large == small
    graph = _graph(large[1])
    assert graph["ran"] is True
    assert graph["python_files"] == FILES + 2
    assert graph["transitive_importers_count"] == FILES


def test_an_import_graph_over_its_parse_budget_is_named_and_a_threshold_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, threshold=10_000)
    code, policy = _policy(repo, tmp_path / "c1", capsys)
    assert (code, policy["decision"]) == (0, "ALLOW")  # the whole graph is under it
    monkeypatch.setattr(policy_run, "MAX_PARSED_BYTES", 2000)
    code, policy = _policy(repo, tmp_path / "c2", capsys)
    graph = _graph(policy)
    assert graph["ran"] is False
    why = str(graph["why"])
    assert "over the 2000 bytes the import graph parses in one run" in why
    assert "the proven tree was not supplied" not in why
    assert (code, policy["decision"]) == (11, "HOLD")
    [finding] = policy["findings"]  # type: ignore[misc]
    assert finding["rule"] == "blast-radius-future"
    assert finding["message"] == f"future blast radius 0 is incomplete: {why}"


@pytest.mark.parametrize(
    ("bound", "why"),
    [
        ("MAX_PARSED_BYTES", "over the 2000 bytes the import graph parses in one run"),
        ("MAX_ANALYZED_BYTES", "changed Python files are over the 2000 bytes the policy reads"),
    ],
    ids=["parse-budget", "held-files"],
)
def test_without_a_threshold_the_incomplete_graph_changes_no_decision(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bound: str,
    why: str,
) -> None:
    repo = _repo(tmp_path)
    small = _policy(repo, tmp_path / "c1", capsys)
    if bound == "MAX_ANALYZED_BYTES":  # the held files themselves over it (a huge lockfile)
        commit_big_lockfile(repo)
    monkeypatch.setattr(policy_run, bound, 2000)
    code, policy = _policy(repo, tmp_path / "c2", capsys)
    assert (code, policy["decision"], policy["findings"]) == (
        small[0],
        small[1]["decision"],
        small[1]["findings"],
    )
    graph = _graph(policy)
    assert graph["ran"] is False
    assert why in str(graph["why"])


def commit_big_lockfile(path: Path) -> None:
    """The same change, but the proven tree now holds a 3 KiB uv.lock."""
    repo = pygit2.Repository(str(path))
    pr = repo.branches["pr"].target
    commit(repo, {b"uv.lock": b"#" * 3072}, branch="pr", parent=str(pr), message="lock")
