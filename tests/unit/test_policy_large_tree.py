"""A large tree gets the same rules as a small one, or the verdict says which analysis did
not complete and why (issue 46). Real git repositories; the bounds are lowered so that a
few hundred files stand for the 50,000 of a large repository."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pygit2
import pytest

from gate.faces.cli import main
from gate.model import ChangeStatus, InventoryEntry
from gate.policy import blast
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
    assert "the import graph needs are over the 2000 bytes it parses in one run" in why
    assert "the proven tree was not supplied" not in why
    assert (code, policy["decision"]) == (11, "HOLD")
    [finding] = policy["findings"]  # type: ignore[misc]
    assert finding["rule"] == "blast-radius-future"
    assert finding["message"] == f"future blast radius 0 is incomplete: {why}"


@pytest.mark.parametrize(
    ("bound", "why"),
    [
        ("MAX_PARSED_BYTES", "the import graph needs are over the 2000 bytes it parses in one run"),
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


def _random_tree(rng: random.Random, n: int) -> dict[bytes, bytes]:
    """n modules in nested packages importing each other in every spelling."""
    dirs = ["a", "a/b", "a/b/c", "d", "a/e", "plain"]
    paths = [f"{d}/__init__.py" for d in dirs if d != "plain"]
    paths += [f"{rng.choice(dirs)}/m{i}.py" for i in range(n)]
    tree: dict[bytes, bytes] = {}
    for p in paths:
        lines = []
        for _ in range(rng.randrange(4)):
            other = rng.choice(paths).removesuffix(".py").removesuffix("/__init__")
            dotted = other.replace("/", ".")
            head, _, last = dotted.rpartition(".")
            lines.append(
                rng.choice(
                    [
                        f"import {dotted}",
                        f"from {head or dotted} import {last}" if head else f"import {dotted}",
                        f"from . import {last}",
                        f"from .. import {last}",
                        f"from .{last} import thing",
                        "from . import *",
                        f"import json  # {last}x",
                        "import os",
                    ]
                )
            )
        tree[p.encode()] = ("\n".join(lines) + "\n").encode()
    # Python reads identifiers NFKC-normalized: "ｍ" is "m", so this imports a module m<i>
    # whose name its bytes do not spell
    tree[b"a/wide.py"] = f"from a import ｍ{rng.randrange(n)}\n".encode()
    return tree


def _radius(
    changed: list[bytes],
    tree: dict[bytes, bytes],
    imports: dict[bytes, tuple[blast.RawImport, ...] | None] | None,
) -> blast.BlastRadius:
    return blast.blast_radius(
        [InventoryEntry(path=p, status=ChangeStatus.MODIFIED) for p in changed],
        build_time=lambda p: False,
        ci=lambda p: False,
        sensitive=lambda p: False,
        tree_files=tree,
        thresholds=None,
        tree_imports=imports,
    )


@pytest.mark.parametrize("seed", range(30))
def test_parsing_only_the_files_that_could_import_a_changed_module_counts_the_same(
    seed: int,
) -> None:
    rng = random.Random(seed)  # noqa: S311 (test data)
    tree = _random_tree(rng, 60)
    changed = rng.sample(sorted(tree), 3)
    whole = _radius(changed, tree, None)
    # as judge_policy reads a large tree: the changed files whole, some imports from the
    # cache, the others by their words, parsed only when they could matter
    others = [p for p in sorted(tree) if p not in changed]
    cached = set(rng.sample(others, 10))
    reader = blast.GraphReader(changed, tree)
    known = {p: blast.imports_from_source(tree[p]) for p in cached}
    for p in others:
        if p in cached:
            reader.add(p, known[p])
        else:
            reader.unknown(p, blast.import_words(tree[p], reader.words))
    while want := reader.wanted():
        for p in want:
            assert p not in known
            known[p] = blast.imports_from_source(tree[p])
            reader.add(p, known[p])
    present = {p: (tree[p] if p in changed else b"") for p in tree}
    read = _radius(changed, present, known)
    assert read.future == whole.future
    graph = read.detail["future"]["analyzers"][0]  # type: ignore[index]
    expected = whole.detail["future"]["analyzers"][0]  # type: ignore[index]
    for key in ("direct_importers", "direct_importers_count", "transitive_importers_count"):
        assert graph[key] == expected[key], key  # type: ignore[index]


def test_a_name_spelled_in_other_unicode_is_read() -> None:
    # "ｃore" is "core" to Python (NFKC): its bytes do not spell the word, so any file
    # with a non-ASCII byte is parsed
    tree = {
        b"pkg/__init__.py": b"",
        b"pkg/core.py": b"x = 1\n",
        b"pkg/wide.py": "from pkg import ｃore\n".encode(),
        b"pkg/other.py": b"import json\n",
    }
    reader = blast.GraphReader([b"pkg/core.py"], tree)
    for p in (b"pkg/wide.py", b"pkg/other.py"):
        reader.unknown(p, blast.import_words(tree[p], reader.words))
    assert reader.wanted() == {b"pkg/wide.py"}
    reader.add(b"pkg/wide.py", blast.imports_from_source(tree[b"pkg/wide.py"]))
    assert reader.wanted() == set()


def test_an_unchanged_lockfile_counts_by_name_not_by_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path)
    config = b"version: 1\nimage: python:3.12-slim\nchecks:\n  - {name: t, test: 'true'}\n"
    files = {b".github/proofgate.yml": config, b"pyproject.toml": b"[project]\nname = 'x'\n"}
    base = commit(repo, {**files, b"uv.lock": b"#" * 8192}, message="base")
    change = {b"pyproject.toml": b"[project]\nname = 'x'\ndependencies = ['y']\n"}
    commit(repo, change, branch="pr", parent=base, message="pr")
    small = _policy(repo_dir(repo), tmp_path / "c1", capsys)
    monkeypatch.setattr(policy_run, "MAX_ANALYZED_BYTES", 4096)  # under the lockfile's size
    large = _policy(repo_dir(repo), tmp_path / "c2", capsys)
    assert large == small
    assert _graph(large[1])["ran"] is True
