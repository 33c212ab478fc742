"""The security figures: run the attack corpus and print what it shows.

    python -m tests.attacks.figures          # runs every case (needs Docker), prints the figures
    python -m tests.attacks.figures --check  # ... and exits 1 if docs/security.md or README.md
                                             # show other figures

The figures block is what README.md and docs/security.md carry between the markers
`<!-- figures:begin -->` and `<!-- figures:end -->`. `figures_block` renders it from
results; `test_corpus.py` records the results of the corpus it ran in `LIVE`, and
`test_readme_figures.py` compares both documents with them.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.attacks.corpus import ATTACKS, CASES, HONEST, Case, Observation, run_case

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (ROOT / "docs" / "security.md", ROOT / "README.md")
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
_BLOCK = re.compile(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), re.S)

# Results of the corpus cases run in this process (filled by test_corpus.py or `main`).
LIVE: dict[str, Observation] = {}


@dataclass(frozen=True)
class Figures:
    attacks: int
    contained: int
    honest: int
    proven: int

    @property
    def false_failures(self) -> int:
        return self.honest - self.proven


def tally(results: Mapping[str, Observation]) -> Figures:
    """Figures over the whole corpus; every case must have a result."""
    missing = [c.id for c in CASES if c.id not in results]
    if missing:
        raise ValueError(f"no result for {', '.join(missing)}")
    contained = sum(1 for c in ATTACKS if c.contained(results[c.id]))
    proven = sum(1 for c in HONEST if c.passed(results[c.id]))
    return Figures(attacks=len(ATTACKS), contained=contained, honest=len(HONEST), proven=proven)


def figures_block(f: Figures) -> str:
    return (
        "```\n"
        f"attacks contained: {f.contained}/{f.attacks}\n"
        f"honest changes proven: {f.proven}/{f.honest} (false failures: {f.false_failures})\n"
        "```\n"
    )


def document_block(path: Path) -> str | None:
    """The figures block of a document; None when it has no markers."""
    m = _BLOCK.search(path.read_text(encoding="utf-8"))
    return None if m is None else m.group(1)


def run_all(cases: tuple[Case, ...] = CASES, *, verbose: bool = True) -> dict[str, Observation]:
    results: dict[str, Observation] = {}
    with tempfile.TemporaryDirectory(prefix="proofgate-corpus-") as tmp:
        for case in cases:
            t0 = time.monotonic()
            seen = run_case(case, Path(tmp) / case.id)
            results[case.id] = seen
            if verbose:
                mark = "ok  " if case.passed(seen) else "FAIL"
                extra = f"  {'; '.join(seen.problems)}" if seen.problems else ""
                print(
                    f"{mark} {case.kind:6} {case.id:38} {seen.outcome:13} "
                    f"{time.monotonic() - t0:5.1f}s{extra}",
                    file=sys.stderr,
                )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="security-figures", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if README.md / docs/security.md disagree"
    )
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    LIVE.update(run_all())
    figures = tally(LIVE)
    block = figures_block(figures)
    sys.stdout.write(block.removeprefix("```\n").removesuffix("```\n"))
    print(f"corpus ran in {time.monotonic() - t0:.0f}s", file=sys.stderr)
    failed = [c.id for c in CASES if not c.passed(LIVE[c.id])]
    if failed:
        print(f"cases not as expected: {', '.join(failed)}", file=sys.stderr)
    if args.check:
        for doc in DOCUMENTS:
            if doc.exists() and document_block(doc) not in (None, block):
                print(f"{doc.name}: the figures block differs from the corpus", file=sys.stderr)
                return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
