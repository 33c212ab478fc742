"""A proof's own run of its proven tree, kept in its receipt as the base run of that tree
for the next proof (SPEC §3.1, base row; `prove --base-receipt FILE --base-key PUB`).
Pure.

The head run of a proof ran its proven tree's tests with the same check, image,
configuration, test options and witness a base run of that tree would have: so when that
tree is the base of a later change, its outcomes are that base run's. Each check with a
differential records, in `checks[].tests.as_base`, what a base run gives the judgement:
the per-test outcomes, the files the collected tests are in, what the tests were seen
reading, the plugins pytest loaded and the tree's modules run before the harness, the
witness's findings, and what setup and build left (the environment record), under a
`key` that binds the check's specification, the image digest, the configuration's digest,
the test options and the witness. A later proof takes them only from a receipt that
verifies with a key it trusts, whose proven tree is its base tree, that judged the whole
change (no shard), whose verdict is PROVEN or HELD (so the run passed: nothing of it is
pre-existing, and a reused outcome can only make the proof stricter or equal), and whose
`as_base` for the check has the same key, is complete and parses. Anything else is
refused, named, and the base's tests run as without a receipt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from gate.differential import Run
from gate.differential.junit import TestId, TestOutcome
from gate.model import EnvChange, EnvRecord, JsonDict
from gate.util.canonical import canonical_json

__all__ = ["MAX_TESTS", "VERSION", "from_dict", "reuse_key", "to_dict"]

VERSION = 1
MAX_TESTS = 50_000  # outcomes kept in a receipt; a larger suite's proof records none
_ACCEPTED = ("PROVEN", "HELD")  # verdicts whose head run passed
_OUTCOME = {o.value: o for o in TestOutcome}


def reuse_key(material: Mapping[str, object]) -> str:
    """SHA-256 over what makes two runs of one tree the same run: the check's
    specification, the image digest, the configuration's digest, the test options every
    test command gets and the witness (`gate.proof.runs` gives them)."""
    return hashlib.sha256(canonical_json({"as_base": VERSION, **material})).hexdigest()


def _text(path: bytes) -> str:
    return path.decode("utf-8", "surrogateescape")


def to_dict(run: Run, *, key: str) -> JsonDict | None:
    """The head run as the next proof's base run; None when it cannot stand for one (no
    outcomes, a problem, no witness, more tests than are kept)."""
    if run.outcomes is None or run.problem is not None or not run.witnessed:
        return None
    if len(run.outcomes) > MAX_TESTS:
        return None
    grouped: dict[str, dict[str, str]] = {}
    for tid, outcome in sorted(run.outcomes.items()):
        grouped.setdefault(tid.classname, {})[tid.name] = outcome.value
    env = run.environment
    return {
        "v": VERSION,
        "key": key,
        "count": len(run.outcomes),
        "outcomes": grouped,
        "test_files": [_text(p) for p in run.test_files],
        "inputs": [_text(p) for p in run.inputs],
        "plugins": list(run.plugins),
        "early": list(run.early),
        "tamper": [[k, d] for k, d in run.tamper],
        "environment": None
        if env is None
        else {
            "complete": env.complete,
            "changes": [[c.key or c.path, c.kind, c.norm or c.sha256, c.why] for c in env.changes],
        },
    }


def _strings(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ValueError("not a list of strings")
    return tuple(raw)


def _environment(raw: object) -> EnvRecord | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("changes"), list):
        raise ValueError("environment is not a record")
    changes: list[EnvChange] = []
    for row in raw["changes"]:
        if not (isinstance(row, list) and len(row) == 4 and all(isinstance(x, str) for x in row)):
            raise ValueError("an environment entry is not [path, kind, digest, type]")
        path, kind, digest, why = row
        changes.append(
            EnvChange(path=path, kind=kind, sha256=digest, why=why, key=path, norm=digest)
        )
    return EnvRecord(changes=tuple(changes), complete=raw.get("complete") is True)


def from_dict(
    predicate: Mapping[str, object], check: str, *, key: str, base_tree: str
) -> Run | str:
    """The base run of `check` that a verified receipt's predicate gives, or why it gives
    none (one line, for the receipt's notes)."""
    if predicate.get("proven_tree") != base_tree:
        return f"it proves tree {predicate.get('proven_tree')}, not the base tree {base_tree}"
    if predicate.get("shard") is not None:
        return "it is a shard's receipt, not a whole proof"
    verdict = predicate.get("verdict")
    if verdict not in _ACCEPTED:
        return f"its verdict is {verdict}: only a PROVEN or HELD proof's run passed"
    checks = predicate.get("checks")
    entry = (
        next(
            (c for c in checks if isinstance(c, dict) and c.get("name") == check),
            None,
        )
        if isinstance(checks, list)
        else None
    )
    tests = entry.get("tests") if isinstance(entry, dict) else None
    raw = tests.get("as_base") if isinstance(tests, dict) else None
    if not isinstance(raw, dict):
        return f"it records no run of check {check} that can stand for a base run"
    if raw.get("v") != VERSION or raw.get("key") != key:
        return (
            f"its run of check {check} is not this proof's base run (another check, image, "
            "configuration, test options or witness)"
        )
    try:
        outcomes: dict[TestId, TestOutcome] = {}
        grouped = raw["outcomes"]
        if not isinstance(grouped, dict):
            raise ValueError("outcomes is not a mapping")
        for classname, names in grouped.items():
            if not isinstance(names, dict):
                raise ValueError("outcomes of a class is not a mapping")
            for name, value in names.items():
                outcomes[TestId(classname=str(classname), name=str(name))] = _OUTCOME[str(value)]
        if raw.get("count") != len(outcomes):
            raise ValueError(f"{len(outcomes)} outcomes where it counts {raw.get('count')}")
        if any(o in (TestOutcome.FAIL, TestOutcome.ERROR) for o in outcomes.values()):
            raise ValueError("a test failed in it")
        tamper_rows = raw["tamper"]
        if not isinstance(tamper_rows, list):
            raise ValueError("tamper is not a list")
        tamper = tuple(
            (str(r[0]), str(r[1])) for r in tamper_rows if isinstance(r, list) and len(r) == 2
        )
        return Run(
            name="base",
            outcomes=outcomes,
            cached=False,
            witnessed=True,
            tamper=tamper,
            test_files=tuple(
                p.encode("utf-8", "surrogateescape") for p in _strings(raw["test_files"])
            ),
            inputs=tuple(p.encode("utf-8", "surrogateescape") for p in _strings(raw["inputs"])),
            plugins=_strings(raw["plugins"]),
            early=_strings(raw["early"]),
            environment=_environment(raw.get("environment")),
        )
    except (KeyError, ValueError, TypeError, IndexError) as e:
        return f"its run of check {check} does not parse: {e}"
