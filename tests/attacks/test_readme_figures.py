"""README.md and docs/security.md show the figures the attack corpus produces.

Fast: it never runs the corpus itself. When `test_corpus.py` ran the whole corpus earlier
in this session, the documents must show exactly its figures. Otherwise they must show
the figures a green corpus run implies (every attack contained, every honest change
PROVEN), so adding a case without updating the documents fails here too.
"""

from __future__ import annotations

from tests.attacks import figures
from tests.attacks.corpus import ATTACKS, CASES, HONEST


def _expected() -> str:
    if all(c.id in figures.LIVE for c in CASES):
        return figures.figures_block(figures.tally(figures.LIVE))
    green = figures.Figures(
        attacks=len(ATTACKS), contained=len(ATTACKS), honest=len(HONEST), proven=len(HONEST)
    )
    return figures.figures_block(green)


def test_security_doc_shows_the_corpus_figures() -> None:
    doc = figures.ROOT / "docs" / "security.md"
    block = figures.document_block(doc)
    assert block is not None, f"{doc} lacks {figures.BEGIN} ... {figures.END}"
    assert block == _expected(), "docs/security.md: run scripts/security-figures and update"


def test_readme_shows_the_corpus_figures() -> None:
    block = figures.document_block(figures.ROOT / "README.md")
    assert block is not None, f"README.md lacks {figures.BEGIN} ... {figures.END}"
    assert block == _expected(), "README.md: copy the figures block from docs/security.md"


def test_figures_block_counts_what_it_is_given() -> None:
    seen = {c.id: c for c in CASES}
    assert len(seen) == len(CASES), "case ids must be unique"
    block = figures.figures_block(figures.Figures(attacks=5, contained=4, honest=3, proven=2))
    assert "attacks contained: 4/5\n" in block
    assert "honest changes proven: 2/3 (false failures: 1)\n" in block


def test_security_doc_lists_every_case() -> None:
    text = (figures.ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    missing = [c.id for c in CASES if f"| `{c.id}` |" not in text]
    assert not missing, f"docs/security.md lacks a table line for {missing}"
