"""The policy as a proof runs it: its inputs read through the evidence port (issue 16).

`gate.policy` is pure; this reads what it wants from the proven tree, bounded, and is
the one function `prove` and `benchmarks/replay.py` both call, so the replay figures
measure the policy the product runs.
"""

from __future__ import annotations

from gate import policy
from gate.git.interface import EvidenceSource
from gate.model import Evidence, PolicyResult, PolicySpec

__all__ = ["MAX_ANALYZED_BYTES", "MAX_SCANNED_BINARY_BYTES", "judge_policy"]

MAX_ANALYZED_BYTES = 64 * 1024 * 1024  # the policy's import graph reads at most this much
MAX_SCANNED_BINARY_BYTES = 16 * 1024 * 1024  # binary additions the secrets rules read


def judge_policy(
    evidence: EvidenceSource, ev: Evidence, spec: PolicySpec, *, config_path: str
) -> PolicyResult:
    """The policy as `prove` runs it (and benchmarks/replay.py measures it): the proven
    tree's files the analyzers want (up to MAX_ANALYZED_BYTES, else they record that
    they did not run), the binary files the patch adds (up to MAX_SCANNED_BINARY_BYTES,
    read from head's tree when no proven tree was computed) and the base's copies of the
    changed Python test files (as much again).

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
    return policy.evaluate(
        ev.inventory,
        ev.patch.data,
        spec,
        config_path=config_path,
        tree_files=tree_files,
        binary_files=binary_files,
        base_files=base_files,
    )
