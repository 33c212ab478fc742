"""Per-test outcomes from a JUnit XML report (SPEC §3.1). Pure.

A test's identity is its `classname` + `name` exactly as the report gives them, so a
parametrized case (`test_add[1-2]`) is its own test. The report is untrusted input:
it is parsed once by `parse_root`, which refuses DTDs and entities and bounds the
size, and `gate.proof.verdict.parse_junit` counts through the same function.
"""

from __future__ import annotations

import enum
import xml.etree.ElementTree as ET  # noqa: S405 - bounded input; DTDs and entities refused
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "MAX_REPORT_BYTES",
    "MAX_TESTS",
    "TestId",
    "TestOutcome",
    "counts",
    "parse_outcomes",
    "parse_root",
]

MAX_REPORT_BYTES = 16 * 1024 * 1024
MAX_TESTS = 200_000  # testcases per report; more is refused rather than truncated


class TestOutcome(enum.StrEnum):
    __test__ = False  # not a pytest class

    PASS = "pass"  # noqa: S105 - an outcome, not a password
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"

    @property
    def badness(self) -> int:
        """Which outcome wins when one identity appears twice: the worse one."""
        return {"pass": 0, "skip": 1, "fail": 2, "error": 3}[self.value]


@dataclass(frozen=True, slots=True, order=True)
class TestId:
    """`classname` + `name` of a JUnit testcase."""

    __test__ = False

    classname: str
    name: str

    @property
    def function(self) -> str:
        """The name without a parametrize id: `test_add[1-2]` -> `test_add`."""
        return self.name.split("[", 1)[0]

    def __str__(self) -> str:
        return f"{self.classname}::{self.name}" if self.classname else self.name


def parse_root(report: bytes) -> ET.Element:
    """The root element of a JUnit report, parsed safely.

    Raises:
        ValueError: too large, declares a DTD or entities, not well-formed, or not JUnit.
    """
    if len(report) > MAX_REPORT_BYTES:
        raise ValueError(f"report is larger than {MAX_REPORT_BYTES} bytes")
    if b"<!DOCTYPE" in report or b"<!ENTITY" in report:
        raise ValueError("report declares a DTD or entities")
    try:
        root = ET.fromstring(report)  # noqa: S314 - DTDs refused above, size bounded
    except ET.ParseError as e:
        raise ValueError(f"not well-formed XML ({e})") from e
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"root element is <{root.tag}>, not <testsuites> or <testsuite>")
    return root


def case_outcome(case: ET.Element) -> TestOutcome:
    tags = {child.tag for child in case}
    if "failure" in tags:
        return TestOutcome.FAIL
    if "error" in tags:
        return TestOutcome.ERROR
    if "skipped" in tags:
        return TestOutcome.SKIP
    return TestOutcome.PASS


def parse_outcomes(report: bytes) -> dict[TestId, TestOutcome]:
    """Every `<testcase>` of the report, by identity.

    A testcase listed twice (pytest reports a teardown error as a second entry) keeps
    its worst outcome.

    Raises:
        ValueError: as `parse_root`, or more than `MAX_TESTS` testcases.
    """
    root = parse_root(report)
    out: dict[TestId, TestOutcome] = {}
    for n, case in enumerate(root.iter("testcase")):
        if n >= MAX_TESTS:
            raise ValueError(f"report has more than {MAX_TESTS} testcases")
        tid = TestId(classname=case.get("classname", ""), name=case.get("name", ""))
        outcome = case_outcome(case)
        prior = out.get(tid)
        if prior is None or outcome.badness > prior.badness:
            out[tid] = outcome
    return out


def counts(outcomes: Mapping[TestId, TestOutcome]) -> dict[str, int]:
    """Counts per outcome, every outcome present (for the receipt)."""
    got = {o.value: 0 for o in TestOutcome}
    for o in outcomes.values():
        got[o.value] += 1
    return got
