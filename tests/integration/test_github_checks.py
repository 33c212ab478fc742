"""GitHubChecks (PyGithub over real HTTP) against the OpenAPI-validating stand-in.

Every test runs under the stand-in fixture, which fails the test if any request or
response did not match GitHub's OpenAPI description.
"""

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.github.checks import (
    CHECK_NAME,
    OUTPUT_LIMIT_BYTES,
    GitHubChecks,
    RetryPolicy,
    embed_envelope,
    extract_envelopes,
    fit_bytes,
)
from gate.github.interface import Annotation, CheckAction, GitHubError
from gate.model import Verdict
from tests.github_standin.fixtures import REPO, TOKEN, running_standin
from tests.github_standin.server import Fault, GitHubStandIn

SHA = "1" * 40
FAST = RetryPolicy(attempts=4, backoff=0.01, max_wait=2.0, timeout=1, write_interval=0)


@pytest.fixture
def standin() -> Iterator[GitHubStandIn]:
    yield from running_standin()


@pytest.fixture
def ghes() -> Iterator[GitHubStandIn]:
    yield from running_standin(base_path="/api/v3")


def checks_for(standin: GitHubStandIn, **kw: object) -> GitHubChecks:
    return GitHubChecks(REPO, TOKEN, api_url=standin.api_url, retry=FAST, **kw)  # type: ignore[arg-type]


def some_annotations(n: int) -> tuple[Annotation, ...]:
    return tuple(
        Annotation(path=f"src/f{i}.py", start_line=1, end_line=1, level="warning", message=f"m{i}")
        for i in range(n)
    )


def test_check_run_is_created_in_progress_then_completed(standin: GitHubStandIn) -> None:
    api = checks_for(standin)
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="proofgate;pr=1")
    (run,) = standin.check_runs()
    assert (run.id, run.status, run.conclusion) == (run_id, "in_progress", None)
    assert run.external_id == "proofgate;pr=1"

    api.complete_check(
        run_id, verdict=Verdict.PROVEN, title="PROVEN", summary="# ok", text="receipt"
    )
    (run,) = standin.check_runs()
    assert (run.status, run.conclusion, run.title) == ("completed", "success", "PROVEN")
    assert (run.summary, run.text) == ("# ok", "receipt")


@pytest.mark.parametrize(
    ("verdict", "conclusion"),
    [
        (Verdict.PROVEN, "success"),
        (Verdict.FAILED, "failure"),
        (Verdict.HELD, "action_required"),
        (Verdict.BLOCKED, "failure"),
        (Verdict.INCONCLUSIVE, "failure"),
        (None, "failure"),
    ],
    ids=["proven", "failed", "held", "blocked", "inconclusive", "error"],
)
def test_conclusion_follows_the_verdict_never_neutral_or_skipped(
    standin: GitHubStandIn, verdict: Verdict | None, conclusion: str
) -> None:
    api = checks_for(standin)
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="x")
    api.complete_check(
        run_id,
        verdict=verdict,
        title="t",
        summary="s",
        text="",
        details_url="https://ci.example/run/1",
    )
    (run,) = standin.check_runs()
    assert run.conclusion == conclusion
    assert run.conclusion not in ("neutral", "skipped")
    assert run.details_url == "https://ci.example/run/1"


def test_output_is_cut_to_65535_bytes_not_characters(standin: GitHubStandIn) -> None:
    # 40,000 two-byte characters: under the schema's character limit, over GitHub's bytes
    summary = "é" * 40_000
    text = "€" * 30_000  # three bytes each
    api = checks_for(standin)
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="x")
    api.complete_check(run_id, verdict=Verdict.FAILED, title="t", summary=summary, text=text)
    (run,) = standin.check_runs()
    assert run.summary is not None
    assert run.text is not None
    for value in (run.summary, run.text):
        assert 65_000 < len(value.encode("utf-8")) <= OUTPUT_LIMIT_BYTES
        assert value.endswith("the full receipt is in the job summary)*")
    assert run.summary.startswith("é" * 100)


@given(st.text(min_size=0, max_size=300), st.integers(min_value=60, max_value=400))
def test_fit_bytes_never_splits_a_character(text: str, limit: int) -> None:
    cut = fit_bytes(text, limit, note="[cut]")
    assert len(cut.encode("utf-8")) <= limit
    if len(text.encode("utf-8")) <= limit:
        assert cut == text
    else:
        assert cut.endswith("[cut]")
        assert text.startswith(cut[: -len("\n\n[cut]")])


