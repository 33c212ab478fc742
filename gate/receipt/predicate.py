"""The receipt's predicate (SPEC §4) as a frozen value, and the in-toto statement around it.

`build_predicate` assembles the predicate from a run's evidence and outcome (pure);
`Predicate.from_dict` reads one back from a verified statement and checks the types of the
fields verification relies on, so an invalid `Predicate` cannot exist. The JSON document
is kept whole (`to_dict`): what was signed is what is shown.

`proofgate policy` runs nothing, so its output is a `Preflight`, not a predicate with a
verdict: its JSON carries `verdict: null` and `preflight: true` and is never signed as a
receipt of a proof.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gate import __version__
from gate.model import (
    CheckResult,
    Config,
    ConfigSource,
    JsonDict,
    Trigger,
    TriggerKind,
    Verdict,
)
from gate.receipt.canonical import canonical_json
from gate.receipt.errors import ReceiptError

if TYPE_CHECKING:
    from gate.proof.verdict import Outcome, RunEvidence
    from gate.util.journal import Journal

PREDICATE_TYPE: Final = "https://proofgate.dev/receipt/v1"
STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
TOOL_NAME: Final = "proofgate"

SUBJECT_PATCH: Final = "patch.diff"
SUBJECT_HEAD: Final = "head"
SUBJECT_TREE: Final = "proven-tree"

_REF = re.compile(r"refs/[^\s]+")


def _junit_counts(result: CheckResult) -> JsonDict | None:
    """The JUnit report's counts, for the page (None: no report, or an unusable one)."""
    from gate.proof.verdict import parse_junit

    if result.junit_report is None:
        return None
    try:
        c = parse_junit(result.junit_report)
    except ValueError:
        return None
    return {"tests": c.tests, "failures": c.failures, "errors": c.errors, "skipped": c.skipped}


