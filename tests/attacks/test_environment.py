"""The trusted run's environment (SPEC §3.2): nothing the change runs during setup or
build may shape what the trusted test phase executes, unjudged.

Each attack breaks `calc.add` and, from code that the base's own build step imports,
changes the image outside /workspace so that the base's tests pass against the broken
code. The policy's pattern rules are all switched off, so what contains each attack is
the environment record: what setup and build changed, read from the Docker daemon with
the container frozen, against what the base's setup and build changed. Honest builds
beside them (`pip install -e .`, a build step that imports the package) stay PROVEN.
Real repositories, real Docker, the clean-room image.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.proof import runs as differential_runs
from tests.attacks.corpus import Built, Workspace, config, pr_repo, predicate_of, prove
from tests.attacks.environment import DROP_PTH, PATCH_PYTEST, STAMP
from tests.attacks.test_differential import (
    ALL_RULES_OFF,
    CALC2,
    CALC2_BROKEN,
    TESTS_CALC,
    _check,
    _codes,
    _detail,
    _tests_block,
)
from tests.gitutil import Content

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _base(
    build: str = ', build: "python3 tools/stamp_version.py"', **files: Content
) -> dict[bytes, Content]:
    tree: dict[bytes, Content] = {
        b".github/proofgate.yml": config(_check(build), policy=ALL_RULES_OFF),
        b"calc.py": CALC2,
        b"tests/test_calc.py": TESTS_CALC,
        b"tools/stamp_version.py": STAMP,
    }
    tree.update({k.encode(): v for k, v in files.items()})
    return tree


def _prove(
    tmp_path: Path, pr: dict[bytes, Content], base: dict[bytes, Content]
) -> tuple[str, dict[str, object], str]:
    ws = Workspace(tmp_path)
    _, path = pr_repo(ws, pr, base)
    seen = prove(ws, Built(repo=path), tmp_path / "out")
    assert not seen.problems, seen.problems
    pred = predicate_of((tmp_path / "out" / "receipt.json").read_bytes())
    return seen.outcome, pred, _detail(seen, pred)


def _changed(pred: dict[str, object]) -> dict[str, str]:
    rows = _tests_block(pred).get("environment_changed") or []
    assert isinstance(rows, list)
    return {str(r["path"]): str(r["why"]) for r in rows}


@pytest.mark.parametrize(
    ("payload", "path", "why"),
    [
        (PATCH_PYTEST, "/usr/lib/python3/dist-packages/_pytest/python.py", "file"),
        (DROP_PTH, "/usr/local/lib/python3.11/dist-packages/zz_quiet.pth", "file"),
    ],
    ids=["build-import-patches-the-images-pytest", "build-import-drops-a-pth-hook"],
)
def test_build_that_rewrites_the_judges_environment_is_held(
    payload: bytes, path: str, why: str, tmp_path: Path
) -> None:
    base = _base()
    outcome, pred, detail = _prove(tmp_path, {**base, b"calc.py": CALC2_BROKEN + payload}, base)
    # the broken add fails the base's test unless the payload swallowed the failure;
    # either way no PROVEN, and the environment change is named with its digest
    assert outcome in ("HELD", "FAILED"), detail
    assert "environment-changed" in _codes(pred), detail
    assert _changed(pred).get(path) == why, detail
    md = (tmp_path / "out" / "receipt.md").read_text()
    assert "Environment changed" in md
    assert path in md


def test_the_pth_attack_is_proven_without_the_environment_record(tmp_path: Path) -> None:
    """The negative control: the witness and the base's tests alone do not see it (the
    payload swallows the assertion before pytest reports it); only the record does."""
    base = _base()
    _, pred, detail = _prove(tmp_path, {**base, b"calc.py": CALC2_BROKEN + DROP_PTH}, base)
    assert _codes(pred) == {"environment-changed"}, detail
    assert pred["verdict"] == "HELD"


def test_an_honest_build_that_imports_the_package_is_proven(tmp_path: Path) -> None:
    base = _base()
    pr = {**base, b"calc.py": b"__version__ = '2'\n" + CALC2}
    outcome, pred, detail = _prove(tmp_path, pr, base)
    assert outcome == "PROVEN", detail
    assert "environment_changed" not in _tests_block(pred)


PYPROJECT = (
    b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
    b'[project]\nname = "calc"\nversion = "0.1"\n\n[tool.setuptools]\npy-modules = ["calc"]\n'
)
EDITABLE = (
    ', memory: 512m, setup: "pip install -q --no-index --no-deps --no-build-isolation '
    '--break-system-packages -e ."'
)


def test_an_editable_install_proves_itself(tmp_path: Path) -> None:
    """`pip install -e .` writes a startup hook in the base run and the trusted run
    alike: the same bytes, so nothing new; a broken change is still FAILED."""
    base = _base(EDITABLE, **{"pyproject.toml": PYPROJECT})
    outcome, pred, detail = _prove(tmp_path / "ok", {**base, b"calc.py": CALC2 + b"# ok\n"}, base)
    assert outcome == "PROVEN", detail
    outcome, pred, detail = _prove(tmp_path / "broken", {**base, b"calc.py": CALC2_BROKEN}, base)
    assert outcome == "FAILED", detail
    assert "regression" in _codes(pred)
    assert "environment-changed" not in _codes(pred), detail


def test_only_a_real_base_run_is_cached_as_a_base_run(tmp_path: Path) -> None:
    """A proof's head run is never kept as the base run of its tree: a later pull
    request against that tree runs the base's tests on it for real."""
    base = _base("")
    first = {**base, b"calc.py": CALC2 + b"\n\ndef mul(a, b):\n    return a * b\n"}
    ws = Workspace(tmp_path)
    _, path = pr_repo(ws, first, base)
    seen = prove(ws, Built(repo=path), tmp_path / "one")
    assert seen.outcome == "PROVEN", seen.log[-2000:]
    entries = [json.loads(e.read_bytes()) for e in differential_runs.cache_dir().glob("*.json")]
    assert len(entries) == 1  # the base tree's, not the proven tree's
    assert entries[0]["environment"] == {"changes": [], "complete": True}
    block = _tests_block(predicate_of((tmp_path / "one" / "receipt.json").read_bytes()))
    assert block["reused"] == {"trusted": "the head run"}


