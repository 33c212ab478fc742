"""`verify --github` (SPEC §5, issue 15): receipts found on a commit's check runs, through
the stand-in, checked against the released commit in a real repository.

A receipt vouches for a release only if it says how the commit got there: the repository,
the branch it was proven for (`trigger.base_ref`), a pull-request or merge-queue trigger,
the configuration blob of the released commit's own tree, the released tree, the verdict.
The check-run conclusion is never trusted: only a receipt that verifies counts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gate import receipt
from gate.faces import cli
from gate.faces.action import main
from gate.github.checks import (
    CHECK_NAME,
    OUTPUT_LIMIT_BYTES,
    GitHubChecks,
    RetryPolicy,
    embed_envelope,
)
from gate.github.receipts import LocalTrees, find_valid_receipt
from gate.model import JsonDict, Verdict
from tests.assets import sample
from tests.github_standin.fixtures import REPO, TOKEN, running_standin
from tests.github_standin.server import GitHubStandIn
from tests.gitutil import commit, make_repo

ASSETS = Path(__file__).resolve().parents[1] / "assets"
FAST = RetryPolicy(attempts=2, backoff=0.01, max_wait=1, timeout=5, write_interval=0)
VERIFY_REPO = "example/calc"
CONFIG = b"image: proofgate/cleanroom:latest\nchecks:\n  - name: unit\n    test: [pytest]\n"
LAX_CONFIG = b"image: proofgate/cleanroom:latest\nchecks:\n  - name: unit\n    test: [true]\n"
PR_MAIN: JsonDict = {"kind": "pull_request", "base_ref": "refs/heads/main", "pull_request": 7}


@dataclass(frozen=True)
class Release:
    """A commit in a real repository, as a release job sees it."""

    path: Path
    commit: str
    tree: str
    config_blob: str


def _release(tmp_path: Path, config: bytes = CONFIG) -> Release:
    repo = make_repo(tmp_path, "calc")
    oid = commit(repo, {b".github/proofgate.yml": config, b"src/calc.py": b"def add(a, b):\n"})
    c = repo[oid].peel(pygit2.Commit)
    blob = str(c.tree[".github/proofgate.yml"].id)
    return Release(path=Path(repo.workdir), commit=str(oid), tree=str(c.tree.id), config_blob=blob)


@pytest.fixture
def release(tmp_path: Path) -> Release:
    return _release(tmp_path)


@pytest.fixture
def standin(release: Release) -> Iterator[GitHubStandIn]:
    for server in running_standin():
        server.add_repo(VERIFY_REPO)
        for repo in (REPO, VERIFY_REPO):
            server.set_commit_tree(repo, release.commit, release.tree)
            server.set_commit_tree(repo, sample.OTHER_COMMIT, sample.OTHER_TREE)
        yield server


def signed_receipt(
    release: Release,
    *,
    trigger: JsonDict | None = PR_MAIN,
    config: JsonDict | None = None,
    verdict: Verdict = Verdict.PROVEN,
    repository: str = VERIFY_REPO,
    tree: str | None = None,
    builder: JsonDict | None = None,
    key: Ed25519PrivateKey | None = None,
    base: JsonDict | None = None,
) -> bytes:
    """A receipt for `release`'s commit, signed by the trusted test key unless `key`."""
    p = sample.predicate(verdict=verdict)
    tree = tree or release.tree
    p["head"] = {"commit": release.commit, "tree": release.tree}
    p["proven_tree"] = tree
    p["repository"] = repository
    if trigger is None:
        del p["trigger"]
    else:
        p["trigger"] = trigger
    p["config"] = config or {
        "source": "base-tree",
        "path": ".github/proofgate.yml",
        "blob": release.config_blob,
        "sha256": hashlib.sha256(CONFIG).hexdigest(),
    }
    if builder is not None:
        p["builder"] = builder
    if base is not None:
        p["base"] = base
    statement = receipt.build_statement(
        p, patch_sha256=sample.PATCH_SHA256, head_commit=release.commit, proven_tree=tree
    )
    return receipt.sign(receipt.serialize(statement), key or sample.key("trusted"))


def api_for(standin: GitHubStandIn, repository: str = VERIFY_REPO) -> GitHubChecks:
    return GitHubChecks(repository, TOKEN, api_url=standin.api_url, retry=FAST)


