"""The orchestrator: sequences the I/O of one proof and hands the evidence to the core.

resolve + capture (git) -> configuration (base tree or --config) -> policy -> approval ->
image + one fresh container per check (sandbox) -> `verdict.decide` -> predicate ->
statement -> signed DSSE envelope. Adapters come in as arguments so the CLI, the Action and
the tests wire the same function.
"""

from __future__ import annotations

import functools
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
from gate.config import DEFAULT_CONFIG_PATH, checked_document, load_config, schema_digest
from gate.differential import DifferentialReport, junitpath, wants_a_person
from gate.errors import RepoError, UsageError
from gate.faces import render
from gate.git.interface import (
    EvidenceSource,
    UnsafeTreeError,
    clean_room_archive,
    clean_room_mtime,
)
from gate.model import (
    Approval,
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
    ReasonCode,
    Sha256,
    ShardFilter,
    TreeId,
    Trigger,
    Verdict,
    worst,
)
from gate.proof.journal import Journal
from gate.proof.policy_run import TagOracle, judge_policy
from gate.proof.shard import ShardSpec, Split
from gate.proof.verdict import Outcome, RunEvidence, decide, preflight
from gate.util import usercache
from gate.util.timefmt import rfc3339
from gate.witness import judge as witness

if TYPE_CHECKING:
    from gate.sandbox.interface import Sandbox

# The sandbox and the differential's runs (with the Docker SDK behind them) are imported
# where a check is about to run: `proofgate policy`, a DENY or a missing configuration
# never load them (tests/integration/test_cli_cost.py keeps it so).

log = logging.getLogger("gate")


Approver = Callable[[Sha256, Sha256], Approval | None]
"""(patch digest, policy fingerprint) -> a verified approval bound to both, or None.

May raise `ApprovalRejected` to record why an offered approval does not count."""


class ApprovalRejected(Exception):
    """An approval was offered but is not valid for this patch and policy."""


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
            data = request.config_file.read_bytes()
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
    engine = _engine_id(sandbox)
    mtime = clean_room_mtime()
    archive_lock = threading.Lock()  # the evidence source is not shared across threads

    def tree_tar() -> Iterator[bytes]:
        with archive_lock:
            return clean_room_archive(evidence, tree, mtime)

    done, failure = _run_concurrently(config.checks, sandbox, image, tree_tar, journal)
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
) -> tuple[Approval | None, str | None]:
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
    return approval, error


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

    config, config_source = _load_config(request, evidence, ev)
    journal.append(
        "config-loaded",
        found=config is not None,
        source=config_source.to_dict() if config_source else None,
    )

    spec = config.policy if config is not None else PolicySpec()
    result = judge_policy(evidence, ev, spec, config_path=request.config_path, tags=tags)
    journal.append(
        "policy-decided",
        decision=result.decision.value,
        fingerprint=result.fingerprint,
        findings=len(result.findings),
    )

    approval: Approval | None = None
    approval_error: str | None = None
    if result.decision is Decision.HOLD and approver is not None:
        approval, approval_error = _ask_approval(approver, ev, result, journal)

    trusted = config is not None and not _config_changed_by_patch(request, ev)
    split: Split | None = None
    if request.shard is not None and config is not None and ev.proven_tree is not None:
        split = _split(config, ev, evidence, request.shard.count, request.balance)
        config = _shard_config(config, split, request.shard, journal)
    room = _CleanRoom()
    forged: tuple[str, ...] = ()
    diffs: tuple[DifferentialReport, ...] = ()
    if (
        request.run_checks
        and config is not None
        and trusted  # SPEC §3 (3): rules the patch wrote run nothing
        and ev.proven_tree is not None
        and result.decision is not Decision.DENY  # SPEC §3: DENY runs no untrusted code
    ):
        from gate.differential import runs as differential_runs

        forged = _forged_reports(config, ev, evidence)
        digest = config_source.blob if config_source is not None else ""
        made: list[Sandbox] = []

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
                config_digest=digest,
                cache=differential_runs.cache_dir(),
            )
            try:
                room = _run_checks(config, ev, evidence, factory, journal)
                if room.interrupted:
                    pending.stop()  # the differential's runs end too
                diffs = pending.finish(room.results, dict(spec.rules))  # SPEC §3.1
            finally:
                pending.close()
        finally:
            # every check has ended: whatever still carries the proof's id is a leftover
            if made:
                swept = made[0].sweep()
                if swept:
                    journal.append("leftovers-removed", removed=list(swept))
        # SPEC §3.1: a changed expectation or a lost test waits for a person, as a HOLD does
        if (
            approval is None
            and approval_error is None
            and approver is not None
            and wants_a_person(diffs)
        ):
            approval, approval_error = _ask_approval(approver, ev, result, journal)
        elif approval is None and approval_error is None and approver is not None and split:
            # SPEC §3.3: a lost test is judged over the union, by the aggregate; a valid
            # approval of this patch goes into the shard receipt for it to release
            approval, _refused = _ask_approval(approver, ev, result, journal)

    run = RunEvidence(
        evidence=ev,
        config_found=config is not None,
        config_trusted=trusted,
        checks=config.checks if config is not None else (),
        policy=result,
        approval=approval,
        approval_error=approval_error,
        sandbox_error=room.sandbox_error,
        image=room.image,
        image_error=room.image_error,
        results=room.results,
        unsafe_tree=room.unsafe_tree,
        interrupted=room.interrupted,
        forged_reports=forged,
        differentials=diffs,
        tampered=_unjudged_tampering(config, room.results, diffs),
    )
    outcome = decide(run) if request.run_checks else preflight(run)
    own = outcome
    if request.shard is not None:
        own, outcome = _as_shard(outcome, request.shard, config)
    journal.append(
        "verdict", verdict=outcome.verdict.value, reasons=[r.code.value for r in outcome.reasons]
    )

    built = receipt.build_predicate(
        outcome=outcome,
        run=run,
        config_source=config_source,
        config=config,
        journal=journal,
        started_at=rfc3339(started),
        finished_at=rfc3339(clock()),
        trigger=request.trigger,
        builder=request.builder,
    )
    # `proofgate policy` ran nothing: its output is a pre-flight, never a verdict.
    report = built if request.run_checks else receipt.Preflight(predicate=built)
    predicate = report.to_dict()
    if room.engine_id is not None:
        predicate["docker"] = {"engine_id": room.engine_id}
    if request.shard is None and request.run_checks:
        _record_durations(predicate, config, room, ev, evidence)
    if request.shard is not None and split is not None:
        predicate["shard"] = _shard_section(
            request.shard, split, own, room, diffs, ev, evidence, config, dict(spec.rules)
        )
    statement = receipt.build_statement(
        predicate,
        patch_sha256=ev.patch.sha256,
        head_commit=ev.head.commit,
        proven_tree=ev.proven_tree,
    )
    envelope = receipt.sign(receipt.serialize(statement), signing_key)
    return ProofRun(
        verdict=outcome.verdict,
        reasons=outcome.reasons,
        policy_decision=result.decision,
        predicate=predicate,
        statement=statement,
        envelope=envelope,
        patch=ev.patch.data,
        markdown=render.to_markdown(predicate, signed=signing_key is not None),
        signed=signing_key is not None,
        shard_verdict=own.verdict if request.shard is not None else None,
    )