def test_a_change_of_tests_alone_has_the_base_run_for_its_trusted_run(tmp_path: Path) -> None:
    """The change edits a test file and nothing the tests run against: its trusted tree
    (the change's code, the base's tests and inputs) is the base tree, so the base run
    stands for it and no third container runs that tree again; the change's own tests
    still run, and fail the check where they fail."""
    base = _base("")
    more = TESTS_CALC + b"\n\ndef test_more():\n    assert add(2, 2) == 4\n"
    outcome, pred, detail = _prove(tmp_path / "ok", {**base, b"tests/test_calc.py": more}, base)
    assert outcome == "PROVEN", detail
    block = _tests_block(pred)
    assert block["reused"] == {"trusted": "the base run"}, detail
    wrong = TESTS_CALC + b"\n\ndef test_more():\n    assert add(2, 2) == 5\n"
    outcome, pred, detail = _prove(tmp_path / "bad", {**base, b"tests/test_calc.py": wrong}, base)
    assert outcome == "FAILED", detail


@pytest.mark.usefixtures("env_cache")
def test_setup_runs_once_per_proof_for_every_run_that_shares_its_inputs(
    tmp_path: Path,
) -> None:
    """One environment-cache key for the head, base and trusted runs: the same commands,
    image, inputs and environment, so setup runs once and the other runs reuse it."""
    setup = ', setup: "echo installed", setup_inputs: [req.txt]'
    base = _base(setup, **{"req.txt": b"nothing\n"})
    pr = {
        **base,
        b"calc.py": CALC2 + b"# ok\n",
        b"tests/test_more.py": b"def test_x():\n    pass\n",
    }
    outcome, pred, detail = _prove(tmp_path, pr, base)
    assert outcome == "PROVEN", detail
    events = pred["journal"]["events"]  # type: ignore[index]
    looked = [e["data"]["cache"] for e in events if e["kind"] == "environment-looked-up"]
    assert sorted(looked) == ["hit", "hit", "miss"], looked  # head, base, trusted
