"""The policy as a proof runs it: its inputs read through the evidence port (issue 16).

`gate.policy` is pure; this reads what it wants from the proven tree, bounded, and is
the one function `prove` and `benchmarks/replay.py` both call, so the replay figures
measure the policy the product runs.
"""

from __future__ import annotations

from typing import Protocol

from gate import policy
from gate.git.interface import EvidenceSource
from gate.model import Evidence, PolicyResult, PolicySpec

__all__ = [
    "MAX_ANALYZED_BYTES",
    "MAX_SCANNED_BINARY_BYTES",
    "TagLookupError",
    "TagOracle",
    "judge_policy",
    "look_up_tags",
]


class TagLookupError(Exception):
    """A tag look-up could not be made (no answer, not "no such tag"); the message says why."""


class TagOracle(Protocol):
    """What an upstream repository calls its tags (the Action: the GitHub API)."""

    def tag(self, repository: str, tag: str) -> policy.TagAnswer:
        """`repository` is owner/name; an answer with exists=False for no such tag.

        Raises:
            TagLookupError: the look-up could not be made.
        """
        ...


def look_up_tags(oracle: TagOracle | None, wanted: set[tuple[str, str]]) -> policy.PinTags | None:
    """The answers to `wanted` (None without an oracle: a local run). Every look-up or
    none: one failure, or more than policy.MAX_LOOKUPS wanted, verifies nothing."""
    if oracle is None:
        return None
    if len(wanted) > policy.MAX_LOOKUPS:
        return policy.PinTags(
            unavailable=f"{len(wanted)} tag look-ups wanted, more than {policy.MAX_LOOKUPS}"
        )
    answers: dict[tuple[str, str], policy.TagAnswer] = {}
    for repository, tag in sorted(wanted):
        try:
            answers[(repository, tag)] = oracle.tag(repository, tag)
        except TagLookupError as e:
            return policy.PinTags(unavailable=f"the tag look-up failed: {e}")
    return policy.PinTags(answers=answers)


MAX_ANALYZED_BYTES = 64 * 1024 * 1024  # the policy's import graph reads at most this much
MAX_SCANNED_BINARY_BYTES = 16 * 1024 * 1024  # binary additions the secrets rules read


def judge_policy(
    evidence: EvidenceSource,
    ev: Evidence,
    spec: PolicySpec,
    *,
    config_path: str,
    tags: TagOracle | None = None,
) -> PolicyResult:
    """The policy as `prove` runs it (and benchmarks/replay.py measures it): the proven
    tree's files the analyzers want (up to MAX_ANALYZED_BYTES, else they record that
    they did not run), the binary files the patch adds (up to MAX_SCANNED_BINARY_BYTES,
    read from head's tree when no proven tree was computed) and the base's copies of the
    changed Python test files (as much again). With `tags` (the Action's GitHub API) the
    tags that the change's pin bumps name are looked up, so a verified bump is not held.

    Raises:
        RepoError: a tree is not readable.
    """
    tree_files = binary_files = None
    if ev.proven_tree is not None:
        tree_files = evidence.read_tree_files(
            ev.proven_tree, policy.wants_tree_file, max_bytes=MAX_ANALYZED_BYTES
        )
    binaries = policy.binary_scan_paths(ev.inventory, max_bytes=MAX_SCANNED_BINARY_BYTES)
    if binaries:
        binary_files = evidence.read_tree_files(
            ev.proven_tree or ev.head.tree,
            binaries.__contains__,
            max_bytes=MAX_SCANNED_BINARY_BYTES,
        )
    base_files: dict[bytes, bytes] = {}
    budget = MAX_SCANNED_BINARY_BYTES
    for e in ev.inventory:
        old = policy.wants_base_file(e)
        if old is None or (e.old_size or 0) > budget:
            continue
        found = evidence.read_blob_at(ev.base.commit, old.decode("utf-8", "surrogateescape"))
        if found is not None:
            base_files[old] = found[1]
            budget -= len(found[1])
    wanted = policy.pin_lookups(ev.inventory, ev.patch.data, tree_files)
    pin_tags = look_up_tags(tags, wanted) if wanted else None
    return policy.evaluate(
        ev.inventory,
        ev.patch.data,
        spec,
        config_path=config_path,
        tree_files=tree_files,
        binary_files=binary_files,
        base_files=base_files,
        pin_tags=pin_tags if tags is not None else None,
    )
