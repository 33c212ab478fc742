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
from gate.receipt.render import TRUNCATION_NOTE, title, to_json, to_markdown
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
    assert md.index("## Reasons") < md.index("## Checks at a glance") < md.index("## What was")
    assert md.index("## What was proven") < md.index("## Checks\n")


def test_markdown_shows_what_was_proven_and_how() -> None:
    md = to_markdown(sample.predicate())
    for text in [
        sample.BASE_COMMIT,
        sample.HEAD_COMMIT,
        sample.HEAD_TREE,
        sample.PATCH_SHA256,
        "173 bytes, 1 files",
        "| `unit` | test | `python -m pytest -q` | 0 | 2.25 s | no | no |",
        "- `unit`: build 0.2–1.7 s → test 1.8–4.0 s (4.0 s)\n",
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


def test_title_names_the_reason_that_sets_the_verdict_and_its_tests() -> None:
    """A failing test beside a protected path: the title is about the test, not the HOLD."""
    p = failed()
    hold = {"code": "policy-hold", "message": "policy wants a person to approve: ops"}
    p["reasons"] = [hold, *p["reasons"]]  # type: ignore[list-item,misc]
    p["checks"][0]["junit"] = {"tests": 3, "failures": 1, "errors": 0, "skipped": 0}  # type: ignore[index]
    assert title(p) == (
        "FAILED: check unit: `python -m pytest -q` exited 1 in phase test "
        "(3 tests: 2 passed, 1 failed) (+1 more reason)"
    )
    assert "## Checks at a glance\n\n- `unit`: **failed** · 3 tests: 2 passed, 1 failed" in (
        to_markdown(p)
    )


def test_title_of_a_proven_run_counts_checks_and_tests() -> None:
    p = sample.predicate()
    p["checks"][0]["junit"] = {"tests": 12, "failures": 0, "errors": 0, "skipped": 1}  # type: ignore[index]
    assert title(p) == "PROVEN: 1 check passed (12 tests: 11 passed, 1 skipped)"
    assert len(title({"verdict": "FAILED", "reasons": [{"message": "x" * 500}]})) == 200


def test_a_held_differential_reads_short_and_the_check_is_held_not_failed() -> None:
    p = sample.predicate(verdict=Verdict.HELD)
    p["reasons"] = [  # type: ignore[index]
        {
            "code": "expectation-changed",
            "check": "unit",
            "message": "1 test(s) that pass on the base fail against the change, and the "
            "change edits their files: a person confirms the old expectation is wrong: "
            "tests.test_calc::test_add",
        }
    ]
    p["checks"][0]["tests"] = {  # type: ignore[index]
        "ran": True,
        "expectation_changed": ["tests.test_calc::test_add", "tests.test_calc::test_sub"],
        "lists": {"expectation_changed": {"count": 2}},
    }
    assert title(p) == (
        "HELD: check unit: the change edits 2 base test(s) that now fail: "
        "tests.test_calc::test_add, … (a person confirms)"
    )
    glance = to_markdown(p).split("## Checks at a glance\n\n", 1)[1]
    assert glance.startswith("- `unit`: **held**")


def held_by(paths: list[str], message: str) -> JsonDict:
    p = sample.predicate(verdict=Verdict.HELD)
    p["policy"]["findings"] = [  # type: ignore[index]
        {"rule": "protected", "decision": "HOLD", "path": path, "message": message}
        for path in paths
    ]
    return p


def test_repeated_identical_findings_are_one_row_with_their_paths() -> None:
    md = to_markdown(held_by([f"ops/{i}.sh" for i in range(12)], "protected path changed"))
    shown = ", ".join(f"`ops/{i}.sh`" for i in range(10))
    assert f"| HOLD | `protected` | {shown} (+2 more) | - | protected path changed |" in md
    assert md.count("protected path changed") == 1


def test_a_cut_page_keeps_verdict_reasons_checks_and_the_failing_tail() -> None:
    p = failed()
    p["checks"][0]["phases"][1]["commands"][0]["log_tail"] = "x\n" * 40_000 + "the real error\n"  # type: ignore[index]
    p["policy"]["findings"] = [  # type: ignore[index]
        {"rule": f"r{i}", "decision": "ALLOW", "path": f"src/m{i}.py", "message": f"note {i}"}
        for i in range(3000)
    ]
    md = to_markdown(p, max_bytes=65535)
    assert len(md.encode()) <= 65535
    for kept in ["# proofgate: FAILED", "## Reasons", "## Checks at a glance", "the real error"]:
        assert kept in md
    assert "note 2999" not in md  # the long findings table is what went
    assert md.endswith(TRUNCATION_NOTE)
