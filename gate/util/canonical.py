"""The one serialization that gets hashed and signed: sorted keys, compact, UTF-8 (pure;
the journal, the policy fingerprint and the receipt all use it)."""

from __future__ import annotations

import json

__all__ = ["canonical_json"]


def canonical_json(value: object) -> bytes:
    """The one serialization used for hashing and signing: sorted keys, compact, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )
