"""Every configuration key has an effect on a `prove` run's receipt (issue 16).

For each key the shipped JSON Schema documents, two configurations that differ only in
that key must give receipts that differ in a predicate field (the config's own digest,
the journal and the clock excluded) — or the key is listed as informational, with why.
The table is checked against the schema: a new key without an entry fails, saying
where to add one. Keys judged before anything runs go through the pre-flight
(`proofgate policy`); the commands and the report need a real proof in the clean room.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gate.faces.cli import main
from tests.conftest import CLEANROOM_IMAGE
from tests.gitutil import commit, make_repo, repo_dir

SCHEMA = Path(__file__).parents[2] / "gate" / "schema" / "proofgate.schema.json"

Doc = dict[str, object]


@dataclass(frozen=True)
class Effect:
    change: Callable[[Doc], None]  # mutates a copy of BASE so that only this key differs
    run: bool = False  # True: visible only once checks ran (needs Docker)


BASE: Doc = {
    "version": 1,
    "image": CLEANROOM_IMAGE,
    "defaults": {"timeout": 60, "memory": "256m", "pids": 64},
    "checks": [{"name": "unit", "test": "true"}],
    "policy": {},
}


def _check(key: str, value: object) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        doc["checks"][0][key] = value  # type: ignore[index]

    return change


def _section(section: str, key: str, value: object) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        doc.setdefault(section, {})[key] = value  # type: ignore[union-attr, index]

    return change


def _policy_sub(key: str, sub: str, value: object) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        doc["policy"].setdefault(key, {})[sub] = value  # type: ignore[union-attr, index]

    return change


def _image(doc: Doc) -> None:
    doc["image"] = CLEANROOM_IMAGE.replace(":latest", ":other")


# a value other than BASE's for each limit (defaults and per check)
_LIMITS: Mapping[str, object] = {
    "timeout": 5,
    "network": "setup",
    "memory": "128m",
    "cpus": 1,
    "pids": 32,
    "user": "1000:1000",
    "cap_add": ["NET_BIND_SERVICE"],
    "env": {"FLAG": "1"},
    "egress": ["index.example.org:443"],
}

CONTAINER = "a mapping or list of keys: each of its keys has its own entry"

# key path (as the schema nests it; list items as `[]`) -> how it shows, or why it does not
EFFECTS: Mapping[str, Effect | str] = {
    "version": "only the value 1 is valid: there is no second configuration to compare",
    "image": Effect(_image),
    "defaults": CONTAINER,
    "checks": CONTAINER,
    "policy": CONTAINER,
    **{f"defaults.{k}": Effect(_section("defaults", k, v)) for k, v in _LIMITS.items()},
    **{f"checks[].{k}": Effect(_check(k, v)) for k, v in {"name": "other", **_LIMITS}.items()},
    "checks[].setup": Effect(_check("setup", "true"), run=True),
    "checks[].build": Effect(_check("build", "true"), run=True),
    "checks[].test": Effect(_check("test", "echo changed"), run=True),
    "checks[].junit": Effect(_check("junit", "out/junit.xml"), run=True),
    # the allowlist is part of the policy fingerprint and of the check's recorded limits
    "defaults.egress": Effect(_section("defaults", "egress", ["index.example.org:443"])),
    "checks[].egress": Effect(_check("egress", ["index.example.org:443"])),
    # both need a JUnit report and a test suite, which this repository has not; their
    # effect on the verdict and the receipt is asserted through `prove` on real suites
    "checks[].tests": "judged by tests/attacks/test_differential.py, which proves real "
    "suites whose trusted runs take exactly the files these globs select",
    "checks[].differential": "judged by tests/attacks/test_differential.py: `off` lets a "
    "weakened test reach PROVEN, `trusted` holds it, `full` adds the proving run",
    "checks[].setup_inputs": Effect(_check("setup_inputs", ["*.txt"]), run=True),
    "policy.protected": Effect(_section("policy", "protected", ["docs/**"])),
    "policy.deny": Effect(_section("policy", "deny", ["docs/**"])),
    "policy.budgets": CONTAINER,
    "policy.budgets.files": Effect(_policy_sub("budgets", "files", 1)),
    "policy.budgets.lines": Effect(_policy_sub("budgets", "lines", 1)),
    "policy.rules": Effect(_section("policy", "rules", {"new-executable": "hold"})),
    "policy.thresholds": CONTAINER,
    "policy.thresholds.immediate": Effect(_policy_sub("thresholds", "immediate", 1)),
    "policy.thresholds.future": Effect(_policy_sub("thresholds", "future", 0)),
    "ci": CONTAINER,
    # part of the policy fingerprint: a default token judged write makes every job privileged
    "ci.default-token": Effect(_section("ci", "default-token", "write")),
}


def _keys(node: Mapping[str, object], defs: Mapping[str, object], path: str) -> Iterator[str]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        node = defs[ref.rsplit("/", 1)[-1]]  # type: ignore[assignment]
    props = node.get("properties", {})
    for k, v in props.items():  # type: ignore[attr-defined]
        yield path + k
        yield from _keys(v, defs, path + k + ".")
    items = node.get("items")
    if isinstance(items, dict):
        yield from _keys(items, defs, path.removesuffix(".") + "[].")
    for alt in (*node.get("oneOf", ()), *node.get("anyOf", ()), *node.get("allOf", ())):  # type: ignore[misc]
        yield from _keys(alt, defs, path)


def schema_keys() -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    defs = schema.get("$defs", schema.get("definitions", {}))
    return sorted(set(_keys(schema, defs, "")))


def test_every_documented_key_has_an_entry() -> None:
    missing = [k for k in schema_keys() if k not in EFFECTS]
    assert not missing, (
        f"config keys without an entry: {missing}. Add each to EFFECTS in "
        f"{Path(__file__).name}: an Effect whose two configs give different receipts, "
        "or a string saying why the key is informational"
    )
    stale = sorted(set(EFFECTS) - set(schema_keys()))
    assert not stale, f"EFFECTS names keys the schema no longer has: {stale}"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("keys")
    r = make_repo(tmp)
    base = commit(r, {b"calc.py": b"x = 1\n", b"docs/a.md": b"a\n"}, message="base")
    commit(
        r,
        {b"calc.py": b"x = 2\n", b"docs/a.md": b"b\n", b"tool.sh": (b"#!/bin/sh\n", 0o100755)},
        branch="pr",
        parent=base,
        message="pr",
    )
    return repo_dir(r)


_VOLATILE = ("config", "journal", "started_at", "finished_at")


def _receipt(
    repo: Path, tmp: Path, doc: Doc, *, run: bool, capsys: pytest.CaptureFixture[str]
) -> Doc:
    cfg = tmp / f"cfg-{len(list(tmp.iterdir()))}.yml"
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False))
    capsys.readouterr()
    command = "prove" if run else "policy"
    main(
        [
            command,
            "--repo",
            str(repo),
            "--base",
            "main",
            "--head",
            "pr",
            "--config",
            str(cfg),
            "--json",
        ]
    )
    predicate: Doc = json.loads(capsys.readouterr().out)
    return {k: v for k, v in predicate.items() if k not in _VOLATILE}


def _params() -> list[object]:
    out: list[object] = []
    for key, effect in EFFECTS.items():
        marks = [pytest.mark.docker] if isinstance(effect, Effect) and effect.run else []
        out.append(pytest.param(key, effect, id=key, marks=marks))
    return out


@pytest.mark.parametrize(("key", "effect"), _params())
def test_config_key_changes_the_receipt(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, effect: Effect | str
) -> None:
    if isinstance(effect, str):
        assert len(effect) > 20, f"{key}: say why the key is informational"
        return
    changed = copy.deepcopy(BASE)
    effect.change(changed)
    assert changed != BASE, f"{key}: the change leaves the config as it was"
    before = _receipt(repo, tmp_path, copy.deepcopy(BASE), run=effect.run, capsys=capsys)
    after = _receipt(repo, tmp_path, changed, run=effect.run, capsys=capsys)
    assert before != after, f"{key}: two configs differing only in it gave the same receipt"