def trusted() -> list[Ed25519PublicKey]:
    return [receipt.load_public_key((ASSETS / "keys/trusted.pub").read_bytes(), source="t")]


def attach(
    standin: GitHubStandIn, sha: str, envelope: bytes, repository: str = VERIFY_REPO
) -> None:
    api = api_for(standin, repository)
    run_id = api.start_check(sha, name=CHECK_NAME, external_id=f"x{len(standin.runs)}")
    text = embed_envelope(envelope, limit=OUTPUT_LIMIT_BYTES, elsewhere="")
    # The conclusion says success whatever the receipt says: it must never count.
    api.complete_check(run_id, verdict=Verdict.PROVEN, title="PROVEN", summary="s", text=text)


def check(
    standin: GitHubStandIn,
    release: Release,
    *,
    sha: str | None = None,
    repository: str = VERIFY_REPO,
    branch: str | None = None,
    accept_reproof: bool = False,
    config_path: str = ".github/proofgate.yml",
) -> tuple[bool, str]:
    with LocalTrees(release.path) as trees:
        envelope, message = find_valid_receipt(
            api_for(standin, repository),
            sha or release.commit,
            trusted(),
            Verdict.PROVEN,
            blob_at=trees.blob_at,
            branch=branch,
            accept_reproof=accept_reproof,
            config_path=config_path,
        )
    return envelope is not None, message


# --- honest receipts are accepted -----------------------------------------------------


def test_pull_request_receipt_for_the_default_branch_verifies(
    standin: GitHubStandIn, release: Release
) -> None:
    attach(standin, release.commit, signed_receipt(release))
    ok, message = check(standin, release)
    assert ok, message
    assert message.startswith(f"valid PROVEN receipt for {release.commit}")
    assert "pull_request onto refs/heads/main, pull request #7" in message


def test_merge_queue_receipt_verifies(standin: GitHubStandIn, release: Release) -> None:
    trigger: JsonDict = {"kind": "merge_group", "base_ref": "refs/heads/main"}
    attach(standin, release.commit, signed_receipt(release, trigger=trigger))
    ok, message = check(standin, release)
    assert ok, message
    assert "merge_group onto refs/heads/main" in message


def test_verify_names_the_workflow_that_signed(standin: GitHubStandIn, release: Release) -> None:
    builder: JsonDict = {
        "workflow": "example/calc/.github/workflows/proofgate.yml@refs/heads/main",
        "run_id": "42",
        "ref": "refs/heads/main",
        "sha": release.commit,
    }
    attach(standin, release.commit, signed_receipt(release, builder=builder))
    ok, message = check(standin, release)
    assert ok, message
    assert "signed by workflow example/calc/.github/workflows/proofgate.yml@refs/heads/main" in (
        message
    )


# --- issue 15: the two ways to ship unproven code -------------------------------------


def test_pr_proven_into_a_laxer_branch_does_not_vouch_for_a_release(
    standin: GitHubStandIn, tmp_path: Path
) -> None:
    """A pull request into `lax` (its test is `true`) got a signed PROVEN whose proven
    tree is the head's own tree. Tagging that head must not make it release-valid."""
    release = _release(tmp_path / "lax", LAX_CONFIG)
    standin.set_commit_tree(VERIFY_REPO, release.commit, release.tree)
    lax: JsonDict = {"kind": "pull_request", "base_ref": "refs/heads/lax", "pull_request": 8}
    attach(standin, release.commit, signed_receipt(release, trigger=lax))
    ok, message = check(standin, release)
    assert not ok
    assert "trigger.base_ref is 'refs/heads/lax'; 'refs/heads/main' is required" in message


def test_reproof_of_a_pushed_commit_does_not_vouch_for_a_release(
    standin: GitHubStandIn, release: Release
) -> None:
    """A commit pushed straight to main, then re-proven by workflow_dispatch with its SHA:
    PROVEN with an empty patch that no policy judged."""
    reproof: JsonDict = {"kind": "commit", "base_ref": "refs/heads/main"}
    attach(standin, release.commit, signed_receipt(release, trigger=reproof))
    ok, message = check(standin, release)
    assert not ok
    assert "trigger.kind is 'commit'; 'merge_group or pull_request' is required" in message
    ok, message = check(standin, release, accept_reproof=True)
    assert ok, message


