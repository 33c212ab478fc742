"""SPEC §3.1: the base's tests judge the change. Pure comparison over per-test outcomes.

Runs (each a fresh container, see `gate.proof.runs`): head (the proven tree), base
(the base tree), trusted (the proven tree with the base's test files and harness) and,
with `differential: full`, proving (the base tree with the head's test files).

For every test that passes on the base:

- fails or errors in the trusted run, its file unchanged by the patch -> `regression`
- fails or errors in the trusted run, its file changed by the patch -> `expectation-changed`
- skipped or absent in the trusted run -> `regression`
- skipped or absent in the head run -> `tests-lost`, unless it survives under another
  identity in the head (see `survivors`).

Identity is JUnit classname + name. A base test absent in the head survives when the head
has, new and not skipped: the same name in another module (moved); a test function whose
body is the same as the base test's body, AST for AST, under another name (renamed:
the body is what the test checks, so the body is the identity that survives a rename);
or, for a parametrized test, at least as many cases of the same function as passed on the
base (its ids changed). None of these can hide a broken change: the trusted run still
runs the base's test, under its base identity, against the new code.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gate.differential.junit import TestId, TestOutcome, counts
from gate.model import (
    CheckSpec,
    Decision,
    DifferentialMode,
    EnvChange,
    EnvRecord,
    JsonDict,
    Reason,
    ReasonCode,
)
from gate.policy.paths import DEFAULT_TESTS, glob_match, selects_tests
from gate.util.canonical import canonical_json

__all__ = [
    "DEFAULT_TESTS",
    "HARNESS",
    "MAX_LISTED",
    "NO_PROVING_TEST",
    "DifferentialReport",
    "Run",
    "compare",
    "could_not_run",
    "fingerprints",
    "foreign_code",
    "not_run",
    "plugins_loaded",
    "test_files",
]

# Files the trusted run always takes from the base, whatever the `tests` globs say: the
# test harness pytest loads by itself. conftest.py (SPEC §3.1), and the routes a change
# could use to load its own plugin into the base's tests: package metadata registering a
# `pytest11` entry point at a sys.path root, pytest's own ini file, and the interpreter's
# start-up hooks.
HARNESS = (
    "**/conftest.py",
    "**/*.dist-info/**",
    "**/*.egg-info/**",
    "pytest.ini",
    ".pytest.ini",
    "**/sitecustomize.py",
    "**/usercustomize.py",
)
MAX_LISTED = 50  # per list in the receipt; the SHA-256 covers the full list
NO_PROVING_TEST = "no-proving-test"

BASE, HEAD, TRUSTED, PROVING = "base", "head", "trusted", "proving"
# a run whose outcomes the witness contradicts: none, and `evidence-tampered` (FAILED) says
# why, not `differential-incomplete`
CONTRADICTED = "the witness contradicts its evidence"


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One run's per-test outcomes, or why there are none."""

    name: str
    outcomes: Mapping[TestId, TestOutcome] | None
    problem: str | None = None  # why `outcomes` is None (or a non-fatal remark)
    cached: bool = False
    witnessed: bool = False  # pytest ran under proofgate's witness (gate/witness/judge.py)
    tamper: tuple[tuple[str, str], ...] = ()  # the witness's findings (kind, detail)
    conftests: tuple[tuple[str, str | None], ...] = ()  # what pytest loaded (path, blob)
    # what setup and build changed outside /workspace (gate/differential/environment.py)
    environment: EnvRecord | None = None
    reused_from: str | None = None  # the run (or cache entry) whose outcomes these are
    test_files: tuple[bytes, ...] = ()  # the files its collected tests are in (tree paths)
    inputs: tuple[bytes, ...] = ()  # workspace files its test code read (tree paths)
    plugins: tuple[str, ...] = ()  # the pytest plugins it loaded (gate/witness/host.py)
    early: tuple[str, ...] = ()  # the tree's modules imported before the harness
    foreign: tuple[str, ...] = ()  # the tree's packages imported from outside the tree


