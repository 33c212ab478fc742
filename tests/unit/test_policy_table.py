"""docs/policy.md shows the replay figures that were recorded (issue 29).

`python -m benchmarks.replay REPO... --label before|after --record
benchmarks/results/replay-LABEL.json` writes a record of every replayed commit; the
page's tables between the `replay` markers must be exactly what `--table` renders from
the committed records, so a figure cannot drift from its source.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.replay import summarize, table

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "policy.md"
RESULTS = ROOT / "benchmarks" / "results"
START, END = "<!-- replay:start -->", "<!-- replay:end -->"


def _record(label: str) -> dict[str, Any]:
    data = json.loads((RESULTS / f"replay-{label}.json").read_text())
    assert isinstance(data, dict)
    return data


def test_the_page_shows_the_recorded_replay_figures() -> None:
    text = PAGE.read_text()
    assert START in text, f"{PAGE.name} lacks the marker {START}"
    assert END in text, f"{PAGE.name} lacks the marker {END}"
    shown = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert shown == table(_record("before"), _record("after")), (
        "docs/policy.md disagrees with benchmarks/results; regenerate with python -m "
        "benchmarks.replay --table benchmarks/results/replay-before.json "
        "benchmarks/results/replay-after.json"
    )


def test_the_replay_covers_a_thousand_real_commits_of_five_projects() -> None:
    for label in ("before", "after"):
        record = _record(label)
        projects = record["records"]
        assert len(projects) >= 5
        assert sum(p["commits"] for p in projects) >= 1000
        for p in projects:
            assert p["commits"] == len(p["runs"]) > 0
            assert len({r["commit"] for r in p["runs"]}) == p["commits"]
    assert _record("after")["pins_verified"] is True


def test_honest_history_is_never_denied_and_no_project_is_held_more_than_before() -> None:
    before = summarize(_record("before")["records"])
    after = summarize(_record("after")["records"])
    assert after["total"].get("DENY", 0) == 0
    for name, row in after["projects"].items():
        assert row.get("HOLD", 0) <= before["projects"][name].get("HOLD", 0), name
