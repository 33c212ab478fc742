"""A job's reach is what the files grant it (SPEC §2.1): workflows read as GitHub reads them."""

from __future__ import annotations

import pytest

from gate.policy.workflows import WorkflowError, parse_workflow, privileged_jobs

WF = b".github/workflows/x.yml"


def _job(body: str, *, on: str = "push", top: str = "") -> str:
    head = f"on: {on}\n{top}jobs:\n  j:\n    runs-on: ubuntu-latest\n"
    return f"{head}{body}    steps:\n      - run: make\n"


# id: (workflow, a grant the job `j` reaches (None: it reaches nothing))
REACH: dict[str, tuple[str, str | None]] = {
    "nothing": (_job(""), None),
    "contents-write": (_job("    permissions:\n      contents: write\n"), "contents: write"),
    "id-token-write": (_job("    permissions:\n      id-token: write\n"), "id-token: write"),
    "write-all": (_job("", top="permissions: write-all\n"), "permissions: write-all"),
    "read-all": (_job("", top="permissions: read-all\n"), None),
    "secret": (_job("    env:\n      T: ${{ secrets.PYPI_TOKEN }}\n"), "secret PYPI_TOKEN"),
    "github-token-is-no-secret": (_job("    env:\n      T: ${{ secrets.GITHUB_TOKEN }}\n"), None),
    "environment": (_job("    environment: pypi\n"), "environment pypi"),
    "self-hosted": (_job("").replace("ubuntu-latest", "[self-hosted, linux]"), "not GitHub-hosted"),
    "unknown-label": (_job("").replace("ubuntu-latest", "big-box"), "not GitHub-hosted (big-box)"),
    "hosted-matrix": (
        _job("    strategy:\n      matrix:\n        os: [ubuntu-24.04, macos-14]\n").replace(
            "ubuntu-latest", "${{ matrix.os }}"
        ),
        None,
    ),
    "input-runner": (_job("").replace("ubuntu-latest", "${{ inputs.runner }}"), "not GitHub"),
    "pull-request-target": (_job("", on="pull_request_target"), "trigger pull_request_target"),
    "workflow-run": (_job("", on="{workflow_run: {workflows: [ci]}}"), "trigger workflow_run"),
    "check-suite": (_job("", on="{check_suite: {types: [completed]}}"), "trigger check_suite"),
    "status": (_job("", on="status"), "trigger status"),
    "fork": (_job("", on="[push, fork]"), "trigger fork"),
    "push-and-pull-request": (_job("", on="[push, pull_request]"), None),
}  # fmt: skip


@pytest.mark.parametrize("case", REACH.values(), ids=REACH.keys())
def test_a_jobs_reach_is_what_the_files_grant(case: tuple[str, str | None]) -> None:
    text, grant = case
    wf = parse_workflow(WF, text.encode())
    reach = [g for g, _ in wf.reach(wf.jobs["j"], default_write=False)]
    if grant is None:
        assert reach == []
    else:
        assert any(grant in g for g in reach), reach


def test_secrets_inherit_reaches_every_secret() -> None:
    text = "on: push\njobs:\n  j:\n    uses: o/r/.github/workflows/w.yml@v1\n    secrets: inherit\n"
    wf = parse_workflow(WF, text.encode())
    assert ("secrets: inherit", 5) in wf.reach(wf.jobs["j"], default_write=False)


def test_the_key_on_is_read_as_github_reads_it() -> None:
    wf = parse_workflow(WF, b"on:\n  pull_request_target:\njobs:\n  j:\n    steps: []\n")
    assert wf.triggers == ("pull_request_target",)


def test_the_default_token_reaches_only_jobs_without_permissions_when_it_is_write() -> None:
    text = "on: push\njobs:\n  a:\n    steps: []\n  b:\n    permissions: {}\n    steps: []\n"
    wf = parse_workflow(WF, text.encode())
    assert privileged_jobs(wf, default_write=False) == frozenset()
    assert privileged_jobs(wf, default_write=True) == {"a"}
    assert wf.on_default_token(wf.jobs["a"])
    assert not wf.on_default_token(wf.jobs["b"])


def test_every_job_a_privileged_job_needs_is_privileged() -> None:
    text = (
        "on: push\npermissions: {}\njobs:\n  a:\n    steps: []\n  b:\n    needs: a\n    steps: []\n"
        "  c:\n    needs: [b]\n    environment: pypi\n    steps: []\n  d:\n    steps: []\n"
    )
    assert privileged_jobs(parse_workflow(WF, text.encode()), default_write=False) == {
        "a",
        "b",
        "c",
    }


@pytest.mark.parametrize(
    "text",
    [
        b"on: push\njobs: [1]\n",
        b"- a\n",
        b"on: push\non: pull_request\njobs: {}\n",
        b"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\n"
        b"d: &d [*c, *c, *c, *c]\n"
        b"e: &e [*d, *d, *d, *d]\nf: &f [*e, *e, *e, *e]\ng: &g [*f, *f, *f, *f]\n"
        b"h: &h [*g, *g, *g, *g]\ni: [*h, *h, *h, *h, *h, *h, *h, *h]\non: push\njobs: {}\n",
        b"\xff\xfe",
    ],
    ids=["jobs-not-a-mapping", "not-a-mapping", "duplicate-key", "alias-bomb", "not-utf-8"],
)
def test_a_file_github_would_not_read_does_not_parse(text: bytes) -> None:
    with pytest.raises(WorkflowError):
        parse_workflow(WF, text)


def test_a_runner_read_from_a_nested_matrix_key_with_a_default_is_hosted() -> None:
    matrix = (
        "    strategy:\n      matrix:\n        config:\n          - {os: windows-latest}\n"
        "          - {py: '3.13'}\n"
    )
    text = _job(matrix).replace("ubuntu-latest", "${{ matrix.config.os || 'ubuntu-latest' }}")
    wf = parse_workflow(WF, text.encode())
    assert wf.reach(wf.jobs["j"], default_write=False) == ()
