"""SPEC §3.3: N shard receipts -> one signed proof (`proofgate aggregate`).

Each shard receipt is verified with the trusted keys first (signature over the DSSE PAE,
then structure, journal chain and subjects: `gate.receipt.verify` with `Signed` alone, the
one place a shard receipt is read as evidence). Then, fail closed:

- every shard must say the same about what was proven and under which rules: repository,
  trigger, base, merge-base, head, patch digest, proven tree, configuration, policy
  fingerprint, image digest, shard count and split digest; a field that differs is
  INCONCLUSIVE `shards-disagree`, naming the field;
- shards 1..N each exactly once: a missing, repeated or unverifiable shard is
  INCONCLUSIVE `shards-incomplete`.

Only then are the per-test outcomes of every run (head, base, trusted, proving) combined
and the differential's rules (`gate.differential.compare`) applied to the union, exactly as
one job would apply them; the shards' own reasons that are not the differential's (a
command that failed, the witness's findings, policy, ...) carry over. The result is one
receipt whose `aggregate` lists the shard receipts' SHA-256; it has no `shard` field, so
release verification reads it as a single-job receipt.

Pure but for the clock and the signing, which come in as arguments.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gate import differential, receipt
from gate.differential import HELD_CODES, Run
from gate.differential.junit import TestId, TestOutcome
from gate.model import Decision, DifferentialMode, JsonDict, Reason, ReasonCode, Verdict, worst
from gate.proof.verdict import verdict_for
from gate.receipt import render
from gate.receipt.predicate import Builder
from gate.util.journal import Journal
from gate.util.timefmt import rfc3339

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = ["AGREEMENT", "AggregateError", "AggregateRun", "aggregate"]

# (what the reason names, the path in the predicate): every shard must agree on these
AGREEMENT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("repository", ("repository",)),
    ("trigger", ("trigger",)),
    ("base", ("base",)),
    ("merge_base", ("merge_base",)),
    ("head", ("head",)),
    ("patch digest", ("patch", "sha256")),
    ("proven tree", ("proven_tree",)),
    ("config digest", ("config",)),
    ("policy fingerprint", ("policy", "fingerprint")),
    ("image digest", ("shard", "image_digest")),
    ("shard count", ("shard", "count")),
    ("split digest", ("shard", "split_sha256")),
)

# What a shard judges only over its share, so the aggregate judges it again over the union
_DIFFERENTIAL_CODES = frozenset(
    {
        ReasonCode.REGRESSION,
        ReasonCode.EXPECTATION_CHANGED,
        ReasonCode.TESTS_LOST,
        ReasonCode.TEST_INPUT_CHANGED,
        ReasonCode.JUNIT_NO_TESTS,
        ReasonCode.POLICY_HOLD,  # with a check: `no-proving-test` raised by the policy
        ReasonCode.POLICY_DENY,
    }
)
_RUNS = (differential.HEAD, differential.BASE, differential.TRUSTED, differential.PROVING)


class AggregateError(Exception):
    """Not one of the receipts verifies: there is nothing to sign."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AggregateRun:
    verdict: Verdict
    reasons: tuple[Reason, ...]
    predicate: JsonDict
    statement: JsonDict
    envelope: bytes = field(repr=False)
    markdown: str
    signed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shard:
    number: int  # its place in the arguments (1-based), for messages
    sha256: str  # of the envelope's bytes
    keyid: str
    statement: JsonDict
    predicate: JsonDict

    @property
    def shard(self) -> JsonDict:
        s = self.predicate.get("shard")
        return s if isinstance(s, dict) else {}

    @property
    def index(self) -> int:
        i = self.shard.get("index")
        return i if isinstance(i, int) else 0


