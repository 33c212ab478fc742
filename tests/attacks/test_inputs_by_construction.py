"""What the base's tests depend on comes from the base, by construction (SPEC §3.2).

Every attack breaks `calc.add` and rewrites the expected value the base's test checks it
against, kept outside the trusted test files and read by a route a reads hook misses: a
subprocess, `sqlite3`, a relative or `..` path, an initial conftest, after the 2,000th
read, a module only the tests import. The trusted run takes every such file from the
base because it is not code (gate/differential/inputs.py), so the base's test fails with
the base's expectation and the change, which edits it, is HELD `test-input-changed`.
Beside them, honest changes to such files prove themselves when the base's tests pass
with the base's copies. The policy's pattern rules are off. Real repositories, real
Docker.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.attacks.test_differential import (
    CALC2,
    CALC2_BROKEN,
    _base,
    _codes,
    _detail,
    _run,
    _tests_block,
)
from tests.gitutil import Content

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HEAD = b"import os\nimport subprocess\nimport sys\n\nfrom calc import add, sub\n\n\n"
SUB = b"\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"


def _db(value: int) -> bytes:
    path = Path(f"/tmp/proofgate-inputs-{value}.db")  # noqa: S108 - a scratch file of the test
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("create table cases (a, b, c)")
        db.execute("insert into cases values (2, 3, ?)", (value,))
    data = path.read_bytes()
    path.unlink()
    return data


ROUTES: dict[str, tuple[bytes, dict[str, tuple[Content, Content]]]] = {
    # name: (the base's test, {path: (the base's copy, the attacker's)})
    "subprocess": (
        b"def test_add():\n"
        b"    out = subprocess.run(['cat', 'golden/add.txt'], capture_output=True).stdout\n"
        b"    assert add(2, 3) == int(out)\n",
        {"golden/add.txt": (b"5\n", b"-1\n")},
    ),
    "sqlite": (
        b"def test_add():\n    import sqlite3\n\n"
        b"    row = sqlite3.connect('golden/cases.db').execute('select * from cases').fetchone()\n"
        b"    assert add(row[0], row[1]) == row[2]\n",
        {"golden/cases.db": (_db(5), _db(-1))},
    ),
    "relative-path": (
        b"def test_add():\n    assert add(2, 3) == int(open('golden/add.txt').read())\n",
        {"golden/add.txt": (b"5\n", b"-1\n")},
    ),
    "dot-dot-path": (
        b"def test_add():\n"
        b"    here = os.path.dirname(__file__)\n"
        b"    path = os.path.join(here, '..', 'tests', '..', 'golden', 'add.txt')\n"
        b"    assert add(2, 3) == int(open(path).read())\n",
        {"golden/add.txt": (b"5\n", b"-1\n")},
    ),
    "initial-conftest": (
        b"def test_add(expected):\n    assert add(2, 3) == expected\n",
        {
            "golden/add.txt": (b"5\n", b"-1\n"),
            "tests/conftest.py": (
                b"import pytest\n\nEXPECTED = int(open('golden/add.txt').read())\n\n\n"
                b"@pytest.fixture\ndef expected():\n    return EXPECTED\n",
            )
            * 2,
        },
    ),
    "after-2000-reads": (
        b"def test_add(tmp_path):\n"
        b"    os.makedirs('noise', exist_ok=True)\n"
        b"    for i in range(2100):\n"
        b"        path = f'noise/{i}.txt'\n"
        b"        open(path, 'w').write('x')\n"
        b"        open(path).read()\n"
        b"    assert add(2, 3) == int(open('golden/add.txt').read())\n",
        {"golden/add.txt": (b"5\n", b"-1\n")},
    ),
    "module-only-the-tests-import": (
        b"def test_add():\n    from expected import ADD\n\n    assert add(2, 3) == ADD\n",
        {
            "expected.py": (
                b'"""What add gives."""\nADD = 5\n',
                b'"""What add gives."""\nADD = -1\n',
            )
        },
    ),
}


def _trees(route: str) -> tuple[dict[bytes, Content], dict[bytes, Content]]:
    test, files = ROUTES[route]
    base = _base(**{"tests/test_calc.py": HEAD + test + SUB})
    base.update({k.encode(): v[0] for k, v in files.items()})
    pr = {**base, b"calc.py": CALC2_BROKEN, **{k.encode(): v[1] for k, v in files.items()}}
    return base, pr


@pytest.mark.parametrize("route", sorted(ROUTES), ids=sorted(ROUTES))
def test_expected_values_bent_with_the_code_are_held_whatever_the_route(
    route: str, tmp_path: Path
) -> None:
    base, pr = _trees(route)
    seen, pred = _run(tmp_path, pr, base)
    detail = _detail(seen, pred)
    assert seen.outcome == "HELD", detail
    assert _codes(pred) == {"test-input-changed"}, detail
    block = _tests_block(pred)
    assert block["test_inputs_failed"] == ["tests.test_calc::test_add"], detail


def test_negative_control_the_base_reads_them_fine(tmp_path: Path) -> None:
    """Each route works: on the base, with the base's copies, every base test passes
    (so the HOLDs above are the bent expectations failing, not a broken route)."""
    for route in sorted(ROUTES):
        base, _ = _trees(route)
        honest = {**base, b"calc.py": CALC2 + b"# " + route.encode() + b"\n"}
        seen, pred = _run(tmp_path / route, honest, base)
        assert seen.outcome == "PROVEN", (route, _detail(seen, pred))


def test_a_golden_file_for_new_code_proves_itself(tmp_path: Path) -> None:
    base, _ = _trees("relative-path")
    pr = {
        **base,
        b"calc.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n",
        b"golden/mul.txt": b"6\n",  # new: the base has none, so it is the change's
        b"tests/test_mul.py": (
            b"from calc import mul\n\n\ndef test_mul():\n"
            b"    assert mul(2, 3) == int(open('golden/mul.txt').read())\n"
        ),
        b"golden/add.txt": b"5\n\n",  # an edit the base's test passes with
    }
    seen, pred = _run(tmp_path, pr, base)
    assert seen.outcome == "PROVEN", _detail(seen, pred)
    assert _tests_block(pred)["test_inputs_changed"] == ["golden/add.txt"]
