"""`proofgate apply`: promote a PROVEN receipt's exact patch into a working tree (issue 20).

The promotion check of the AgentDiff pipeline: a patch is applied only when

1. the receipt verifies with a trusted key (signature, journal, subjects);
2. its verdict is PROVEN;
3. the patch file's SHA-256 is the receipt's patch digest;
4. HEAD's tree is the receipt's base tree, the index has nothing staged, and the working
   tree (tracked and non-ignored untracked files) equals that base tree exactly;
5. the patch re-applied to the base tree in the private store gives the proven tree.

Otherwise nothing is written and the refusal says what differs. The patch goes into the
working tree only (not the index) with one `git apply`, after `git apply --check`; the
working tree is captured again afterwards and must equal the proven tree.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gate import receipt
from gate.git.patch import PatchApplyError
from gate.git.worktree import Checkout

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["ApplyDiverged", "ApplyRefused", "apply_receipt"]

log = logging.getLogger("gate")

_SHOWN = 10


class ApplyRefused(Exception):
    """The receipt or the checkout does not allow the patch; nothing was changed."""


class ApplyDiverged(ApplyRefused):
    """The patch was applied, but the working tree is not the proven tree afterwards."""


def _text(predicate: dict[str, object], *path: str) -> str:
    node: object = predicate
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, str):
        raise ApplyRefused(f"the receipt has no {'.'.join(path)}")
    return node


def _listed(lines: list[str]) -> str:
    more = f" and {len(lines) - _SHOWN} more" if len(lines) > _SHOWN else ""
    return ", ".join(lines[:_SHOWN]) + more


def _patch_paths(predicate: dict[str, object]) -> frozenset[bytes]:
    """Every path the receipt's inventory names (new and old), as exact bytes."""
    paths: set[bytes] = set()
    inventory = predicate.get("inventory")
    for entry in inventory if isinstance(inventory, list) else []:
        if not isinstance(entry, dict):
            continue
        for key in ("path", "old_path"):
            raw, text = entry.get(f"{key}_b64"), entry.get(key)
            if isinstance(raw, str):
                paths.add(base64.b64decode(raw))
            elif isinstance(text, str):
                paths.add(text.encode("utf-8"))
    return frozenset(paths)


def apply_receipt(
    envelope: bytes, patch: bytes, keys: Sequence[Ed25519PublicKey], repo: Path
) -> str:
    """Apply the receipt's patch to `repo`'s working tree; returns what was done.

    Raises:
        ApplyRefused: a check failed; the working tree is unchanged.
        ApplyDiverged: applied, but the result is not the proven tree.
        RepoError: `repo` is not a git repository with a working tree (exit 2).
    """
    try:
        verified = receipt.verify(
            envelope, receipt.AllOf(receipt.Signed(keys), receipt.WholeProof())
        )
    except receipt.ReceiptError as e:
        raise ApplyRefused(f"the receipt does not verify: {e}") from e
    predicate = verified.statement["predicate"]
    assert isinstance(predicate, dict)  # noqa: S101 - verify checked it
    verdict = predicate.get("verdict")
    if verdict != "PROVEN":
        raise ApplyRefused(f"the receipt's verdict is {verdict}: only a PROVEN patch is applied")
    digest = hashlib.sha256(patch).hexdigest()
    want = _text(predicate, "patch", "sha256")
    if digest != want:
        raise ApplyRefused(f"the patch file has sha256 {digest}; the receipt is for {want}")
    base_tree = _text(predicate, "base", "tree")
    base_commit = _text(predicate, "base", "commit")
    proven = _text(predicate, "proven_tree")
    with Checkout(repo) as checkout:
        head = checkout.head_tree()
        if head != base_tree:
            raise ApplyRefused(
                f"HEAD moved: its tree is {head}, the receipt's base tree is {base_tree} "
                f"(check out the base commit {base_commit[:12]}, or prove again)"
            )
        staged = checkout.staged_changes()
        if staged:
            raise ApplyRefused(f"the index has staged changes: {_listed(staged)}")
        snap = checkout.snapshot()
        if snap.unstable:
            shown = _listed([p.decode("utf-8", "backslashreplace") for p in snap.unstable])
            raise ApplyRefused(f"files changed while the working tree was read: {shown}")
        if snap.tree != base_tree:
            diff = checkout.differences(base_tree, snap.tree)
            raise ApplyRefused(
                f"the working tree differs from the receipt's base: {_listed(diff)} "
                "(commit, stash or remove these first)"
            )
        try:
            reapplied = checkout.reapply(base_tree, patch)
        except PatchApplyError as e:
            raise ApplyRefused(f"the patch does not apply to the base tree: {e}") from e
        if reapplied != proven:
            raise ApplyRefused(
                f"the patch on the base tree gives {reapplied}, not the proven tree {proven}"
            )
        try:
            checkout.apply(patch)
        except PatchApplyError as e:
            raise ApplyRefused(f"git apply refused the patch, nothing written: {e}") from e
        after = checkout.snapshot(also=_patch_paths(predicate))
        if after.tree != proven:
            diff = checkout.differences(proven, after.tree)
            raise ApplyDiverged(
                "the patch was applied, but the working tree does not equal the proven tree "
                f"(.gitattributes conversions or a concurrent writer?): {_listed(diff)}"
            )
    patch_info = predicate.get("patch")
    count = patch_info.get("files") if isinstance(patch_info, dict) else "?"
    return f"applied the patch ({count} file(s)); the working tree is the proven tree {proven}"
