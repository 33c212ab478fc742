"""Supply-chain rules for the project's own workflows (issue 8, STYLE §8).

Each rule is a function from a workflow (raw text + parsed YAML) to a list of
violations. The rules run on every file in .github/workflows/ and, so that none of
them can pass vacuously, on a small hostile workflow that breaks each one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))

_SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[^@\s]+)?@[0-9a-f]{40}$")
_DIGEST_PIN = re.compile(r"^docker://[^@\s]+@sha256:[0-9a-f]{64}$")
_USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)\s*(?P<comment>#.*)?$")
_VERSION_COMMENT = re.compile(r"^#\s*v\d+(\.\d+)*\b")


@dataclass(frozen=True)
class Workflow:
    name: str
    text: str
    doc: dict[str, object]

    @classmethod
    def parse(cls, name: str, text: str) -> Workflow:
        doc = yaml.safe_load(text)
        assert isinstance(doc, dict), f"{name}: not a mapping"
        return cls(name, text, doc)

    @property
    def triggers(self) -> dict[str, object]:
        # YAML 1.1 reads the bare key `on` as the boolean True.
        on = self.doc.get("on", self.doc.get(True))  # type: ignore[call-overload]
        if isinstance(on, str):
            return {on: None}
        if isinstance(on, list):
            return dict.fromkeys(on)
        assert isinstance(on, dict), f"{self.name}: no `on:`"
        return on

    @property
    def jobs(self) -> dict[str, dict[str, object]]:
        jobs = self.doc.get("jobs")
        assert isinstance(jobs, dict), f"{self.name}: no jobs"
        return jobs

    def steps(self) -> Iterator[tuple[str, dict[str, object]]]:
        for job_id, job in self.jobs.items():
            steps = job.get("steps", [])
            assert isinstance(steps, list)
            for step in steps:
                yield job_id, step


Rule = Callable[[Workflow], list[str]]


def top_level_permissions_empty(wf: Workflow) -> list[str]:
    if wf.doc.get("permissions", "missing") != {}:
        return ["top-level `permissions:` must be `{}`; grant per job"]
    return []


def every_job_declares_permissions(wf: Workflow) -> list[str]:
    return [f"job {j}: no `permissions:`" for j, job in wf.jobs.items() if "permissions" not in job]


def remote_uses_pinned_by_sha(wf: Workflow) -> list[str]:
    """Every remote action or reusable workflow is pinned by a full commit SHA, and the
    line says which version that is (`# v4.2.2`); images are pinned by digest."""
    problems = []
    for line in wf.text.splitlines():
        m = _USES_LINE.match(line)
        if not m:
            continue
        ref = m.group("ref").strip("'\"")
        if ref.startswith(("./", "$/")):
            continue  # this repository's own code
        if ref.startswith("docker://"):
            if not _DIGEST_PIN.match(ref):
                problems.append(f"{ref}: image not pinned by @sha256 digest")
        elif not _SHA_PIN.match(ref):
            problems.append(f"{ref}: not pinned by a 40-hex commit SHA")
        elif not _VERSION_COMMENT.match(m.group("comment") or ""):
            problems.append(f"{ref}: no `# vX.Y.Z` comment naming the pinned version")
    return problems


def checkout_does_not_persist_credentials(wf: Workflow) -> list[str]:
    problems = []
    for job_id, step in wf.steps():
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            with_ = step.get("with") or {}
            assert isinstance(with_, dict)
            if with_.get("persist-credentials") is not False:
                problems.append(f"job {job_id}: checkout without `persist-credentials: false`")
    return problems


def no_expressions_in_run(wf: Workflow) -> list[str]:
    """`${{ }}` inside `run:` is pasted into the shell script before it runs: a PR title
    or branch name becomes code. Values reach scripts through `env:` instead."""
    return [
        f"job {job_id}: `${{{{ ... }}}}` inside run: (pass it through env:)"
        for job_id, step in wf.steps()
        if "${{" in str(step.get("run", ""))
    ]


def pull_request_target_never_checks_out_head(wf: Workflow) -> list[str]:
    """On pull_request_target the job holds secrets and a write token: checking out or
    building the PR head there hands both to whoever opened the PR."""
    if "pull_request_target" not in wf.triggers:
        return []
    problems = []
    for job_id, step in wf.steps():
        with_ = step.get("with") or {}
        assert isinstance(with_, dict)
        ref = str(with_.get("ref", ""))
        repo = str(with_.get("repository", ""))
        if re.search(r"\bhead\b|head[._]sha|head_ref|refs/pull", ref + " " + repo):
            problems.append(f"job {job_id}: checks out the pull request's head ({ref or repo})")
    return problems


def jobs_have_timeouts(wf: Workflow) -> list[str]:
    return [
        f"job {j}: no timeout-minutes"
        for j, job in wf.jobs.items()
        if "uses" not in job and "timeout-minutes" not in job  # reusable workflows set their own
    ]


def signing_key_only_in_its_environment(wf: Workflow) -> list[str]:
    """Any workflow that can read the signing key can sign anything: the key lives in the
    `proofgate` environment, whose deployment branches are limited to the default branch
    (docs/release-verification.md), and only jobs in that environment may name it."""
    problems = []
    for job_id, job in wf.jobs.items():
        if "PROOFGATE_SIGNING_KEY" in yaml.safe_dump(job) and job.get("environment") != "proofgate":
            problems.append(f"job {job_id}: reads the signing key outside `environment: proofgate`")
    return problems


RULES: list[Rule] = [
    top_level_permissions_empty,
    every_job_declares_permissions,
    remote_uses_pinned_by_sha,
    checkout_does_not_persist_credentials,
    no_expressions_in_run,
    pull_request_target_never_checks_out_head,
    jobs_have_timeouts,
    signing_key_only_in_its_environment,
]


def _load(path: Path) -> Workflow:
    return Workflow.parse(path.name, path.read_text(encoding="utf-8"))


def test_the_project_has_its_workflows() -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "proofgate.yml", "release.yml"}


@pytest.mark.parametrize("rule", RULES, ids=[r.__name__ for r in RULES])
@pytest.mark.parametrize("path", WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def test_workflow_follows_rule(path: Path, rule: Rule) -> None:
    assert rule(_load(path)) == []


def test_ci_ends_in_one_aggregate_job_needing_all_others() -> None:
    wf = _load(ROOT / ".github" / "workflows" / "ci.yml")
    aggregate = wf.jobs["ci-ok"]
    needs = aggregate["needs"]
    assert isinstance(needs, list)
    assert set(needs) == set(wf.jobs) - {"ci-ok"}, "the aggregate job must need every job"
    # Without always() a failed dependency skips the aggregate, and branch protection
    # treats a skipped required check as passing.
    assert aggregate["if"] == "always()"
    steps = aggregate["steps"]
    assert isinstance(steps, list)
    assert any("success" in str(s.get("run", "")) for s in steps), "must fail on non-success"


def test_release_verifies_the_receipt_before_publishing() -> None:
    wf = _load(ROOT / ".github" / "workflows" / "release.yml")
    runs: dict[str, str] = {}
    for job_id, step in wf.steps():
        runs[job_id] = runs.get(job_id, "") + " " + str(step.get("run", ""))
    verifying = [j for j, text in runs.items() if "proofgate verify" in text]
    assert verifying, "release.yml never runs proofgate verify"
    assert "--require PROVEN" in runs[verifying[0]]
    publishing = [j for j, text in runs.items() if "gh release create" in text]
    assert publishing, "release.yml never publishes"
    for job_id in publishing:
        needs = wf.jobs[job_id].get("needs", [])
        assert verifying[0] in (needs if isinstance(needs, list) else [needs])


E2E = "tests/integration/test_action_e2e.py"


def test_ci_runs_each_suite_once() -> None:
    """Lint in one job, the end-to-end test in one job, the rest of pytest in one job."""
    wf = _load(ROOT / ".github" / "workflows" / "ci.yml")
    runs = [str(step.get("run", "")) for _, step in wf.steps()]
    assert not [r for r in runs if "make test" in r], "`make test` re-runs lint and e2e"
    assert len([r for r in runs if "make lint" in r]) == 1
    pytest_runs = [r for r in runs if "make pytest" in r]
    selecting_e2e = [r for r in pytest_runs if E2E in r and f"--ignore={E2E}" not in r]
    assert len(selecting_e2e) == 1, "the end-to-end test must run in exactly one job"
    rest = [r for r in pytest_runs if r not in selecting_e2e]
    assert len(rest) == 1, "the other tests must run in exactly one job"
    assert f"--ignore={E2E}" in rest[0], "the test job must leave the e2e test to its job"


HOSTILE = """\
on: pull_request_target
permissions: write-all
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - uses: actions/setup-python@0b93645e9fea7318ecaed2b359559ac225c90a2b
      - uses: docker://alpine:3.20
      - run: echo "${{ github.event.pull_request.title }}"
      - uses: ./
        with:
          signing-key: ${{ secrets.PROOFGATE_SIGNING_KEY }}
