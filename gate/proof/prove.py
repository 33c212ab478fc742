"""The orchestrator: sequences the I/O of one proof and hands the evidence to the core.

`prove()` is the stages of SPEC §1-§3 in order, each a function below over the frozen
values of those before it: capture (git) -> configuration (base tree or --config) ->
policy -> a person, on a HOLD -> the plan of runs -> one fresh container per check and
per differential run (sandbox) -> a person, on what the runs found -> `verdict.decide`
-> predicate, statement, signed DSSE envelope. Adapters come in as arguments so the CLI,
the Action and the tests wire the same function (docs/architecture.md walks it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from gate import policy, receipt
from gate.config import (
    DEFAULT_CONFIG_PATH,
    MAX_CONFIG_BYTES,
    checked_document,
    load_config,
    schema_digest,
)
from gate.differential import DifferentialReport, junitpath, wants_a_person
from gate.errors import ApprovalRejected, UsageError
from gate.git.interface import (
    EvidenceSource,
    UnsafeTreeError,
    clean_room_archive,
    clean_room_mtime,
)
from gate.model import (
    Approval,
    BaseReceipt,
    CheckResult,
    CheckSpec,
    Config,
    ConfigSource,
    ConfigSourceKind,
    Decision,
    Evidence,
    ImageRef,
    JsonDict,
    PolicyResult,
    PolicySpec,
    Reason,
    Sha256,
    Trigger,
    Verdict,
)
from gate.proof import shard
from gate.proof.policy_run import TagOracle, judge_policy
from gate.proof.shard import ShardSpec, Split
from gate.proof.verdict import Outcome, RunEvidence, decide, preflight
from gate.receipt import render
from gate.util import usercache
from gate.util.bounded import FileTooLarge, read_bounded
from gate.util.journal import Journal
from gate.util.timefmt import rfc3339
from gate.witness import judge as witness

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gate.sandbox.interface import Sandbox

# The sandbox and the differential's runs (with the Docker SDK behind them) are imported
# where a check is about to run: `proofgate policy`, a DENY or a missing configuration
# never load them (tests/integration/test_cli_cost.py keeps it so).

log = logging.getLogger("gate")


Approver = Callable[[Sha256, Sha256], Approval | None]
"""(patch digest, policy fingerprint) -> a verified approval bound to both, or None.

May raise `ApprovalRejected` to record why an offered approval does not count."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProveRequest:
    base: str
    head: str
    config_file: Path | None = None  # trusted by the operator; overrides the base tree
    config_path: str = DEFAULT_CONFIG_PATH  # path inside the base tree
    signing_key_pem: bytes | None = None
    run_checks: bool = True  # False: `proofgate policy` (evidence + policy, runs nothing)
    trigger: Trigger | None = None  # None: a local run (kind `local`)
    builder: receipt.Builder | None = None  # the workflow run, when the Action proves
    repo_dir: Path | None = None  # the repository's work tree, when there is one
    # on every Docker object of the proof and in the journal's `run-started` event
    # (gate/sandbox/labels.py): cleanups select by it, never by what another proof made
    proof_id: str = field(default_factory=lambda: secrets.token_hex(8))
    shard: ShardSpec | None = None  # SPEC §3.3: prove only this shard's share of the tests
    # recorded seconds per test file, per check (from a verified receipt): balances the split
    balance: Mapping[str, Mapping[str, float]] | None = None
    # SPEC §3.1: a receipt of the base tree's own proof, for the base's outcomes
    base_receipt: BaseReceipt | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProofRun:
    verdict: Verdict
    reasons: tuple[Reason, ...]
    policy_decision: Decision
    predicate: JsonDict
    statement: JsonDict
    envelope: bytes = field(repr=False)
    patch: bytes = field(repr=False)
    markdown: str
    signed: bool
    shard_verdict: Verdict | None = None  # a shard receipt: its own verdict over its share