@pytest.mark.parametrize("kind", ["pull_request", "merge_group"])
def test_empty_change_onto_a_pushed_commit_does_not_vouch_for_a_release(
    standin: GitHubStandIn, release: Release, kind: str
) -> None:
    """A commit pushed straight to main, then a pull request (or queue group) whose head
    adds an empty commit on top: PROVEN, trigger `pull_request`, and its proven tree is
    the base's own tree. No policy judged any change: it is a re-proof of the base."""
    trigger: JsonDict = {"kind": kind, "base_ref": "refs/heads/main"}
    base: JsonDict = {"commit": sample.OTHER_COMMIT, "tree": release.tree}
    attach(standin, release.commit, signed_receipt(release, trigger=trigger, base=base))
    ok, message = check(standin, release)
    assert not ok
    assert (
        f"patch is empty: the proven tree {release.tree} is the base's own tree "
        f"(base {sample.OTHER_COMMIT}); a re-proof counts only with --accept-reproof"
    ) in message
    ok, message = check(standin, release, accept_reproof=True)
    assert ok, message


# --- every refusal names the field and both values ------------------------------------


OTHER_BLOB = "8" * 40
REFUSALS = [
    pytest.param(
        {},
        {"branch": "refs/heads/stable"},
        "trigger.base_ref is 'refs/heads/main'; 'refs/heads/stable' is required",
        id="branch-flag",
    ),
    pytest.param(
        {"trigger": None},
        {},
        "trigger.base_ref is None; 'refs/heads/main' is required",
        id="no-trigger",
    ),
    pytest.param(
        {"trigger": {"kind": "local", "base_ref": "refs/heads/main"}},
        {"accept_reproof": True},
        "trigger.kind is 'local'; 'commit or merge_group or pull_request' is required",
        id="local",
    ),
    pytest.param(
        {"config": {"source": "base-tree", "path": ".github/proofgate.yml", "blob": OTHER_BLOB}},
        {},
        f"config.blob (.github/proofgate.yml) is '{OTHER_BLOB}'; '{{blob}}' is required",
        id="other-config",
    ),
    pytest.param(
        {"config": {"source": "file", "path": "/tmp/lax.yml", "blob": "sha256:" + "9" * 64}},
        {},
        "config.source is 'file'; 'base-tree' is required",
        id="operator-config-file",
    ),
    pytest.param(
        # proven against a base that has since moved: base tip + patch, not the head's tree
        {"tree": "7" * 40},
        {},
        f"receipt is for tree {'7' * 40}, not {{tree}}",
        id="moved-base",
    ),
    pytest.param(
        {"verdict": Verdict.FAILED}, {}, "verdict is FAILED; PROVEN is required", id="failed"
    ),
    pytest.param(
        {"key": sample.key("untrusted")},
        {},
        "no valid signature by a trusted key",
        id="unknown-key",
    ),
]


@pytest.mark.parametrize(("made", "asked", "refusal"), REFUSALS)
def test_refusal_names_the_field_and_both_values(
    standin: GitHubStandIn,
    release: Release,
    made: dict[str, Any],
    asked: dict[str, Any],
    refusal: str,
) -> None:
    attach(standin, release.commit, signed_receipt(release, **made))
    ok, message = check(standin, release, **asked)
    assert not ok
    assert refusal.format(blob=release.config_blob, tree=release.tree) in message


def test_default_branch_is_read_from_the_api(standin: GitHubStandIn, release: Release) -> None:
    standin.repos[VERIFY_REPO].default_branch = "trunk"
    attach(standin, release.commit, signed_receipt(release))
    ok, message = check(standin, release)
    assert not ok
    assert "'refs/heads/trunk' is required" in message


def test_configuration_absent_from_the_released_tree_is_refused(
    standin: GitHubStandIn, release: Release
) -> None:
    moved = {"source": "base-tree", "path": "ci/proofgate.yml", "blob": release.config_blob}
    attach(standin, release.commit, signed_receipt(release, config=moved))
    ok, message = check(standin, release, config_path="ci/proofgate.yml")
    assert not ok
    assert (
        f"config.blob (ci/proofgate.yml) is '{release.config_blob}'; the released tree has "
        "no such file" in message
    )


