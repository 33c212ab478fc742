"""SPEC §3.3: a proof split over CI jobs, owned here: prove() hands its plan of runs to
`plan` (the split, this shard's share of the checks), its outcome to `outcome` (a shard
receipt is never a whole proof) and asks `receipt_section` for what the aggregate needs.
The split itself, its digest and a shard's config are pure functions below.

Every shard of a proof computes the same split from the same inputs: the base tree's test
files (per check with `junit`) and, when given, recorded per-test durations (from a
verified receipt, `prove --balance-from`: every receipt records them, to the microsecond,
as the witness timed the head run). A check is split by test file:

- with durations: longest first, each file to the least-loaded shard (ties: the shard
  with fewest items, then the lowest index, so tests of no measurable cost spread too); a
  file without a recorded duration counts as the mean of those recorded;
- without, or when the recorded durations cannot balance (none for the check's files, all
  zero): ordered by the SHA-256 of their paths and dealt round robin, so every shard gets
  a share of about the same size; the split says why it fell back (`fallback`);
- a test file only in the head (or any file not listed, such as a doctest's module) goes
  by the hash of its path (`gate.model.hashed_shard`), in every run of every shard.

Only what the runner collects is split: a file of the base tree that the base's pytest
`python_files` patterns select (`collected`), so a helper module in a test directory is
not a share. A check without `junit` (nothing to compare per test) or with fewer test
files than shards is assigned whole, round robin in configuration order: it runs on one
shard only. A share that still collects nothing (a file the change moved, renamed or
deleted) is an *empty share*: recorded in the shard receipt, not a failure
(`own_outcome`); the aggregate judges the union as the one-job proof would.
The split's digest covers all of it, so shards that split differently never aggregate.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import functools
import hashlib
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gate.differential.junit import TestId, TestOutcome
from gate.errors import RepoError, UsageError
from gate.model import (
    CheckResult,
    CheckSpec,
    Config,
    Decision,
    Evidence,
    ImageRef,
    JsonDict,
    Phase,
    Reason,
    ReasonCode,
    ShardFilter,
    TreeId,
    Verdict,
    worst,
)
from gate.util.canonical import canonical_json

if TYPE_CHECKING:
    from gate.differential import DifferentialReport
    from gate.git.interface import EvidenceSource
    from gate.proof.verdict import Outcome
    from gate.util.journal import Journal

log = logging.getLogger("gate")

__all__ = [
    "ShardSpec",
    "Split",
    "apply",
    "by_path_hash",
    "collected",
    "compute_split",
    "defines_tests",
    "exit_code",
    "outcome",
    "own_outcome",
    "parse_shard",
    "plan",
    "receipt_section",
    "record_durations",
    "run_durations",
    "top_level_tests",
]

_SHARD = re.compile(r"([1-9][0-9]{0,3})/([1-9][0-9]{0,3})")
MAX_SHARDS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardSpec:
    """`--shard I/N`: this is shard `index` (1-based) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> ShardSpec:
    """Raises: UsageError unless `text` is I/N with 1 <= I <= N <= 256."""
    m = _SHARD.fullmatch(text.strip())
    if m is None:
        raise UsageError(f"--shard {text!r}: expected I/N, such as 2/3")
    index, count = int(m[1]), int(m[2])
    if not 1 <= index <= count <= MAX_SHARDS:
        raise UsageError(f"--shard {text!r}: expected 1 <= I <= N <= {MAX_SHARDS}")
    return ShardSpec(index=index, count=count)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckSplit:
    name: str
    owner: int | None  # assigned whole to this shard; None: split by file
    assigned: tuple[tuple[str, int], ...] = ()  # file or file::Name -> shard, sorted
    by_unit: tuple[str, ...] = ()  # files split by their top-level tests
    balanced_by: str = "path-hash"  # or "durations"
    fallback: str | None = None  # why durations were given but could not balance

    def to_dict(self) -> JsonDict:
        if self.owner is not None:
            return {"name": self.name, "whole": self.owner}
        d: JsonDict = {
            "name": self.name,
            "by": self.balanced_by,
            "files": dict(self.assigned),
            "by_unit": list(self.by_unit),
        }
        if self.fallback is not None:
            d["fallback"] = self.fallback
        return d


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    count: int
    checks: tuple[CheckSplit, ...]

    def to_dict(self) -> JsonDict:
        return {"count": self.count, "checks": [c.to_dict() for c in self.checks]}

    @property
    def sha256(self) -> str:
        return hashlib.sha256(canonical_json(self.to_dict())).hexdigest()

    @property
    def fallbacks(self) -> dict[str, str]:
        """Per split check, why its recorded durations could not balance it."""
        return {c.name: c.fallback for c in self.checks if c.fallback is not None}

    def files_of(self, check: str, index: int) -> int:
        """How many listed test files of `check` shard `index` runs."""
        for c in self.checks:
            if c.name == check:
                if c.owner is not None:
                    return -1
                return sum(1 for _, s in c.assigned if s == index)
        return 0


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def top_level_tests(source: bytes) -> tuple[str, ...] | None:
    """The top-level tests of a Python file, as pytest collects them by default: `test*`
    functions, `Test*` classes and `unittest.TestCase` subclasses (by the base's name).
    () for helpers, `__init__.py` and conftests; None when the file does not parse (it
    errors at collection in whichever shard runs it: the file goes whole)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    units: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test"):
                units.append(node.name)
        elif isinstance(node, ast.ClassDef) and (
            node.name.startswith("Test")
            or any(_base_name(b).endswith("TestCase") for b in node.bases)
        ):
            units.append(node.name)
    return tuple(dict.fromkeys(units))


def defines_tests(source: bytes) -> bool:
    """Whether a Python file defines tests (see `top_level_tests`)."""
    units = top_level_tests(source)
    return units is None or bool(units)


def collected(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether pytest collects tests from the file at `path` under its `python_files`
    `patterns` (pytest's `fnmatch_ex`: a pattern without `/` matches the file's name, one
    with `/` the path). A file named on the test command itself is collected whatever its
    name; it is not listed then and goes by the hash of its path, like a head-only file."""
    name = path.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatchcase(name, p) if "/" not in p else fnmatch.fnmatchcase(f"/{path}", f"*/{p}")
        for p in patterns
    )