def _checked_config(data: bytes, *, source: str, known: frozenset[str]) -> Config:
    """`load_config`, with its YAML document remembered in the per-user cache by the
    bytes' SHA-256 and the schema's once it passed the schema: a configuration seen
    valid before is neither parsed nor schema-checked again (the cache is as trusted as
    the machine), so the process imports neither yaml nor jsonschema. The checks after
    the schema always run; errors are never remembered.

    Raises:
        ConfigError: the configuration is malformed.
    """
    seen = usercache.BlobIndex(
        "config-document", schema_digest()[:16], decode=_document, encode=lambda v: v
    )
    key = hashlib.sha256(data).hexdigest()
    document = seen[key] if key in seen else None
    fresh = document is None
    if document is None:
        document = checked_document(data, source)
    config = load_config(data, source=source, known_rules=known, document=document)
    # only a document JSON carries unchanged (a YAML date or binary value is not)
    if fresh and _json_round_trip(document) == document:
        seen[key] = document
        seen.save()
    return config


def _document(raw: object) -> Mapping[str, object]:
    if not isinstance(raw, dict):
        raise ValueError("not a remembered configuration document")
    return cast(Mapping[str, object], raw)


def _json_round_trip(document: Mapping[str, object]) -> object:
    try:
        return json.loads(json.dumps(document, allow_nan=False))
    except (TypeError, ValueError):
        return None


def _load_config(
    request: ProveRequest, evidence: EvidenceSource, ev: Evidence
) -> tuple[Config | None, ConfigSource | None]:
    """SPEC §2: the base commit's tree, never head or the worktree; or an operator's file.

    Raises:
        ConfigError: the configuration is malformed (exit 2).
        UsageError: --config names a file that cannot be read.
    """
    known = frozenset(policy.RULES)
    if request.config_file is not None:
        try:
            data = read_bounded(request.config_file, MAX_CONFIG_BYTES, "a configuration")
        except FileTooLarge as e:
            raise UsageError(f"--config {e}") from e
        except OSError as e:
            raise UsageError(f"cannot read --config {request.config_file}: {e.strerror}") from e
        digest = hashlib.sha256(data).hexdigest()
        config = _checked_config(data, source=str(request.config_file), known=known)
        return config, ConfigSource(
            kind=ConfigSourceKind.FILE,
            path=str(request.config_file),
            blob=f"sha256:{digest}",
            sha256=digest,
        )
    found = evidence.read_blob_at(ev.base.commit, request.config_path)
    if found is None:
        return None, None
    blob, data = found
    source = f"{request.config_path} (base {ev.base.commit[:12]})"
    config = _checked_config(data, source=source, known=known)
    return config, ConfigSource(
        kind=ConfigSourceKind.BASE_TREE,
        path=request.config_path,
        blob=blob,
        sha256=hashlib.sha256(data).hexdigest(),
    )


def _config_changed_by_patch(request: ProveRequest, ev: Evidence) -> bool:
    """Whether `--config` names a file of the repository's work tree that the patch
    changes: the change would then be judged by rules it wrote itself (SPEC §3 (3))."""
    if request.config_file is None or request.repo_dir is None:
        return False
    try:
        rel = request.config_file.resolve().relative_to(request.repo_dir.resolve())
    except (OSError, ValueError):
        return False
    raw = rel.as_posix().encode("utf-8", "surrogateescape")
    return any(raw in (e.path, e.old_path) for e in ev.inventory)


def _forged_reports(config: Config, ev: Evidence, evidence: EvidenceSource) -> tuple[str, ...]:
    """JUnit paths that the proven tree already contains: a committed report is forgeable."""
    forged: list[str] = []
    tree = ev.proven_tree
    for check in config.checks:
        if check.junit is None or tree is None:
            continue
        # SPEC §3.2: as the container resolves it (normalized, through committed symlinks)
        problem = junitpath.committed_problem(check.junit, lambda p: evidence.entry_mode(tree, p))
        in_base = evidence.read_blob_at(ev.base.commit, check.junit) is not None
        if problem is not None or in_base:
            forged.append(check.junit)
    return tuple(sorted(set(forged)))


@dataclass(frozen=True, slots=True, kw_only=True)
class _CleanRoom:
    """What the clean room produced; at most one of the error fields is set."""

    image: ImageRef | None = None
    results: tuple[CheckResult, ...] = ()
    sandbox_error: str | None = None
    image_error: str | None = None
    unsafe_tree: str | None = None
    interrupted: bool = False
    engine_id: str | None = None  # the Docker daemon's engine id (`docker info` ID)


