"""Signed approvals of a HELD result (SPEC §3 (4)).

An approval is a small DSSE envelope (payloadType `application/vnd.proofgate.approval+json`)
whose payload binds one person's approval to one patch digest and one policy fingerprint.
It counts only when signed by a trusted key and bound to exactly the patch and the policy
being judged: an approval of yesterday's patch, or of a looser policy, approves nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final

from gate.model import Approval, JsonDict, Sha256
from gate.receipt import ReceiptError, canonical_json, keyid, open_envelope, parse_json, sign

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

APPROVAL_PAYLOAD_TYPE: Final = "application/vnd.proofgate.approval+json"
MAX_APPROVAL_BYTES: Final = 64 * 1024

_SHA256 = re.compile(r"[0-9a-f]{64}")
_REQUIRED = frozenset({"approver", "approved_at", "patch_sha256", "policy_fingerprint"})
_OPTIONAL = frozenset({"note"})


class ApprovalError(ReceiptError):
    """An approval is unsigned, untrusted, malformed or bound to another patch or policy."""


def create_approval(
    *,
    approver: str,
    approved_at: str,
    patch_sha256: str,
    policy_fingerprint: str,
    key: Ed25519PrivateKey,
    note: str | None = None,
) -> bytes:
    """A signed approval envelope (JSON bytes). `approved_at` is RFC 3339 UTC."""
    body: JsonDict = {
        "approver": approver,
        "approved_at": approved_at,
        "patch_sha256": patch_sha256,
        "policy_fingerprint": policy_fingerprint,
    }
    if note is not None:
        body["note"] = note
    return sign(canonical_json(body), key, payload_type=APPROVAL_PAYLOAD_TYPE)


def _is_rfc3339_utc(text: str) -> bool:
    if not text.endswith("Z"):
        return False
    try:
        datetime.fromisoformat(text[:-1] + "+00:00")
    except ValueError:
        return False
    return "T" in text


def verify_approval(
    data: bytes,
    keys: Sequence[Ed25519PublicKey],
    *,
    patch_sha256: str,
    policy_fingerprint: str,
) -> Approval:
    """The approval in `data`, when a trusted key signed it for this patch and policy.

    Raises:
        ApprovalError: unsigned, untrusted, malformed, or bound to another patch digest
            or policy fingerprint; one line saying which.
    """
    try:
        payload, key = open_envelope(
            data, keys, payload_type=APPROVAL_PAYLOAD_TYPE, max_bytes=MAX_APPROVAL_BYTES
        )
        body = parse_json(payload, what="approval payload")
    except ApprovalError:
        raise
    except ReceiptError as e:
        raise ApprovalError(f"approval rejected: {e}") from e
    if not isinstance(body, dict):
        raise ApprovalError("approval rejected: payload is not a JSON object")
    keys_present = set(body)
    if not _REQUIRED <= keys_present or not keys_present <= _REQUIRED | _OPTIONAL:
        raise ApprovalError(
            "approval rejected: payload must have approver, approved_at, patch_sha256, "
            "policy_fingerprint and optionally note"
        )
    fields: dict[str, str] = {}
    for name in (*sorted(_REQUIRED), *sorted(_OPTIONAL & keys_present)):
        value = body[name]
        if not isinstance(value, str):
            raise ApprovalError(f"approval rejected: {name} is not a string")
        fields[name] = value
    approver, approved_at = fields["approver"], fields["approved_at"]
    digest, fingerprint = fields["patch_sha256"], fields["policy_fingerprint"]
    if not approver.strip():
        raise ApprovalError("approval rejected: approver is empty")
    if not _is_rfc3339_utc(approved_at):
        raise ApprovalError(f"approval rejected: approved_at {approved_at!r} is not RFC 3339 UTC")
    if not _SHA256.fullmatch(digest) or not _SHA256.fullmatch(fingerprint):
        raise ApprovalError("approval rejected: digests must be 64 lowercase hex characters")
    if digest != patch_sha256:
        raise ApprovalError(
            f"approval is for patch {digest[:12]}…, not this patch {patch_sha256[:12]}…"
        )
    if fingerprint != policy_fingerprint:
        raise ApprovalError(
            f"approval is for policy {fingerprint[:12]}…, not this policy "
            f"{policy_fingerprint[:12]}…"
        )
    return Approval(
        approver=approver,
        method="file",
        approved_at=approved_at,
        patch_sha256=Sha256(digest),
        policy_fingerprint=Sha256(fingerprint),
        keyid=keyid(key),
    )