def test_annotations_go_in_batches_of_50(standin: GitHubStandIn) -> None:
    api = checks_for(standin)
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="x")
    api.complete_check(
        run_id,
        verdict=Verdict.HELD,
        title="t",
        summary="s",
        text="",
        annotations=some_annotations(120),
    )
    patches = standin.calls("checks/update")
    sizes = [
        len(p.body["output"].get("annotations", []))  # type: ignore[index]
        for p in patches
    ]
    assert sizes == [50, 50, 20]
    (run,) = standin.check_runs()
    assert len(run.annotations) == 120
    assert run.conclusion == "action_required"
    # the conclusion is set by the last request only
    assert [("conclusion" in p.body) for p in patches] == [False, False, True]  # type: ignore[operator]


def test_rerun_updates_the_same_check_run(standin: GitHubStandIn) -> None:
    for verdict in (Verdict.FAILED, Verdict.PROVEN):
        api = checks_for(standin)  # a fresh process: nothing cached
        run_id = api.start_check(SHA, name=CHECK_NAME, external_id="proofgate;pr=7")
        assert standin.check_runs()[0].status == "in_progress"
        api.complete_check(
            run_id,
            verdict=verdict,
            title=verdict.value,
            summary="s",
            text="",
            annotations=some_annotations(3),
        )
    runs = standin.check_runs()
    assert len(runs) == 1
    assert len(standin.calls("checks/create")) == 1
    assert runs[0].conclusion == "success"
    assert len(runs[0].annotations) == 3  # not appended twice


def test_other_external_id_gets_its_own_run(standin: GitHubStandIn) -> None:
    api = checks_for(standin)
    a = api.start_check(SHA, name=CHECK_NAME, external_id="proofgate;pr=1")
    b = api.start_check(SHA, name=CHECK_NAME, external_id="proofgate;merge-group")
    assert a != b
    assert len(standin.check_runs()) == 2


def test_post_answered_with_502_after_creating_makes_no_duplicate(
    standin: GitHubStandIn,
) -> None:
    standin.inject(Fault("checks/create", "server-error-after"))
    api = checks_for(standin)
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="x")
    assert [r.id for r in standin.check_runs()] == [run_id]
    assert len(standin.calls("checks/create")) == 1  # found by external id, not re-posted


def test_post_failing_with_5xx_is_retried(standin: GitHubStandIn) -> None:
    standin.inject(Fault("checks/create", "server-error", times=2))
    api = checks_for(standin)
    api.start_check(SHA, name=CHECK_NAME, external_id="x")
    assert [c.status for c in standin.calls("checks/create")] == [502, 502, 201]
    assert len(standin.check_runs()) == 1


def test_post_timing_out_after_creating_makes_no_duplicate(standin: GitHubStandIn) -> None:
    standin.inject(Fault("checks/create", "slow", delay=2.5))
    api = checks_for(standin)  # 1 s client timeout
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="x")
    assert [r.id for r in standin.check_runs()] == [run_id]


def test_secondary_rate_limit_waits_for_retry_after(standin: GitHubStandIn) -> None:
    waits: list[float] = []
    standin.inject(Fault("checks/create", "secondary-rate-limit", retry_after=1))
    api = checks_for(standin, sleep=waits.append)
    api.start_check(SHA, name=CHECK_NAME, external_id="x")
    assert waits == [1.0]
    assert [c.status for c in standin.calls("checks/create")] == [403, 201]
    assert len(standin.check_runs()) == 1


def test_reads_retry_on_5xx_and_secondary_rate_limit(standin: GitHubStandIn) -> None:
    standin.add_pull(REPO, 3, head_sha=SHA, base_sha="2" * 40)
    standin.inject(Fault("pulls/get", "server-error"))
    standin.inject(Fault("pulls/get", "secondary-rate-limit", retry_after=0))
    assert checks_for(standin).get_pull(3).head_sha == SHA
    assert [c.status for c in standin.calls("pulls/get")] == [502, 403, 200]


