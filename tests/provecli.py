"""Helpers shared by the `proofgate prove` tests (tests/integration/test_prove.py with real
Docker, tests/unit/test_prove_orchestration.py with the Sandbox stand-in)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pygit2

from gate.faces.cli import main
from tests.gitutil import commit, make_repo, repo_dir

IMAGE = "proofgate/cleanroom:latest"


def config_yaml(checks: str, policy: str = "") -> bytes:
    """A `.github/proofgate.yml` for the clean-room image with small limits."""
    return (
        f"version: 1\nimage: {IMAGE}\ndefaults: {{timeout: 60, memory: 256m, pids: 64}}\n"
        f"checks:\n{checks}{policy}"
    ).encode()


def pr_repo(
    tmp_path: Path, base: dict[bytes, object], head: dict[bytes, object]
) -> tuple[pygit2.Repository, Path]:
    """A repository with `base` committed on main and `head` on branch `pr` on top of it."""
    repo = make_repo(tmp_path)
    base_id = commit(repo, base, message="base")  # type: ignore[arg-type]
    commit(repo, head, branch="pr", parent=base_id, message="pr")  # type: ignore[arg-type]
    return repo, repo_dir(repo)


def cli_prove(path: Path, out: Path, *extra: str) -> int:
    """`proofgate prove --base main --head pr --out OUT`; the exit code."""
    return main(
        ["prove", "--repo", str(path), "--base", "main", "--head", "pr", "--out", str(out), *extra]
    )


def receipt_predicate(out: Path) -> dict[str, object]:
    """The predicate of OUT/receipt.json (not verified: callers verify separately)."""
    envelope = json.loads((out / "receipt.json").read_bytes())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    return statement["predicate"]  # type: ignore[no-any-return]