def by_path_hash(files: list[str], count: int) -> dict[str, int]:
    """Each item's shard: ordered by the SHA-256 of the path, dealt round robin."""
    order = sorted(files, key=lambda f: (hashlib.sha256(f.encode()).hexdigest(), f))
    return {f: i % count + 1 for i, f in enumerate(order)}


def _cost(key: str, durations: Mapping[str, float]) -> float | None:
    """Recorded seconds of a file (its own entry and its units' `file::Name` entries) or
    of one unit."""
    if "::" in key:
        return durations.get(key)
    prefix = key + "::"
    parts = [v for k, v in durations.items() if k == key or k.startswith(prefix)]
    return sum(parts) if parts else None


def _by_durations(files: list[str], durations: Mapping[str, float], count: int) -> dict[str, int]:
    recorded = {f: _cost(f, durations) for f in files}
    known = [v for v in recorded.values() if v is not None]
    mean = sum(known) / len(known) if known else 0.0
    cost = {f: max(0.0, mean if v is None else v) for f, v in recorded.items()}
    loads = [0.0] * count
    items = [0] * count
    out: dict[str, int] = {}
    for f in sorted(files, key=lambda f: (-cost[f], f)):
        # ties (tests of no measurable cost above all) go to the shard with fewest items
        shard = min(range(count), key=lambda i: (loads[i], items[i], i))
        loads[shard] += cost[f]
        items[shard] += 1
        out[f] = shard + 1
    return out