@dataclass(frozen=True, slots=True, kw_only=True)
class Builder:
    """The workflow run that produced (and signed) the receipt, when one did (`builder`).

    Filled by the Action from the runner's GITHUB_WORKFLOW_REF, GITHUB_RUN_ID, GITHUB_REF
    and GITHUB_SHA; the CLI leaves it out. It is what the signer says about itself: it is
    evidence only as far as the signing key is confined to that workflow."""

    workflow: str
    run_id: str
    ref: str
    sha: str

    def to_dict(self) -> JsonDict:
        return {"workflow": self.workflow, "run_id": self.run_id, "ref": self.ref, "sha": self.sha}

    @classmethod
    def from_dict(cls, d: object) -> Builder:
        """Raises: ReceiptError for anything but four strings."""
        if not isinstance(d, dict) or set(d) != {"workflow", "run_id", "ref", "sha"}:
            raise ReceiptError("predicate builder is malformed (want workflow, run_id, ref, sha)")
        if not all(isinstance(v, str) for v in d.values()):
            raise ReceiptError("predicate builder fields are not strings")
        return cls(workflow=d["workflow"], run_id=d["run_id"], ref=d["ref"], sha=d["sha"])

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Builder | None:
        """The builder of a GitHub Actions run, or None outside one."""
        workflow = env.get("GITHUB_WORKFLOW_REF") or ""
        if not workflow:
            return None
        return cls(
            workflow=workflow,
            run_id=env.get("GITHUB_RUN_ID") or "",
            ref=env.get("GITHUB_REF") or "",
            sha=env.get("GITHUB_SHA") or "",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRef:
    """`predicate.config`: where the configuration came from (SPEC §2, §4)."""

    source: str  # base-tree | file | none
    path: str | None
    blob: str | None  # git blob id (base-tree) or "sha256:<hex>" (file)
    sha256: str | None  # SHA-256 of the configuration's bytes


def _str_or_none(d: Mapping[str, object], key: str, what: str) -> str | None:
    value = d.get(key)
    if value is not None and not isinstance(value, str):
        raise ReceiptError(f"predicate {what}.{key} is not a string")
    return value


def _trigger(d: object) -> Trigger | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise ReceiptError("predicate trigger is not an object")
    kinds = {k.value for k in TriggerKind}
    kind, base_ref, pr = d.get("kind"), d.get("base_ref"), d.get("pull_request")
    if not isinstance(kind, str) or kind not in kinds:
        raise ReceiptError(f"predicate trigger.kind {kind!r} is not one of {sorted(kinds)}")
    if base_ref is not None and not (isinstance(base_ref, str) and _REF.fullmatch(base_ref)):
        raise ReceiptError(f"predicate trigger.base_ref {base_ref!r} is not a full ref")
    if pr is not None and (isinstance(pr, bool) or not isinstance(pr, int)):
        raise ReceiptError("predicate trigger.pull_request is not a number")
    return Trigger(kind=TriggerKind(kind), base_ref=base_ref, pull_request=pr)


@dataclass(frozen=True, slots=True, kw_only=True)
class Predicate:
    """A receipt's predicate: the fields verification decides on, typed, and the whole
    signed document. Build with `build_predicate` or `from_dict`."""

    verdict: Verdict
    repository: str
    trigger: Trigger | None  # None only in receipts older than SPEC §4's trigger
    head_commit: str
    proven_tree: str | None
    patch_sha256: str
    config: ConfigRef
    builder: Builder | None
    document: JsonDict

    def to_dict(self) -> JsonDict:
        """The predicate as JSON data (a copy: the value stays frozen)."""
        return copy.deepcopy(self.document)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Predicate:
        """Raises: ReceiptError when a field verification relies on is missing or malformed."""
        raw_verdict = d.get("verdict")
        if not isinstance(raw_verdict, str) or raw_verdict not in {v.value for v in Verdict}:
            raise ReceiptError(f"predicate verdict {raw_verdict!r} is not a verdict")
        repository = d.get("repository")
        if not isinstance(repository, str):
            raise ReceiptError("predicate repository is not a string")
        head, patch, config = d.get("head"), d.get("patch"), d.get("config")
        if not isinstance(head, dict) or not isinstance(head.get("commit"), str):
            raise ReceiptError("predicate head.commit is not a string")
        if not isinstance(patch, dict) or not isinstance(patch.get("sha256"), str):
            raise ReceiptError("predicate patch.sha256 is not a string")
        if not isinstance(config, dict) or not isinstance(config.get("source"), str):
            raise ReceiptError("predicate config.source is not a string")
        proven_tree = d.get("proven_tree")
        if proven_tree is not None and not isinstance(proven_tree, str):
            raise ReceiptError("predicate proven_tree is not a string")
        builder = d.get("builder")
        return cls(
            verdict=Verdict(raw_verdict),
            repository=repository,
            trigger=_trigger(d.get("trigger")),
            head_commit=head["commit"],
            proven_tree=proven_tree,
            patch_sha256=patch["sha256"],
            config=ConfigRef(
                source=config["source"],
                path=_str_or_none(config, "path", "config"),
                blob=_str_or_none(config, "blob", "config"),
                sha256=_str_or_none(config, "sha256", "config"),
            ),
            builder=Builder.from_dict(builder) if builder is not None else None,
            document=copy.deepcopy(dict(d)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Preflight:
    """What `proofgate policy` reports: evidence and policy, no verdict (nothing ran)."""

    predicate: Predicate

    def to_dict(self) -> JsonDict:
        # It must never read as a verdict, least of all PROVEN.
        return {**self.predicate.to_dict(), "verdict": None, "preflight": True}


def build_predicate(
    *,
    outcome: Outcome,
    run: RunEvidence,
    config_source: ConfigSource | None,
    config: Config | None,
    journal: Journal,
    started_at: str,
    finished_at: str,
    trigger: Trigger | None = None,
    builder: Builder | None = None,
) -> Predicate:
    """SPEC §4: the predicate of one run. Pure."""
    ev = run.evidence
    checks: list[JsonDict] = [r.to_dict() for r in run.results]
    for shown, result in zip(checks, run.results, strict=True):
        if (counts := _junit_counts(result)) is not None:
            shown["junit"] = counts
    predicate: JsonDict = {
        "verdict": outcome.verdict.value,
        "reasons": [r.to_dict() for r in outcome.reasons],
        "repository": ev.repository,
        "trigger": (trigger or Trigger(kind=TriggerKind.LOCAL)).to_dict(),
        "base": ev.base.to_dict(),
        "merge_base": ev.merge_base,
        "head": ev.head.to_dict(),
        "proven_tree": ev.proven_tree,
        "patch": ev.patch.to_dict(),
        "inventory": [e.to_dict() for e in ev.inventory],
        "coverage": ev.coverage.to_dict(),
        "config": config_source.to_dict() if config_source else {"source": "none"},
        "policy": run.policy.to_dict(),
        "checks": checks,
        "journal": journal.to_dict(),
        "tool": {"name": TOOL_NAME, "version": __version__},
        "started_at": started_at,
        "finished_at": finished_at,
    }
    from gate.differential import add_to_predicate

    add_to_predicate(predicate, run.differentials)  # SPEC §3.1: checks[].tests, coverage
    if config is not None:
        predicate["image"] = config.image
        predicate["check_limits"] = {c.name: c.limits.to_dict() for c in config.checks}
    if run.approval is not None:
        predicate["approval"] = run.approval.to_dict()
    if ev.worktree is not None:
        predicate["worktree"] = ev.worktree.to_dict()
    if builder is not None:
        predicate["builder"] = builder.to_dict()
    return Predicate.from_dict(predicate)


def build_statement(
    predicate: Mapping[str, object],
    *,
    patch_sha256: str,
    head_commit: str,
    proven_tree: str | None,
) -> JsonDict:
    """An in-toto Statement v1 around `predicate`.

    Subjects, in this order: the patch (sha256 first, so sha256-only verifiers such as
    cosign can check it against `patch.diff`), the head commit, and the proven tree when
    there is one (SPEC §4).
    """
    subjects: list[JsonDict] = [
        {"name": SUBJECT_PATCH, "digest": {"sha256": patch_sha256}},
        {"name": SUBJECT_HEAD, "digest": {"gitCommit": head_commit}},
    ]
    if proven_tree is not None:
        subjects.append({"name": SUBJECT_TREE, "digest": {"gitTree": proven_tree}})
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": dict(predicate),
    }


def serialize(statement: Mapping[str, object]) -> bytes:
    """The exact payload bytes that get signed; serialize once and keep them."""
    return canonical_json(statement)
