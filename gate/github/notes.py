"""The notes that open a check run before the receipt page, when they apply: what a commit
re-proof vouches for, and an image named by tag only."""

from __future__ import annotations

from collections.abc import Mapping

from gate.github.events import Target
from gate.model import TriggerKind

__all__ = ["image_note", "trigger_note"]


def trigger_note(target: Target) -> str:
    """Markdown that opens the check run for a re-proof of one commit: what it vouches for."""
    if target.kind is not TriggerKind.COMMIT:
        return ""
    return (
        f"**Re-proof of commit `{target.head_sha[:12]}`** (workflow_dispatch). It proves the "
        f"patch from the tip of `{target.base_branch}` now to this commit, applied to that "
        "tip and checked in the clean room. It does not prove a pull request: no review or "
        "approval is consulted (a HOLD stays HELD), and it says nothing about any other "
        "base branch or a later tip.\n\n"
    )


def image_note(predicate: Mapping[str, object]) -> str:
    """Markdown for a configured image named by tag only: which digest ran, how to pin it."""
    image = predicate.get("image")
    if not isinstance(image, str) or "@sha256:" in image:
        return ""
    checks = predicate.get("checks")
    digests = {
        str(c["image_digest"])
        for c in (checks if isinstance(checks, list) else [])
        if isinstance(c, dict) and c.get("image_digest")
    }
    used = digests.pop() if len(digests) == 1 else None
    last = image.rpartition("/")[2]
    repository = image.rpartition(":")[0] if ":" in last else image
    pin = f"{repository}@{used.rpartition('@')[2]}" if used and "@" in used else None
    return (
        f"**Image not pinned:** the config names `{image}` by tag, so what runs can change "
        "under the same name."
        + (f" This run used `{used}` (recorded per check in the receipt)." if used else "")
        + f" Pin it in the base branch's config (`image: {pin or 'NAME@sha256:...'}`) so "
        "every run uses that exact image.\n\n"
    )
