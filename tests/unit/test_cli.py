"""The command line's surface: --help for every subcommand, usage errors, docs sync."""

from __future__ import annotations

import argparse
import os
import re
import signal
import time
from pathlib import Path
from types import FrameType

import pytest

from gate.faces import cli
from gate.faces.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"
SUBCOMMANDS = [
    "prove",
    "policy",
    "aggregate",
    "verify",
    "show",
    "keygen",
    "approve",
    "demo",
    "apply",
    "cache",
]


def test_top_level_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_subcommand_help_works(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    assert f"proofgate {command}" in capsys.readouterr().out


def test_unknown_subcommand_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "proofgate: error:" in err
    assert "frobnicate" in err


def test_missing_required_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--base", "main"]) == 2
    assert "--head" in capsys.readouterr().err


def test_verify_without_receipt_or_github_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keygen", "--out", str(tmp_path)]) == 0
    assert main(["verify", "--key", str(tmp_path / "proofgate.pub")]) == 2
    assert "RECEIPT" in capsys.readouterr().err


def test_keygen_writes_private_key_0600_and_refuses_overwrite(tmp_path: Path) -> None:
    assert main(["keygen", "--out", str(tmp_path)]) == 0
    key = tmp_path / "proofgate.key"
    assert key.stat().st_mode & 0o777 == 0o600
    before = key.read_bytes()
    assert main(["keygen", "--out", str(tmp_path)]) == 2
    assert key.read_bytes() == before


def _section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    section = text[text.index(f"\n{heading}\n") :]
    end = section.find("\n## ", 1)
    return section if end < 0 else section[:end]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_cli_doc_documents_every_flag_of_every_subcommand() -> None:
    """--help and docs/cli.md agree: each option a subcommand accepts is documented."""
    text = CLI_DOC.read_text(encoding="utf-8")
    synopsis = _section(CLI_DOC, "## Synopsis")
    missing = []
    for name, sub in _subparsers().items():
        assert f"proofgate {name}" in synopsis, f"docs/cli.md's synopsis lacks `proofgate {name}`"
        for action in sub._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag not in ("--help", "--verbose"):
                    if not re.search(re.escape(flag) + r"\b", text):
                        missing.append(f"{name} {flag}")
    assert not missing, f"docs/cli.md does not mention: {missing}"


def test_readme_command_list_names_every_subcommand() -> None:
    block = _section(README, "## Command line")
    names = set(_subparsers())
    assert names == set(SUBCOMMANDS), "update SUBCOMMANDS with the parser"
    listed = set(re.findall(r"^proofgate (\S+)", block, re.M))
    assert listed == names, f"README's command list differs from the parser: {listed ^ names}"


def test_prove_out_that_is_a_file_exits_2_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "afile"
    target.write_text("keep me")
    code = main(
        ["prove", "--repo", str(tmp_path), "--base", "a", "--head", "b", "--out", str(target)]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--out" in err
    assert "Traceback" not in err
    assert target.read_text() == "keep me"


def test_keygen_out_that_is_a_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "afile"
    target.write_text("")
    assert main(["keygen", "--out", str(target)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_verify_of_a_missing_receipt_fails_with_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keygen", "--out", str(tmp_path)]) == 0
    code = main(["verify", str(tmp_path / "nope.json"), "--key", str(tmp_path / "proofgate.pub")])
    assert code == 1
    assert "verify failed" in capsys.readouterr().err


def test_verify_github_needs_owner_repo_and_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("PROOFGATE_GITHUB_TOKEN", raising=False)
    assert main(["keygen", "--out", str(tmp_path)]) == 0
    pub = str(tmp_path / "proofgate.pub")
    sha = "a" * 40
    assert main(["verify", "--github", "notarepo", "--commit", sha, "--key", pub]) == 2
    assert "OWNER/REPO" in capsys.readouterr().err
    assert main(["verify", "--github", "o/r", "--commit", sha, "--key", pub]) == 2
    assert "GITHUB_TOKEN" in capsys.readouterr().err


def test_approve_refuses_digests_that_are_not_sha256(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keygen", "--out", str(tmp_path)]) == 0
    code = main([
        "approve", "--key", str(tmp_path / "proofgate.key"), "--approver", "a",
        "--patch-sha256", "abc", "--policy-fingerprint", "f" * 64,
        "--out", str(tmp_path / "a.json"),
    ])  # fmt: skip
    assert code == 2
    assert "--patch-sha256" in capsys.readouterr().err
    assert not (tmp_path / "a.json").exists()


def test_policy_preflight_never_reads_as_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy` runs nothing: its JSON must not say PROVEN (SPEC §3 (5)-(7) unchecked)."""
    import json

    from tests.gitutil import commit, make_repo, repo_dir

    repo = make_repo(tmp_path)
    cfg = b"version: 1\nchecks: [{name: b, build: 'true'}]\n"
    base = commit(repo, {b".github/proofgate.yml": cfg, b"a": b"1"})
    commit(repo, {b"a": b"2"}, branch="pr", parent=base)
    path = str(repo_dir(repo))
    assert main(["policy", "--repo", path, "--base", "main", "--head", "pr", "--json"]) == 0
    predicate = json.loads(capsys.readouterr().out)
    assert predicate["verdict"] is None
    assert predicate["preflight"] is True
    assert predicate["checks"] == []


def test_sigterm_during_main_is_ctrl_c_and_the_callers_handler_is_back(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`main` itself makes SIGTERM (a CI system's cancel) a Ctrl-C, so the `proofgate`
    console script behaves as `python -m gate`; a caller's own handler is back afterwards
    (here the test's, which would otherwise have swallowed the signal)."""
    caught: list[int] = []

    def callers(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    def cancelled_show(args: argparse.Namespace) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2)  # a command still at work when the signal comes
        return 0

    monkeypatch.setattr(cli, "_cmd_show", cancelled_show)
    previous = signal.signal(signal.SIGTERM, callers)
    try:
        code = main(["show", str(tmp_path / "receipt.json")])
        after = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert code == 130
    assert "proofgate: interrupted; no verdict" in capsys.readouterr().err
    assert caught == []
    assert after is callers