# What the witness finds in a check no differential judged: no base run to tell the
# project's own harness from the change, so only what no honest harness does (a test
# whose call raised reported as passed is a lie, whoever tells it).
_WITHOUT_BASE = frozenset(
    {"exit-status", "report-rewritten", "witness-garbled", "outcome-rewritten"}
)


def _unjudged_tampering(
    config: Config | None, results: tuple[CheckResult, ...], diffs: tuple[DifferentialReport, ...]
) -> tuple[tuple[str, str], ...]:
    if config is None:
        return ()
    judged = {d.check for d in diffs if d.ran}
    by_name = {r.name: r for r in results}
    out: list[tuple[str, str]] = []
    for spec in config.checks:
        result = by_name.get(spec.name)
        if result is None or spec.name in judged:
            continue
        seen = witness.assess(result, spec, None)
        out.extend((spec.name, f"{k}: {d}") for k, d in seen.findings if k in _WITHOUT_BASE)
    return tuple(out)


def _run_checks(
    config: Config,
    ev: Evidence,
    evidence: EvidenceSource,
    sandbox_factory: Callable[[], Sandbox],
    journal: Journal,
) -> _CleanRoom:
    """Resolve the image, then one fresh container per check; never raises for the
    clean room's own failures (they become fields of the result)."""
    from gate.sandbox.interface import ImageError, SandboxError

    assert ev.proven_tree is not None  # noqa: S101 - caller checked
    tree = ev.proven_tree
    try:
        sandbox = sandbox_factory()
        image = sandbox.resolve_image(config.image)
    except ImageError as e:
        journal.append("image-unresolved", image=config.image, error=str(e))
        return _CleanRoom(image_error=str(e))
    except SandboxError as e:
        journal.append("sandbox-unavailable", error=str(e))
        return _CleanRoom(sandbox_error=str(e))
    journal.append("image-resolved", name=image.name, id=image.id, digest=image.digest)
    mtime = clean_room_mtime()
    archive_lock = threading.Lock()  # the evidence source is not shared across threads

    def tree_tar() -> Iterator[bytes]:
        with archive_lock:
            return clean_room_archive(evidence, tree, mtime)

    # which daemon runs them is asked while the checks start: a round trip off their path
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine") as side:
        asked = side.submit(_engine_id, sandbox)
        done, failure = _run_concurrently(config.checks, sandbox, image, tree_tar, journal)
    engine = asked.result()
    results = tuple(done[i] for i in sorted(done))  # config order, whatever finished first
    if isinstance(failure, UnsafeTreeError):
        journal.append("unsafe-tree", error=str(failure))
        return _CleanRoom(image=image, engine_id=engine, results=results, unsafe_tree=str(failure))
    if isinstance(failure, SandboxError):
        journal.append("sandbox-lost", error=str(failure))
        return _CleanRoom(
            image=image, engine_id=engine, results=results, sandbox_error=str(failure)
        )
    if isinstance(failure, KeyboardInterrupt):
        # Every worker killed its command and removed its containers; judge what we have.
        journal.append("interrupted")
        return _CleanRoom(image=image, engine_id=engine, results=results, interrupted=True)
    return _CleanRoom(image=image, engine_id=engine, results=results)


def _engine_id(sandbox: Sandbox) -> str | None:
    """The Docker daemon's engine id, when the sandbox has one to tell: which daemon ran
    the checks (a remote `DOCKER_HOST` too), never how it was reached or with what."""
    from gate.sandbox.interface import SandboxError

    get = getattr(sandbox, "engine_id", None)
    if get is None:
        return None
    try:
        got = get()
    except SandboxError:
        return None
    return got if isinstance(got, str) and got else None