def _at(d: object, path: tuple[str, ...]) -> object:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def _dicts(value: object) -> list[JsonDict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _dict(value: object) -> JsonDict:
    return value if isinstance(value, dict) else {}


def _reason_of(d: JsonDict) -> Reason | None:
    try:
        code = ReasonCode(str(d.get("code")))
    except ValueError:
        return None
    check = d.get("check")
    return Reason(
        code=code,
        message=str(d.get("message", "")),
        check=str(check) if check is not None else None,
    )


def _refusals(shards: list[_Shard], count_hint: int | None) -> list[Reason]:
    """The set's own problems: disagreement (named field), missing or repeated shards."""
    out: list[Reason] = []
    first = shards[0]
    out.extend(
        Reason(
            code=ReasonCode.SHARDS_INCOMPLETE,
            message=f"receipt {s.number} is not a shard receipt (it has no `shard`)",
        )
        for s in shards
        if not s.shard
    )
    for name, path in AGREEMENT:
        want = _at(first.predicate, path)
        for s in shards[1:]:
            got = _at(s.predicate, path)
            if got != want:
                out.append(
                    Reason(
                        code=ReasonCode.SHARDS_DISAGREE,
                        message=f"the shards disagree on the {name} (`{'.'.join(path)}`): "
                        f"receipt {first.number} says {_short(want)}, receipt {s.number} "
                        f"says {_short(got)}",
                    )
                )
                break
    count = _at(first.predicate, ("shard", "count"))
    n = count if isinstance(count, int) and count > 0 else count_hint or len(shards)
    seen: dict[int, int] = {}
    for s in shards:
        seen[s.index] = seen.get(s.index, 0) + 1
    for index in sorted(seen):
        if seen[index] > 1:
            out.append(
                Reason(
                    code=ReasonCode.SHARDS_INCOMPLETE,
                    message=f"shard {index} of {n} is given {seen[index]} times",
                )
            )
        elif not 1 <= index <= n:
            out.append(
                Reason(code=ReasonCode.SHARDS_INCOMPLETE, message=f"shard {index} is not 1..{n}")
            )
    missing = [i for i in range(1, n + 1) if i not in seen]
    if missing:
        out.append(
            Reason(
                code=ReasonCode.SHARDS_INCOMPLETE,
                message=f"shard(s) {', '.join(map(str, missing))} of {n} missing: every shard's "
                "receipt is needed",
            )
        )
    return out


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


# -- the union ---------------------------------------------------------------------------


def _union_run(name: str, shards: list[tuple[int, JsonDict]]) -> tuple[Run, int]:
    """One run's outcomes over every shard (worst wins for a test given twice); a shard
    whose run produced nothing leaves its tests absent, and says so."""
    outcomes: dict[TestId, TestOutcome] = {}
    problems: list[str] = []
    duplicates = 0
    present = False
    for index, section in shards:
        rows = _dict(section.get("outcomes")).get(name)
        problem = _dict(section.get("problems")).get(name)
        if problem:
            problems.append(f"shard {index}: {problem}")
        if not isinstance(rows, list):
            continue
        present = True
        for row in rows:
            if not (isinstance(row, list) and len(row) == 3):
                continue
            tid = TestId(classname=str(row[0]), name=str(row[1]))
            try:
                outcome = TestOutcome(str(row[2]))
            except ValueError:
                continue
            prior = outcomes.get(tid)
            if prior is not None:
                duplicates += 1
            if prior is None or outcome.badness > prior.badness:
                outcomes[tid] = outcome
    problem = "; ".join(problems) or None
    return Run(name=name, outcomes=outcomes if present else None, problem=problem), duplicates


def _path_bytes(entry: JsonDict, key: str) -> bytes | None:
    b64 = entry.get(f"{key}_b64")
    if isinstance(b64, str):
        return base64.b64decode(b64)
    text = entry.get(key)
    return text.encode("utf-8") if isinstance(text, str) else None


def _prints(shards: list[tuple[int, JsonDict]], side: str) -> dict[tuple[bytes, str], str]:
    """The test functions' fingerprints of one side (`base` or `head`) over every shard:
    kept apart, so a lost test is judged with the base's (a head function of the same
    name and file never stands in for it). A shard that records no such side adds none
    (its lost tests then cannot pass for renamed)."""
    out: dict[tuple[bytes, str], str] = {}
    for _, section in shards:
        rows = _dict(section.get("fingerprints")).get(side)
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, list) and len(row) == 3:
                out[(str(row[0]).encode("utf-8"), str(row[1]))] = str(row[2])
    return out


