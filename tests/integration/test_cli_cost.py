"""What a CLI process pays for that it does not use (issue 31).

A user runs `proofgate` as a new process per proof. `policy`, `verify` and `show` run no
container, so they never import the Docker SDK nor the sandbox; `python -X importtime`
of the real entry point (`python -m gate ...`) lists every module the process loaded.
The blast radius's per-file analysis is cached by git blob id in the per-user cache: a
repeated proof of the same tree parses nothing for the import graph, a changed tree only
what changed; the changed files are parsed once each, for every rule (issue 46).
The timings themselves are benchmarks (benchmarks/cli_process.py), not tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from gate.faces.cli import main
from gate.policy import blast, scan
from tests.gitutil import commit, make_repo, repo_dir

ROOT = Path(__file__).resolve().parents[2]
RECEIPT = ROOT / "tests" / "assets" / "receipts" / "proven.json"
PUB = ROOT / "tests" / "assets" / "keys" / "trusted.pub"
CONFIG = b'version: 1\nimage: python:3.12-slim\nchecks:\n  - {name: unit, test: "true"}\n'
# What only a check that runs needs: the Docker SDK (and its HTTP stack) and the sandbox.
NOT_WITHOUT_A_CHECK = ("docker", "requests", "urllib3", "gate.sandbox", "gate.proof.runs")


def _repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path)
    files: dict[bytes, object] = {b".github/proofgate.yml": CONFIG}
    files |= {b"pkg/__init__.py": b"", b"pkg/core.py": b"import os\n"}
    files |= {f"pkg/m{i}.py".encode(): b"from pkg import core  # %d\n" % i for i in range(20)}
    base = commit(repo, files, message="base")  # type: ignore[arg-type]
    commit(repo, {b"pkg/core.py": b"import sys\n"}, branch="pr", parent=base, message="pr")
    return repo_dir(repo)


def _imported(argv: list[str], cwd: Path, cache: Path) -> tuple[int, set[str]]:
    """Exit code and every module `python -X importtime -m gate ARGV` imported."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gate", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "gate.faces.cli" in names, done.stderr[-2000:]  # the listing is what it claims
    return done.returncode, names


def _forbidden(names: set[str]) -> list[str]:
    return sorted(n for n in names for p in NOT_WITHOUT_A_CHECK if n == p or n.startswith(p + "."))


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["policy", "--base", "main", "--head", "pr"], id="policy"),
        pytest.param(["verify", str(RECEIPT), "--key", str(PUB)], id="verify"),
        pytest.param(["show", str(RECEIPT), "--key", str(PUB)], id="show"),
    ],
)
def test_commands_without_a_check_never_import_docker_or_the_sandbox(
    tmp_path: Path, argv: list[str]
) -> None:
    repo = _repo(tmp_path)
    code, names = _imported(argv, repo, tmp_path / "cache")
    assert code == 0
    assert _forbidden(names) == []


def test_prove_does_import_them_so_the_listing_can_fail(tmp_path: Path) -> None:
    # the same listing of a `prove` that reaches its check shows what the others avoid;
    # with no daemon or image the check is INCONCLUSIVE, but the sandbox was loaded
    repo = _repo(tmp_path)
    _, names = _imported(["prove", "--base", "main", "--head", "pr"], repo, tmp_path / "cache")
    assert "docker" in names
    assert "gate.sandbox.docker" in names


def test_a_repeated_proof_of_the_same_tree_parses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    argv = ["policy", "--repo", str(repo), "--base", "main", "--head", "pr", "--json"]

    scanned = _count_scans(monkeypatch)

    def parses() -> int:
        # a new process starts with an empty in-memory cache: so does each run here
        blast._parse_imports.cache_clear()
        assert main(argv) == 0
        return blast._parse_imports.cache_info().misses

    first, first_out = parses(), capsys.readouterr().out
    # pkg/__init__.py, m0..m19 for the import graph; core.py, the changed file, once for
    # every rule that reads it (gate/policy/scan.py): every module, once
    assert (first, scanned) == (21, [b"import sys\n"])
    again, again_out = parses(), capsys.readouterr().out
    assert again == 0  # the import graph parses nothing; the change's own rules read core.py
    # the receipt does not depend on where the imports came from
    graph = _blast(first_out)
    assert graph == _blast(again_out)
    assert graph["future"]["analyzers"][0]["direct_importers_count"] == 20  # type: ignore[index]


def test_a_changed_tree_parses_only_its_new_blobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_path = _repo(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    argv = ["policy", "--repo", str(repo_path), "--base", "main", "--head", "pr"]
    assert main(argv) == 0
    repo = pygit2.Repository(str(repo_path))
    pr = repo.branches["pr"].target
    commit(repo, {b"pkg/m3.py": b"import json\n"}, branch="pr", parent=str(pr), message="more")
    blast._parse_imports.cache_clear()
    scanned = _count_scans(monkeypatch)
    assert main(argv) == 0
    # only the changed files are parsed (core.py and m3.py, both changed from main)
    assert blast._parse_imports.cache_info().misses == 0
    assert sorted(scanned) == [b"import json\n", b"import sys\n"]
    capsys.readouterr()


def _count_scans(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The sources gate/policy/scan.py parses from now on (each changed Python file)."""
    seen: list[bytes] = []

    def parse(source: bytes) -> object:
        seen.append(source)
        return blast.parse_python(source)

    monkeypatch.setattr(scan, "parse_python", parse)
    return seen


def test_an_unreadable_cache_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    argv = ["policy", "--repo", str(repo), "--base", "main", "--head", "pr", "--json"]
    assert main(argv) == 0
    good = capsys.readouterr().out
    index = cache / "proofgate" / "analyses" / f"imports-v{blast.IMPORTS_VERSION}.json"
    assert index.is_file()
    for junk in (b"{not json", b'{"x": [[1, 2]]}', b"[]"):
        index.write_bytes(junk)
        blast._parse_imports.cache_clear()
        assert main(argv) == 0
        assert _blast(capsys.readouterr().out) == _blast(good)
        assert blast._parse_imports.cache_info().misses == 21  # and core.py, scanned


def _blast(out: str) -> dict[str, object]:
    found = json.loads(out)["policy"]["blast_radius"]
    assert isinstance(found, dict)
    return found


def test_a_configuration_seen_valid_is_neither_parsed_nor_schema_checked_again(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    argv = ["policy", "--base", "main", "--head", "pr"]
    code, first = _imported(argv, repo, tmp_path / "cache")
    assert code == 0
    assert "jsonschema" in first
    code, again = _imported(argv, repo, tmp_path / "cache")
    assert code == 0
    assert "jsonschema" not in again  # the second process skips the import, not the check
    assert "yaml" not in again


def test_an_invalid_configuration_is_never_remembered(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_bytes(CONFIG.replace(b"checks:", b"chekcs:"))
    repo = _repo(tmp_path)
    argv = ["policy", "--base", "main", "--head", "pr", "--config", str(bad)]
    for _ in range(2):
        code, names = _imported(argv, repo, tmp_path / "cache")
        assert code == 2
        assert "jsonschema" in names