def test_receipt_proven_under_another_config_file_in_the_tree_does_not_vouch(
    standin: GitHubStandIn, tmp_path: Path
) -> None:
    """The released tree carries the real configuration and a laxer one (a second
    workflow's quick checks, an example, a fixture). A receipt whose config is the lax
    file, signed by the same key, names a blob that is in the released tree, at its own
    path: it was not proven under the configuration releases are judged by."""
    repo = make_repo(tmp_path, "two-configs")
    oid = commit(
        repo,
        {b".github/proofgate.yml": CONFIG, b"ci/quick.yml": LAX_CONFIG, b"src/calc.py": b"x\n"},
    )
    c = repo[oid].peel(pygit2.Commit)
    release = Release(
        path=Path(repo.workdir),
        commit=str(oid),
        tree=str(c.tree.id),
        config_blob=str(c.tree[".github/proofgate.yml"].id),
    )
    standin.set_commit_tree(VERIFY_REPO, release.commit, release.tree)
    quick: JsonDict = {
        "source": "base-tree",
        "path": "ci/quick.yml",
        "blob": str(c.tree["ci/quick.yml"].id),
        "sha256": hashlib.sha256(LAX_CONFIG).hexdigest(),
    }
    attach(standin, release.commit, signed_receipt(release, config=quick))
    ok, message = check(standin, release)
    assert not ok, message
    assert "config.path" in message


def test_receipt_replayed_on_another_repository_fails_verify(
    standin: GitHubStandIn, release: Release
) -> None:
    """Same key, same commit and tree, but the receipt was made for another repository."""
    attach(standin, release.commit, signed_receipt(release), repository=REPO)
    ok, message = check(standin, release, repository=REPO)
    assert not ok
    assert f"receipt is for repository '{VERIFY_REPO}', not '{REPO}'" in message


def test_receipt_replayed_on_other_commit_fails_verify(
    standin: GitHubStandIn, release: Release
) -> None:
    attach(standin, sample.OTHER_COMMIT, signed_receipt(release))
    ok, message = check(standin, release, sha=sample.OTHER_COMMIT)
    assert not ok
    assert f"receipt is for commit {release.commit}, not {sample.OTHER_COMMIT}" in message


def test_missing_receipt_fails_even_with_a_success_conclusion(
    standin: GitHubStandIn, release: Release
) -> None:
    api = api_for(standin)
    run_id = api.start_check(release.commit, name=CHECK_NAME, external_id="x")
    api.complete_check(run_id, verdict=Verdict.PROVEN, title="PROVEN", summary="s", text="")
    ok, message = check(standin, release)
    assert not ok
    assert "no proofgate receipt" in message


def test_tampered_receipt_fails(standin: GitHubStandIn, release: Release) -> None:
    data = bytearray(signed_receipt(release))
    i = data.index(b'"payload":"') + 40
    data[i] = ord("A") if data[i] != ord("A") else ord("B")
    attach(standin, release.commit, bytes(data))
    ok, _ = check(standin, release)
    assert not ok


def test_one_valid_receipt_among_refused_ones_is_enough(
    standin: GitHubStandIn, release: Release
) -> None:
    lax: JsonDict = {"kind": "pull_request", "base_ref": "refs/heads/lax"}
    attach(standin, release.commit, signed_receipt(release))
    attach(standin, release.commit, signed_receipt(release, trigger=lax))
    attach(standin, release.commit, signed_receipt(release, key=sample.key("untrusted")))
    ok, message = check(standin, release)
    assert ok, message


def test_receipts_still_verify_with_securesystemslib(release: Release) -> None:
    """The independent DSSE implementation agrees with ours on the new fields."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

    pub = sample.key("trusted").public_key()
    key = SSlibKey.from_crypto(pub, keyid=receipt.keyid(pub))  # type: ignore[no-untyped-call]
    env = Envelope.from_dict(__import__("json").loads(signed_receipt(release)))
    assert list(env.verify([key], 1)) == [receipt.keyid(pub)]


# --- through the command line ----------------------------------------------------------


@pytest.fixture
def github_env(standin: GitHubStandIn, monkeypatch: pytest.MonkeyPatch) -> GitHubStandIn:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", standin.api_url)
    return standin


def _cli_verify(release: Release, *extra: str, repo: Path | None = None) -> int:
    return cli.main(
        [
            "verify",
            "--github",
            VERIFY_REPO,
            "--commit",
            release.commit,
            "--key",
            str(ASSETS / "keys/trusted.pub"),
            "--require",
            "PROVEN",
            "--repo",
            str(repo or release.path),
            *extra,
        ]
    )


def test_cli_verify_github_accepts_and_refuses(
    github_env: GitHubStandIn, release: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    attach(github_env, release.commit, signed_receipt(release))
    assert _cli_verify(release) == 0
    assert f"valid PROVEN receipt for {release.commit}" in capsys.readouterr().err
    assert _cli_verify(release, "--branch", "stable") == 1
    err = capsys.readouterr().err
    assert "proofgate: verify failed:" in err
    assert "trigger.base_ref is 'refs/heads/main'; 'refs/heads/stable' is required" in err
    assert _cli_verify(release, "--branch", "refs/heads/main") == 0


def test_cli_verify_github_needs_the_released_tree_locally(
    github_env: GitHubStandIn,
    release: Release,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    attach(github_env, release.commit, signed_receipt(release))
    elsewhere = make_repo(tmp_path, "elsewhere")
    commit(elsewhere, {b"README": b"another project\n"})
    assert _cli_verify(release, repo=Path(elsewhere.workdir)) == 2
    assert f"cannot read the released commit's tree {release.tree}" in capsys.readouterr().err


def test_file_verify_for_a_branch_refuses_a_receipt_for_a_moved_base(
    release: Release, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pull request proven against a base that has since moved proved base tip + patch,
    not its head's tree; under other rules, too. --github refuses it (see REFUSALS); the
    file verify of the same receipt for the same release must as well."""
    other = {"source": "base-tree", "path": ".github/proofgate.yml", "blob": OTHER_BLOB}
    path = tmp_path / "receipt.json"
    path.write_bytes(signed_receipt(release, tree="7" * 40, config=other))
    argv = ["verify", str(path), "--key", str(ASSETS / "keys/trusted.pub")]
    argv += ["--commit", release.commit, "--repository", VERIFY_REPO, "--branch", "main"]
    argv += ["--require", "PROVEN", "--repo", str(release.path)]
    assert cli.main(argv) == 1, capsys.readouterr().err


@pytest.mark.parametrize(
    "branch",
    ["refs/tags/v1", "", "..", "a..b", "main branch", "refs/heads/", "x.lock", "-x", "a/"],
    ids=["tag", "empty", "dotdot", "inner-dotdot", "space", "no-name", "lock", "dash", "slash"],
)
def test_bad_branch_exits_2(
    github_env: GitHubStandIn,
    release: Release,
    branch: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _cli_verify(release, f"--branch={branch}") == 2
    assert "proofgate: --branch:" in capsys.readouterr().err


def test_action_verify_mode(standin: GitHubStandIn, release: Release, tmp_path: Path) -> None:
    reproof: JsonDict = {"kind": "commit", "base_ref": "refs/heads/main"}
    envelope = signed_receipt(release, trigger=reproof)
    attach(standin, release.commit, envelope)
    output = tmp_path / "output"
    env = {
        "PROOFGATE_MODE": "verify",
        "PROOFGATE_GITHUB_TOKEN": TOKEN,
        "PROOFGATE_VERIFY_KEYS": (ASSETS / "keys/trusted.pub").read_text(),
        "GITHUB_REPOSITORY": VERIFY_REPO,
        "GITHUB_API_URL": standin.api_url,
        "GITHUB_SHA": release.commit,
        "GITHUB_WORKSPACE": str(release.path),
        "GITHUB_OUTPUT": str(output),
        "PROOFGATE_OUT_DIR": str(tmp_path / "out"),
    }
    assert main(env) == 1  # a re-proof does not count by default
    assert output.read_text() == "verdict=UNVERIFIED\n"

    output.write_text("")
    assert main({**env, "PROOFGATE_ACCEPT_REPROOF": "true"}) == 0
    lines = output.read_text().splitlines()
    assert lines[0] == "verdict=PROVEN"
    assert (tmp_path / "out/verified-receipt.json").read_bytes() == envelope

    output.write_text("")
    assert main({**env, "PROOFGATE_ACCEPT_REPROOF": "true", "PROOFGATE_BRANCH": "lax"}) == 1
    output.write_text("")
    assert main({**env, "PROOFGATE_BRANCH": "refs/tags/v1"}) == 2