def _run_concurrently(
    checks: tuple[CheckSpec, ...],
    sandbox: Sandbox,
    image: ImageRef,
    tree_tar: Callable[[], Iterator[bytes]],
    journal: Journal,
) -> tuple[dict[int, CheckResult], BaseException | None]:
    """Run the checks concurrently, started in config order while the `cpus` of those
    running fit in the machine's cores (one check always runs, however many it asks for).

    The first failure (an unsafe tree, the daemon gone, Ctrl-C or SIGTERM in this thread,
    which alone receives them) sets the stop event: every running check kills its command
    and removes its containers, no further check starts, and this returns once all
    workers have ended. Returns the finished results by config index and that failure.
    """
    from gate.sandbox.interface import SandboxError

    cores = float(os.cpu_count() or 1)
    stop = threading.Event()
    running: dict[Future[CheckResult], tuple[int, float]] = {}
    done: dict[int, CheckResult] = {}
    failure: BaseException | None = None
    queue = list(enumerate(checks))
    with ThreadPoolExecutor(max_workers=max(1, len(checks)), thread_name_prefix="check") as pool:
        try:
            while queue or running:
                used = sum(need for _, need in running.values())
                while queue and failure is None:
                    i, spec = queue[0]
                    need = min(max(spec.limits.cpus, 0.0), cores)
                    if running and used + need > cores:
                        break
                    queue.pop(0)
                    used += need
                    log.info("check %s: starting a fresh container", spec.name)
                    journal.append("check-started", check=spec.name, cpus=spec.limits.cpus)
                    future = pool.submit(
                        sandbox.run_check, spec, image, tree_tar, journal, stop=stop
                    )
                    running[future] = (i, need)
                if failure is not None:
                    queue.clear()
                if not running:
                    break
                finished, _ = wait(running, timeout=0.2, return_when=FIRST_COMPLETED)
                for future in finished:
                    i, _need = running.pop(future)
                    name = checks[i].name
                    try:
                        result = future.result()
                    except (UnsafeTreeError, SandboxError, KeyboardInterrupt) as e:
                        journal.append("check-ended", check=name, error=str(e) or type(e).__name__)
                        if failure is None:
                            failure = e
                        stop.set()
                        continue
                    done[i] = result
                    ok = result.started and all(p.ok for p in result.phases)
                    journal.append("check-finished", check=name, started=result.started, ok=ok)
        except KeyboardInterrupt as e:
            failure = e
            stop.set()
            _drain(running, done, journal, checks)
    return done, failure


def _drain(
    running: dict[Future[CheckResult], tuple[int, float]],
    done: dict[int, CheckResult],
    journal: Journal,
    checks: tuple[CheckSpec, ...],
) -> None:
    """After a Ctrl-C: wait, uninterrupted by a second one, until every worker has ended
    (each removes its containers); keep the results of those that finished anyway."""
    for future, (i, _) in running.items():
        while True:
            try:
                wait([future])
                break
            except KeyboardInterrupt:
                log.warning("still removing the containers of check %s", checks[i].name)
        error = future.exception()
        if error is None:
            done[i] = future.result()
        journal.append("check-ended", check=checks[i].name, error=str(error or "") or None)
    running.clear()


def _shared(factory: Callable[[], Sandbox]) -> Callable[[], Sandbox]:
    """`factory`, called once for the whole proof: the checks and every differential run
    share one sandbox (one client, one daemon handshake) as concurrent checks already
    share theirs. Still called only when something is about to run; a failure (no
    daemon) is not remembered, so a later call tries again."""
    lock = threading.Lock()
    made: list[Sandbox] = []

    def once() -> Sandbox:
        with lock:
            if not made:
                made.append(factory())
            return made[0]

    return once


def _ask_approval(
    approver: Approver, ev: Evidence, result: PolicyResult, journal: Journal
) -> _Asked:
    approval: Approval | None = None
    error: str | None = None
    try:
        approval = approver(ev.patch.sha256, result.fingerprint)
    except ApprovalRejected as e:
        error = str(e)
    journal.append(
        "approval-checked",
        approved=approval is not None,
        approver=approval.approver if approval else None,
        error=error,
    )
    return _Asked(approval=approval, error=error)