def _why_not_balanced(items: list[str], recorded: Mapping[str, float]) -> str | None:
    """None when `recorded` can balance `items`; otherwise why not (said in the split)."""
    costs = [c for i in items if (c := _cost(i, recorded)) is not None]
    if not costs:
        return "no recorded duration for any of the check's test files"
    if sum(costs) <= 0.0:
        return f"every recorded duration of the check's test files is zero ({len(costs)})"
    return None


def _items(files: Mapping[str, tuple[str, ...] | None], count: int) -> tuple[list[str], list[str]]:
    """What gets assigned: each file whole, but a file holding more than 1/count of the
    check's top-level tests is split into its `file::Name` units (so one big file does
    not make one shard as slow as the whole). Returns (items, files split by unit)."""
    total = sum(len(u or ()) for u in files.values())
    by_unit = sorted(f for f, u in files.items() if u and len(u) > 1 and len(u) * count > total)
    items = [f for f in files if f not in by_unit]
    items += [f"{f}::{name}" for f in by_unit for name in files[f] or ()]
    return sorted(items), by_unit


def compute_split(
    checks: tuple[CheckSpec, ...],
    test_files: Mapping[str, Mapping[str, tuple[str, ...] | None]],
    count: int,
    durations: Mapping[str, Mapping[str, float]] | None = None,
) -> Split:
    """The split of `checks` over `count` shards. `test_files[check]`: the base tree's
    test files of that check, each with its `top_level_tests` (None: it does not parse);
    `durations[check]`: recorded seconds per file or `file::Name`. Pure, deterministic."""
    whole = 0
    out: list[CheckSplit] = []
    for spec in checks:
        items, by_unit = _items(test_files.get(spec.name) or {}, count)
        if spec.junit is None or len(items) < count:
            out.append(CheckSplit(name=spec.name, owner=whole % count + 1))
            whole += 1
            continue
        recorded = (durations or {}).get(spec.name) or {}
        why = _why_not_balanced(items, recorded) if durations is not None else None
        if durations is not None and why is None:
            assigned = _by_durations(items, recorded, count)
            by = "durations"
        else:
            assigned = by_path_hash(items, count)
            by = "path-hash"
        out.append(
            CheckSplit(
                name=spec.name,
                owner=None,
                assigned=tuple(sorted(assigned.items())),
                by_unit=tuple(by_unit),
                balanced_by=by,
                fallback=why,
            )
        )
    return Split(count=count, checks=tuple(out))


def apply(config: Config, split: Split, shard: ShardSpec) -> Config:
    """The configuration shard `shard` runs: the checks assigned to it whole, and every
    split check with the filter of its share."""
    by_name = {c.name: c for c in split.checks}
    kept: list[CheckSpec] = []
    for spec in config.checks:
        c = by_name[spec.name]
        if c.owner is not None:
            if c.owner == shard.index:
                kept.append(spec)
            continue
        kept.append(
            dataclasses.replace(
                spec,
                shard=ShardFilter(
                    index=shard.index, count=shard.count, assigned=c.assigned, by_unit=c.by_unit
                ),
            )
        )
    return dataclasses.replace(config, checks=tuple(kept))


# -- the shard receipt's own section (SPEC §3.3) ------------------------------------------

MAX_ROWS = 200_000  # per run: a JUnit report holds no more (gate.differential.junit)


def run_durations(
    result: CheckResult, test_paths: Callable[[], tuple[bytes, ...]]
) -> dict[str, float]:
    """Seconds per top-level test (`file::Name`) of a check's run: what the witness timed
    in its test phase, to the microsecond; the JUnit report's (milliseconds, its tests
    placed in `test_paths()`, read only then) when no session of the witness timed any."""
    out: dict[str, float] = {}
    for phase in result.phases:
        if phase.phase is not Phase.TEST:
            continue
        for cmd in phase.commands:
            for session in cmd.witness:
                for key, seconds in session.durations:
                    if math.isfinite(seconds):
                        out[key] = round(out.get(key, 0.0) + seconds, 6)
    if out or result.junit_report is None:
        return out
    return file_durations(result.junit_report, test_paths())