@dataclass(frozen=True, slots=True, kw_only=True)
class DifferentialReport:
    """What the differential of one check found; `to_dict` is the receipt's `tests`."""

    check: str
    mode: DifferentialMode
    ran: bool
    note: str | None = None  # why it did not run, in plain words
    runs: tuple[Run, ...] = ()
    regressions: tuple[str, ...] = ()
    expectation_changed: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()
    proving: tuple[str, ...] = ()
    proving_basis: str = ""  # "fail-to-pass" (full) or "new-tests" (trusted)
    survived: tuple[str, ...] = ()  # "base id -> head id (moved|renamed|reparametrized)"
    pre_existing: tuple[str, ...] = ()  # failing on base: recorded, not held against it
    findings: tuple[JsonDict, ...] = ()
    tampered: tuple[str, ...] = ()  # "run: kind: detail", the witness's unwaived findings
    # SPEC §3.2: what setup and build changed for the judging run and not for the base's
    environment_changed: tuple[EnvChange, ...] = ()
    # files the base's tests may read that the change edits: the trusted run took the
    # base's copies (gate/differential/inputs.py); and the base's tests that failed with them
    inputs_changed: tuple[str, ...] = ()
    inputs_failed: tuple[str, ...] = ()
    plugins_loaded: tuple[str, ...] = ()  # plugins the judging run loaded, the base's did not
    # the head run as the next proof's base run (gate/differential/asbase.py), and why a
    # base receipt offered gave no base run
    as_base: JsonDict | None = None
    base_receipt_refused: str | None = None
    reasons: tuple[Reason, ...] = field(default=())

    def to_dict(self) -> JsonDict:
        d: JsonDict = {"differential": self.mode.value, "ran": self.ran}
        if self.note is not None:
            d["note"] = self.note
        if not self.ran:
            return d
        d["runs"] = {r.name: counts(r.outcomes or {}) for r in self.runs}
        d["run_notes"] = {
            r.name: ("reused from the local cache" if r.cached else "") + (r.problem or "")
            for r in self.runs
            if r.cached or r.problem
        }
        d["reused"] = {r.name: r.reused_from for r in self.runs if r.reused_from}
        if self.base_receipt_refused is not None:
            d["base_receipt_refused"] = self.base_receipt_refused
        d["proving_basis"] = self.proving_basis
        digests: JsonDict = {}
        for key, items in (
            ("regressions", self.regressions),
            ("expectation_changed", self.expectation_changed),
            ("lost", self.lost),
            ("proving", self.proving),
            ("survived", self.survived),
            ("pre_existing", self.pre_existing),
        ):
            d[key] = list(items[:MAX_LISTED])
            digests[key] = {"count": len(items), "sha256": list_digest(items)}
        d["lists"] = digests
        d["findings"] = list(self.findings)
        if self.tampered:
            d["tampered"] = list(self.tampered[:MAX_LISTED])
        if self.environment_changed:
            d["environment_changed"] = [c.to_dict() for c in self.environment_changed[:MAX_LISTED]]
        if self.as_base is not None:
            d["as_base"] = self.as_base
        if self.plugins_loaded:
            d["plugins_loaded"] = list(self.plugins_loaded[:MAX_LISTED])
            digests["plugins_loaded"] = {
                "count": len(self.plugins_loaded),
                "sha256": list_digest(self.plugins_loaded),
            }
        for key, items in (
            ("test_inputs_changed", self.inputs_changed),
            ("test_inputs_failed", self.inputs_failed),
        ):
            if items:
                d[key] = list(items[:MAX_LISTED])
                digests[key] = {"count": len(items), "sha256": list_digest(items)}
        return d


def enabled(spec: CheckSpec) -> bool:
    """Whether the check has a differential: a `junit` report and not `differential: off`."""
    return spec.junit is not None and spec.differential is not DifferentialMode.OFF


def selector(globs: Iterable[str]) -> Callable[[bytes], bool]:
    patterns = tuple(globs)
    return lambda path: any(glob_match(g, path) for g in patterns)


def test_files(spec: CheckSpec) -> Callable[[bytes], bool]:
    """The test files of a check (SPEC §3.1): its `tests` globs, or DEFAULT_TESTS (the
    policy's definition too, gate/policy/paths.py), and every conftest.py."""
    return selects_tests(spec.tests)


