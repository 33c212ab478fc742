"""Each changed Python file of the proven tree, parsed once for every rule (issue 46). Pure.

Three analyses read a changed Python file's syntax: the blast radius (its imports),
`harness-tampering` (its harness sites on the added lines) and `tests-skipped` (its
skips). Each used to parse the file itself, and the harness rule walked both copies whole
for every file: 3.5 ms per changed file, most of a 10,000-file patch's policy. Here the
proven tree's copy is parsed once and every analysis reads that tree; the imports go
into the blast radius's cache by git blob id (the per-user cache keeps them), and the
base's copy is parsed only when an analysis needs it (see `new_harness_sites`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gate.policy.blast import (
    MAX_PARSE_BYTES,
    ImportCache,
    blob_id,
    imports_of,
    parse_python,
    statements_of,
)
from gate.policy.harness import HarnessSite, is_harness_code, new_harness_sites
from gate.policy.patch import FileDiff
from gate.policy.paths import is_test_path
from gate.policy.skips import SkipSite, new_skips

__all__ = ["Scans", "scan_changed"]


@dataclass(frozen=True, slots=True)
class Scans:
    """What the rules read from the changed files, by the diff's path (`FileDiff.path`);
    a path absent was not scanned (the rule reads the file itself), None: it does not
    parse."""

    harness: dict[bytes, list[HarnessSite] | None] = field(default_factory=dict)
    skips: dict[bytes, list[SkipSite] | None] = field(default_factory=dict)


def scan_changed(
    diffs: Iterable[FileDiff],
    tree_files: Mapping[bytes, bytes] | None,
    base_files: Mapping[bytes, bytes] | None,
    imports: ImportCache,
) -> Scans:
    """Parse the proven tree's copy of every changed Python file once: its imports into
    `imports` (by blob id, unless there), its harness sites on the added lines (non-test
    code) or its new skips (test files)."""
    out = Scans()
    if tree_files is None:
        return out
    for d in diffs:
        path = d.new_path
        if d.binary or path is None or not path.endswith(b".py"):
            continue
        source = tree_files.get(path)
        if source is None or len(source) > MAX_PARSE_BYTES:
            continue
        tree = parse_python(source)
        statements = None if tree is None else statements_of(tree)
        key = blob_id(source)
        if key not in imports:
            imports[key] = None if statements is None else imports_of(statements)
        old = None
        if d.old_path is not None and base_files is not None:
            old = base_files.get(d.old_path)
        added = frozenset(ln.new for ln in d.added)
        if is_harness_code(path) and added:
            sites = None
            if tree is not None:
                sites = new_harness_sites(source, added, old, tree=tree, statements=statements)
            out.harness[d.path] = sites
        elif is_test_path(path) and old is not None:
            out.skips[d.path] = None if tree is None else new_skips(old, source, new_tree=tree)
    return out
