"""`verify --github` (issue 8): receipts found on a commit's check runs, through the stand-in.

Receipts are the fixed assets in tests/assets/receipts (PROVEN for HEAD_COMMIT, signed by
tests/assets/keys/trusted.key). The check-run conclusion is never trusted: only a receipt
that verifies for exactly that commit counts.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gate import receipt
from gate.action import main, verify_from_github
from gate.github.checks import (
    CHECK_NAME,
    OUTPUT_LIMIT_BYTES,
    GitHubChecks,
    RetryPolicy,
    embed_envelope,
)
from gate.model import Verdict
from tests.assets.sample import HEAD_COMMIT, HEAD_TREE, OTHER_COMMIT
from tests.github_standin.fixtures import REPO, TOKEN, running_standin
from tests.github_standin.server import GitHubStandIn

ASSETS = Path(__file__).resolve().parents[1] / "assets"
FAST = RetryPolicy(attempts=2, backoff=0.01, max_wait=1, timeout=5, write_interval=0)


# The repository the asset receipts were made for (their predicate's `repository`).
VERIFY_REPO = "example/calc"


@pytest.fixture
def standin() -> Iterator[GitHubStandIn]:
    for server in running_standin():
        server.add_repo(VERIFY_REPO)
        # The commits' own trees, as repos/get-commit reports them.
        for repo in (REPO, VERIFY_REPO):
            server.set_commit_tree(repo, HEAD_COMMIT, HEAD_TREE)
            server.set_commit_tree(repo, OTHER_COMMIT, "6" * 40)
        yield server


def api_for(standin: GitHubStandIn, repository: str = VERIFY_REPO) -> GitHubChecks:
    return GitHubChecks(repository, TOKEN, api_url=standin.api_url, retry=FAST)


def trusted() -> list[Ed25519PublicKey]:
    return [receipt.load_public_key((ASSETS / "keys/trusted.pub").read_bytes(), source="t")]


def attach(
    standin: GitHubStandIn,
    sha: str,
    envelope: bytes,
    verdict: Verdict,
    repository: str = VERIFY_REPO,
) -> None:
    api = api_for(standin, repository)
    run_id = api.start_check(sha, name=CHECK_NAME, external_id=f"x{len(standin.runs)}")
    text = embed_envelope(envelope, limit=OUTPUT_LIMIT_BYTES, elsewhere="")
    api.complete_check(run_id, verdict=verdict, title=verdict.value, summary="s", text=text)


def proven() -> bytes:
    return (ASSETS / "receipts/proven.json").read_bytes()


def test_valid_proven_receipt_verifies(standin: GitHubStandIn) -> None:
    attach(standin, HEAD_COMMIT, proven(), Verdict.PROVEN)
    ok, message = verify_from_github(api_for(standin), HEAD_COMMIT, trusted(), Verdict.PROVEN)
    assert ok, message
    assert message.startswith(f"valid PROVEN receipt for {HEAD_COMMIT}")


def test_missing_receipt_fails_even_with_a_success_conclusion(standin: GitHubStandIn) -> None:
    api = api_for(standin)
    run_id = api.start_check(HEAD_COMMIT, name=CHECK_NAME, external_id="x")
    api.complete_check(run_id, verdict=Verdict.PROVEN, title="PROVEN", summary="s", text="")
    ok, message = verify_from_github(api, HEAD_COMMIT, trusted(), Verdict.PROVEN)
    assert not ok
    assert "no proofgate receipt" in message


def test_receipt_forged_with_an_unknown_key_fails(standin: GitHubStandIn) -> None:
    forged = (ASSETS / "receipts/proven-signed-by-untrusted-key.json").read_bytes()
    attach(standin, HEAD_COMMIT, forged, Verdict.PROVEN)
    ok, message = verify_from_github(api_for(standin), HEAD_COMMIT, trusted(), Verdict.PROVEN)
    assert not ok
    assert "none valid" in message


def test_receipt_replayed_on_other_commit_fails_verify(standin: GitHubStandIn) -> None:
    attach(standin, OTHER_COMMIT, proven(), Verdict.PROVEN)
    ok, message = verify_from_github(api_for(standin), OTHER_COMMIT, trusted(), Verdict.PROVEN)
    assert not ok
    assert "none valid" in message


def test_receipt_proven_against_a_moved_base_does_not_vouch_for_the_head(
    standin: GitHubStandIn,
) -> None:
    """The receipt names the head commit, but its proven tree (base tip + patch) is not that
    commit's own tree: it says nothing about the head as released."""
    standin.set_commit_tree(VERIFY_REPO, HEAD_COMMIT, "7" * 40)
    attach(standin, HEAD_COMMIT, proven(), Verdict.PROVEN)
    ok, message = verify_from_github(api_for(standin), HEAD_COMMIT, trusted(), Verdict.PROVEN)
    assert not ok
    assert "tree" in message