def trusted_selector(spec: CheckSpec) -> Callable[[bytes], bool]:
    """The trusted files of a check: its test files and the harness (SPEC §3.1). Package
    metadata in any case (`importlib.metadata` finds `X.Dist-Info` as `x.dist-info`)."""
    chosen = selector((*(spec.tests or DEFAULT_TESTS), *HARNESS))
    metadata = selector(("**/*.dist-info/**", "**/*.egg-info/**"))
    return lambda path: chosen(path) or metadata(path.lower())


def list_digest(items: Iterable[str]) -> str:
    """SHA-256 of the canonical JSON of the full, sorted list."""
    return hashlib.sha256(canonical_json(sorted(items))).hexdigest()


def not_run(check: str, mode: DifferentialMode, note: str) -> DifferentialReport:
    """A check with no differential (`differential: off`, no `junit`): recorded, and
    the coverage says so."""
    return DifferentialReport(check=check, mode=mode, ran=False, note=note)


def could_not_run(check: str, mode: DifferentialMode, note: str) -> DifferentialReport:
    """A check whose differential should have run and could not (its trees, its image):
    INCONCLUSIVE `differential-incomplete`, never a note beside a PROVEN (SPEC §3.1)."""
    reason = Reason(
        code=ReasonCode.DIFFERENTIAL_INCOMPLETE,
        message=f"the differential could not run ({note}): the base's tests did not judge "
        "the change",
        check=check,
    )
    return DifferentialReport(check=check, mode=mode, ran=False, note=note, reasons=(reason,))


# -- where a test lives ----------------------------------------------------------------


def _module(path: bytes) -> tuple[str, ...] | None:
    text = path.decode("utf-8", "surrogateescape")
    if not text.endswith(".py"):
        return None
    parts = tuple(text[:-3].split("/"))
    # a package's `__init__.py` is never a test's file: mapped to its package, it would
    # claim every test below it (SPEC §3.2, a test's file by exact path)
    return None if parts[-1] == "__init__" else parts


def _locate(tid: TestId, modules: Mapping[tuple[str, ...], bytes]) -> tuple[bytes, str] | None:
    """(file, qualname) of a testcase: the module whose dotted path, or a dotted suffix of
    it (pytest names modules relative to its rootdir), starts the classname."""
    parts = tuple(tid.classname.split(".")) if tid.classname else ()
    best: tuple[int, bytes, str] | None = None
    for mod, path in modules.items():
        for start in range(len(mod)):
            suffix = mod[start:]
            if parts[: len(suffix)] == suffix:
                rest = parts[len(suffix) :]
                qual = ".".join((*rest, tid.function))
                if best is None or len(suffix) > best[0]:
                    best = (len(suffix), path, qual)
                break
    return None if best is None else (best[1], best[2])


def _modules(paths: Iterable[bytes]) -> dict[tuple[str, ...], bytes]:
    out: dict[tuple[str, ...], bytes] = {}
    for p in paths:
        mod = _module(p)
        if mod:
            out[mod] = p
    return out


def fingerprints(files: Mapping[bytes, bytes]) -> dict[tuple[bytes, str], str]:
    """(file, qualname) -> SHA-256 of the test function's decorators, arguments and body
    as an AST (the name excluded): what survives a rename. Files that do not parse are
    left out (their tests then cannot survive a rename)."""
    out: dict[tuple[bytes, str], str] = {}
    for path, data in files.items():
        if not path.endswith(b".py"):
            continue
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            continue
        stack: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
        while stack:
            prefix, body = stack.pop()
            for node in body:
                if isinstance(node, ast.ClassDef):
                    stack.append((prefix + node.name + ".", node.body))
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    shape = ast.dump(
                        ast.Module(
                            body=[*node.body],
                            type_ignores=[],
                        )
                    ) + "|".join(ast.dump(d) for d in node.decorator_list)
                    shape += "|" + ast.dump(node.args)
                    out[(path, prefix + node.name)] = hashlib.sha256(shape.encode()).hexdigest()
    return out


# -- the comparison --------------------------------------------------------------------