def _judge_union(
    name: str,
    sections: list[tuple[int, JsonDict]],
    mode: DifferentialMode,
    changed: frozenset[bytes],
) -> tuple[differential.DifferentialReport, int]:
    runs: dict[str, Run] = {}
    duplicates = 0
    for run in _RUNS:
        got, dup = _union_run(run, sections)
        runs[run] = got
        duplicates += dup
    base = runs[differential.BASE]
    # SPEC §3.2: a test's file is the file the base run reports, as in the one-job proof
    # (not a changed module whose dotted name merely prefixes its classname); every
    # shard's, or none (the changed modules then, as without a witness)
    found: set[bytes] = set()
    for _, sec in sections:
        files = sec.get("base_test_files")
        if not isinstance(files, list):
            break
        found.update(str(p).encode("utf-8", "surrogateescape") for p in files)
    else:
        base = dataclasses.replace(base, test_files=tuple(sorted(found)))
    first = sections[0][1]
    try:
        decision = Decision(str(first.get("no_proving_decision", "allow")))
    except ValueError:
        decision = Decision.HOLD
    proving = runs[differential.PROVING] if mode is DifferentialMode.FULL else None
    report = differential.compare(
        check=name,
        mode=mode,
        head=runs[differential.HEAD],
        base=base,
        trusted=runs[differential.TRUSTED],
        proving=proving,
        changed=changed,
        nontest_changed=any(bool(s.get("nontest_changed")) for _, s in sections),
        base_files={},
        head_files={},
        no_proving_decision=decision,
        prints=(_prints(sections, "base"), _prints(sections, "head")),
        inputs={
            str(p).encode("utf-8", "surrogateescape")
            for _, sec in sections
            for p in _list_of(sec.get("inputs"))
        },
    )
    return report, duplicates


