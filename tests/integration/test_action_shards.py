"""The sharded workflow of docs/action.md, end to end against the GitHub stand-in: three
matrix jobs run the Action with `shard: I/3` (no check run), their `.proofgate/` folders
are the uploaded artifacts (a shared folder stands in for upload/download-artifact), and
the aggregate job (`mode: aggregate`) posts the one check run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gate import receipt
from gate.model import Verdict, hashed_shard
from gate.proof.shard import by_path_hash
from tests.github_standin.fixtures import REPO, running_standin
from tests.github_standin.server import GitHubStandIn
from tests.integration.test_action_e2e import (
    CONFIG,
    KEYS,
    Origin,
    Result,
    action_image,
    add_pull,
    git,
    pr_event,
    run_action,
    write_commit,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]
__all__ = ["action_image"]  # the fixture, shared with the single-job e2e

CALC = "def add(a, b):\n    return a + b\n"


MODULES = [f"tests/test_mod{f}.py" for f in range(6)]


def _emptied() -> dict[str, str]:
    """Shard 3's test files of the base split (by path hash), each moved under
    `tests/suite/` to a name whose hash puts it on another shard: shard 3's share of the
    pull request's head collects no test (an empty share), and no test is lost."""
    moves: dict[str, str] = {}
    for old, shard in by_path_hash(MODULES, 3).items():
        if shard != 3:
            continue
        stem = old.rsplit("/", 1)[1][: -len(".py")]
        moves[old] = next(
            new for k in range(100) if hashed_shard(new := f"tests/suite/{stem}_{k}.py", 3) != 3
        )
    return moves


def _suite() -> dict[str, str]:
    files = {".github/proofgate.yml": CONFIG, "calc.py": CALC}
    for f in range(6):
        body = "from calc import add\n"
        for t in range(4):
            body += f"\n\ndef test_{f}_{t}():\n    assert add({t}, {f}) == {t + f}\n"
        files[f"tests/test_mod{f}.py"] = body
    return files


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Origin:
    root = tmp_path_factory.mktemp("origin")
    work = root / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    base = write_commit(work, _suite(), "base")
    git(work, "checkout", "-q", "-b", "pr1", base)
    head = write_commit(
        work,
        {
            "calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n",
            "tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n"
            "    assert mul(2, 3) == 6\n",
        },
        "pr 1",
    )
    git(work, "checkout", "-q", "-b", "pr2", base)
    for old, new in _emptied().items():
        (work / new).parent.mkdir(parents=True, exist_ok=True)
        git(work, "mv", old, new)
    moved = write_commit(work, {}, "pr 2: shard 3's test files moved")
    bare = root / "origin.git"
    git(root, "init", "-q", "--bare", str(bare))
    git(
        work,
        "push",
        "-q",
        str(bare),
        f"{base}:refs/heads/main",
        "pr1:refs/pull/1/head",
        "pr2:refs/pull/2/head",
    )
    return Origin(bare, base, base, {1: head, 2: moved}, "", "")


@pytest.fixture
def standin(origin: Origin) -> Iterator[GitHubStandIn]:
    for server in running_standin():
        for sha in [origin.main, *origin.pulls.values()]:
            server.set_commit_tree(REPO, sha, git(origin.path, "rev-parse", f"{sha}^{{tree}}"))
        yield server


def _shard_job(
    image: str, standin: GitHubStandIn, origin: Origin, tmp: Path, pull: int, i: int
) -> tuple[Result, dict[str, object]]:
    """Matrix job `shard: I/3`: its result and the predicate of the receipt it uploads
    (copied into `tmp/artifacts`, as upload-artifact would)."""
    shard = run_action(
        image,
        standin,
        origin,
        tmp / f"shard{i}",
        "pull_request",
        pr_event(origin, pull),
        PROOFGATE_SHARD=f"{i}/3",
    )
    assert shard.code == 0, shard.stderr
    shutil.copytree(shard.workspace / ".proofgate", tmp / "artifacts" / f"proofgate-shard-{i}")
    envelope = (shard.workspace / shard.outputs["receipt"]).read_bytes()
    predicate = receipt.unverified_statement(envelope)["predicate"]
    assert isinstance(predicate, dict)
    return shard, predicate


def _aggregate_job(
    image: str, standin: GitHubStandIn, origin: Origin, agg: Path, pull: int
) -> Result:
    """The aggregate job (`mode: aggregate`) over `agg/workspace/shards/*/receipt.json`."""
    return run_action(
        image,
        standin,
        origin,
        agg,
        "pull_request",
        pr_event(origin, pull),
        PROOFGATE_MODE="aggregate",
        PROOFGATE_RECEIPTS="shards/*/receipt.json",
        PROOFGATE_VERIFY_KEYS=(KEYS / "trusted.pub").read_text(),
    )


def test_matrix_shards_and_one_aggregate_check_run(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    add_pull(standin, origin, 1)
    heads = []
    for i in (1, 2, 3):
        shard, predicate = _shard_job(action_image, standin, origin, tmp_path, 1, i)
        assert shard.outputs["verdict"] == "PROVEN"
        assert f"proofgate shard {i}/3: PROVEN" in shard.summary
        # shard jobs never write the check run
        assert standin.calls("checks/create") == []
        heads.append(sum(predicate["checks"][0]["tests"]["runs"]["head"].values()))  # type: ignore[index]
    assert sum(heads) == 6 * 4 + 1
    assert max(heads) < 6 * 4  # each ran a share

    agg = tmp_path / "aggregate"
    (agg / "workspace").mkdir(parents=True)
    shutil.copytree(tmp_path / "artifacts", agg / "workspace" / "shards")
    result = _aggregate_job(action_image, standin, origin, agg, 1)
    assert result.code == 0, result.stderr
    assert result.outputs["verdict"] == "PROVEN"
    (run,) = standin.check_runs()
    assert (run.head_sha, run.conclusion, run.name) == (origin.pulls[1], "success", "proofgate")
    pub = receipt.load_public_key((KEYS / "trusted.pub").read_bytes(), source="test key")
    envelope = (result.workspace / result.outputs["receipt"]).read_bytes()
    statement = receipt.verify_statement(envelope, [pub], require=Verdict.PROVEN)
    predicate = statement["predicate"]
    assert isinstance(predicate, dict)
    assert [s["index"] for s in predicate["aggregate"]["shards"]] == [1, 2, 3]
    assert predicate["checks"][0]["tests"]["runs"]["head"]["pass"] == 25

    # a missing shard: the aggregate job still posts the one check run, failing
    shutil.rmtree(agg / "workspace" / "shards" / "proofgate-shard-3")
    again = _aggregate_job(action_image, standin, origin, agg, 1)
    assert again.code == 1
    assert again.outputs["verdict"] == "INCONCLUSIVE"
    (run,) = standin.check_runs()
    assert run.conclusion == "failure"


def test_matrix_with_an_empty_share_reaches_one_proven_check_run(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    """SPEC §3.3: a pull request that moves shard 3's test files away leaves shard 3 with
    an empty share; that shard's job is PROVEN over its share (not FAILED for pytest's
    status 5), records the empty share, and the aggregate job's one check run is the
    one-job proof's PROVEN (every test moved, none lost)."""
    add_pull(standin, origin, 2)
    empty = []
    for i in (1, 2, 3):
        shard, predicate = _shard_job(action_image, standin, origin, tmp_path, 2, i)
        assert shard.outputs["verdict"] == "PROVEN", shard.stderr
        empty.append(predicate["shard"]["checks"]["unit"]["empty"])  # type: ignore[index]
    assert empty == [False, False, True]

    agg = tmp_path / "aggregate"
    (agg / "workspace").mkdir(parents=True)
    shutil.copytree(tmp_path / "artifacts", agg / "workspace" / "shards")
    result = _aggregate_job(action_image, standin, origin, agg, 2)
    assert result.code == 0, result.stderr
    assert result.outputs["verdict"] == "PROVEN"
    (run,) = standin.check_runs()
    assert (run.head_sha, run.conclusion) == (origin.pulls[2], "success")
    envelope = (result.workspace / result.outputs["receipt"]).read_bytes()
    predicate = receipt.unverified_statement(envelope)["predicate"]
    check = predicate["checks"][0]  # type: ignore[index]
    assert check["empty_shares"] == [3]
    assert check["tests"]["runs"]["head"]["pass"] == 24
    assert check["tests"]["lost"] == []

    # the one-job proof of the same pull request says the same
    one = run_action(
        action_image, standin, origin, tmp_path / "one", "pull_request", pr_event(origin, 2)
    )
    assert (one.code, one.outputs["verdict"]) == (result.code, result.outputs["verdict"])
    whole = receipt.unverified_statement((one.workspace / one.outputs["receipt"]).read_bytes())
    assert whole["predicate"]["checks"][0]["tests"]["runs"] == check["tests"]["runs"]  # type: ignore[index]