def _survivors(
    lost: list[TestId],
    base: Mapping[TestId, TestOutcome],
    head: Mapping[TestId, TestOutcome],
    base_prints: Mapping[tuple[bytes, str], str],
    head_prints: Mapping[tuple[bytes, str], str],
) -> tuple[list[TestId], list[str]]:
    """Split `lost` into the really lost and those that survive in the head."""
    new = [t for t, o in head.items() if t not in base and o is not TestOutcome.SKIP]
    by_name: dict[str, list[TestId]] = {}
    for t in new:
        by_name.setdefault(t.name, []).append(t)
    base_mods = _modules(p for p, _ in base_prints)
    head_mods = _modules(p for p, _ in head_prints)
    new_by_print: dict[str, list[TestId]] = {}
    for t in new:
        where = _locate(t, head_mods)
        if where is not None and where in head_prints:
            new_by_print.setdefault(head_prints[where], []).append(t)
    base_pass: dict[tuple[str, str], int] = {}
    for t, o in base.items():
        if o is TestOutcome.PASS:
            key = (t.classname, t.function)
            base_pass[key] = base_pass.get(key, 0) + 1
    head_cases: dict[tuple[str, str], int] = {}
    for t, o in head.items():
        if o is not TestOutcome.SKIP:
            key = (t.classname, t.function)
            head_cases[key] = head_cases.get(key, 0) + 1

    really: list[TestId] = []
    survived: list[str] = []
    for t in lost:
        moved = [m for m in by_name.get(t.name, []) if m.classname != t.classname]
        if moved:
            survived.append(f"{t} -> {moved[0]} (moved)")
            continue
        where = _locate(t, base_mods)
        fp = base_prints.get(where) if where is not None else None
        renamed = [r for r in new_by_print.get(fp, []) if r.function != t.function] if fp else []
        if renamed:
            survived.append(f"{t} -> {renamed[0]} (renamed, same body)")
            continue
        key = (t.classname, t.function)
        if t.name != t.function and head_cases.get(key, 0) >= base_pass.get(key, 0):
            survived.append(f"{t} -> {t.classname}::{t.function}[...] (reparametrized)")
            continue
        really.append(t)
    return really, survived


def _with_collection_errors(
    outcomes: Mapping[TestId, TestOutcome],
) -> Callable[[TestId], TestOutcome | None]:
    """A run's outcome of a test, where a test absent because its module failed to collect
    (pytest reports `classname=""`, `name=<module>` with an error) counts as an error."""
    broken = {t.name for t, o in outcomes.items() if not t.classname and o is TestOutcome.ERROR}

    def outcome(tid: TestId) -> TestOutcome | None:
        got = outcomes.get(tid)
        if got is None and any(
            tid.classname == m or tid.classname.startswith(m + ".") for m in broken
        ):
            return TestOutcome.ERROR
        return got

    return outcome


def _reason(code: ReasonCode, check: str, items: list[str], what: str) -> Reason:
    shown = ", ".join(items[:5]) + (f" (+{len(items) - 5} more)" if len(items) > 5 else "")
    return Reason(code=code, message=f"{len(items)} test(s) {what}: {shown}", check=check)


