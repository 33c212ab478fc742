"""README.md and docs/ hold together: links resolve, every page is reachable from the
README, and the facts the README states about verdicts match the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gate import policy
from gate.config import load_config
from gate.model import ReasonCode, Verdict

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for link in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", link):
            continue
        name, _, anchor = link.partition("#")
        target = (page.parent / name).resolve() if name else page
        if not target.exists():
            broken.append(f"{link} (no such file)")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link} (no such heading)")
    assert not broken, f"{page.name}: broken links {broken}"


def test_readme_links_every_doc() -> None:
    text = README.read_text(encoding="utf-8")
    unlinked = [p.name for p in DOCS if f"](docs/{p.name})" not in text]
    assert not unlinked, f"README.md does not link {unlinked}"


def test_readme_verdict_table_matches_the_code() -> None:
    text = README.read_text(encoding="utf-8")
    rows = {
        m.group(1): (m.group(2), int(m.group(3)))
        for m in re.finditer(r"^\| (\w+) \| [^|]+ \| (\w+) \| (\d+) \|$", text, re.M)
    }
    assert rows == {v.value: (v.conclusion, v.exit_code) for v in Verdict}


def test_every_reason_code_is_documented() -> None:
    text = "".join(p.read_text(encoding="utf-8") for p in PAGES)
    missing = [c.value for c in ReasonCode if f"`{c.value}`" not in text]
    assert not missing, f"README.md and docs/ never name the reason codes {missing}"


def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```$", text, re.S | re.M)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_configuration_examples_load(page: Path) -> None:
    """Every `.github/proofgate.yml` example in the docs is a valid configuration."""
    for block in _yaml_blocks(page.read_text(encoding="utf-8")):
        if block.startswith("version: 1\n"):
            load_config(block.encode(), source=page.name, known_rules=frozenset(policy.RULES))
