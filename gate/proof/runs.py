"""The I/O of the differential (SPEC §3.1): build the trees, run base, trusted and proving
in fresh containers (in parallel with the head run when the cores allow), reuse a cached
base run, and hand the outcomes to `gate.differential.compare`.

`start()` is called before the head runs and submits what can run alongside them;
`Pending.finish(results)` waits for the rest and returns one report per check that has a
`junit` report. Each run records its journal events privately (threads) and they are
appended to the proof's journal, in order and named by run, when it finishes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from gate import differential
from gate.differential import (
    BASE,
    PROVING,
    TRUSTED,
    DifferentialReport,
    Run,
    asbase,
    pytestconfig,
)
from gate.differential import inputs as test_inputs
from gate.differential.junit import TestId, TestOutcome, parse_outcomes
from gate.errors import RepoError
from gate.git.interface import (
    EvidenceSource,
    UnsafeTreeError,
    clean_room_archive,
    clean_room_mtime,
)
from gate.model import (
    BaseReceipt,
    CheckResult,
    CheckSpec,
    Config,
    Decision,
    DifferentialMode,
    EnvRecord,
    Evidence,
    ImageRef,
    Phase,
    Reason,
    ReasonCode,
    TreeId,
)
from gate.sandbox.interface import Sandbox, SandboxError
from gate.util import usercache
from gate.util.journal import Journal, canonical_json
from gate.util.spool import Spool
from gate.witness import host as witness_env
from gate.witness import judge as witness

__all__ = ["Pending", "cache_dir", "start"]

log = logging.getLogger("gate")

MAX_TEST_SOURCE_BYTES = 32 * 1024 * 1024  # test files read for rename detection
CACHE_VERSION = 7  # 2: the witness; 3: the environment record; 4: in-process tripwires;
# 5: exact details, test files, inputs; 6: plugins and what ran before the harness;
# 7: the environment path by path


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/proofgate/base-runs (default ~/.cache/...)."""
    return usercache.root() / "base-runs"


def _outcomes_of(result: CheckResult, name: str, spec: CheckSpec | None = None) -> Run:
    run = _outcomes_only(result, name)
    if spec is None:
        return run
    seen = witness.assess(result, spec, None)
    sessions = [s for p in result.phases for c in p.commands for s in c.witness]
    conftests = tuple((path, blob) for s in sessions for path, blob in s.conftests)
    return dataclasses.replace(
        run,
        witnessed=seen.sessions > 0,
        tamper=seen.findings,
        conftests=conftests,
        environment=result.env_changes,
        test_files=witness.test_files(sessions),
        inputs=witness.test_inputs(sessions, differential.test_files(spec)),
        plugins=tuple(sorted({p for s in sessions for p in s.plugins})),
        early=tuple(sorted({m for s in sessions for m in s.early})),
        foreign=tuple(sorted({m for s in sessions for m in s.foreign})),
    )


def _outcomes_only(result: CheckResult, name: str) -> Run:
    if not result.started:
        return Run(name=name, outcomes=None, problem=f"container did not start: {result.error}")
    late = [
        f"{p.phase.value}: `{' '.join(c.argv)}` timed out"
        for p in result.phases
        for c in p.commands
        if c.timed_out
    ]
    if result.junit_report is None:
        # what ended the run before its report, in the words of the step that failed
        why = "; ".join([*late, *_failed(result)]) or "no JUnit report was written"
        return Run(name=name, outcomes=None, problem=why)
    try:
        outcomes = parse_outcomes(result.junit_report)
    except ValueError as e:
        return Run(name=name, outcomes=None, problem=f"the JUnit report is unusable: {e}")
    return Run(name=name, outcomes=outcomes, problem="; ".join(late) or None)


def _failed(result: CheckResult) -> list[str]:
    """The command that failed (its phase and exit status), or the clean room's error."""
    out = [
        f"{p.phase.value}: `{' '.join(c.argv)}` exited {c.exit_code}"
        for p in result.phases
        for c in p.commands
        if c.exit_code not in (None, 0) and not c.timed_out
    ][:1]
    if result.error:
        out.append(f"the clean room: {result.error}")
    ran = {p.phase for p in result.phases if p.commands}
    if not out and Phase.TEST not in ran:
        out.append("the test phase did not run")
    return out


