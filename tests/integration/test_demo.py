"""`make demo` end to end (`gate.faces.demo.run_demo`, the README's first command) on the real
daemon: the honest pull request is PROVEN and its receipt verifies; the false-PASS
fixture and the weakened test are caught. Its build (`python3 -m compileall -q src`)
writes bytecode for the tree, which a check with a differential must allow."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gate import receipt
from gate.faces.demo import run_demo
from gate.model import Verdict


def test_the_demo_proves_the_honest_change_and_catches_the_other_two(
    tmp_path: Path, cleanroom_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    out = tmp_path / "demo"
    assert run_demo(out=out, image=cleanroom_image) == 0, caplog.text
    text = caplog.text
    assert "verdict PROVEN; receipt verified" in text
    assert "verdict FAILED (caught: each check saw a fresh copy)" in text
    assert "caught: the base's tests judge the change" in text
    statement = receipt.verify_statement(
        (out / "receipt.json").read_bytes(),
        [receipt.load_public_key((out / "demo.pub").read_bytes(), source="demo key")],
        require=Verdict.PROVEN,
    )
    assert statement["predicate"]["verdict"] == "PROVEN"  # type: ignore[index]
