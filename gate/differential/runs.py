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
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from gate import differential, usercache
from gate.differential import BASE, PROVING, TRUSTED, DifferentialReport, Run, witness
from gate.differential.junit import TestId, TestOutcome, parse_outcomes
from gate.errors import RepoError
from gate.git.interface import (
    EvidenceSource,
    UnsafeTreeError,
    clean_room_archive,
    clean_room_mtime,
)
from gate.journal import Journal, canonical_json
from gate.model import (
    CheckResult,
    CheckSpec,
    Config,
    Decision,
    DifferentialMode,
    Evidence,
    ImageRef,
    Reason,
    ReasonCode,
    TreeId,
)
from gate.sandbox.interface import Sandbox, SandboxError

__all__ = ["Pending", "cache_dir", "start"]

log = logging.getLogger("gate")

MAX_TEST_SOURCE_BYTES = 32 * 1024 * 1024  # test files read for rename detection
CACHE_VERSION = 2  # 2: the witness (witnessed, tamper kinds)
CONTINUE = "--continue-on-collection-errors"


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/proofgate/base-runs (default ~/.cache/...)."""
    return usercache.root() / "base-runs"


def _outcomes_of(result: CheckResult, name: str, spec: CheckSpec | None = None) -> Run:
    run = _outcomes_only(result, name)
    if spec is None:
        return run
    seen = witness.assess(result, spec, None)
    conftests = tuple(
        (path, blob)
        for p in result.phases
        for c in p.commands
        for s in c.witness
        for path, blob in s.conftests
    )
    return dataclasses.replace(
        run,
        witnessed=seen.sessions > 0,
        tamper=seen.findings,
        conftests=conftests,
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
        why = "; ".join(late) or "no JUnit report was written"
        return Run(name=name, outcomes=None, problem=why)
    try:
        outcomes = parse_outcomes(result.junit_report)
    except ValueError as e:
        return Run(name=name, outcomes=None, problem=f"the JUnit report is unusable: {e}")
    return Run(name=name, outcomes=outcomes, problem="; ".join(late) or None)


# -- the local cache of base runs --------------------------------------------------------


def _cache_key(spec: CheckSpec, base_tree: TreeId, image: ImageRef, config_digest: str) -> str:
    material = {
        "v": CACHE_VERSION,
        "base_tree": base_tree,
        "check": repr(spec),
        "image": image.digest,
        "config": config_digest,
    }
    return hashlib.sha256(canonical_json(material)).hexdigest()


def _cache_read(path: Path) -> Run | None:
    """A cached base run, or None when missing or malformed. A cache entry is as trusted as
    the machine it sits on, no more: whoever can write it can choose the base outcomes."""
    try:
        raw = json.loads(path.read_bytes())
        if raw["v"] != CACHE_VERSION:
            return None
        rows = raw["outcomes"]
        outcomes = {TestId(classname=str(c), name=str(n)): TestOutcome(str(o)) for c, n, o in rows}
        kinds = tuple((str(k), "") for k in raw["witness"]["tamper"])
        return Run(
            name=BASE,
            outcomes=outcomes,
            cached=True,
            witnessed=bool(raw["witness"]["witnessed"]),
            tamper=kinds,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache_write(path: Path, outcomes: Mapping[TestId, TestOutcome], run: Run) -> None:
    rows = [[t.classname, t.name, o.value] for t, o in sorted(outcomes.items())]
    seen = {"witnessed": run.witnessed, "tamper": sorted({k for k, _ in run.tamper})}
    try:
        data = canonical_json({"v": CACHE_VERSION, "outcomes": rows, "witness": seen})
        usercache.write_atomic(path, data)
    except OSError as e:
        log.warning("cannot write the base-run cache %s: %s", path, e)


# -- runs ------------------------------------------------------------------------------


@dataclasses.dataclass
class _Job:
    check: CheckSpec
    run: str
    tar: bytes | None  # None: the tree could not be built (see `problem`)
    problem: str | None = None
    cache: Path | None = None
    future: Future[tuple[Run, Journal]] | None = None


@dataclasses.dataclass
class _Plan:
    spec: CheckSpec
    is_test: Callable[[bytes], bool]
    jobs: dict[str, _Job]
    cached_base: Run | None = None
    note: str | None = None
    head_cache: Path | None = None  # the proven tree's entry: a later base run of that tree
    # run -> the run of the very same tree whose outcomes it reuses (no second container)
    same_as: dict[str, str] = dataclasses.field(default_factory=dict)
    trees: dict[str, TreeId] = dataclasses.field(default_factory=dict)  # run -> its tree


def _execute(
    job: _Job, sandbox: Callable[[], Sandbox], image: ImageRef, stop: threading.Event
) -> tuple[Run, Journal]:
    journal = Journal(clock=time.monotonic)
    if job.tar is None:
        return Run(name=job.run, outcomes=None, problem=job.problem), journal
    if stop.is_set():
        return Run(name=job.run, outcomes=None, problem="interrupted"), journal
    tar = job.tar
    # A module of the base's tests that does not import against the change (or a new test
    # module without it) must cost that module's tests, not the whole run: pytest stops at
    # a collection error unless told otherwise. Every differential run gets the same flag.
    env = dict(job.check.limits.env)
    env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " " + CONTINUE).strip()
    limits = dataclasses.replace(job.check.limits, env=tuple(sorted(env.items())))
    spec = dataclasses.replace(job.check, name=f"{job.check.name}@{job.run}", limits=limits)
    log.info("check %s: the %s run in a fresh container", job.check.name, job.run)

    def stream() -> Iterator[bytes]:
        yield tar

    try:
        result = sandbox().run_check(spec, image, stream, journal, stop=stop)
    except KeyboardInterrupt:  # told to stop: its containers are removed
        return Run(name=job.run, outcomes=None, problem="interrupted"), journal
    except SandboxError as e:
        return Run(name=job.run, outcomes=None, problem=f"the clean room failed: {e}"), journal
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
            runs[BASE] = plan.cached_base
        if plan.note is not None:
            return differential.not_run(spec.name, spec.differential, plan.note)
        base = runs[BASE]
        if base.outcomes is None:
            note = f"the base run produced no per-test outcomes ({base.problem})"
            return differential.not_run(spec.name, spec.differential, note)
        if head is None:
            head_run = Run(name="head", outcomes=None, problem="the head run did not run")
        else:
            head_run = _outcomes_of(head, "head", spec)
            seen = head_run.outcomes
            if plan.head_cache is not None and seen and head_run.problem is None:
                clean = not head_run.tamper
                if clean and all(o in (TestOutcome.PASS, TestOutcome.SKIP) for o in seen.values()):
                    # the outcomes of this very tree: what a base run of it would record
                    _cache_write(plan.head_cache, seen, head_run)
        runs["head"] = head_run
        for name, twin in plan.same_as.items():
            got = runs[twin]
            note = f"the {name} tree is the {twin} tree: the {twin} run's outcomes"
            runs[name] = dataclasses.replace(got, name=name, problem=got.problem or note)
        tampered = self._tampered(plan, runs, base)
        if any(t.startswith(f"{TRUSTED}: ") for t in tampered):
            # SPEC §3.2: what the witness contradicts is no outcome at all
            runs[TRUSTED] = dataclasses.replace(
                runs[TRUSTED], outcomes=None, problem="the witness contradicts its evidence"
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
        """The witness's findings in the runs that judge (head, trusted), less the kinds
        the base run shows too (the project's own harness), plus `witness-missing`."""
        waived = frozenset(k for k, _ in base.tamper)
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
            found = list(witness.waive(found, waived))
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
) -> Pending:
    """Plan every check's differential and start what may run beside the head runs.

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
        plans.append(_plan(spec, ev, source, image, config_digest, cache))
    for plan in plans:
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


def _tar(source: EvidenceSource, tree: TreeId) -> bytes:
    return b"".join(clean_room_archive(source, tree, clean_room_mtime()))


def _plan(
    spec: CheckSpec,
    ev: Evidence,
    source: EvidenceSource,
    image: ImageRef | None,
    config_digest: str,
    cache: Path | None,
) -> _Plan:
    assert ev.proven_tree is not None  # noqa: S101
    globs = spec.tests or differential.DEFAULT_TESTS
    is_test = differential.selector((*globs, "**/conftest.py"))
    trusted_sel = differential.trusted_selector(spec)
    plan = _Plan(spec=spec, is_test=is_test, jobs={})
    if image is None:
        plan.note = "the clean-room image did not resolve"
        return plan
    try:
        trees: dict[str, TreeId] = {
            TRUSTED: source.overlay(ev.proven_tree, ev.base.tree, trusted_sel),
        }
        if spec.differential is DifferentialMode.FULL:
            trees[PROVING] = source.overlay(ev.base.tree, ev.head.tree, is_test)
        trees[BASE] = ev.base.tree
        # A trusted tree equal to the proven tree (the change touches no test or harness
        # file) is exactly what the head run ran; a proving tree equal to the base tree is
        # the base run. The same tree in a fresh container again is no new evidence.
        if trees[TRUSTED] == ev.proven_tree:
            plan.same_as[TRUSTED] = "head"
            del trees[TRUSTED]
        if trees.get(PROVING) == ev.base.tree:
            plan.same_as[PROVING] = BASE
            del trees[PROVING]
        plan.trees = dict(trees)
    except (RepoError, UnsafeTreeError) as e:
        plan.note = f"the differential's trees could not be built: {e}"
        return plan
    entry: Path | None = None
    if cache is not None:
        entry = cache / f"{_cache_key(spec, ev.base.tree, image, config_digest)}.json"
        plan.head_cache = cache / f"{_cache_key(spec, ev.proven_tree, image, config_digest)}.json"
        hit = _cache_read(entry)
        if hit is not None:
            plan.cached_base = hit
            del trees[BASE]
    for name, tree in trees.items():
        try:
            data: bytes | None = _tar(source, tree)
            problem = None
        except (RepoError, UnsafeTreeError) as e:
            data, problem = None, f"the {name} tree cannot be copied: {e}"
        plan.jobs[name] = _Job(
            check=spec,
            run=name,
            tar=data,
            problem=problem,
            cache=entry if name == BASE else None,
        )
    return plan