# -- the local cache of base runs --------------------------------------------------------


def _run_material(spec: CheckSpec, image: ImageRef, config_digest: str) -> dict[str, object]:
    """What makes two runs of one tree the same run."""
    return {
        "check": repr(dataclasses.replace(spec, pytest_config=None)),  # commands, limits, env
        "image": image.digest,
        "config": config_digest,
        # what every test command gets besides (the witness and the pytest options)
        "test_environment": witness_env.test_environment({}, None, differential=True),
        "witness": witness_env.plugin_digest(),
    }


def _cache_key(spec: CheckSpec, base_tree: TreeId, image: ImageRef, config_digest: str) -> str:
    material = {
        "v": CACHE_VERSION,
        "base_tree": base_tree,
        **_run_material(spec, image, config_digest),
    }
    return hashlib.sha256(canonical_json(material)).hexdigest()


def _text(path: bytes) -> str:
    return path.decode("utf-8", "surrogateescape")


def _path(text: object) -> bytes:
    return str(text).encode("utf-8", "surrogateescape")


def _cache_read(path: Path) -> Run | None:
    """A cached base run, or None when missing or malformed. A cache entry is as trusted as
    the machine it sits on, no more: whoever can write it can choose the base outcomes."""
    try:
        raw = json.loads(path.read_bytes())
        if raw["v"] != CACHE_VERSION:
            return None
        rows = raw["outcomes"]
        outcomes = {TestId(classname=str(c), name=str(n)): TestOutcome(str(o)) for c, n, o in rows}
        env = raw.get("environment")
        seen = raw["witness"]
        return Run(
            name=BASE,
            outcomes=outcomes,
            cached=True,
            witnessed=bool(seen["witnessed"]),
            tamper=tuple((str(k), str(d)) for k, d in seen["tamper"]),
            test_files=tuple(_path(p) for p in seen["test_files"]),
            inputs=tuple(_path(p) for p in seen["inputs"]),
            plugins=tuple(str(p) for p in seen["plugins"]),
            early=tuple(str(m) for m in seen["early"]),
            environment=EnvRecord.from_dict(env) if isinstance(env, dict) else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache_write(path: Path, outcomes: Mapping[TestId, TestOutcome], run: Run) -> None:
    rows = [[t.classname, t.name, o.value] for t, o in sorted(outcomes.items())]
    seen = {
        "witnessed": run.witnessed,
        "tamper": sorted([k, d] for k, d in set(run.tamper)),
        "test_files": [_text(p) for p in run.test_files],
        "inputs": [_text(p) for p in run.inputs],
        "plugins": list(run.plugins),
        "early": list(run.early),
    }
    try:
        env = run.environment.to_dict() if run.environment is not None else None
        data = canonical_json(
            {"v": CACHE_VERSION, "outcomes": rows, "witness": seen, "environment": env}
        )
        usercache.write_atomic(path, data)
    except OSError as e:
        log.warning("cannot write the base-run cache %s: %s", path, e)


# -- runs ------------------------------------------------------------------------------


@dataclasses.dataclass
class _Job:
    check: CheckSpec
    run: str
    tar: Spool | None  # None: the tree could not be built (see `problem`)
    problem: str | None = None
    cache: Path | None = None
    future: Future[tuple[Run, Journal]] | None = None


@dataclasses.dataclass
class _Plan:
    spec: CheckSpec
    is_test: Callable[[bytes], bool]
    jobs: dict[str, _Job]
    cached_base: Run | None = None
    cache_entry: str | None = None  # the base-run cache entry the base run comes from
    reused_from: str | None = None  # where `cached_base` comes from, in words
    receipt_refused: str | None = None  # why a base receipt offered gave no base run
    reuse_key: str = ""  # of this proof's runs (asbase.reuse_key): its head run's `as_base`
    note: str | None = None
    # run -> the run of the very same tree whose outcomes it reuses (no second container)
    same_as: dict[str, str] = dataclasses.field(default_factory=dict)
    trees: dict[str, TreeId] = dataclasses.field(default_factory=dict)  # run -> its tree
    # the files the patch touches that the trusted run takes from the base (test inputs)
    inputs: frozenset[bytes] = frozenset()


def _execute(
    job: _Job, sandbox: Callable[[], Sandbox], image: ImageRef, stop: threading.Event
) -> tuple[Run, Journal]:
    journal = Journal(clock=time.monotonic)
    if job.tar is None:
        return Run(name=job.run, outcomes=None, problem=job.problem), journal
    tar = job.tar
    if stop.is_set():
        tar.close()
        return Run(name=job.run, outcomes=None, problem="interrupted"), journal
    # SPEC §3.2: every run gets the check's own environment and the same pytest options
    # as the head run (gate/witness/host.py `test_environment`): one environment-cache
    # key for all of them, and no test that behaves differently in one run.
    spec = dataclasses.replace(job.check, name=f"{job.check.name}@{job.run}")
    log.info("check %s: the %s run in a fresh container", job.check.name, job.run)

    try:
        result = sandbox().run_check(spec, image, tar.chunks, journal, stop=stop)
    except KeyboardInterrupt:  # told to stop: its containers are removed
        return Run(name=job.run, outcomes=None, problem="interrupted"), journal
    except SandboxError as e:
        return Run(name=job.run, outcomes=None, problem=f"the clean room failed: {e}"), journal
    finally:
        tar.close()
    got = _outcomes_of(result, job.run, job.check)
    if job.cache is not None and got.outcomes is not None and got.problem is None:
        _cache_write(job.cache, got.outcomes, got)
    return got, journal


class Pending:
    """Differential runs under way; `finish` once the head runs are done."""

    def __init__(
        self,
        plans: list[_Plan],
        evidence: Evidence,
        source: EvidenceSource,
        sandbox: Callable[[], Sandbox],
        image: ImageRef | None,
        journal: Journal,
        workers: int,
        parallel: bool,
    ) -> None:
        self._plans = plans
        self.skipped: tuple[DifferentialReport, ...] = ()  # checks with no differential
        self._ev = evidence
        self._source = source
        self._sandbox = sandbox
        self._image = image
        self._journal = journal
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="differential")
        self._stop = threading.Event()  # set: running runs end, and no further one starts
        if parallel:
            self._submit()

    def _submit(self) -> None:
        image = self._image
        if image is None:
            return
        for plan in self._plans:
            for job in plan.jobs.values():
                if job.future is None:
                    job.future = self._pool.submit(_execute, job, self._sandbox, image, self._stop)

    def stop(self) -> None:
        """The proof was interrupted: end what runs, start nothing more."""
        self._stop.set()

    def close(self) -> None:
        self._stop.set()  # after `finish` nothing runs; on an exception, end what does
        self._pool.shutdown(wait=True, cancel_futures=True)
        for plan in self._plans:  # the archives of runs that never started
            for job in plan.jobs.values():
                if job.tar is not None:
                    job.tar.close()

    def finish(
        self, results: tuple[CheckResult, ...], rules: Mapping[str, Decision]
    ) -> tuple[DifferentialReport, ...]:
        """Wait for every run, then compare. Never raises for a run's own failure."""
        self._submit()
        by_name = {r.name: r for r in results}
        try:
            judged = tuple(self._judge(p, by_name.get(p.spec.name), rules) for p in self._plans)
        finally:
            self.close()
        return judged + self.skipped

    def _judge(
        self, plan: _Plan, head: CheckResult | None, rules: Mapping[str, Decision]
    ) -> DifferentialReport:
        spec = plan.spec
        runs: dict[str, Run] = {}
        for name, job in plan.jobs.items():
            if job.future is None:
                runs[name] = Run(name=name, outcomes=None, problem="did not run")
                continue
            run, sub = job.future.result()
            for e in sub.events():
                data = e["data"] if isinstance(e["data"], dict) else {}
                self._journal.append(str(e["kind"]), run=name, at=e["t"], **data)
            self._journal.append(
                "differential-run-finished",
                check=spec.name,
                run=name,
                tests=len(run.outcomes or {}),
                problem=run.problem,
            )
            runs[name] = run
        if plan.cached_base is not None:
            runs[BASE] = dataclasses.replace(plan.cached_base, reused_from=plan.reused_from)
        if plan.note is not None:
            return differential.could_not_run(spec.name, spec.differential, plan.note)
        base = runs[BASE]
        if head is None:
            head_run = Run(name="head", outcomes=None, problem="the head run did not run")
        else:
            # SPEC §3.2: only a real base run is ever cached as a base run
            head_run = _outcomes_of(head, "head", spec)
        runs["head"] = head_run
        for name, twin in plan.same_as.items():
            got = runs[twin]
            note = f"the {name} tree is the {twin} tree: the {twin} run's outcomes"
            runs[name] = dataclasses.replace(
                got, name=name, problem=got.problem or note, reused_from=f"the {twin} run"
            )
        tampered = self._tampered(plan, runs, base)
        if any(t.startswith(f"{TRUSTED}: ") for t in tampered):
            # SPEC §3.2: what the witness contradicts is no outcome at all
            runs[TRUSTED] = dataclasses.replace(
                runs[TRUSTED], outcomes=None, problem=differential.CONTRADICTED
            )
        ev = self._ev
        changed = frozenset(p for e in ev.inventory for p in (e.path, e.old_path) if p is not None)
        is_test = plan.is_test
        nontest = any(not is_test(p) for p in changed)
        wanted: Callable[[bytes], bool] = lambda p: p.endswith(b".py") and is_test(p)  # noqa: E731
        base_files = self._read(ev.base.tree, wanted)
        head_files = self._read(ev.head.tree, wanted)
        report = differential.compare(
            check=spec.name,
            mode=spec.differential,
            head=head_run,
            base=base,
            trusted=runs[TRUSTED],
            proving=runs.get(PROVING),
            changed=changed,
            nontest_changed=nontest,
            base_files=base_files,
            head_files=head_files,
            no_proving_decision=rules.get(differential.NO_PROVING_TEST, Decision.ALLOW),
            scoped=spec.shard is not None,  # SPEC §3.3: the aggregate judges the union
            inputs=plan.inputs,
        )
        changed_env, env_reason = differential.environment_reason(
            spec.name, runs[TRUSTED], base, changed
        )
        if env_reason is not None:
            report = dataclasses.replace(
                report, environment_changed=changed_env, reasons=(*report.reasons, env_reason)
            )
        # the head run, as the base run of its tree for the next proof (SPEC §3.1)
        whole = spec.shard is None  # a shard's run is only its share: no base run
        report = dataclasses.replace(
            report,
            as_base=asbase.to_dict(head_run, key=plan.reuse_key) if whole else None,
            base_receipt_refused=plan.receipt_refused,
        )
        foreign = differential.foreign_code(spec.name, runs[TRUSTED])
        if foreign is not None:
            report = dataclasses.replace(report, reasons=(*report.reasons, foreign))
        loaded, plugin_reason = differential.plugins_loaded(spec.name, runs[TRUSTED], base)
        if plugin_reason is not None:
            report = dataclasses.replace(
                report, plugins_loaded=loaded, reasons=(*report.reasons, plugin_reason)
            )
        if not tampered:
            return report
        reason = Reason(
            code=ReasonCode.EVIDENCE_TAMPERED,
            message="proofgate's witness inside pytest contradicts what was read back: "
            + "; ".join(tampered[:5])
            + (f" (and {len(tampered) - 5} more)" if len(tampered) > 5 else ""),
            check=spec.name,
        )
        return dataclasses.replace(
            report, tampered=tuple(tampered), reasons=(*report.reasons, reason)
        )

    def _tampered(self, plan: _Plan, runs: Mapping[str, Run], base: Run) -> list[str]:
        """The witness's findings in the runs that judge (head, trusted), less those the
        base run shows with the same detail (the project's own harness; never one naming
        the change's non-test files), plus `witness-missing`."""
        waived = frozenset(base.tamper)
        changed = {p for e in self._ev.inventory for p in (e.path, e.old_path) if p is not None}
        is_test = differential.test_files(plan.spec)
        changed_code = lambda p: p in changed and not is_test(p)  # noqa: E731
        out: list[str] = []
        trees = {"head": self._ev.proven_tree, **plan.trees}
        for name in ("head", TRUSTED):
            run = runs.get(name)
            if run is None:
                continue
            found = list(run.tamper)
            tree = trees.get(plan.same_as.get(name, name))
            if tree is not None and run.conftests:
                blobs = self._blob_ids(tree, {path for path, _ in run.conftests})
                found.extend(
                    f
                    for path, blob in run.conftests
                    for f in witness.foreign_conftest(path, blob, blobs.get)
                )
            found = list(witness.waive(found, waived, changed_code))
            if base.witnessed and not run.witnessed and run.outcomes is not None:
                found.append(
                    (
                        "witness-missing",
                        "pytest ran under proofgate's witness on the base, not here",
                    )
                )
            out.extend(f"{name}: {kind}: {detail}" for kind, detail in dict.fromkeys(found))
        return out

    def _blob_ids(self, tree: TreeId, paths: set[str]) -> dict[bytes, str]:
        """Git blob ids of the tree's files at the witness's absolute `paths`, one read."""
        prefix = witness.WORKSPACE + "/"
        wanted = {p[len(prefix) :].encode() for p in paths if p.startswith(prefix)}
        got = self._read(tree, lambda p: p in wanted)
        return {
            p: hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest()  # noqa: S324 - git's id
            for p, d in got.items()
        }

    def _read(self, tree: TreeId, wanted: Callable[[bytes], bool]) -> dict[bytes, bytes]:
        try:
            got = self._source.read_tree_files(tree, wanted, max_bytes=MAX_TEST_SOURCE_BYTES)
        except RepoError:
            return {}
        return got or {}