def test_receipt_replayed_on_another_repository_fails_verify(standin: GitHubStandIn) -> None:
    """Same key, same commit and tree, but the receipt was made for another repository."""
    attach(standin, HEAD_COMMIT, proven(), Verdict.PROVEN, repository=REPO)
    ok, message = verify_from_github(api_for(standin, REPO), HEAD_COMMIT, trusted(), Verdict.PROVEN)
    assert not ok
    assert "repository" in message


def test_tampered_receipt_fails(standin: GitHubStandIn) -> None:
    data = bytearray(proven())
    i = data.index(b'"payload":"') + 40
    data[i] = ord("A") if data[i] != ord("A") else ord("B")
    attach(standin, HEAD_COMMIT, bytes(data), Verdict.PROVEN)
    ok, _ = verify_from_github(api_for(standin), HEAD_COMMIT, trusted(), Verdict.PROVEN)
    assert not ok


def test_failed_receipt_does_not_meet_require_proven(standin: GitHubStandIn) -> None:
    attach(standin, HEAD_COMMIT, (ASSETS / "receipts/failed.json").read_bytes(), Verdict.FAILED)
    ok, _ = verify_from_github(api_for(standin), HEAD_COMMIT, trusted(), Verdict.PROVEN)
    assert not ok


def test_one_valid_receipt_among_forged_ones_is_enough(standin: GitHubStandIn) -> None:
    attach(standin, HEAD_COMMIT, proven(), Verdict.PROVEN)
    forged = (ASSETS / "receipts/proven-signed-by-untrusted-key.json").read_bytes()
    attach(standin, HEAD_COMMIT, forged, Verdict.PROVEN)
    ok, message = verify_from_github(api_for(standin), HEAD_COMMIT, trusted(), Verdict.PROVEN)
    assert ok, message


def test_action_verify_mode(standin: GitHubStandIn, tmp_path: Path) -> None:
    attach(standin, HEAD_COMMIT, proven(), Verdict.PROVEN)
    output = tmp_path / "output"
    env = {
        "PROOFGATE_MODE": "verify",
        "PROOFGATE_GITHUB_TOKEN": TOKEN,
        "PROOFGATE_VERIFY_KEYS": (ASSETS / "keys/trusted.pub").read_text(),
        "GITHUB_REPOSITORY": VERIFY_REPO,
        "GITHUB_API_URL": standin.api_url,
        "GITHUB_SHA": HEAD_COMMIT,
        "GITHUB_WORKSPACE": str(tmp_path),
        "GITHUB_OUTPUT": str(output),
    }
    assert main(env) == 0
    lines = output.read_text().splitlines()
    assert lines[0] == "verdict=PROVEN"
    assert lines[1] == "receipt=.proofgate/verified-receipt.json"
    assert (tmp_path / ".proofgate/verified-receipt.json").read_bytes() == proven()

    output.write_text("")
    assert main({**env, "GITHUB_SHA": OTHER_COMMIT}) == 1
    assert output.read_text() == "verdict=UNVERIFIED\n"