def compare(
    *,
    check: str,
    mode: DifferentialMode,
    head: Run,
    base: Run,
    trusted: Run,
    proving: Run | None,
    changed: frozenset[bytes],
    nontest_changed: bool,
    base_files: Mapping[bytes, bytes],
    head_files: Mapping[bytes, bytes],
    no_proving_decision: Decision = Decision.ALLOW,
    scoped: bool = False,
    prints: tuple[Mapping[tuple[bytes, str], str], Mapping[tuple[bytes, str], str]] | None = None,
    inputs: Iterable[bytes] = (),
) -> DifferentialReport:
    """Apply the SPEC §3.1 table. `changed` holds every path the patch touches (old and
    new names); `*_files` are the test files of the base and head trees (for renames), or
    `prints` their `fingerprints` already computed (base, head).

    `scoped` (SPEC §3.3, one shard's share): the runs hold only this shard's tests, so a
    base test missing from the head may live on in another shard's file, and a proving
    test may be another shard's. Lost tests and `no-proving-test` are listed but not
    judged here; `gate.proof.aggregate` judges them over the union of the shards.

    `inputs`: the files the patch edits that the trusted run took from the base as the
    base's tests' inputs (SPEC §3.2). A base test that fails with them, its own file
    unchanged, is `test-input-changed` (HELD: a person confirms what the tests check
    against); when the base's tests pass with the base's inputs, that is the proof.

    A differential never fails open (SPEC §3.1). A test is pre-existing only when the
    base run reported it failing: a base run without outcomes (its setup or build failed,
    it timed out, it wrote no report) leaves nothing pre-existing, and every failure of
    the base's tests in the trusted run counts. A trusted or head run without outcomes is
    `differential-incomplete`, naming the run and why.
    """
    b = base.outcomes or {}
    h = head.outcomes or {}
    t = trusted.outcomes
    in_trusted = _with_collection_errors(t or {})
    # SPEC §3.2: a test's file is the file the run itself reports (the witness saw its
    # collected tests' files): the base run's, or where it gave none the trusted run's
    # (the base's test files too); without a witness, the changed modules
    reported = base.test_files or trusted.test_files
    test_mods = _modules(reported) if reported else _modules(changed)

    regressions: list[TestId] = []
    expectation: list[TestId] = []
    input_failed: list[TestId] = []
    taken = tuple(sorted(p.decode("utf-8", "surrogateescape") for p in inputs))
    lost: list[TestId] = []
    judged = sorted({*b, *(t or {})}) if t is not None else []
    covered = {m for tid in b for m in _dotted_prefixes(tid.classname)}
    for tid in judged:
        if not tid.classname and tid not in b and tid.name in covered:
            continue  # a module that did not collect: judged as its base tests, above
        before = b.get(tid)
        if before in (TestOutcome.FAIL, TestOutcome.ERROR):
            continue  # pre-existing: recorded, not held against the change
        got = in_trusted(tid)
        if got in (TestOutcome.FAIL, TestOutcome.ERROR):
            where = _locate(_as_test(tid), test_mods)
            edited = where is not None and where[0] in changed
            (expectation if edited else input_failed if taken else regressions).append(tid)
        elif before is TestOutcome.PASS and (got is None or got is TestOutcome.SKIP):
            regressions.append(tid)
    if head.outcomes is not None:
        lost = [
            tid
            for tid, o in sorted(b.items())
            if o is TestOutcome.PASS and h.get(tid) in (None, TestOutcome.SKIP)
        ]
    survived: list[str] = []
    if lost:  # parsing every test file of both trees (seconds on a real suite) only then
        base_prints, head_prints = prints or (fingerprints(base_files), fingerprints(head_files))
        lost, survived = _survivors(lost, b, h, base_prints, head_prints)

    if proving is not None:
        # fail-to-pass: fails or errors without the change (a module that does not even
        # import without it errors); absent for another reason proves nothing
        in_proving = _with_collection_errors(proving.outcomes or {})
        basis = "fail-to-pass"
        proves = sorted(
            tid
            for tid, o in h.items()
            if o is TestOutcome.PASS and in_proving(tid) in (TestOutcome.FAIL, TestOutcome.ERROR)
        )
    else:
        basis = "new-tests"
        proves = sorted(tid for tid, o in h.items() if o is TestOutcome.PASS and tid not in b)
    pre = sorted(tid for tid, o in b.items() if o in (TestOutcome.FAIL, TestOutcome.ERROR))

    reasons = _incomplete(check, head, trusted)
    if regressions:
        reasons.append(
            _reason(
                ReasonCode.REGRESSION,
                check,
                [str(x) for x in regressions],
                "of the base fail, are skipped or are missing against the change (the "
                "base's tests, not failing on the base)",
            )
        )
    if expectation:
        reasons.append(
            _reason(
                ReasonCode.EXPECTATION_CHANGED,
                check,
                [str(x) for x in expectation],
                "of the base fail against the change, and the change edits their files: "
                "a person confirms the old expectation is wrong",
            )
        )
    if input_failed:
        shown = ", ".join(taken[:5]) + (f" (+{len(taken) - 5} more)" if len(taken) > 5 else "")
        reasons.append(
            _reason(
                ReasonCode.TEST_INPUT_CHANGED,
                check,
                [str(x) for x in input_failed],
                "of the base fail against the change with the base's copies of the files "
                f"the change edits that they may read ({shown}): a person confirms what the "
                "tests check against",
            )
        )
    if lost and not scoped:
        reasons.append(
            _reason(
                ReasonCode.TESTS_LOST,
                check,
                [str(x) for x in lost],
                "that pass on the base are skipped or missing in the change's own run",
            )
        )
    findings: list[JsonDict] = []
    if nontest_changed and not proves and not scoped:
        message = "the change edits non-test code and no test " + (
            "fails without it" if proving is not None else "was added for it"
        )
        findings.append(
            {"rule": NO_PROVING_TEST, "decision": no_proving_decision.value, "message": message}
        )
        if no_proving_decision is Decision.HOLD:
            reasons.append(Reason(code=ReasonCode.POLICY_HOLD, message=message, check=check))
        elif no_proving_decision is Decision.DENY:
            reasons.append(Reason(code=ReasonCode.POLICY_DENY, message=message, check=check))
    runs = (head, base, trusted) + ((proving,) if proving is not None else ())
    note = None
    if base.outcomes is None:
        note = (
            f"the base run gave no per-test outcomes ({base.problem or 'no JUnit report'}): "
            "nothing is pre-existing, and every failure of the base's tests against the "
            "change counts"
        )
    return DifferentialReport(
        check=check,
        mode=mode,
        ran=True,
        note=note,
        runs=runs,
        regressions=tuple(str(x) for x in regressions),
        expectation_changed=tuple(str(x) for x in expectation),
        lost=tuple(str(x) for x in lost),
        proving=tuple(str(x) for x in proves),
        proving_basis=basis,
        survived=tuple(survived),
        pre_existing=tuple(str(x) for x in pre),
        findings=tuple(findings),
        reasons=tuple(reasons),
        inputs_changed=taken,
        inputs_failed=tuple(str(x) for x in input_failed),
    )