"""


@pytest.mark.parametrize("rule", RULES, ids=[r.__name__ for r in RULES])
def test_rule_catches_the_hostile_workflow(rule: Rule) -> None:
    assert rule(Workflow.parse("hostile.yml", HOSTILE)), f"{rule.__name__} let it through"


def test_pinning_rule_names_each_unpinned_reference() -> None:
    problems = remote_uses_pinned_by_sha(Workflow.parse("hostile.yml", HOSTILE))
    assert any("actions/checkout@v4" in p and "40-hex" in p for p in problems)
    assert any("setup-python" in p and "comment" in p for p in problems)
    assert any("alpine" in p and "digest" in p for p in problems)


def _sharded_example() -> Workflow:
    text = (Path(__file__).parents[2] / "docs" / "action.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```$", text, re.S | re.M)
    (block,) = [b for b in blocks if "sharded" in b.splitlines()[0]]
    return Workflow.parse("sharded.yml", block)


# The docs example calls the action by a placeholder ref, not a pinned SHA.
_DOC_RULES = [r for r in RULES if r is not remote_uses_pinned_by_sha]


@pytest.mark.parametrize("rule", _DOC_RULES, ids=[r.__name__ for r in _DOC_RULES])
def test_sharded_docs_workflow_follows_rule(rule: Rule) -> None:
    assert rule(_sharded_example()) == []


def test_sharded_docs_workflow_writes_the_check_run_only_in_the_aggregate() -> None:
    jobs: dict[str, dict[str, object]] = _sharded_example().doc["jobs"]  # type: ignore[assignment]
    writers = [j for j, job in jobs.items() if (job.get("permissions") or {}).get("checks")]
    assert writers == ["aggregate"]
    assert jobs["aggregate"]["needs"] == ["shard"]
    assert "matrix" in jobs["shard"]["strategy"]