def prove(
    request: ProveRequest,
    *,
    evidence: EvidenceSource,
    sandbox: Callable[[str], Sandbox],
    approver: Approver | None = None,
    clock: Callable[[], float] = time.time,
    on_event: Callable[[JsonDict], None] | None = None,
    tags: TagOracle | None = None,
) -> ProofRun:
    """Prove one change end to end and return the (signed) receipt. `tags` answers the
    tag look-ups that verify pin bumps (the Action: the GitHub API); without it (a local
    run) a pin bump stays held.

    The stages of SPEC §1-§3, in order, each over the frozen values of those before it
    (docs/architecture.md walks them): evidence -> configuration -> policy -> (a person,
    on a HOLD) -> plan of runs -> runs -> (a person, on what the runs found) -> judgement
    -> receipt. A shard (SPEC §3.3) is a transformation of the plan and of the outcome,
    owned by gate/proof/shard.py.

    Raises:
        RepoError: a revision or the repository cannot be read (exit 2).
        ConfigError: the configuration is malformed (exit 2).
        SigningKeyError: the signing key cannot be loaded (exit 2).

    `sandbox` is called with the proof id (`request.proof_id`) whenever a check is about
    to run; every Docker object of the proof carries it, and once every check has ended
    the last sandbox made removes whatever still does (`Sandbox.sweep`).
    """
    signing_key = (
        receipt.load_private_key(request.signing_key_pem, source="the signing key")
        if request.signing_key_pem is not None
        else None
    )
    captured = _capture(request, evidence, clock=clock, on_event=on_event)
    configured = _configure(request, evidence, captured)
    policy_result = _apply_policy(evidence, captured, configured, tags, request.config_path)
    asked = _ask_on_hold(approver, captured, policy_result)
    plan = _plan_runs(request, evidence, captured, configured, policy_result)
    ran = _run(evidence, sandbox, captured, configured, plan, request)
    asked = _ask_after_runs(approver, captured, policy_result, plan, ran, asked)
    judged = _judge(captured, configured, plan, policy_result, asked, ran)
    return _sign_receipt(
        request,
        evidence,
        captured,
        configured,
        plan,
        policy_result,
        ran,
        judged,
        signing_key=signing_key,
        clock=clock,
    )


# -- the stages, in prove()'s order ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Captured:
    """SPEC §1: the change as git holds it, with the journal that records the proof."""

    ev: Evidence
    journal: Journal
    started: float


@dataclass(frozen=True, slots=True)
class _Configured:
    """SPEC §2: the configuration (None: none found) and whether the patch left it alone."""

    config: Config | None
    source: ConfigSource | None
    trusted: bool
    policy: PolicySpec


@dataclass(frozen=True, slots=True)
class _Asked:
    """A person's approval of this patch and policy, or why an offered one does not count."""

    approval: Approval | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Plan:
    """What runs: the checks (a shard's share of them) and the split they came from; with
    `runs` false (DENY, `proofgate policy`, an untrusted or missing configuration, no
    proven tree) nothing does."""

    config: Config | None
    split: Split | None
    runs: bool
    shard: ShardSpec | None  # SPEC §3.3: this proof is that shard of the split
    preflight: bool  # `proofgate policy`: nothing runs, and the output is no verdict


@dataclass(frozen=True, slots=True)
class _Ran:
    """What the clean room produced: the checks' results and the differential's runs."""

    room: _CleanRoom
    forged: tuple[str, ...] = ()
    diffs: tuple[DifferentialReport, ...] = ()


@dataclass(frozen=True, slots=True)
class _Judged:
    run: RunEvidence
    outcome: Outcome  # what the receipt says (a shard's: at best INCONCLUSIVE)
    own: Outcome  # over what ran here (a shard's own verdict over its share)


def _capture(
    request: ProveRequest,
    evidence: EvidenceSource,
    *,
    clock: Callable[[], float],
    on_event: Callable[[JsonDict], None] | None,
) -> _Captured:
    started = clock()
    journal = Journal(clock=time.monotonic, on_event=on_event)
    journal.append("run-started", base=request.base, head=request.head, proof=request.proof_id)
    ev = evidence.capture(request.base, request.head)
    journal.append(
        "evidence-captured",
        base=ev.base.commit,
        head=ev.head.commit,
        merge_base=ev.merge_base,
        patch_sha256=ev.patch.sha256,
        files=ev.patch.files,
        proven_tree=ev.proven_tree,
        coverage_complete=ev.coverage.complete,
        reasons=[r.code.value for r in ev.reasons],
    )
    return _Captured(ev=ev, journal=journal, started=started)