def test_api_failing_for_good_is_a_clear_error(standin: GitHubStandIn) -> None:
    standin.inject(Fault("checks/create", "server-error", times=10))
    with pytest.raises(GitHubError, match="kept failing after 4 attempts"):
        checks_for(standin).start_check(SHA, name=CHECK_NAME, external_id="x")
    assert standin.check_runs() == []


def test_missing_checks_write_names_the_permissions_block(standin: GitHubStandIn) -> None:
    standin.repos[REPO].checks_write = False
    with pytest.raises(GitHubError) as caught:
        checks_for(standin).start_check(SHA, name=CHECK_NAME, external_id="x")
    message = str(caught.value)
    assert "HTTP 403: Resource not accessible by integration" in message
    assert "permissions: { checks: write, contents: read, pull-requests: read }" in message
    assert "pull_request_target" in message
    assert len(standin.calls("checks/create")) == 1  # a real 403 is not retried


def test_enterprise_server_base_url(ghes: GitHubStandIn) -> None:
    assert ghes.api_url.endswith("/api/v3")
    api = checks_for(ghes)
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="x")
    api.complete_check(run_id, verdict=Verdict.PROVEN, title="t", summary="s", text="")
    assert ghes.requests
    assert all(r.path.startswith("/api/v3/repos/") for r in ghes.requests)
    assert ghes.check_runs()[0].conclusion == "success"


def test_requested_action_button_is_offered(standin: GitHubStandIn) -> None:
    api = checks_for(standin)
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="x")
    button = CheckAction(label="Approve", description="Approve this patch", identifier="approve")
    api.complete_check(
        run_id, verdict=Verdict.HELD, title="t", summary="s", text="", actions=(button,)
    )
    assert standin.check_runs()[0].actions == [button.to_dict()]


def test_permissions_pulls_and_reviews(standin: GitHubStandIn) -> None:
    standin.set_permission(REPO, "maint", "write", "maintain")
    standin.set_permission(REPO, "boss", "admin")
    standin.set_permission(REPO, "reader", "read")
    standin.add_pull(REPO, 9, head_sha=SHA, base_sha="2" * 40, head_repo="forker/widgets")
    standin.add_review(REPO, 9, user="maint", state="APPROVED", commit_id=SHA)
    api = checks_for(standin)
    perms = [api.collaborator_permission(u) for u in ("maint", "boss", "reader", "stranger")]
    assert perms == ["write", "admin", "read", "none"]
    pull = api.get_pull(9)
    assert (pull.head_sha, pull.base_ref, pull.fork) == (SHA, "main", True)
    (review,) = api.list_reviews(9)
    assert (review.login, review.state, review.commit_id) == ("maint", "APPROVED", SHA)
    assert review.submitted_at == "2026-01-02T03:04:05Z"
    with pytest.raises(GitHubError, match="not found"):
        api.get_pull(404)


def test_envelope_round_trips_through_check_run_text(standin: GitHubStandIn) -> None:
    envelope = b'{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[]}'
    api = checks_for(standin)
    run_id = api.start_check(SHA, name=CHECK_NAME, external_id="x")
    text = embed_envelope(envelope, limit=OUTPUT_LIMIT_BYTES, elsewhere="")
    api.complete_check(run_id, verdict=Verdict.PROVEN, title="t", summary="s", text=text)
    assert api.receipts_for_commit(SHA) == [envelope]
    assert api.receipts_for_commit("3" * 40) == []


def test_envelope_too_large_leaves_its_digest_and_where_to_find_it() -> None:
    import os

    envelope = os.urandom(60_000)  # incompressible
    text = embed_envelope(envelope, limit=OUTPUT_LIMIT_BYTES, elsewhere="See the run's artifact.")
    assert len(text.encode()) < 1000
    assert "See the run's artifact." in text
    assert extract_envelopes(text) == []


def test_block_whose_digest_does_not_match_is_ignored() -> None:
    text = embed_envelope(b"envelope", limit=OUTPUT_LIMIT_BYTES, elsewhere="")
    other = embed_envelope(b"other", limit=OUTPUT_LIMIT_BYTES, elsewhere="")
    digest = text.split("sha256=")[1][:64]
    forged = other.replace(other.split("sha256=")[1][:64], digest)
    assert extract_envelopes(text) == [b"envelope"]
    assert extract_envelopes(forged) == []
