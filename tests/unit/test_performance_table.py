"""docs/performance.md shows the real-world replay figures that were recorded.

`python -m benchmarks.realworld ... --record benchmarks/results/realworld-NAME.json`
writes a record; the page's table between the `realworld` markers must be exactly what
`--table` renders from the committed records, so a figure cannot drift from its source.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.realworld import table

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "performance.md"
START, END = "<!-- realworld:start -->", "<!-- realworld:end -->"


def _records() -> list[dict[str, object]]:
    paths = sorted((ROOT / "benchmarks" / "results").glob("realworld-*.json"))
    return [json.loads(p.read_text()) for p in paths]


def test_the_page_shows_the_recorded_realworld_figures() -> None:
    records = _records()
    assert records, "no benchmarks/results/realworld-*.json record is committed"
    text = PAGE.read_text()
    assert START in text, f"{PAGE.name} lacks the marker {START}"
    assert END in text, f"{PAGE.name} lacks the marker {END}"
    shown = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert shown == table(records), (
        "docs/performance.md disagrees with benchmarks/results; regenerate with "
        "python -m benchmarks.realworld --table benchmarks/results/realworld-*.json"
    )


def test_records_name_every_commit_they_summarize() -> None:
    for record in _records():
        runs = record["runs"]
        assert isinstance(runs, list)
        assert record["commits"] == len(runs) > 0
