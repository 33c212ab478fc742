"""Rendering receipts for people: verdict first, total on bad input, safe on hostile text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate import receipt
from gate.model import JsonDict, Verdict
from gate.render import TRUNCATION_NOTE, to_json, to_markdown
from tests.assets import sample

ASSETS = Path(__file__).parent.parent / "assets"
HOSTILE_TAIL = (
    "ok\n"
    "```\n"
    "</details>\n"
    "<script>alert(1)</script>\n"
    '<img src=x onerror="alert(2)">\n'
    "`````\n"
    "~~~\n"
    "\x1b[31mred\x1b[0m\r\n"
    "# not a heading\n"
    "1 failed\n"
)


def html_of(markdown: str) -> str:
    markdown_it = pytest.importorskip("markdown_it")
    return str(markdown_it.MarkdownIt("commonmark").enable("table").render(markdown))


def failed() -> JsonDict:
    return sample.predicate(
        verdict=Verdict.FAILED, reasons=sample.FAILED_REASONS, test_tail=HOSTILE_TAIL
    )


def test_verdict_comes_first() -> None:
    md = to_markdown(failed())
    assert md.startswith("# proofgate: FAILED\n\nA configured check failed.\n")
    assert md.index("## Reasons") < md.index("## What was proven") < md.index("## Checks")


def test_markdown_shows_what_was_proven_and_how() -> None:
    md = to_markdown(sample.predicate())
    for text in [
        sample.BASE_COMMIT,
        sample.HEAD_COMMIT,
        sample.HEAD_TREE,
        sample.PATCH_SHA256,
        "173 bytes, 1 files",
        "| `unit` | test | `python -m pytest -q` | 0 | 2.25 s | no | no |",
        "```mermaid\ngantt\n",
        "    test : 1800, 4050\n",
        "`budget-lines`",
        "Journal head `",
        "proofgate 0.1.0",
    ]:
        assert text in md


def test_reasons_show_code_and_message() -> None:
    md = to_markdown(failed())
    assert "- **check-failed** (check `unit`): \\`python -m pytest -q\\` exited 1" in md


def test_asset_markdown_matches_rendering_of_verified_receipt() -> None:
    pub = receipt.load_public_key((ASSETS / "keys" / "trusted.pub").read_bytes(), source="pub")
    st_ = receipt.verify_statement((ASSETS / "receipts" / "proven.json").read_bytes(), [pub])
    assert isinstance(st_["predicate"], dict)
    assert to_markdown(st_["predicate"]) == (ASSETS / "receipts" / "proven.md").read_text()


def test_hostile_log_tail_cannot_break_out_of_the_fence() -> None:
    md = to_markdown(failed())
    fence = re.search(r"^(`{6,})text$", md, re.M)
    assert fence is not None, "fence must be longer than the longest backtick run (5)"
    html = html_of(md)
    assert "<script>" not in html
    assert "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<details>") == html.count("</details>") == 1
    assert "<h1>not a heading</h1>" not in html
    assert "\x1b" not in md
    assert "\r" not in md
    assert "\\x1b[31mred" in md


def test_hostile_text_in_cells_and_summaries_is_escaped() -> None:
    p = failed()
    p["reasons"] = [{"code": "x</li><script>", "message": "a | b\n## injected [x](javascript:1)"}]
    p["policy"]["findings"][0]["path"] = "a|b`c`</summary>"  # type: ignore[index]
    p["checks"][0]["phases"][1]["commands"][0]["argv"] = ["sh", "-c", "</summary><b>x"]  # type: ignore[index]
    md = to_markdown(p)
    html = html_of(md)
    assert "<script>" not in html
    assert "<b>x" not in html
    assert "<h2>injected" not in html
    assert 'href="javascript' not in html
    assert html.count("</summary>") == 1
    findings = html.split("<th>Message</th>")[1].split("</table>")[0]
    assert findings.count("<td>") == 5  # the pipe in the path did not add a cell


def test_to_json_is_the_predicate() -> None:
    p = sample.predicate()
    assert json.loads(to_json(p)) == p


@pytest.mark.parametrize(
    "predicate",
    [
        {},
        {"verdict": "PROVEN"},
        {"verdict": 7, "checks": "x", "policy": []},
        {"reasons": [None, 1]},
    ],
    ids=["empty", "verdict-only", "wrong-types", "odd-reasons"],
)
def test_markdown_is_total_on_partial_predicates(predicate: JsonDict) -> None:
    md = to_markdown(predicate)
    assert md.startswith("# proofgate: ")
    assert "*unknown*" in md


def test_unknown_verdict_is_never_shown_as_proven() -> None:
    md = to_markdown({"verdict": "PROVEN<script>"})
    assert md.startswith("# proofgate: PROVEN&lt;script&gt;\n\nThis receipt has no recognised")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=25,
)


@given(
    field=st.sampled_from(
        [
            "verdict",
            "reasons",
            "base",
            "patch",
            "coverage",
            "policy",
            "approval",
            "checks",
            "journal",
            "tool",
        ]
    ),
    value=json_values,
)
@settings(max_examples=300)
def test_markdown_is_total_on_random_fields(field: str, value: object) -> None:
    p = sample.predicate()
    p[field] = value
    assert to_markdown(p, max_bytes=4096).startswith("# proofgate")


@given(st.dictionaries(st.text(max_size=10), json_values, max_size=8))
@settings(max_examples=200)
def test_markdown_is_total_on_random_predicates(p: JsonDict) -> None:
    assert isinstance(to_markdown(p), str)


MULTIBYTE_TAIL = "é✓😀 " * 3000 + "\nlast line 😀\n"


@pytest.mark.parametrize("limit", [600, 1500, 3000, 5000, 9000, 65535])
def test_max_bytes_counts_utf8_bytes(limit: int) -> None:
    p = sample.predicate(verdict=Verdict.FAILED, test_tail=MULTIBYTE_TAIL)
    full = to_markdown(p)
    assert len(full.encode()) > 20_000
    md = to_markdown(p, max_bytes=limit)
    assert len(md.encode("utf-8")) <= limit
    if len(full.encode()) > limit:
        assert md.endswith(TRUNCATION_NOTE)
        assert md.startswith("# proofgate: FAILED")


def test_truncated_log_keeps_its_end_inside_a_closed_fence() -> None:
    p = sample.predicate(verdict=Verdict.FAILED, test_tail=MULTIBYTE_TAIL)
    md = to_markdown(p, max_bytes=8000)
    assert "last line 😀" in md
    html = html_of(md)
    assert html.count("<details>") == html.count("</details>") == 1
    assert "This receipt was truncated to fit." in html.split("</pre>")[-1]


def test_max_bytes_smaller_than_the_note_still_holds() -> None:
    md = to_markdown(sample.predicate(), max_bytes=10)
    assert len(md.encode()) <= 10


def test_max_bytes_not_reached_leaves_the_receipt_whole() -> None:
    p = sample.predicate()
    assert to_markdown(p, max_bytes=65535) == to_markdown(p)