def file_durations(report: bytes, test_paths: tuple[bytes, ...]) -> dict[str, float]:
    """Seconds per top-level test (`file::Name`) in a JUnit report (its testcases'
    `time`), each testcase placed the way the differential places it (classname ->
    module); `compute_split` sums them per file for files it does not divide."""
    from gate.differential import _locate, _modules
    from gate.differential.junit import parse_root

    try:
        root = parse_root(report)
    except ValueError:
        return {}
    modules = _modules(test_paths)
    out: dict[str, float] = {}
    for case in root.iter("testcase"):
        name = case.get("name", "").split("[", 1)[0]
        where = _locate(TestId(classname=case.get("classname", ""), name=name), modules)
        if where is None:
            continue
        try:
            seconds = max(0.0, float(case.get("time", "0") or 0))
        except ValueError:
            continue
        unit = where[0].decode("utf-8", "replace") + "::" + where[1].split(".", 1)[0]
        # microseconds: a fast suite's tests are not all 0.0 (issue 38)
        out[unit] = round(out.get(unit, 0.0) + seconds, 6)
    return out


# -- a shard's own verdict ----------------------------------------------------------------

# Judged over the union by the aggregate, never over one share: a split check whose share
# collected no test (an empty share), a shard that has no check with a test phase.
_LEFT_TO_THE_AGGREGATE = frozenset({ReasonCode.JUNIT_NO_TESTS, ReasonCode.NO_TEST_PHASE})


def own_outcome(outcome: Outcome, config: Config | None) -> Outcome:
    """SPEC §3.3: a shard's own verdict over its share. `junit-no-tests` of a split check
    and `no-test-phase` are not the share's to judge (the aggregate judges the union, as
    the one-job proof would); every other reason stands."""
    from gate.proof.verdict import Outcome, verdict_for

    split = {c.name for c in (config.checks if config is not None else ()) if c.shard}
    kept = tuple(
        r
        for r in outcome.reasons
        if not (
            r.code in _LEFT_TO_THE_AGGREGATE
            and (r.code is ReasonCode.NO_TEST_PHASE or r.check in split)
        )
    )
    if len(kept) == len(outcome.reasons):
        return outcome
    return Outcome(verdict=worst([verdict_for(r.code) for r in kept]), reasons=kept)


def exit_code(own: Verdict) -> int:
    """`prove --shard`'s exit status: 0 for a share PROVEN or HELD (its receipt must reach
    the aggregate job, which judges the whole, holds included); otherwise the verdict's."""
    return 0 if own in (Verdict.PROVEN, Verdict.HELD) else own.exit_code


def section(
    *,
    shard: ShardSpec,
    split: Split,
    own_verdict: str,
    image_digest: str | None,
    checks: Mapping[str, JsonDict],
) -> JsonDict:
    """The predicate's `shard`: which shard this is, of which split, its own verdict over
    its share, and per split check what the aggregate needs to judge the union."""
    d: JsonDict = {
        "index": shard.index,
        "count": shard.count,
        "split_sha256": split.sha256,
        "split": split.to_dict(),
        "verdict": own_verdict,
        "image_digest": image_digest,
        "checks": dict(checks),
    }
    return d