def _dotted_prefixes(name: str) -> Iterable[str]:
    parts = name.split(".")
    return (".".join(parts[:i]) for i in range(1, len(parts) + 1))


def _as_test(tid: TestId) -> TestId:
    """A module that failed to collect (pytest: `classname=""`, `name=<dotted module>`)
    is located as the module itself."""
    return tid if tid.classname else TestId(classname=tid.name, name="")


def _incomplete(check: str, head: Run, trusted: Run) -> list[Reason]:
    """SPEC §3.1: a head or trusted run that gave no per-test outcomes leaves the
    differential incomplete (INCONCLUSIVE), never PROVEN with a note."""
    out: list[Reason] = []
    runs = ((trusted, "the base's tests against the change"), (head, "the change's own tests"))
    for run, what in runs:
        if run.outcomes is None and run.problem != CONTRADICTED:
            why = run.problem or "no JUnit report was written"
            out.append(
                Reason(
                    code=ReasonCode.DIFFERENTIAL_INCOMPLETE,
                    message=f"the {run.name} run gave no per-test outcomes ({why}): "
                    f"{what} could not be judged",
                    check=check,
                )
            )
    return out


HELD_CODES = frozenset(
    {
        ReasonCode.EXPECTATION_CHANGED,
        ReasonCode.TESTS_LOST,
        ReasonCode.ENVIRONMENT_CHANGED,
        ReasonCode.TEST_INPUT_CHANGED,
        ReasonCode.PLUGIN_LOADED,
    }
)


def foreign_code(check: str, judged: Run) -> Reason | None:
    """SPEC §3.2: in the trusted run the code under test is the tree's. Modules of the
    tree's packages that it imported from outside the tree, not as copies of the tree's
    files (a release installed by setup, an older copy ahead of `src/`), mean the base's
    tests ran other code than the change's: INCONCLUSIVE, with the fix."""
    if not judged.foreign:
        return None
    shown = "; ".join(judged.foreign[:3]) + (
        f" (and {len(judged.foreign) - 3} more)" if len(judged.foreign) > 3 else ""
    )
    return Reason(
        code=ReasonCode.DIFFERENTIAL_INCOMPLETE,
        message=f"the {judged.name} run imported the package under test from outside the "
        f"tree, not as a copy of the tree's files: {shown}. The base's tests did not run the "
        "change's code. Install the project from the tree in setup or build (`pip install -e "
        ".`), or put its source first on PYTHONPATH in the check's `env`",
        check=check,
    )