def _list_of(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _mode_of(check: JsonDict) -> DifferentialMode:
    try:
        return DifferentialMode(str(_at(check, ("tests", "differential"))))
    except ValueError:
        return DifferentialMode.TRUSTED


def _merge_checks(
    shards: list[_Shard], approved: bool
) -> tuple[list[JsonDict], list[Reason], list[str]]:
    """The aggregate's `checks` (config order), the union's differential reasons, notes."""
    first = shards[0]
    split = _dict(first.shard.get("split"))
    inventory = _dicts(first.predicate.get("inventory"))
    changed = frozenset(
        p for e in inventory for key in ("path", "old_path") if (p := _path_bytes(e, key))
    )
    out: list[JsonDict] = []
    reasons: list[Reason] = []
    notes: list[str] = []
    for planned in _dicts(split.get("checks")):
        name = str(planned.get("name"))
        entries = [
            (s.index, c)
            for s in shards
            for c in _dicts(s.predicate.get("checks"))
            if c.get("name") == name
        ]
        if "whole" in planned:  # one shard ran it all: its entry as it is
            for index, c in entries:
                out.append({**c, "shards": [index]})
            continue
        merged: JsonDict = {"name": name, "shards": [i for i, _ in entries]}
        if entries:
            head = entries[0][1]
            for key in ("image", "image_digest", "image_id"):
                merged[key] = head.get(key)
            merged["started"] = all(bool(c.get("started")) for _, c in entries)
            merged["phases"] = [
                {**ph, "shard": i} for i, c in entries for ph in _dicts(c.get("phases"))
            ]
            junit: dict[str, int] = {}
            for _, c in entries:
                for k, v in _dict(c.get("junit")).items():
                    if isinstance(v, int):
                        junit[k] = junit.get(k, 0) + v
            if junit:
                merged["junit"] = junit
        sections = [
            (s.index, sec)
            for s in shards
            if isinstance(sec := _at(s.shard, ("checks", name)), dict)
        ]
        mode = _mode_of(entries[0][1]) if entries else DifferentialMode.TRUSTED
        if len(sections) != len(shards):
            ran = {i for i, _ in sections}
            absent = [s.index for s in shards if s.index not in ran]
            note = f"no differential ran on shard(s) {', '.join(map(str, absent))}"
            report = differential.not_run(name, mode, note)
        else:
            report, duplicates = _judge_union(name, sections, mode, changed)
            if duplicates:
                notes.append(f"check {name}: {duplicates} test outcome(s) came from two shards")
        merged["tests"] = report.to_dict()
        empty = [i for i, sec in sections if sec.get("empty") is True]
        if empty:  # SPEC §3.3: recorded, not a failure; the union was judged
            merged["empty_shares"] = empty
        durations: dict[str, float] = {}
        for _, sec in sections:
            got = sec.get("durations")
            for path, seconds in got.items() if isinstance(got, dict) else ():
                if isinstance(seconds, int | float):
                    durations[str(path)] = float(seconds)
        if durations:  # what `prove --shard --balance-from` balances the next split by
            merged["durations"] = dict(sorted(durations.items()))
        if not report.ran:
            notes.append(f"check {name}: no differential ran ({report.note})")
        reasons.extend(r for r in report.reasons if not (approved and r.code in HELD_CODES))
        if report.ran:  # the union's head run: a test given by two shards counts once
            head_run = next((r for r in report.runs if r.name == differential.HEAD), None)
            seen = head_run.outcomes if head_run is not None and head_run.outcomes else {}
            executed = sum(1 for o in seen.values() if o is not TestOutcome.SKIP)
        else:  # no per-test outcomes (`differential: off`): the shards' JUnit counts
            counted = {k: v for k, v in _dict(merged.get("junit")).items() if isinstance(v, int)}
            executed = counted.get("tests", 0) - counted.get("skipped", 0)
        if (
            entries
            and executed == 0
            and not any(r.code is ReasonCode.CHECK_FAILED and r.check == name for r in reasons)
        ):
            reasons.append(
                Reason(
                    code=ReasonCode.JUNIT_NO_TESTS,
                    message="no shard's JUnit report counts an executed test",
                    check=name,
                )
            )
        out.append(merged)
    return out, reasons, notes


def _approved(p: JsonDict) -> bool:
    a = _dict(p.get("approval"))
    return bool(a) and (
        a.get("patch_sha256"),
        a.get("policy_fingerprint"),
    ) == (_at(p, ("patch", "sha256")), _at(p, ("policy", "fingerprint")))


def _carried(shards: list[_Shard], split_checks: frozenset[str]) -> list[Reason]:
    """The shards' own reasons that stand for the whole: not `shard-partial`, not what the
    union judges again, and `no-test-phase` only when every shard says it."""
    out: list[Reason] = []
    no_test_phase = 0
    for s in shards:
        for d in _dicts(s.predicate.get("reasons")):
            r = _reason_of(d)
            if r is None or r.code is ReasonCode.SHARD_PARTIAL:
                continue
            if r.code is ReasonCode.NO_TEST_PHASE:
                no_test_phase += 1
                continue
            if r.check in split_checks and r.code in _DIFFERENTIAL_CODES:
                continue
            if r not in out:
                out.append(r)
    if no_test_phase == len(shards):
        out.append(
            Reason(
                code=ReasonCode.NO_TEST_PHASE,
                message="no check of any shard has a test phase; PROVEN needs one",
            )
        )
    return out


def aggregate(
    envelopes: Sequence[bytes],
    keys: Sequence[Ed25519PublicKey],
    *,
    signing_key: Ed25519PrivateKey | None,
    clock: Callable[[], float],
    builder: Builder | None = None,
) -> AggregateRun:
    """Verify, check and combine shard receipts into one signed receipt.

    Raises:
        AggregateError: no receipt verifies with `keys` (nothing to build a receipt of).
    """
    started = clock()
    journal = Journal(clock=clock)
    journal.append("aggregate-started", receipts=len(envelopes))
    shards: list[_Shard] = []
    unverified: list[Reason] = []
    for number, envelope in enumerate(envelopes, start=1):
        digest = hashlib.sha256(envelope).hexdigest()
        try:
            verified = receipt.verify(envelope, receipt.Signed(keys))
        except receipt.ReceiptError as e:
            journal.append("shard-refused", receipt=number, sha256=digest, error=str(e))
            unverified.append(
                Reason(
                    code=ReasonCode.SHARDS_INCOMPLETE,
                    message=f"receipt {number} (sha256 {digest[:12]}) does not verify: {e}",
                )
            )
            continue
        s = _Shard(
            number=number,
            sha256=digest,
            keyid=verified.keyid,
            statement=verified.statement,
            predicate=verified.predicate.to_dict(),
        )
        journal.append(
            "shard-verified",
            receipt=number,
            sha256=digest,
            keyid=verified.keyid,
            index=s.index,
            verdict=s.shard.get("verdict"),
        )
        shards.append(s)
    if not shards:
        raise AggregateError(
            "no shard receipt verifies with the given keys: "
            + "; ".join(r.message for r in unverified)
        )
    shards.sort(key=lambda s: (s.index, s.number))
    refused = unverified + _refusals(shards, None)
    first = shards[0]
    predicate = {k: v for k, v in first.predicate.items() if k != "shard"}
    checks: list[JsonDict] = []
    notes: list[str] = []
    if refused:
        reasons = refused
    else:
        approved = any(_approved(s.predicate) for s in shards)
        split_checks = frozenset(
            str(c.get("name"))
            for c in _dicts(_dict(first.shard.get("split")).get("checks"))
            if "whole" not in c
        )
        checks, union_reasons, notes = _merge_checks(shards, approved)
        reasons = _carried(shards, split_checks) + union_reasons
    unique: list[Reason] = []
    for r in reasons:
        if r not in unique:
            unique.append(r)
    verdict = worst([verdict_for(r.code) for r in unique])
    journal.append("verdict", verdict=verdict.value, reasons=[r.code.value for r in unique])

    coverage = dict(_dict(first.predicate.get("coverage")))
    merged_notes: list[object] = []
    for s in shards:
        shard_notes = _at(s.predicate, ("coverage", "notes"))
        for n in shard_notes if isinstance(shard_notes, list) else []:
            if n not in merged_notes:
                merged_notes.append(n)
    coverage["notes"] = merged_notes + [n for n in notes if n not in merged_notes]
    limits: JsonDict = {}
    engines: set[str] = set()
    for s in shards:
        limits.update(_dict(s.predicate.get("check_limits")))
        engine = _at(s.predicate, ("docker", "engine_id"))
        if isinstance(engine, str):
            engines.add(engine)
    predicate.update(
        {
            "verdict": verdict.value,
            "reasons": [r.to_dict() for r in unique],
            "checks": checks,
            "coverage": coverage,
            "journal": journal.to_dict(),
            "started_at": rfc3339(started),
            "finished_at": rfc3339(clock()),
            "aggregate": {
                "count": _at(first.predicate, ("shard", "count")),
                "split_sha256": _at(first.predicate, ("shard", "split_sha256")),
                "shards": [
                    {
                        "index": s.index,
                        "sha256": s.sha256,
                        "keyid": s.keyid,
                        "verdict": s.shard.get("verdict"),
                    }
                    for s in shards
                ],
            },
        }
    )
    if limits:
        predicate["check_limits"] = limits
    if engines:
        predicate["docker"] = {"engine_ids": sorted(engines)}
    if builder is not None:
        predicate["builder"] = builder.to_dict()
    subjects = {
        str(sub.get("name")): _dict(sub.get("digest"))
        for sub in _dicts(first.statement.get("subject"))
    }
    tree = subjects.get(receipt.SUBJECT_TREE, {}).get("gitTree")
    statement = receipt.build_statement(
        predicate,
        patch_sha256=str(subjects[receipt.SUBJECT_PATCH]["sha256"]),
        head_commit=str(subjects[receipt.SUBJECT_HEAD]["gitCommit"]),
        proven_tree=str(tree) if tree is not None else None,
    )
    envelope = receipt.sign(receipt.serialize(statement), signing_key)
    return AggregateRun(
        verdict=verdict,
        reasons=tuple(unique),
        predicate=predicate,
        statement=statement,
        envelope=envelope,
        markdown=render.to_markdown(predicate, signed=signing_key is not None),
        signed=signing_key is not None,
    )


def shard_patch(receipts: Mapping[str, bytes], patch_sha256: str) -> bytes | None:
    """The patch bytes among `receipts`' neighbours whose SHA-256 is the patch digest."""
    for data in receipts.values():
        if hashlib.sha256(data).hexdigest() == patch_sha256:
            return data
    return None