# -- shards (SPEC §3.3) -------------------------------------------------------------------


def _test_files(spec: CheckSpec, tree: TreeId, evidence: EvidenceSource) -> dict[bytes, bytes]:
    """The `.py` files of `tree` the check's `tests` globs (and conftests) select."""
    from gate import differential
    from gate.differential.runs import MAX_TEST_SOURCE_BYTES

    is_test = differential.selector((*(spec.tests or differential.DEFAULT_TESTS), "**/conftest.py"))
    try:
        got = evidence.read_tree_files(
            tree, lambda p: p.endswith(b".py") and is_test(p), max_bytes=MAX_TEST_SOURCE_BYTES
        )
    except RepoError:
        return {}
    return got or {}


def _test_paths(spec: CheckSpec, tree: TreeId, evidence: EvidenceSource) -> tuple[bytes, ...]:
    return tuple(_test_files(spec, tree, evidence))


def _split(
    config: Config,
    ev: Evidence,
    evidence: EvidenceSource,
    count: int,
    balance: Mapping[str, Mapping[str, float]] | None,
) -> Split:
    """The split every shard computes alike: from the base tree (and `balance`), of the
    test files the base's pytest configuration collects (its `python_files`)."""
    from gate.differential import pytestconfig
    from gate.proof import shard

    try:
        roots = evidence.read_tree_files(
            ev.base.tree, lambda p: p in pytestconfig.CANDIDATES, max_bytes=1 << 22
        )
    except RepoError:
        roots = None
    patterns = pytestconfig.python_files(*pytestconfig.effective(roots or {}))
    files: dict[str, dict[str, tuple[str, ...] | None]] = {}
    for spec in config.checks:
        if spec.junit is None:
            continue
        units = {
            p.decode("utf-8", "surrogateescape"): shard.top_level_tests(data)
            for p, data in _test_files(spec, ev.base.tree, evidence).items()
        }
        files[spec.name] = {
            p: u for p, u in units.items() if (u is None or u) and shard.collected(p, patterns)
        }
    return shard.compute_split(config.checks, files, count, balance)