def check_section(
    *,
    runs: Mapping[str, tuple[Mapping[TestId, TestOutcome] | None, str | None]],
    fingerprints: Mapping[str, Mapping[tuple[bytes, str], str]],
    nontest_changed: bool,
    no_proving_decision: str,
    durations: Mapping[str, float],
    base_test_files: tuple[bytes, ...] = (),
    inputs: tuple[str, ...] = (),
) -> JsonDict:
    """One split check's per-run per-test outcomes (bounded by `MAX_ROWS`), the test
    functions' fingerprints of this shard's files per side (`base`, `head`: lost tests
    are judged with the base's), whether its share collected no test (`empty`), the files
    the base run's tests are in (`base_test_files`, as the witness saw them: a test's file
    for `expectation-changed`, SPEC §3.2), the files the patch edits that the trusted run
    took from the base as test inputs (`inputs`) and the comparison's other inputs."""
    outcomes: JsonDict = {}
    problems: JsonDict = {}
    for name, (got, problem) in runs.items():
        if got is None:
            outcomes[name] = None
        else:
            rows = sorted([t.classname, t.name, o.value] for t, o in got.items())
            outcomes[name] = rows[:MAX_ROWS]
        if problem:
            problems[name] = problem
    head = outcomes.get("head")
    return {
        "outcomes": outcomes,
        "problems": problems,
        "empty": isinstance(head, list) and not head,
        "fingerprints": {
            side: sorted([p.decode("utf-8", "replace"), q, s] for (p, q), s in prints.items())
            for side, prints in sorted(fingerprints.items())
        },
        "nontest_changed": nontest_changed,
        "no_proving_decision": no_proving_decision,
        "durations": dict(sorted(durations.items())),
        "base_test_files": sorted(p.decode("utf-8", "surrogateescape") for p in base_test_files),
        "inputs": sorted(inputs),
    }


def recorded_durations(predicate: Mapping[str, object]) -> dict[str, dict[str, float]]:
    """Per check, seconds per top-level test (`file::Name`) that a receipt records: a
    shard receipt's `shard.checks.*.durations`, an aggregate's or a one-job receipt's
    `checks[].durations`."""
    out: dict[str, dict[str, float]] = {}

    def take(name: object, durations: object) -> None:
        if not isinstance(name, str) or not isinstance(durations, dict):
            return
        got = out.setdefault(name, {})
        for path, seconds in durations.items():
            if isinstance(path, str) and isinstance(seconds, int | float):
                got[path] = got.get(path, 0.0) + float(seconds)

    shard = predicate.get("shard")
    if isinstance(shard, dict) and isinstance(shard.get("checks"), dict):
        for name, section in shard["checks"].items():
            if isinstance(section, dict):
                take(name, section.get("durations"))
    checks = predicate.get("checks")
    for c in checks if isinstance(checks, list) else []:
        if isinstance(c, dict):
            take(c.get("name"), c.get("durations"))
    return out


# -- prove()'s side: the plan of runs, the outcome, the receipt's section ----------------


def plan(
    config: Config,
    ev: Evidence,
    evidence: EvidenceSource,
    which: ShardSpec,
    balance: Mapping[str, Mapping[str, float]] | None,
    journal: Journal,
) -> tuple[Config, Split]:
    """This shard's share of the checks, and the split every shard computes alike: from
    the base tree (and `balance`, recorded durations from a verified receipt)."""
    split = _split(config, ev, evidence, which.count, balance)
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
    return apply(config, split, which), split


def outcome(decided: Outcome, which: ShardSpec, config: Config | None) -> tuple[Outcome, Outcome]:
    """SPEC §3.3: (the shard's own outcome over its share, the receipt's). A shard receipt
    never verifies as a whole proof, not even for a verifier that knows nothing of shards:
    its verdict is at best INCONCLUSIVE `shard-partial`."""
    from gate.proof.verdict import Outcome

    own = own_outcome(decided, config)
    partial = Reason(
        code=ReasonCode.SHARD_PARTIAL,
        message=f"this receipt proves shard {which} only (its own verdict: "
        f"{own.verdict.value}); `proofgate aggregate` combines the {which.count} shard "
        "receipts into one proof",
    )
    return own, Outcome(
        verdict=worst([decided.verdict, Verdict.INCONCLUSIVE]),
        reasons=(*decided.reasons, partial),
    )