def start(
    config: Config,
    ev: Evidence,
    source: EvidenceSource,
    sandbox: Callable[[], Sandbox],
    journal: Journal,
    *,
    config_digest: str,
    cache: Path | None,
    base_receipt: BaseReceipt | None = None,
) -> Pending:
    """Plan every check's differential and start what may run beside the head runs. The
    base run of a check comes from the local cache, or from `base_receipt` (a receipt
    of the base tree's own proof, SPEC §3.1), or runs.

    Never raises for the clean room's own failures: they become notes and run problems.
    """
    assert ev.proven_tree is not None  # noqa: S101 - caller checked
    image: ImageRef | None = None
    wanted = any(differential.enabled(s) for s in config.checks)
    try:
        image = sandbox().resolve_image(config.image) if wanted else None
    except SandboxError as e:
        log.info("differential: the image did not resolve: %s", e)
    plans: list[_Plan] = []
    cores = os.cpu_count() or 1
    slots = cores
    skipped: list[DifferentialReport] = []
    for spec in config.checks:
        if not differential.enabled(spec):
            why = "differential: off" if spec.junit else "the check has no junit report to compare"
            skipped.append(differential.not_run(spec.name, DifferentialMode.OFF, why))
            continue
        slots = min(slots, max(1, cores // max(1, math.ceil(spec.limits.cpus))))
        plans.append(_plan(spec, ev, source, image, config_digest, cache, base_receipt))
    for plan in plans:
        if plan.receipt_refused is not None:
            journal.append("base-receipt-refused", check=plan.spec.name, why=plan.receipt_refused)
        journal.append(
            "differential-planned",
            check=plan.spec.name,
            mode=plan.spec.differential.value,
            runs=sorted(plan.jobs),
            reused=dict(plan.same_as),
            base_cached=plan.cached_base is not None,
            note=plan.note,
        )
    parallel = slots > 1
    pending = Pending(plans, ev, source, sandbox, image, journal, max(1, slots - 1), parallel)
    pending.skipped = tuple(skipped)
    return pending


def _from_receipt(plan: _Plan, offered: BaseReceipt, base_tree: TreeId) -> None:
    """The base run of the plan's check from a receipt of the base tree's proof, or why
    not (SPEC §3.1; gate/differential/asbase.py): the base's tests then run."""
    if offered.predicate is None:
        plan.receipt_refused = (
            f"the base receipt {offered.digest[:16]} does not verify: {offered.refused}"
        )
        return
    got = asbase.from_dict(
        offered.predicate, plan.spec.name, key=plan.reuse_key, base_tree=base_tree
    )
    if isinstance(got, str):
        plan.receipt_refused = f"the base receipt {offered.digest[:16]} gives no base run: {got}"
        return
    plan.cached_base = got
    plan.reused_from = f"base receipt sha256:{offered.digest}"


def _tar(source: EvidenceSource, tree: TreeId) -> Spool:
    """The run's tar, checked and written out before any run starts (an unsafe tree is
    the run's problem, not a run cut short), kept on disk: a large blob in the tree costs
    no memory (issue 46).

    Raises:
        RepoError, UnsafeTreeError: as `clean_room_archive`; RepoError when the temporary
            file cannot be written.
    """
    try:
        return Spool(clean_room_archive(source, tree, clean_room_mtime()))
    except OSError as e:
        raise RepoError(f"cannot write the archive of tree {tree[:12]} to disk: {e}") from e


def _test_inputs(
    source: EvidenceSource,
    ev: Evidence,
    spec: CheckSpec,
    observed: Iterable[bytes],
) -> frozenset[bytes]:
    """SPEC §3.2, by construction: the files the patch touches that the base tree has
    and the trusted run takes from the base as the base's tests' inputs
    (gate/differential/inputs.py), with what a cached base run was seen reading.

    Raises:
        RepoError: a tree is not readable.
    """
    trusted = differential.trusted_selector(spec)
    changed = {p for e in ev.inventory for p in (e.path, e.old_path) if p is not None}
    candidates = sorted(
        p
        for p in changed
        if not trusted(p) and source.entry_mode(ev.base.tree, p) not in (None, 0o40000)
    )
    modules = {p for p in candidates if p.endswith(b".py")}
    base_sources: dict[bytes, bytes] = {}
    tests_import: frozenset[str] = frozenset()
    if modules:  # a data-only module the base's tests import is an input too
        is_test = differential.test_files(spec)
        wanted = lambda p: p in modules or (p.endswith(b".py") and is_test(p))  # noqa: E731
        found = source.read_tree_files(ev.base.tree, wanted, max_bytes=MAX_TEST_SOURCE_BYTES)
        base_sources = found or {}
        tests_import = test_inputs.imported_names(
            {p: d for p, d in base_sources.items() if is_test(p)}
        )
    return test_inputs.inputs(
        candidates,
        trusted=trusted,
        base_sources=base_sources,
        tests_import=tests_import,
        observed=observed,
    )


def head_checks(config: Config, source: EvidenceSource, tree: TreeId) -> Config:
    """SPEC §3.2: every run of a differential gets the same test options, the head run
    included: a check with a differential runs its head with the effective pytest
    configuration of the tree it proves, passed as the base run of that tree would get
    it (so no code under test can tell the head run from a base run, and the head run
    stands for the base run of its tree in the receipt, asbase.py). A tree that cannot be
    read leaves the check as configured (its runs then say why).
    """
    wanted = [s for s in config.checks if differential.enabled(s)]
    if not wanted:
        return config
    try:
        own = _pytest_config(source, tree)
    except RepoError:
        return config
    checks = tuple(
        dataclasses.replace(s, pytest_config=own) if differential.enabled(s) else s
        for s in config.checks
    )
    return dataclasses.replace(config, checks=checks)


def _pytest_config(source: EvidenceSource, tree: TreeId) -> tuple[str, bytes]:
    """The pytest configuration a tree's root gives `/workspace` (differential.pytestconfig).

    Raises:
        RepoError: the tree is not readable.
    """
    wanted = frozenset(pytestconfig.CANDIDATES)
    found = source.read_tree_files(tree, wanted.__contains__, max_bytes=MAX_TEST_SOURCE_BYTES)
    return pytestconfig.effective(found or {})


def _plan(
    spec: CheckSpec,
    ev: Evidence,
    source: EvidenceSource,
    image: ImageRef | None,
    config_digest: str,
    cache: Path | None,
    base_receipt: BaseReceipt | None = None,
) -> _Plan:
    assert ev.proven_tree is not None  # noqa: S101
    is_test = differential.test_files(spec)
    trusted_sel = differential.trusted_selector(spec)
    plan = _Plan(spec=spec, is_test=is_test, jobs={})
    if image is None:
        plan.note = "the clean-room image did not resolve"
        return plan
    plan.reuse_key = asbase.reuse_key(_run_material(spec, image, config_digest))
    entry: Path | None = None
    if cache is not None:
        entry = cache / f"{_cache_key(spec, ev.base.tree, image, config_digest)}.json"
        plan.cached_base = _cache_read(entry)
        plan.cache_entry = entry.stem
        plan.reused_from = f"base-run cache entry {entry.stem}"
    if plan.cached_base is None and base_receipt is not None:
        _from_receipt(plan, base_receipt, ev.base.tree)
    try:
        # SPEC §3.2: what the base's tests may read comes from the base, by construction
        # (gate/differential/inputs.py); what a cached base run was seen reading adds
        observed = plan.cached_base.inputs if plan.cached_base is not None else ()
        plan.inputs = _test_inputs(source, ev, spec, observed)
        taken = plan.inputs
        # SPEC §3.2: every run the differential compares gets the base's pytest
        # configuration, whatever the change does to the files it comes from
        base_config = _pytest_config(source, ev.base.tree)
        same_config = _pytest_config(source, ev.proven_tree) == base_config
        trusted_tree = source.overlay(
            ev.proven_tree, ev.base.tree, lambda p: trusted_sel(p) or p in taken
        )
        trees: dict[str, TreeId] = {BASE: ev.base.tree, TRUSTED: trusted_tree}
        if spec.differential is DifferentialMode.FULL:
            trees[PROVING] = source.overlay(ev.base.tree, ev.head.tree, is_test)
        # A trusted tree equal to the proven tree (the change touches no test, harness or
        # test input file, and pytest's configuration is the base's) is exactly what the
        # head run ran; a proving tree equal to the base tree is the base run. The same
        # tree in a fresh container again is no new evidence.
        # Likewise a trusted tree equal to the base tree (the change touches only tests,
        # harness or test inputs: no code under test) is the base run's tree, built and
        # configured as the base run was: its outcomes are the base run's, reused or not.
        trusted_is_head = trusted_tree == ev.proven_tree and same_config
        if trusted_is_head:
            plan.same_as[TRUSTED] = "head"
            del trees[TRUSTED]
        elif trusted_tree == ev.base.tree:
            plan.same_as[TRUSTED] = BASE
            del trees[TRUSTED]
        if trees.get(PROVING) == ev.base.tree:
            plan.same_as[PROVING] = BASE
            del trees[PROVING]
        plan.trees = dict(trees)
    except (RepoError, UnsafeTreeError) as e:
        plan.note = f"the differential's trees could not be built: {e}"
        return plan
    if plan.cached_base is not None:
        del trees[BASE]
    for name, tree in trees.items():
        data: Spool | None = None
        problem = None
        try:
            data = _tar(source, tree)
        except (RepoError, UnsafeTreeError) as e:
            problem = f"the {name} tree cannot be copied: {e}"
        plan.jobs[name] = _Job(
            check=dataclasses.replace(spec, pytest_config=base_config),
            run=name,
            tar=data,
            problem=problem,
            cache=entry if name == BASE else None,
        )
    return plan