def plugins_loaded(check: str, judged: Run, base: Run) -> tuple[tuple[str, ...], Reason | None]:
    """SPEC §3.2: the trusted run's pytest plugins are the base run's. A plugin (by name,
    file and what each of its hooks does) or a module of the tree run before the harness
    that the judging run loaded and the base run did not is HELD `plugin-loaded`: the
    project's own plugin gaining or changing a hook, an entry point that setup or build
    added. Where the base gave no witness (it did not reach its tests), nothing vouches
    for any: each one counts (SPEC §3.1, a differential never fails open)."""
    if not judged.witnessed:
        return (), None  # `witness-missing` or the run's own problem says why
    known = set(base.plugins) | set(base.early)
    fresh = tuple(p for p in (*judged.plugins, *judged.early) if p not in known)
    if not fresh:
        return (), None
    shown = "; ".join(fresh[:3]) + (f" (and {len(fresh) - 3} more)" if len(fresh) > 3 else "")
    message = (
        f"the {judged.name} run loaded pytest plugins or ran modules of the tree before the "
        f"harness that the base run did not: {shown}. A person confirms them before they "
        "judge the change"
    )
    return fresh, Reason(code=ReasonCode.PLUGIN_LOADED, message=message, check=check)


def environment_reason(
    check: str, judged: Run, base: Run, changed: Iterable[bytes] = ()
) -> tuple[tuple[EnvChange, ...], Reason | None]:
    """SPEC §3.2: what the judging run's setup and build left, outside /workspace and in
    it, that the base's did not, path by path and byte by byte
    (gate/differential/environment.py), and the HELD reason for it. `changed`: the paths
    the patch touches (a compiled artefact built from one of them is the change's code).

    Where the judging run has no record (it did not get that far), nothing is judged
    here: its own problem keeps the verdict from PROVEN. Where the base has none (its
    setup or build did not finish), nothing vouches for any change: every one counts
    (SPEC §3.1, a differential never fails open)."""
    from gate.differential import environment  # noqa: PLC0415 - a module beside this one

    if judged.environment is None:
        return (), None
    fresh = environment.new_in(judged.environment, base.environment or EnvRecord(), changed)
    if not fresh:
        return (), None
    shown = ", ".join(f"{c.path or '(more)'} {c.kind}" for c in fresh[:5])
    more = f" (and {len(fresh) - 5} more)" if len(fresh) > 5 else ""
    unvouched = (
        "as the base's setup and build did not"
        if base.environment is not None
        else "and the base's setup and build did not finish, so nothing of it is the base's"
    )
    message = (
        f"setup or build left what the {judged.name} run's tests execute and read "
        f"otherwise {unvouched}: {shown}{more}. A person confirms the new environment "
        "(e.g. a dependency bump) before it judges"
    )
    return fresh, Reason(code=ReasonCode.ENVIRONMENT_CHANGED, message=message, check=check)


def wants_a_person(reports: Iterable[DifferentialReport]) -> bool:
    """Whether a differential reason is one a valid approval releases (HELD, not FAILED)."""
    return any(r.code in HELD_CODES for d in reports for r in d.reasons)


def add_to_predicate(predicate: JsonDict, reports: Iterable[DifferentialReport]) -> None:
    """Each check's `tests` (SPEC §4), and a coverage note for every check whose
    differential did not run: never silently skipped."""
    by_check = {r.check: r for r in reports}
    checks = predicate.get("checks")
    if isinstance(checks, list):
        for c in checks:
            if isinstance(c, dict) and c.get("name") in by_check:
                c["tests"] = by_check[str(c["name"])].to_dict()
    coverage = predicate.get("coverage")
    if isinstance(coverage, dict):
        notes = list(coverage.get("notes") or [])
        notes.extend(
            f"check {r.check}: no differential ran ({r.note})"
            for r in by_check.values()
            if not r.ran
        )
        coverage["notes"] = notes