def receipt_section(
    which: ShardSpec,
    split: Split,
    own: Outcome,
    results: tuple[CheckResult, ...],
    image: ImageRef | None,
    diffs: tuple[DifferentialReport, ...],
    ev: Evidence,
    evidence: EvidenceSource,
    config: Config | None,
    rules: Mapping[str, Decision],
) -> JsonDict:
    """The predicate's `shard` (see `section`), per split check from the differential's
    runs of this shard's share."""
    from gate import differential

    by_name = {s.name: s for s in (config.checks if config is not None else ())}
    by_result = {r.name: r for r in results}
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
        head = by_result.get(spec.name)
        durations = (
            run_durations(head, functools.partial(tuple, head_files)) if head is not None else {}
        )
        if report.runs and any(r.name == "head" and r.outcomes == {} for r in report.runs):
            log.info("shard %s: check %s: an empty share (no test collected)", which, spec.name)
        checks[spec.name] = check_section(
            runs={r.name: (r.outcomes, r.problem) for r in report.runs},
            fingerprints=prints,
            nontest_changed=any(not is_test(p) for p in changed),
            no_proving_decision=rules.get(differential.NO_PROVING_TEST, Decision.ALLOW).value,
            durations=durations,
            base_test_files=next((r.test_files for r in report.runs if r.name == "base"), ()),
            inputs=report.inputs_changed,
        )
    return section(
        shard=which,
        split=split,
        own_verdict=own.verdict.value,
        image_digest=image.digest if image is not None else None,
        checks=checks,
    )


def _test_files(spec: CheckSpec, tree: TreeId, evidence: EvidenceSource) -> dict[bytes, bytes]:
    """The `.py` files of `tree` the check's `tests` globs (and conftests) select."""
    from gate import differential
    from gate.proof.runs import MAX_TEST_SOURCE_BYTES

    is_test = differential.selector((*(spec.tests or differential.DEFAULT_TESTS), "**/conftest.py"))
    try:
        got = evidence.read_tree_files(
            tree, lambda p: p.endswith(b".py") and is_test(p), max_bytes=MAX_TEST_SOURCE_BYTES
        )
    except RepoError:
        return {}
    return got or {}


def record_durations(
    predicate: JsonDict,
    config: Config | None,
    results: tuple[CheckResult, ...],
    ev: Evidence,
    evidence: EvidenceSource,
) -> None:
    """A one-job receipt records its head run's seconds per top-level test of each check
    with `junit` (`checks[].durations`): what `prove --shard --balance-from` balances a
    split by."""
    specs = {s.name: s for s in (config.checks if config is not None else ())}
    by_name = {r.name: r for r in results}
    checks = predicate.get("checks")
    for entry in checks if isinstance(checks, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else None
        spec, result = specs.get(str(name)), by_name.get(str(name))
        if spec is None or result is None or spec.junit is None or not isinstance(entry, dict):
            continue
        paths = functools.partial(_test_paths, spec, ev.head.tree, evidence)
        durations = run_durations(result, paths)
        if durations:
            entry["durations"] = dict(sorted(durations.items()))


def _test_paths(spec: CheckSpec, tree: TreeId, evidence: EvidenceSource) -> tuple[bytes, ...]:
    return tuple(_test_files(spec, tree, evidence))


def _split(
    config: Config,
    ev: Evidence,
    evidence: EvidenceSource,
    count: int,
    balance: Mapping[str, Mapping[str, float]] | None,
) -> Split:
    """Of the test files the base's pytest configuration collects (its `python_files`)."""
    from gate.differential import pytestconfig

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
            p.decode("utf-8", "surrogateescape"): top_level_tests(data)
            for p, data in _test_files(spec, ev.base.tree, evidence).items()
        }
        files[spec.name] = {
            p: u for p, u in units.items() if (u is None or u) and collected(p, patterns)
        }
    return compute_split(config.checks, files, count, balance)


def _in_share(filt: ShardFilter, path: bytes) -> bool:
    """The file's tests run here (a file split by unit: some of them may)."""
    text = path.decode("utf-8", "surrogateescape")
    return text in filt.by_unit or filt.shard_of(text) == filt.index
