"""Every policy feature reaches `proofgate prove` / `proofgate policy` (issue 16).

Each case builds a real repository and goes through `gate.faces.cli.main`: the pre-flight
(`policy`, exit 0 ALLOW / 11 HOLD / 12 DENY / 13 evidence incomplete) runs the same
evidence, configuration and policy path as `prove` and needs no Docker.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from gate.faces.cli import main
from tests.gitutil import Symlink, commit, make_repo, repo_dir

CONFIG = b'version: 1\nimage: python:3.12-slim\nchecks:\n  - {name: unit, test: "true"}\n'


def _repo(tmp_path: Path, base: dict[bytes, object], head: dict[bytes, object]) -> Path:
    repo = make_repo(tmp_path)
    base_id = commit(repo, base, message="base")  # type: ignore[arg-type]
    commit(repo, head, branch="pr", parent=base_id, message="pr")  # type: ignore[arg-type]
    return repo_dir(repo)


def _policy(
    path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    code = main(["policy", "--repo", str(path), "--base", "main", "--head", "pr", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def _findings(predicate: dict[str, object]) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for f in predicate["policy"]["findings"]:  # type: ignore[index]
        out.setdefault(f["rule"], []).append(f)
    return out


def test_thresholds_reach_the_policy_and_its_fingerprint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = {b"src/a.py": b"x = 1\n"}
    plain = _repo(tmp_path / "plain", {b".github/proofgate.yml": CONFIG}, head)
    strict_cfg = CONFIG + b"policy:\n  thresholds: {immediate: 1}\n"
    strict = _repo(tmp_path / "strict", {b".github/proofgate.yml": strict_cfg}, head)
    code_plain, p_plain = _policy(plain, capsys)
    code_strict, p_strict = _policy(strict, capsys)
    assert code_plain == 0
    assert code_strict == 11
    assert "blast-radius-immediate" in _findings(p_strict)
    pol = p_strict["policy"]
    assert pol["blast_radius"]["thresholds"] == {"immediate": 1, "future": None}  # type: ignore[index]
    assert pol["fingerprint"] != p_plain["policy"]["fingerprint"]  # type: ignore[index]


def test_the_proven_trees_files_reach_the_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a line of [tool.black] far below its header: only the tree tells its section
    pyproject = b"[tool.black]\n" + b"".join(b"k%d = %d\n" % (i, i) for i in range(20))
    path = _repo(
        tmp_path,
        {b".github/proofgate.yml": CONFIG, b"pyproject.toml": pyproject, b"pkg/__init__.py": b""},
        {
            b"pyproject.toml": pyproject.replace(b"k15 = 15", b"k15 = 16"),
            b"pkg/__init__.py": b"from pkg import mod\n",
            b"pkg/mod.py": b"import pkg\n",
        },
    )
    code, predicate = _policy(path, capsys)
    found = _findings(predicate)
    assert "build-hook-changed" not in found, found
    assert "dependency-changed" not in found, found
    graph = predicate["policy"]["blast_radius"]["future"]["analyzers"][0]  # type: ignore[index]
    assert graph["name"] == "import-graph"
    assert graph["ran"] is True
    assert code == 0


def test_config_the_patch_changes_is_untrusted_through_config_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loose = CONFIG + b"policy:\n  rules: {ci-workflow-changed: allow}\n"
    path = _repo(tmp_path, {b".github/proofgate.yml": CONFIG}, {b".github/proofgate.yml": loose})
    inside = path / ".github" / "proofgate.yml"  # the work tree's copy: the patch's own rules
    inside.parent.mkdir(parents=True)
    inside.write_bytes(loose)
    code, predicate = _policy(path, capsys, "--config", str(inside))
    assert code == 13
    assert "untrusted-config" in [r["code"] for r in predicate["reasons"]]  # type: ignore[union-attr]
    outside = tmp_path / "reviewed.yml"  # the operator's own copy
    outside.write_bytes(loose)
    code, predicate = _policy(path, capsys, "--config", str(outside))
    assert "untrusted-config" not in [r["code"] for r in predicate["reasons"]]  # type: ignore[union-attr]
    assert code == 11  # gate-config-changed


@pytest.mark.docker
def test_prove_with_a_config_the_patch_changes_runs_nothing(tmp_path: Path) -> None:
    rewritten = CONFIG + b"# rewritten by the pull request\n"
    path = _repo(
        tmp_path, {b".github/proofgate.yml": CONFIG}, {b".github/proofgate.yml": rewritten}
    )
    inside = path / ".github" / "proofgate.yml"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(rewritten)
    out = tmp_path / "out"
    code = main(
        ["prove", "--repo", str(path), "--base", "main", "--head", "pr", "--out", str(out),
         "--config", str(inside)]
    )  # fmt: skip
    envelope = json.loads((out / "receipt.json").read_bytes())
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert code == 13
    assert predicate["verdict"] == "INCONCLUSIVE"
    assert "untrusted-config" in [r["code"] for r in predicate["reasons"]]
    assert predicate["checks"] == []


_BODY = b"MIIEowIBAAKCAQEAq3Jx0m1y2kX6rQ3v8p0bZ9Yh5vQ2q0y7mN4Lx8J2sT6c1pW0\n"
_KEY = b"-----BEGIN RSA PRIVATE KEY-----\n" + _BODY * 4 + b"-----END RSA PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    "content", [_KEY + b"\0", b"\0\x01" + _KEY], ids=["nul-after", "nul-before"]
)
def test_private_key_made_binary_by_a_nul_byte_is_blocked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = _repo(tmp_path, {b".github/proofgate.yml": CONFIG}, {b"deploy/id_rsa": content})
    code, predicate = _policy(path, capsys)
    inventory = {e["path"]: e for e in predicate["inventory"]}  # type: ignore[union-attr]
    assert inventory["deploy/id_rsa"]["binary"] is True
    assert code == 12
    assert _findings(predicate)["private-key"][0]["path"] == "deploy/id_rsa"


_SYMLINKS = [
    pytest.param(
        {b"a/keep": b""},
        {b"a/b": Symlink(b".."), b"up": Symlink(b"a/b/..")},
        ["a/b", "up"],  # every link of the chain
        id="chain-added",
    ),
    pytest.param(
        # `up -> a/b/..` was harmless while a/b was a directory; the patch adds `a/b -> ..`
        {b"a/b/keep": b"", b"up": Symlink(b"a/b/..")},
        {b"a/b/keep": None, b"a/b": Symlink(b"..")},
        ["a/b"],
        id="chain-completed",
    ),
    pytest.param(
        {b"a/c/keep": b""},
        {b"a/b": Symlink(b"c"), b"in": Symlink(b"a/b/..")},
        [],
        id="chain-inside",
    ),
    pytest.param(
        {}, {b"loop": Symlink(b"loop2"), b"loop2": Symlink(b"loop")}, ["loop", "loop2"], id="loop"
    ),
]


@pytest.mark.parametrize(("base", "head", "held"), _SYMLINKS)
def test_symlink_chains_are_resolved_against_the_whole_tree(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base: dict[bytes, object],
    head: dict[bytes, object],
    held: list[str],
) -> None:
    path = _repo(tmp_path, {b".github/proofgate.yml": CONFIG, **base}, head)
    code, predicate = _policy(path, capsys)
    escapes = _findings(predicate).get("symlink-escapes", [])
    assert [f["path"] for f in escapes] == held
    assert code == (11 if held else 0)


_IS = "looping symlink: its target is a symlink loop: "
_LOOPS = {
    "two-links": (
        {},
        {b"a": Symlink(b"b"), b"b": Symlink(b"a")},
        {"a": f"{_IS}a -> b -> a", "b": f"{_IS}b -> a -> b"},
    ),
    "self": ({}, {b"a": Symlink(b"a")}, {"a": f"{_IS}a -> a"}),
    "in-a-directory": ({b"d/x": b""}, {b"d/loop": Symlink(b"../d/loop")}, {
        "d/loop": f"{_IS}d/loop -> d/loop",
    }),
    "directory-links-cycle": (
        {},
        {b"p": Symlink(b"q/c"), b"q": Symlink(b"p")},
        {"p": f"{_IS}p -> q -> p", "q": f"{_IS}q -> p -> q"},
    ),
    "into-a-loop-of-the-base": (
        {b"a": Symlink(b"b"), b"b": Symlink(b"a")},
        {b"c": Symlink(b"a")},
        {"c": "looping symlink: its target leads into a symlink loop: c -> a -> b -> a"},
    ),
    "redirected-through-into-a-loop": (
        # x -> ok/c resolved to e/c; the patch points ok at d, whose c loops
        {b"d/c": Symlink(b"c"), b"e/c": b"", b"ok": Symlink(b"e"), b"x": Symlink(b"ok/c")},
        {b"ok": Symlink(b"d")},
        {
            "ok": "looping symlink: the resolution of x passes through it into a symlink "
            "loop: x -> d/c -> d/c"
        },
    ),
}  # fmt: skip


@pytest.mark.parametrize(("base", "head", "held"), _LOOPS.values(), ids=_LOOPS.keys())
def test_symlink_loops_are_held_saying_they_loop(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base: dict[bytes, object],
    head: dict[bytes, object],
    held: dict[str, str],
) -> None:
    """A loop does not leave the repository and is not said to: HELD, its chain named
    (issue 46; it used to read "its target lies outside the repository")."""
    path = _repo(tmp_path, {b".github/proofgate.yml": CONFIG, **base}, head)
    code, predicate = _policy(path, capsys)
    assert code == 11
    findings = _findings(predicate)["symlink-escapes"]
    assert {f["path"]: f["message"] for f in findings} == held
    assert {f["decision"] for f in findings} == {"HOLD"}
    inventory = {e["path"]: e for e in predicate["inventory"]}  # type: ignore[union-attr]
    for link in held:
        assert inventory[link]["symlink_escapes"] is False
        assert inventory[link]["symlink_loop"] == held[link].rpartition(": ")[2].split(" -> ")


_TESTS = (
    b"import pytest\n\n\ndef test_a():\n    assert 1\n\n\n"
    b"class TestB:\n    def test_c(self):\n        pass\n"
)
_SKIPS = [
    pytest.param(
        b"from pytest import skip\n" + _TESTS.replace(b"    assert 1", b"    skip('later')"),
        "pytest.skip on test_a",
        id="from-pytest-import-skip",
    ),
    pytest.param(
        _TESTS.replace(b"import pytest\n", b"import pytest as pt\n").replace(
            b"def test_a", b"@pt.mark.xfail\ndef test_a"
        ),
        "pytest.mark.xfail on test_a",
        id="import-pytest-as-pt",
    ),
    pytest.param(
        _TESTS.replace(
            b"import pytest\n", b"import pytest\n\nslow = pytest.mark.skip('x')\n"
        ).replace(b"def test_a", b"@slow\ndef test_a"),
        "pytest.mark.skip on test_a",
        id="named-marker-object",
    ),
    pytest.param(
        _TESTS.replace(b"    assert 1", b"    raise pytest.skip.Exception('x')"),
        "pytest.skip.Exception on test_a",
        id="raise-skip-exception",
    ),
    pytest.param(
        b"import unittest\n"
        + _TESTS.replace(b"        pass", b"        raise unittest.SkipTest('x')"),
        "unittest.SkipTest on TestB.test_c",
        id="raise-unittest-skiptest",
    ),
    pytest.param(
        _TESTS + b"\npytestmark: list[object] = [pytest.mark.skip]\n",
        "pytest.mark.skip on every test of the module",
        id="module-level-annotated-pytestmark",
    ),
]


def _skip_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: bytes, head: bytes
) -> tuple[int, list[object]]:
    """Pre-flight of a change of tests/test_x.py: exit code, tests-skipped messages."""
    path = _repo(
        tmp_path,
        {b".github/proofgate.yml": CONFIG, b"tests/test_x.py": base},
        {b"tests/test_x.py": head},
    )
    code, predicate = _policy(path, capsys)
    return code, [f["message"] for f in _findings(predicate).get("tests-skipped", [])]


@pytest.mark.parametrize(("head", "message"), _SKIPS)
def test_skips_in_any_spelling_are_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], head: bytes, message: str
) -> None:
    code, skipped = _skip_findings(tmp_path, capsys, _TESTS, head)
    assert skipped == [f"existing test newly skipped ({message})"]
    assert code == 11


_SKIPPED_A = _TESTS.replace(b"def test_a", b"@pytest.mark.skipif(WIN, reason='x')\ndef test_a")


@pytest.mark.parametrize(
    "head",
    [
        _SKIPPED_A + b"\n\n@pytest.mark.skip('posix')\ndef test_new():\n    pass\n",
        _SKIPPED_A.replace(b"import pytest\n", b"import pytest as pt\n").replace(
            b"@pytest.mark", b"@pt.mark"
        ),
        _SKIPPED_A.replace(b"skipif(WIN, reason='x')", b"skipif(\n    IS_WINDOWS, reason='y'\n)"),
    ],
    ids=["new-test-skipped", "alias-only", "condition-rewritten"],
)
def test_changes_that_skip_no_existing_test_are_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], head: bytes
) -> None:
    code, skipped = _skip_findings(tmp_path, capsys, _SKIPPED_A, head)
    assert skipped == []
    assert code == 0


_ROUTES = [
    pytest.param(
        {b"calc/__pycache__/calc.cpython-312.pyc": b"\xcb\r\r\n\0\0\0\0" + b"\0" * 16},
        "compiled-code-added",
        id="committed-pyc",
    ),
    pytest.param(
        {b"evil-1.0.dist-info/entry_points.txt": b"[pytest11]\nevil = evil_plugin\n"},
        "plugin-metadata-added",
        id="dist-info-at-root",
    ),
    pytest.param(
        {b"tests/test_y.py": b"pytest_plugins = ['evil_plugin']\n\n\ndef test_y():\n    pass\n"},
        "test-plugin-added",
        id="pytest-plugins-in-test-module",
    ),
    pytest.param(
        {b"pytest.ini": b"[pytest]\naddopts = -p evil_plugin\n"},
        "test-plugin-added",
        id="p-option",
    ),
]


@pytest.mark.parametrize(("head", "rule"), _ROUTES)
def test_code_routes_into_the_test_run_are_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], head: dict[bytes, object], rule: str
) -> None:
    path = _repo(tmp_path, {b".github/proofgate.yml": CONFIG, b"calc/calc.py": b"x = 1\n"}, head)
    code, predicate = _policy(path, capsys)
    found = _findings(predicate)
    assert rule in found, found
    assert "binary-added" not in found
    assert code == 11


_OLD_PIN = "11bd71901bbe5b1630ceea73d27597364c9af683"
_NEW_PIN = "08eba0b27e820071cde6df949e0beb9ba4906955"
_WORKFLOW = (
    "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
    "      - uses: actions/checkout@{} # {}\n      - run: make test\n"
)
_PRECOMMIT = (
    "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n"
    "    rev: {}\n    hooks:\n      - id: ruff\n"
)


@pytest.mark.parametrize(
    ("path", "old", "new", "rule", "message"),
    [
        pytest.param(
            ".github/workflows/ci.yml",
            _WORKFLOW.format(_OLD_PIN, "v4.2.2"),
            _WORKFLOW.format(_NEW_PIN, "v4.3.0"),
            "ci-workflow-changed",
            ".github/workflows/ci.yml, line 3: modified (jobs touched: t): pins moved: "
            "actions/checkout "
            "11bd71...(v4.2.2) → 08eba0...(v4.3.0); nothing else changed; not verified: "
            "tag look-ups need the GitHub API: the Action has it; a local run has it with "
            "GITHUB_TOKEN or GH_TOKEN set",
            id="action-bump-in-a-job-that-reaches-nothing",
        ),
    ],
)
def test_pin_bumps_say_exactly_what_moved(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    path: str,
    old: str,
    new: str,
    rule: str,
    message: str,
) -> None:
    repo = _repo(
        tmp_path,
        {b".github/proofgate.yml": CONFIG, path.encode(): old.encode()},
        {path.encode(): new.encode()},
    )
    code, predicate = _policy(repo, capsys)
    assert [f["message"] for f in _findings(predicate)[rule]] == [message]
    # SPEC §2.1: another SHA of an action the base uses, in a job that reaches nothing,
    # is allowed and recorded, verified or not
    assert code == 0
