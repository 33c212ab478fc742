"""docs/performance.md shows the real-world replay and whole-process figures that were recorded.

`python -m benchmarks.realworld ... --record benchmarks/results/realworld-NAME.json`
writes a record; the page's table between the `realworld` markers must be exactly what
`--table` renders from the committed records, so a figure cannot drift from its source.
Likewise `python -m benchmarks.cli_process ... --record benchmarks/results/process-NAME.json`
and the table between the `process` markers.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.cli_process import table as process_table
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


PROCESS_START, PROCESS_END = "<!-- process:start -->", "<!-- process:end -->"


def _process_records() -> list[dict[str, object]]:
    paths = sorted((ROOT / "benchmarks" / "results").glob("process-*.json"))
    return [json.loads(p.read_text()) for p in paths]


def test_the_page_shows_the_recorded_whole_process_figures() -> None:
    records = _process_records()
    assert records, "no benchmarks/results/process-*.json record is committed"
    text = PAGE.read_text()
    assert PROCESS_START in text, f"{PAGE.name} lacks the marker {PROCESS_START}"
    assert PROCESS_END in text, f"{PAGE.name} lacks the marker {PROCESS_END}"
    shown = text.split(PROCESS_START, 1)[1].split(PROCESS_END, 1)[0].strip()
    assert shown == process_table(records), (
        "docs/performance.md disagrees with benchmarks/results; regenerate with "
        "python -m benchmarks.cli_process --table benchmarks/results/process-*.json"
    )
    for record in records:
        scenarios = record["scenarios"]
        assert isinstance(scenarios, list)
        assert scenarios
        for s in scenarios:
            assert s["runs"] == len(s["proofgate_s"]) == len(s["peer_s"]) >= 5