def _configure(request: ProveRequest, evidence: EvidenceSource, captured: _Captured) -> _Configured:
    config, source = _load_config(request, evidence, captured.ev)
    captured.journal.append(
        "config-loaded",
        found=config is not None,
        source=source.to_dict() if source else None,
    )
    return _Configured(
        config=config,
        source=source,
        trusted=config is not None and not _config_changed_by_patch(request, captured.ev),
        policy=config.policy if config is not None else PolicySpec(),
    )


def _apply_policy(
    evidence: EvidenceSource,
    captured: _Captured,
    configured: _Configured,
    tags: TagOracle | None,
    config_path: str,
) -> PolicyResult:
    result = judge_policy(
        evidence, captured.ev, configured.policy, config_path=config_path, tags=tags
    )
    captured.journal.append(
        "policy-decided",
        decision=result.decision.value,
        fingerprint=result.fingerprint,
        findings=len(result.findings),
    )
    return result


def _ask_on_hold(approver: Approver | None, captured: _Captured, result: PolicyResult) -> _Asked:
    if result.decision is not Decision.HOLD or approver is None:
        return _Asked()
    return _ask_approval(approver, captured.ev, result, captured.journal)


def _plan_runs(
    request: ProveRequest,
    evidence: EvidenceSource,
    captured: _Captured,
    configured: _Configured,
    result: PolicyResult,
) -> _Plan:
    config, ev = configured.config, captured.ev
    split: Split | None = None
    if request.shard is not None and config is not None and ev.proven_tree is not None:
        config, split = shard.plan(
            config, ev, evidence, request.shard, request.balance, captured.journal
        )
    runs = (
        request.run_checks
        and config is not None
        and configured.trusted  # SPEC §3 (3): rules the patch wrote run nothing
        and ev.proven_tree is not None
        and result.decision is not Decision.DENY  # SPEC §3: DENY runs no untrusted code
    )
    return _Plan(
        config=config,
        split=split,
        runs=runs,
        shard=request.shard,
        preflight=not request.run_checks,
    )


def _run(
    evidence: EvidenceSource,
    sandbox: Callable[[str], Sandbox],
    captured: _Captured,
    configured: _Configured,
    plan: _Plan,
    request: ProveRequest,
) -> _Ran:
    """The checks, each in a fresh container, beside the differential's runs (SPEC §3.1);
    one sandbox for all of them, and whatever still carries the proof's id is removed
    once every check has ended."""
    if not plan.runs or plan.config is None:
        return _Ran(room=_CleanRoom())
    from gate.proof import runs as differential_runs

    config, ev, journal = plan.config, captured.ev, captured.journal
    forged = _forged_reports(config, ev, evidence)
    made: list[Sandbox] = []
    base_receipt = request.base_receipt

    def make() -> Sandbox:
        made[:] = [sandbox(request.proof_id)]
        return made[0]

    factory = _shared(make)  # one sandbox for the checks and every differential run
    try:
        pending = differential_runs.start(
            config,
            ev,
            evidence,
            factory,
            journal,
            config_digest=configured.source.blob if configured.source is not None else "",
            cache=differential_runs.cache_dir(),
            base_receipt=base_receipt,
        )
        try:
            tree = ev.proven_tree
            heads = (
                config if tree is None else differential_runs.head_checks(config, evidence, tree)
            )
            room = _run_checks(heads, ev, evidence, factory, journal)
            if room.interrupted:
                pending.stop()  # the differential's runs end too
            diffs = pending.finish(room.results, dict(configured.policy.rules))  # SPEC §3.1
        finally:
            pending.close()
    finally:
        # every check has ended: whatever still carries the proof's id is a leftover
        if made:
            swept = made[0].sweep()
            if swept:
                journal.append("leftovers-removed", removed=list(swept))
    return _Ran(room=room, forged=forged, diffs=diffs)


