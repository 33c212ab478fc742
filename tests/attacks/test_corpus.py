"""The attack corpus, end to end: every attacker pull request is contained, every honest
change is PROVEN, and the user's repository is byte-identical afterwards (see corpus.py).

The results are recorded in `figures.LIVE`, so `test_readme_figures.py` checks the
documented figures against this very run without running the corpus twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attacks import figures
from tests.attacks.corpus import CASES, Case, run_case

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus_case(case: Case, tmp_path: Path) -> None:
    seen = run_case(case, tmp_path)
    figures.LIVE[case.id] = seen
    detail = f"{case.id}: {case.tries}\n{seen}\n--- stderr ---\n{seen.log[-4000:]}"
    if case.kind == "attack":
        assert case.contained(seen), f"NOT CONTAINED: {detail}"
    else:
        assert seen.outcome == "PROVEN", f"FALSE FAILURE: {detail}"
    assert seen.outcome in case.expect, f"unexpected outcome: {detail}"
    assert not seen.problems, f"problems: {detail}"
