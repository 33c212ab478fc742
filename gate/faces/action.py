"""The GitHub Action: `python -m gate.faces.action` (SPEC §6).

A thin shim. It reads its inputs from the plain `PROOFGATE_*` names that `action.yml`'s
`runs.env` sets, works out base and head from the event (gate.github.events), fetches the
pull request's objects into a private bare repository (gate.git.fetch), calls `prove()`
with the reviews as approver (gate.github.approvals), and reports: `$GITHUB_OUTPUT`, the
job summary, `::error::` lines (gate.github.workflow) and the check run on the head SHA
(gate.github.checks).

Container actions get the Docker socket, must not set USER, and run in /github/workspace.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gate.errors import GateError, UsageError
from gate.git.fetch import fetch_private
from gate.github.approvals import ReviewApprover, how_to_approve
from gate.github.checks import (
    OUTPUT_LIMIT_BYTES,
    GitHubChecks,
    embed_envelope,
)
from gate.github.events import (
    APPROVE_ACTION,
    HEX40,
    Target,
    check_name,
    resolve_target,
)
from gate.github.interface import (
    CheckAction,
    ChecksAPI,
    GitHubError,
)
from gate.github.notes import image_note, trigger_note
from gate.github.workflow import (
    annotations_from,
    append_file,
    escape_data,
    report_to_job,
    set_outputs,
)
from gate.model import BaseReceipt, JsonDict, Verdict
from gate.receipt import render
from gate.receipt.predicate import Builder
from gate.receipt.verify import branch_ref
from gate.util.bounded import FileTooLarge, read_bounded

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from gate.proof.prove import ProofRun
    from gate.sandbox.docker import DockerSandbox

__all__ = ["ActionInputs", "action_sandbox", "main", "run_prove", "run_verify"]

log = logging.getLogger("gate")

_HEX40 = HEX40
UNSIGNED_WARNING = (
    "This receipt is not signed: no `signing-key` was given to the action, so it vouches "
    "for nothing outside this page and `proofgate verify` refuses it. Pass "
    "`signing-key: ${{ secrets.PROOFGATE_SIGNING_KEY }}` to sign it."
)
_append = append_file


# --- inputs ---------------------------------------------------------------------------


def _truthy(value: str, *, name: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"input {name}: expected true or false, got {value!r}")


def _branch_input(value: str) -> str | None:
    if not value.strip():
        return None
    try:
        return branch_ref(value.strip())
    except ValueError as e:
        raise UsageError(f"input branch: {e}") from e


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionInputs:
    """The Action's inputs (from `runs.env`) and the runner's GITHUB_* variables."""

    token: str
    config_path: str
    signing_key: bytes | None
    pull_request: str
    fail_on_unproven: bool
    mode: str  # prove | verify
    verify_keys: str
    offer_approve: bool
    event_name: str
    event_path: str
    repository: str
    api_url: str
    server_url: str
    workspace: str
    output_file: str
    summary_file: str
    run_id: str
    sha: str
    origin_url: str  # test override: a local bare repository standing in for GitHub
    out_dir: str
    verify_branch: str | None = None  # verify mode: full ref releases come from (None: default)
    accept_reproof: bool = False  # verify mode: count receipts of a re-proven commit
    builder: Builder | None = None  # the workflow run, recorded in the receipt
    shard: str = ""  # prove mode: "I/N" proves one shard and writes no check run (SPEC §3.3)
    receipts: str = ""  # aggregate mode: glob of the shard receipts, under the workspace

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ActionInputs:
        """Raises: UsageError for a malformed input."""
        mode = (env.get("PROOFGATE_MODE") or "prove").strip()
        if mode not in ("prove", "verify", "aggregate"):
            raise UsageError(f"input mode: expected prove, verify or aggregate, got {mode!r}")
        key = env.get("PROOFGATE_SIGNING_KEY") or ""
        return cls(
            token=env.get("PROOFGATE_GITHUB_TOKEN") or env.get("GITHUB_TOKEN") or "",
            config_path=env.get("PROOFGATE_CONFIG") or ".github/proofgate.yml",
            signing_key=key.encode() if key.strip() else None,
            pull_request=(env.get("PROOFGATE_PULL_REQUEST") or "").strip(),
            fail_on_unproven=_truthy(
                env.get("PROOFGATE_FAIL_ON_UNPROVEN") or "true", name="fail-on-unproven"
            ),
            mode=mode,
            verify_keys=env.get("PROOFGATE_VERIFY_KEYS") or "",
            offer_approve=_truthy(
                env.get("PROOFGATE_APPROVE_BUTTON") or "false", name="approve-button"
            ),
            event_name=env.get("GITHUB_EVENT_NAME") or "",
            event_path=env.get("GITHUB_EVENT_PATH") or "",
            repository=env.get("GITHUB_REPOSITORY") or "",
            api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
            server_url=env.get("GITHUB_SERVER_URL") or "https://github.com",
            workspace=env.get("GITHUB_WORKSPACE") or os.getcwd(),
            output_file=env.get("GITHUB_OUTPUT") or "",
            summary_file=env.get("GITHUB_STEP_SUMMARY") or "",
            run_id=env.get("GITHUB_RUN_ID") or "",
            sha=env.get("PROOFGATE_COMMIT") or env.get("GITHUB_SHA") or "",
            origin_url=env.get("PROOFGATE_ORIGIN_URL") or "",
            out_dir=env.get("PROOFGATE_OUT_DIR") or "",
            verify_branch=_branch_input(env.get("PROOFGATE_BRANCH") or ""),
            accept_reproof=_truthy(
                env.get("PROOFGATE_ACCEPT_REPROOF") or "false", name="accept-reproof"
            ),
            builder=Builder.from_env(env),
            shard=(env.get("PROOFGATE_SHARD") or "").strip(),
            receipts=(env.get("PROOFGATE_RECEIPTS") or "").strip(),
        )

    @property
    def run_url(self) -> str | None:
        if not self.run_id or not self.repository:
            return None
        return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"


# --- reporting --------------------------------------------------------------------------


def _set_outputs(inputs: ActionInputs, values: Mapping[str, str]) -> None:
    set_outputs(inputs.output_file, values)


def _out_dir(inputs: ActionInputs) -> Path:
    """Receipt files go under the workspace: the one directory a container action shares
    with later steps (RUNNER_TEMP is not mounted into the container)."""
    if inputs.out_dir:
        path = Path(inputs.out_dir)
    elif inputs.workspace and Path(inputs.workspace).is_dir():
        path = Path(inputs.workspace) / ".proofgate"
    else:
        path = Path(tempfile.mkdtemp(prefix="proofgate-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


class _Signed(Protocol):
    """What a check run shows of a proof or an aggregate: its verdict and receipt."""

    @property
    def verdict(self) -> Verdict: ...
    @property
    def predicate(self) -> JsonDict: ...
    @property
    def envelope(self) -> bytes: ...
    @property
    def signed(self) -> bool: ...


def _complete_with_receipt(
    api: ChecksAPI,
    inputs: ActionInputs,
    run_id: int,
    run: _Signed,
    opening: str,
    shown: str,
    digest: str,
    actions: tuple[CheckAction, ...] = (),
) -> None:
    """Complete the check run with the receipt (within GitHub's limits) and set the
    step's outputs."""
    where = (
        f"Download it from the workflow run ({inputs.run_url}): `{shown}`."
        if inputs.run_url
        else f"It was written to `{shown}`."
    )
    text = (
        embed_envelope(run.envelope, limit=OUTPUT_LIMIT_BYTES, elsewhere=where)
        if run.signed
        else UNSIGNED_WARNING + "\n"
    )
    api.complete_check(
        run_id,
        verdict=run.verdict,
        title=render.title(run.predicate),
        summary=opening
        + render.to_markdown(
            run.predicate,
            max_bytes=OUTPUT_LIMIT_BYTES - len(opening.encode()) - 64,
            signed=run.signed,
            truncation_note=f"\n\n---\n**Cut to fit GitHub's 65,535-byte limit.** {where}\n",
        ),
        text=text,
        annotations=annotations_from(run.predicate),
        actions=actions,
        details_url=inputs.run_url,
    )
    _set_outputs(inputs, {"verdict": run.verdict.value, "receipt": shown, "receipt-sha256": digest})


def _shown_path(inputs: ActionInputs, path: Path) -> str:
    """Relative to the workspace when inside it: the host sees the workspace elsewhere."""
    try:
        return str(path.relative_to(inputs.workspace))
    except ValueError:
        return str(path)


def write_receipt(inputs: ActionInputs, run: ProofRun) -> tuple[Path, str]:
    from gate.receipt import write_receipt_files

    out = _out_dir(inputs)
    digest = write_receipt_files(out, envelope=run.envelope, markdown=run.markdown, patch=run.patch)
    return out / "receipt.json", digest


# --- prove mode -------------------------------------------------------------------------


def action_sandbox(proof: str | None = None) -> DockerSandbox:
    """The Action's clean room. A workflow's `env` reaches this process, so the egress
    broker's test-only overrides (`PROOFGATE_UNSAFE_EGRESS_*`, docs/egress.md) must not
    loosen it here: they are removed from the environment with a warning, and the
    sandbox reads its overrides from an empty mapping.

    A hosted runner starts empty: pull the base config's image when absent (by digest
    when pinned); the receipt records the digest used.
    """
    from gate.sandbox.docker import DockerSandbox
    from gate.sandbox.egress import UNSAFE_ENV_NAMES

    ignored = [name for name in UNSAFE_ENV_NAMES if os.environ.pop(name, None) is not None]
    if ignored:
        log.warning(
            "ignoring %s: test-only settings of the egress broker have no effect in the Action",
            ", ".join(ignored),
        )
    return DockerSandbox(allow_pull=True, egress_environ={}, proof=proof)


def run_prove(
    inputs: ActionInputs,
    event: Mapping[str, object],
    api: ChecksAPI,
    *,
    clock: Callable[[], float] = time.time,
) -> int:
    """One proof for this event; returns the step's exit code.

    Raises:
        GateError: usage/config errors (the check run, once started, is completed first).
    """
    from gate.git.repo import GitRepository
    from gate.proof.prove import ProveRequest, prove

    target = resolve_target(inputs, event, api)
    if target is None:
        print(f"proofgate: nothing to do for this {inputs.event_name} event", file=sys.stderr)
        return 0
    if inputs.shard:
        return run_shard(inputs, target, api, clock=clock)
    name = check_name(target.base_branch, api.default_branch())
    run_id = api.start_check(
        target.head_sha, name=name, external_id=target.external_id, details_url=inputs.run_url
    )
    approver = ReviewApprover(api, target, clock)
    try:
        with tempfile.TemporaryDirectory(prefix="proofgate-objects-") as tmp:
            private = Path(tmp) / "repo.git"
            base, head = _fetch(inputs, target, private)
            request = ProveRequest(
                base=base,
                head=head,
                config_path=inputs.config_path,
                signing_key_pem=inputs.signing_key,
                trigger=target.trigger,
                builder=inputs.builder,
                base_receipt=base_receipt(api, inputs, base),
            )
            with GitRepository(private, name=inputs.repository) as evidence:
                run = prove(
                    request,
                    evidence=evidence,
                    sandbox=action_sandbox,
                    approver=approver,
                    clock=clock,
                    tags=api,
                )
    except GateError as e:
        api.complete_check(
            run_id,
            verdict=None,
            title="proofgate could not run",
            summary=f"proofgate stopped before a verdict:\n\n```\n{e}\n```\n",
            text="",
            details_url=inputs.run_url,
        )
        raise
    receipt_path, digest = write_receipt(inputs, run)
    shown = _shown_path(inputs, receipt_path)
    button = inputs.offer_approve and target.pr is not None
    opening = (
        trigger_note(target)
        + how_to_approve(run.predicate, target, repository=api.repository, button=button)
        + image_note(run.predicate)
    )
    actions: tuple[CheckAction, ...] = ()
    if run.verdict is Verdict.HELD and button:
        actions = (
            CheckAction(
                label="Approve", description="Approve this exact patch", identifier=APPROVE_ACTION
            ),
        )
    _complete_with_receipt(api, inputs, run_id, run, opening, shown, digest, actions)
    report_to_job(
        inputs.summary_file,
        opening + run.markdown,
        unsigned=None if run.signed else UNSIGNED_WARNING,
        warnings=approver.refusals,
        errors=[(r.code.value, r.message) for r in run.reasons],
        cut_note=f"*(cut; the full receipt is `{shown}`)*",
    )
    print(f"proofgate: {run.verdict.value} (receipt {shown}, sha256 {digest})", file=sys.stderr)
    if run.verdict is Verdict.PROVEN or not inputs.fail_on_unproven:
        return 0
    return 1


def base_receipt(api: ChecksAPI, inputs: ActionInputs, base: str) -> BaseReceipt | None:
    """SPEC §3.1: the receipt on the base commit's check runs (the merge queue's proof of
    it, or a re-proof), verified with the public half of this workflow's signing key: the
    base's outcomes come from it instead of a run of the base's tests. None when there is
    none, no key, or the API cannot tell; a receipt that does not verify is named in the
    receipt (gate/proof/runs.py) and the base's tests run."""
    from gate import receipt

    if inputs.signing_key is None:
        return None
    try:
        keys = [receipt.load_private_key(inputs.signing_key, source="signing-key").public_key()]
        envelopes = api.receipts_for_commit(base)
    except (GateError, receipt.ReceiptError) as e:
        log.warning("no base receipt: %s", e)
        return None
    refused: BaseReceipt | None = None
    for envelope in envelopes:
        digest = hashlib.sha256(envelope).hexdigest()
        try:
            verified = receipt.verify(envelope, receipt.Signed(keys))
        except receipt.ReceiptError as e:
            refused = refused or BaseReceipt(digest=digest, refused=str(e))
            continue
        raw = verified.statement.get("predicate")
        if isinstance(raw, dict) and raw.get("proven_tree"):
            return BaseReceipt(digest=digest, predicate=raw)
    return refused


# --- shards (SPEC §3.3) ----------------------------------------------------------------


def _fetch(inputs: ActionInputs, target: Target, private: Path) -> tuple[str, str]:
    return fetch_private(
        inputs.origin_url or f"{inputs.server_url.rstrip('/')}/{inputs.repository}.git",
        private,
        token=inputs.token,
        head_ref=target.head_ref,
        head_sha=target.head_sha,
        base_ref=target.base_ref,
        base_sha=target.base_sha,
    )


def run_shard(
    inputs: ActionInputs, target: Target, api: ChecksAPI, *, clock: Callable[[], float]
) -> int:
    """`shard: I/N`: prove one shard and write its receipt for the aggregate job. No check
    run: only the aggregate writes one, so a shard job needs no `checks: write`, and the
    step does not fail on the shard's verdict (the aggregate judges the whole)."""
    from gate.git.repo import GitRepository
    from gate.proof.prove import ProveRequest, prove
    from gate.proof.shard import parse_shard

    which = parse_shard(inputs.shard)
    approver = ReviewApprover(api, target, clock)
    with tempfile.TemporaryDirectory(prefix="proofgate-objects-") as tmp:
        base, head = _fetch(inputs, target, Path(tmp) / "repo.git")
        request = ProveRequest(
            base=base,
            head=head,
            config_path=inputs.config_path,
            signing_key_pem=inputs.signing_key,
            trigger=target.trigger,
            builder=inputs.builder,
            shard=which,
        )
        with GitRepository(Path(tmp) / "repo.git", name=inputs.repository) as evidence:
            run = prove(
                request, evidence=evidence, sandbox=action_sandbox, approver=approver, clock=clock
            )
    receipt_path, digest = write_receipt(inputs, run)
    shown = _shown_path(inputs, receipt_path)
    own = run.shard_verdict or run.verdict
    _set_outputs(inputs, {"verdict": own.value, "receipt": shown, "receipt-sha256": digest})
    _append(
        inputs.summary_file,
        f"proofgate shard {which}: {own.value} over its share (receipt `{shown}`, sha256 "
        f"{digest}); the aggregate job judges the whole proof.\n",
    )
    print(f"proofgate: shard {which}: {own.value} (receipt {shown})", file=sys.stderr)
    return 0


def _shard_receipt(path: Path) -> bytes:
    """A shard receipt the matrix uploaded, never more than a receipt's limit.

    Raises:
        AggregateError: it cannot be read, or is larger (the check run says so).
    """
    from gate.proof.aggregate import AggregateError
    from gate.receipt import MAX_RECEIPT_BYTES

    try:
        return read_bounded(path, MAX_RECEIPT_BYTES, "a receipt")
    except FileTooLarge as e:
        raise AggregateError(f"shard receipt {e}") from e
    except OSError as e:
        raise AggregateError(f"cannot read the shard receipt {path}: {e.strerror}") from e


def _shard_patch(path: Path) -> bytes | None:
    """The patch.diff beside a shard receipt (None: none, unreadable or too large)."""
    from gate.receipt.files import MAX_PATCH_BYTES

    try:
        return read_bounded(path, MAX_PATCH_BYTES, "a patch")
    except FileTooLarge as e:
        print(f"proofgate: {e}: left out", file=sys.stderr)
        return None
    except OSError:
        return None


def run_aggregate(
    inputs: ActionInputs,
    event: Mapping[str, object],
    api: ChecksAPI,
    *,
    clock: Callable[[], float] = time.time,
) -> int:
    """`mode: aggregate`: verify and combine the shard receipts the matrix jobs uploaded
    (`receipts`, a glob under the workspace) and post the one check run, named as a
    single-job proof's."""
    from gate import receipt
    from gate.proof.aggregate import AggregateError, aggregate, shard_patch
    from gate.receipt.files import PATCH_DIFF

    target = resolve_target(inputs, event, api)
    if target is None:
        print(f"proofgate: nothing to do for this {inputs.event_name} event", file=sys.stderr)
        return 0
    if not inputs.receipts:
        raise UsageError("mode aggregate needs the receipts input (a glob of shard receipts)")
    keys = load_keys(inputs.verify_keys, source="the verify-keys input")
    root = Path(inputs.workspace)
    paths = sorted(p for p in root.glob(inputs.receipts) if p.is_file())
    name = check_name(target.base_branch, api.default_branch())
    run_id = api.start_check(
        target.head_sha, name=name, external_id=target.external_id, details_url=inputs.run_url
    )
    signing = (
        receipt.load_private_key(inputs.signing_key, source="the signing-key input")
        if inputs.signing_key is not None
        else None
    )
    try:
        if not paths:
            raise AggregateError(f"no shard receipt matches {inputs.receipts!r}")
        run = aggregate(
            [_shard_receipt(p) for p in paths],
            keys,
            signing_key=signing,
            clock=clock,
            builder=inputs.builder,
        )
    except AggregateError as e:
        api.complete_check(
            run_id,
            verdict=Verdict.INCONCLUSIVE,
            title="proofgate: no shard receipt verifies",
            summary=f"proofgate aggregate found nothing to combine:\n\n```\n{e}\n```\n",
            text="",
            details_url=inputs.run_url,
        )
        print(f"::error title=proofgate aggregate::{escape_data(str(e))}")
        _set_outputs(inputs, {"verdict": Verdict.INCONCLUSIVE.value})
        return 1
    out = _out_dir(inputs)
    (out / "receipt.json").write_bytes(run.envelope)
    (out / "receipt.md").write_text(run.markdown, encoding="utf-8")
    patch_field = run.predicate.get("patch")
    patch_digest = str(patch_field.get("sha256")) if isinstance(patch_field, dict) else ""
    neighbours = {
        str(p): patch for p in paths if (patch := _shard_patch(p.parent / PATCH_DIFF)) is not None
    }
    patch = shard_patch(neighbours, patch_digest)
    if patch is not None:
        (out / PATCH_DIFF).write_bytes(patch)
    digest = hashlib.sha256(run.envelope).hexdigest()
    shown = _shown_path(inputs, out / "receipt.json")
    opening = trigger_note(target) + image_note(run.predicate)
    _complete_with_receipt(api, inputs, run_id, run, opening, shown, digest)
    report_to_job(
        inputs.summary_file,
        opening + run.markdown,
        unsigned=None if run.signed else UNSIGNED_WARNING,
        warnings=[],
        errors=[(r.code.value, r.message) for r in run.reasons],
        cut_note=f"*(cut; the full receipt is `{shown}`)*",
    )
    print(f"proofgate: aggregate {run.verdict.value} (receipt {shown})", file=sys.stderr)
    if run.verdict is Verdict.PROVEN or not inputs.fail_on_unproven:
        return 0
    return 1


# --- verify mode (issue 8: release jobs) ------------------------------------------------


def load_keys(pem_text: str, *, source: str) -> list[Ed25519PublicKey]:
    """Every PEM public key in `pem_text`.

    Raises:
        SigningKeyError: a block is not an Ed25519 public key.
        UsageError: no key at all.
    """
    from gate import receipt

    blocks = re.findall(
        r"-----BEGIN PUBLIC KEY-----.*?-----END PUBLIC KEY-----", pem_text, flags=re.DOTALL
    )
    if not blocks:
        raise UsageError(f"{source}: no PEM public key (-----BEGIN PUBLIC KEY-----) found")
    return [receipt.load_public_key(b.encode(), source=source) for b in blocks]


def run_verify(inputs: ActionInputs, api: ChecksAPI) -> int:
    if not _HEX40.fullmatch(inputs.sha.lower()):
        raise UsageError(f"verify mode needs a 40-hex commit (GITHUB_SHA), got {inputs.sha!r}")
    from gate.github.receipts import LocalTrees, find_valid_receipt

    keys = load_keys(inputs.verify_keys, source="the verify-keys input")
    with LocalTrees(Path(inputs.workspace)) as trees:
        envelope, message = find_valid_receipt(
            api,
            inputs.sha,
            keys,
            Verdict.PROVEN,
            blob_at=trees.blob_at,
            branch=inputs.verify_branch,
            accept_reproof=inputs.accept_reproof,
            config_path=inputs.config_path,
        )
    if envelope is None:
        print(f"::error title=proofgate verify::{escape_data(message)}")
        _set_outputs(inputs, {"verdict": "UNVERIFIED"})
        return 1
    out = _out_dir(inputs) / "verified-receipt.json"
    out.write_bytes(envelope)
    _set_outputs(
        inputs,
        {
            "verdict": Verdict.PROVEN.value,
            "receipt": _shown_path(inputs, out),
            "receipt-sha256": hashlib.sha256(envelope).hexdigest(),
        },
    )
    _append(inputs.summary_file, f"proofgate verify: {message}\n")
    print(f"proofgate: {message}", file=sys.stderr)
    return 0


# --- entry point ------------------------------------------------------------------------


def main(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    logging.basicConfig(
        level=env.get("PROOFGATE_LOGLEVEL", "INFO").upper(),
        format="proofgate: %(message)s",
        stream=sys.stderr,
    )
    try:
        inputs = ActionInputs.from_env(env)
        api = GitHubChecks.from_env(
            {**env, "PROOFGATE_GITHUB_TOKEN": inputs.token} if inputs.token else env
        )
        if inputs.mode == "verify":
            return run_verify(inputs, api)
        if inputs.mode == "aggregate" and inputs.shard:
            raise UsageError("input shard is for mode prove; the aggregate job combines them")
        if not inputs.event_path:
            raise UsageError("GITHUB_EVENT_PATH is not set: run inside GitHub Actions")
        try:
            event = json.loads(Path(inputs.event_path).read_bytes())
        except (OSError, ValueError) as e:
            raise UsageError(f"cannot read the event {inputs.event_path}: {e}") from e
        if not isinstance(event, dict):
            raise UsageError(f"the event {inputs.event_path} is not a JSON object")
        if inputs.mode == "aggregate":
            return run_aggregate(inputs, event, api)
        return run_prove(inputs, event, api)
    except GitHubError as e:
        print(f"::error title=proofgate::{escape_data(str(e))}")
        print(f"proofgate: {e}", file=sys.stderr)
        return e.exit_code
    except GateError as e:
        print(f"::error title=proofgate::{escape_data(str(e))}")
        print(f"proofgate: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    from gate.util.signals import sigterm_raises_interrupt

    sigterm_raises_interrupt()
    sys.exit(main())