def _ask_after_runs(
    approver: Approver | None,
    captured: _Captured,
    result: PolicyResult,
    plan: _Plan,
    ran: _Ran,
    asked: _Asked,
) -> _Asked:
    """SPEC §3.1: a changed expectation or a lost test waits for a person, as a HOLD does;
    SPEC §3.3: a shard asks anyway, since a lost test is judged over the union by the
    aggregate, and a valid approval of this patch goes into the shard receipt for it."""
    if not plan.runs or approver is None or asked.approval is not None or asked.error is not None:
        return asked
    if wants_a_person(ran.diffs):
        return _ask_approval(approver, captured.ev, result, captured.journal)
    if plan.split:
        got = _ask_approval(approver, captured.ev, result, captured.journal)
        return _Asked(approval=got.approval)  # a refusal is the aggregate's to record
    return asked


def _judge(
    captured: _Captured,
    configured: _Configured,
    plan: _Plan,
    result: PolicyResult,
    asked: _Asked,
    ran: _Ran,
) -> _Judged:
    config, room = plan.config, ran.room
    run = RunEvidence(
        evidence=captured.ev,
        config_found=config is not None,
        config_trusted=configured.trusted,
        checks=config.checks if config is not None else (),
        policy=result,
        approval=asked.approval,
        approval_error=asked.error,
        sandbox_error=room.sandbox_error,
        image=room.image,
        image_error=room.image_error,
        results=room.results,
        unsafe_tree=room.unsafe_tree,
        interrupted=room.interrupted,
        forged_reports=ran.forged,
        differentials=ran.diffs,
        tampered=_unjudged_tampering(config, room.results, ran.diffs),
    )
    decided = preflight(run) if plan.preflight else decide(run)
    own, outcome = (
        shard.outcome(decided, plan.shard, config) if plan.shard is not None else (decided, decided)
    )
    captured.journal.append(
        "verdict", verdict=outcome.verdict.value, reasons=[r.code.value for r in outcome.reasons]
    )
    return _Judged(run=run, outcome=outcome, own=own)


def _sign_receipt(
    request: ProveRequest,
    evidence: EvidenceSource,
    captured: _Captured,
    configured: _Configured,
    plan: _Plan,
    result: PolicyResult,
    ran: _Ran,
    judged: _Judged,
    *,
    signing_key: Ed25519PrivateKey | None,
    clock: Callable[[], float],
) -> ProofRun:
    """SPEC §4: the predicate, the in-toto statement over it, the DSSE envelope."""
    ev = captured.ev
    built = receipt.build_predicate(
        outcome=judged.outcome,
        run=judged.run,
        config_source=configured.source,
        config=plan.config,
        journal=captured.journal,
        started_at=rfc3339(captured.started),
        finished_at=rfc3339(clock()),
        trigger=request.trigger,
        builder=request.builder,
    )
    # `proofgate policy` ran nothing: its output is a pre-flight, never a verdict.
    report = receipt.Preflight(predicate=built) if plan.preflight else built
    predicate = report.to_dict()
    if ran.room.engine_id is not None:
        predicate["docker"] = {"engine_id": ran.room.engine_id}
    if plan.shard is None and not plan.preflight:
        shard.record_durations(predicate, plan.config, ran.room.results, ev, evidence)
    if plan.shard is not None and plan.split is not None:
        predicate["shard"] = shard.receipt_section(
            plan.shard,
            plan.split,
            judged.own,
            ran.room.results,
            ran.room.image,
            ran.diffs,
            ev,
            evidence,
            plan.config,
            dict(configured.policy.rules),
        )
    statement = receipt.build_statement(
        predicate,
        patch_sha256=ev.patch.sha256,
        head_commit=ev.head.commit,
        proven_tree=ev.proven_tree,
    )
    envelope = receipt.sign(receipt.serialize(statement), signing_key)
    return ProofRun(
        verdict=judged.outcome.verdict,
        reasons=judged.outcome.reasons,
        policy_decision=result.decision,
        predicate=predicate,
        statement=statement,
        envelope=envelope,
        patch=ev.patch.data,
        markdown=render.to_markdown(predicate, signed=signing_key is not None),
        signed=signing_key is not None,
        shard_verdict=judged.own.verdict if plan.shard is not None else None,
    )
