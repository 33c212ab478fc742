"""Each changed Python file is parsed once for every rule, and the harness rule reads only
what the change touches (issue 46): the same findings as reading both copies whole."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gate.model import PolicySpec
from gate.policy import blast, evaluate, scan
from gate.policy.harness import HarnessSite, harness_sites, new_harness_sites
from tests.unit.test_policy import chg
from tests.unit.test_policy_harness import HONEST, TAMPERING

FILLER = "\n\ndef helper{n}(x):\n    return x + {n}\n"
DECORATED = "\n\n@functools.cache\ndef cached{n}(x):\n    return x\n"


def _whole(new: bytes, added: frozenset[int], old: bytes | None) -> list[HarnessSite] | None:
    """new_harness_sites as it was before issue 46: both copies read whole."""
    sites = harness_sites(new)
    if sites is None:
        return None
    before = Counter(s.kind for s in (harness_sites(old) if old is not None else None) or [])
    budget = Counter(s.kind for s in sites)
    budget.subtract(before)
    out = []
    for s in sites:
        if budget[s.kind] > 0 and any(n in added for n in range(s.line, s.end + 1)):
            budget[s.kind] -= 1
            out.append(s)
    return out


def _sources() -> list[str]:
    rng = random.Random(46)  # noqa: S311 (test data)
    out = []
    pieces = [c[1] for c in (*TAMPERING, *HONEST)]
    for _ in range(60):
        body = ["import functools\n"]
        body += [
            rng.choice([*pieces, FILLER.format(n=n), DECORATED.format(n=n)])
            for n in range(rng.randrange(1, 6))
        ]
        out.append("".join(body))
    return out


@pytest.mark.parametrize("source", _sources())
def test_reading_what_the_change_touches_finds_what_reading_it_whole_finds(source: str) -> None:
    rng = random.Random(source)  # noqa: S311 (test data)
    new = source.encode()
    count = source.count("\n")
    for _ in range(8):
        added = frozenset(n for n in range(1, count + 1) if rng.random() < 0.3)
        old = None
        if rng.random() < 0.5:
            keep = [ln for n, ln in enumerate(source.splitlines(True), 1) if n not in added]
            old = "".join(keep).encode()
        assert new_harness_sites(new, added, old) == _whole(new, added, old)


def test_a_change_that_touches_no_site_does_not_parse_the_base() -> None:
    new = b"import sys\nsys.settrace(print)\n" + FILLER.format(n=1).encode()
    assert new_harness_sites(new, frozenset({5, 6}), b"\x00 not python (") == []
    # touching the site reads the base: it cannot be parsed, so every new site counts
    got = new_harness_sites(new, frozenset({2}), b"\x00 not python (")
    assert [s.kind for s in got or []] == ["uses sys.settrace"]


def test_a_decorator_added_above_a_definition_is_read() -> None:
    new = b"import sys\n\n@sys.settrace\ndef f():\n    pass\n"
    got = new_harness_sites(new, frozenset({3}), b"import sys\n\ndef f():\n    pass\n")
    assert [s.kind for s in got or []] == ["uses sys.settrace"]


def test_each_changed_file_is_parsed_once_for_every_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bytes] = []

    def parse(source: bytes) -> object:
        seen.append(source)
        return blast.parse_python(source)

    monkeypatch.setattr(scan, "parse_python", parse)
    code = chg("pkg/mod.py", "M", deleted=["import os"], added=["import sys", "sys.settrace(1)"])
    test = chg("tests/test_m.py", "M", deleted=["def test_a(): pass"], added=["def test_a(): 1"])
    tree = {
        b"pkg/mod.py": b"import sys\nsys.settrace(1)\n",
        b"tests/test_m.py": b"def test_a(): 1\n",
    }
    base = {b"pkg/mod.py": b"import os\n", b"tests/test_m.py": b"def test_a(): pass\n"}
    imports: dict[str, object] = {}
    r = evaluate(
        [code.entry, test.entry],
        code.patch + test.patch,
        PolicySpec(),
        tree_files=tree,
        base_files=base,
        import_cache=imports,  # type: ignore[arg-type]
    )
    assert sorted(seen) == sorted(tree.values())
    assert {f.rule for f in r.findings} >= {"harness-tampering"}
    assert imports[blast.blob_id(tree[b"pkg/mod.py"])] == ((0, "sys", ()),)