def _shard_config(config: Config, split: Split, which: ShardSpec, journal: Journal) -> Config:
    from gate.proof import shard

    journal.append(
        "shard-split",
        index=which.index,
        count=which.count,
        split_sha256=split.sha256,
        checks={
            c.name: (
                {"whole": c.owner}
                if c.owner
                else {"files": split.files_of(c.name, which.index), "by": c.balanced_by}
            )
            for c in split.checks
        },
        fallback=split.fallbacks or None,
    )
    log.info("shard %s: split %s", which, split.sha256[:12])
    for name, why in split.fallbacks.items():
        log.warning(
            "shard %s: check %s: the recorded durations cannot balance the split (%s); "
            "split by the hash of each test file's path instead",
            which,
            name,
            why,
        )
    return shard.apply(config, split, which)


def _in_share(filt: ShardFilter, path: bytes) -> bool:
    """The file's tests run here (a file split by unit: some of them may)."""
    text = path.decode("utf-8", "surrogateescape")
    return text in filt.by_unit or filt.shard_of(text) == filt.index


def _as_shard(outcome: Outcome, which: ShardSpec, config: Config | None) -> tuple[Outcome, Outcome]:
    """SPEC §3.3: (the shard's own outcome over its share, the receipt's). A shard receipt
    never verifies as a whole proof, not even for a verifier that knows nothing of shards:
    its verdict is at best INCONCLUSIVE `shard-partial`."""
    from gate.proof import shard

    own = shard.own_outcome(outcome, config)
    partial = Reason(
        code=ReasonCode.SHARD_PARTIAL,
        message=f"this receipt proves shard {which} only (its own verdict: "
        f"{own.verdict.value}); `proofgate aggregate` combines the {which.count} shard "
        "receipts into one proof",
    )
    return own, Outcome(
        verdict=worst([outcome.verdict, Verdict.INCONCLUSIVE]),
        reasons=(*outcome.reasons, partial),
    )


def _shard_section(
    which: ShardSpec,
    split: Split,
    own: Outcome,
    room: _CleanRoom,
    diffs: tuple[DifferentialReport, ...],
    ev: Evidence,
    evidence: EvidenceSource,
    config: Config | None,
    rules: Mapping[str, Decision],
) -> JsonDict:
    from gate import differential
    from gate.proof import shard

    by_name = {s.name: s for s in (config.checks if config is not None else ())}
    results = {r.name: r for r in room.results}
    changed = frozenset(p for e in ev.inventory for p in (e.path, e.old_path) if p is not None)
    checks: dict[str, JsonDict] = {}
    for report in diffs:
        spec = by_name.get(report.check)
        if spec is None or spec.shard is None or not report.ran:
            continue
        filt = spec.shard
        base_files = _test_files(spec, ev.base.tree, evidence)
        head_files = _test_files(spec, ev.head.tree, evidence)
        # per side: lost tests are judged with the base's fingerprints (SPEC §3.3)
        prints = {
            side: differential.fingerprints({p: d for p, d in files.items() if _in_share(filt, p)})
            for side, files in (("base", base_files), ("head", head_files))
        }
        is_test = differential.selector(
            (*(spec.tests or differential.DEFAULT_TESTS), "**/conftest.py")
        )
        head = results.get(spec.name)
        durations = (
            shard.run_durations(head, functools.partial(tuple, head_files))
            if head is not None
            else {}
        )
        if report.runs and any(r.name == "head" and r.outcomes == {} for r in report.runs):
            log.info("shard %s: check %s: an empty share (no test collected)", which, spec.name)
        checks[spec.name] = shard.check_section(
            runs={r.name: (r.outcomes, r.problem) for r in report.runs},
            fingerprints=prints,
            nontest_changed=any(not is_test(p) for p in changed),
            no_proving_decision=rules.get(differential.NO_PROVING_TEST, Decision.ALLOW).value,
            durations=durations,
        )
    return shard.section(
        shard=which,
        split=split,
        own_verdict=own.verdict.value,
        image_digest=room.image.digest if room.image is not None else None,
        checks=checks,
    )


def _record_durations(
    predicate: JsonDict,
    config: Config | None,
    room: _CleanRoom,
    ev: Evidence,
    evidence: EvidenceSource,
) -> None:
    """SPEC §3.3: a one-job receipt records its head run's seconds per top-level test of
    each check with `junit` (`checks[].durations`), what `prove --shard --balance-from`
    balances a split by."""
    from gate.proof import shard

    specs = {s.name: s for s in (config.checks if config is not None else ())}
    results = {r.name: r for r in room.results}
    checks = predicate.get("checks")
    for entry in checks if isinstance(checks, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else None
        spec, result = specs.get(str(name)), results.get(str(name))
        if spec is None or result is None or spec.junit is None:
            continue
        paths = functools.partial(_test_paths, spec, ev.head.tree, evidence)
        durations = shard.run_durations(result, paths)
        if durations:
            entry["durations"] = dict(sorted(durations.items()))
