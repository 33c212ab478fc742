"""What every rule of the catalog reads and returns (issue 6). Pure.

A rule is a `Check`: it reads a `Context` (the inventory, the parsed patch, the spec and,
when the caller supplies them, the proven tree's files) and yields `RawFinding`s;
`gate.policy.evaluate` applies the rule's effective decision and merges them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gate.model import Decision, InventoryEntry, PolicySpec
from gate.policy.patch import FileDiff

if TYPE_CHECKING:
    from gate.policy.pinbump import PinTags
    from gate.policy.scan import Scans
    from gate.policy.workflows import CiFiles

__all__ = [
    "Check",
    "Context",
    "RawFinding",
    "Rule",
    "as_text",
    "basename",
    "dirs_of",
    "paths_of",
    "text_diffs",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """A built-in rule: stable kebab-case id, default decision, one-line rationale."""

    id: str
    default: Decision
    rationale: str


@dataclass(frozen=True, slots=True)
class RawFinding:
    path: bytes | None
    message: str
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """Everything a rule may read. `diffs` is keyed by FileDiff.path."""

    inventory: tuple[InventoryEntry, ...]
    diffs: Mapping[bytes, FileDiff]
    spec: PolicySpec
    config_path: bytes
    tree_files: Mapping[bytes, bytes] | None
    binary_files: Mapping[bytes, bytes] | None
    base_files: Mapping[bytes, bytes] | None
    blast_scores: Mapping[str, int]
    thresholds: Mapping[str, int | None]
    pin_tags: PinTags | None = None  # the upstreams' tags, when the caller looked them up
    ci: CiFiles | None = None  # both sides' workflow and action files (SPEC §2.1)
    scans: Scans | None = None  # the changed Python files, parsed once (gate/policy/scan.py)
    # a blast-radius score ("future") whose analysis did not complete -> why not
    incomplete: Mapping[str, str] = field(default_factory=dict)

    def diff_of(self, entry: InventoryEntry) -> FileDiff | None:
        return self.diffs.get(entry.path) or (
            self.diffs.get(entry.old_path) if entry.old_path is not None else None
        )


def paths_of(entry: InventoryEntry) -> tuple[bytes, ...]:
    """Both sides of a rename: a rule on paths must see where a file came from too."""
    if entry.old_path is not None and entry.old_path != entry.path:
        return (entry.path, entry.old_path)
    return (entry.path,)


def basename(path: bytes) -> bytes:
    return path.rsplit(b"/", 1)[-1]


def dirs_of(path: bytes) -> list[bytes]:
    return path.split(b"/")[:-1]


def as_text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


Check = Callable[[Context], Iterator[RawFinding]]


def text_diffs(ctx: Context) -> Iterator[FileDiff]:
    for path in sorted(ctx.diffs):
        d = ctx.diffs[path]
        if not d.binary:
            yield d
