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
from gate.model import Verdict
from tests.github_standin.fixtures import REPO, running_standin
from tests.github_standin.server import GitHubStandIn
from tests.integration.test_action_e2e import (
    CONFIG,
    KEYS,
    Origin,
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
    bare = root / "origin.git"
    git(root, "init", "-q", "--bare", str(bare))
    git(work, "push", "-q", str(bare), f"{base}:refs/heads/main", "pr1:refs/pull/1/head")
    return Origin(bare, base, base, {1: head}, "", "")


@pytest.fixture
def standin(origin: Origin) -> Iterator[GitHubStandIn]:
    for server in running_standin():
        for sha in [origin.main, *origin.pulls.values()]:
            server.set_commit_tree(REPO, sha, git(origin.path, "rev-parse", f"{sha}^{{tree}}"))
        yield server


def test_matrix_shards_and_one_aggregate_check_run(
    action_image: str, standin: GitHubStandIn, origin: Origin, tmp_path: Path
) -> None:
    add_pull(standin, origin, 1)
    artifacts = tmp_path / "artifacts"
    heads = []
    for i in (1, 2, 3):
        shard = run_action(
            action_image,
            standin,
            origin,
            tmp_path / f"shard{i}",
            "pull_request",
            pr_event(origin, 1),
            PROOFGATE_SHARD=f"{i}/3",
        )
        assert shard.code == 0, shard.stderr
        assert shard.outputs["verdict"] == "PROVEN"
        assert f"proofgate shard {i}/3: PROVEN" in shard.summary
        # shard jobs never write the check run
        assert standin.calls("checks/create") == []
        shutil.copytree(shard.workspace / ".proofgate", artifacts / f"proofgate-shard-{i}")
        envelope = (shard.workspace / shard.outputs["receipt"]).read_bytes()
        predicate = receipt.unverified_statement(envelope)["predicate"]
        heads.append(sum(predicate["checks"][0]["tests"]["runs"]["head"].values()))  # type: ignore[index]
    assert sum(heads) == 6 * 4 + 1
    assert max(heads) < 6 * 4  # each ran a share

    agg = tmp_path / "aggregate"
    (agg / "workspace").mkdir(parents=True)
    shutil.copytree(artifacts, agg / "workspace" / "shards")
    result = run_action(
        action_image,
        standin,
        origin,
        agg,
        "pull_request",
        pr_event(origin, 1),
        PROOFGATE_MODE="aggregate",
        PROOFGATE_RECEIPTS="shards/*/receipt.json",
        PROOFGATE_VERIFY_KEYS=(KEYS / "trusted.pub").read_text(),
    )
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
    again = run_action(
        action_image,
        standin,
        origin,
        agg,
        "pull_request",
        pr_event(origin, 1),
        PROOFGATE_MODE="aggregate",
        PROOFGATE_RECEIPTS="shards/*/receipt.json",
        PROOFGATE_VERIFY_KEYS=(KEYS / "trusted.pub").read_text(),
    )
    assert again.code == 1
    assert again.outputs["verdict"] == "INCONCLUSIVE"
    (run,) = standin.check_runs()
    assert run.conclusion == "failure"
