"""Approvals of a HELD result: signed, trusted, and bound to this patch and policy (SPEC §3 (4))."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gate import receipt
from gate.model import Approval
from gate.proof.approval import (
    APPROVAL_PAYLOAD_TYPE,
    ApprovalError,
    create_approval,
    verify_approval,
)
from gate.receipt import ReceiptError, canonical_json
from tests.assets import sample

ASSETS = Path(__file__).parent.parent / "assets"
TRUSTED = sample.key("trusted")
UNTRUSTED = sample.key("untrusted")
TRUSTED_PUB = TRUSTED.public_key()
OTHER_SHA256 = hashlib.sha256(b"another patch").hexdigest()


def approval(**overrides: object) -> bytes:
    kwargs: dict[str, object] = {
        "approver": "octocat",
        "approved_at": "2025-01-02T04:00:00Z",
        "patch_sha256": sample.PATCH_SHA256,
        "policy_fingerprint": sample.POLICY_FINGERPRINT,
        "key": TRUSTED,
    }
    kwargs.update(overrides)
    return create_approval(**kwargs)  # type: ignore[arg-type]


def check(data: bytes, **overrides: str) -> Approval:
    expected: dict[str, str] = {
        "patch_sha256": sample.PATCH_SHA256,
        "policy_fingerprint": sample.POLICY_FINGERPRINT,
    }
    expected.update(overrides)
    return verify_approval(data, [TRUSTED_PUB], **expected)


def test_valid_approval_is_accepted_with_signer_keyid() -> None:
    a = check(approval(note="looked at the workflow change"))
    assert a == Approval(
        approver="octocat",
        method="file",
        approved_at="2025-01-02T04:00:00Z",
        patch_sha256=sample.PATCH_SHA256,
        policy_fingerprint=sample.POLICY_FINGERPRINT,
        keyid=receipt.keyid(TRUSTED_PUB),
    )


def test_asset_approval_is_accepted() -> None:
    assert check((ASSETS / "approvals" / "approval.json").read_bytes()).approver == "octocat"


def test_approval_of_another_patch_is_rejected() -> None:
    with pytest.raises(ApprovalError, match="approval is for patch .*not this patch"):
        check(approval(), patch_sha256=OTHER_SHA256)


def test_approval_under_another_policy_is_rejected() -> None:
    with pytest.raises(ApprovalError, match="approval is for policy .*not this policy"):
        check(approval(), policy_fingerprint=OTHER_SHA256)


def test_approval_signed_by_untrusted_key_is_rejected() -> None:
    with pytest.raises(ApprovalError, match="no valid signature by a trusted key"):
        check(approval(key=UNTRUSTED))


def test_unsigned_approval_is_rejected() -> None:
    payload = canonical_json(
        {
            "approver": "octocat",
            "approved_at": "2025-01-02T04:00:00Z",
            "patch_sha256": sample.PATCH_SHA256,
            "policy_fingerprint": sample.POLICY_FINGERPRINT,
        }
    )
    unsigned = receipt.sign(payload, None, payload_type=APPROVAL_PAYLOAD_TYPE)
    with pytest.raises(ApprovalError, match="receipt is not signed|not signed"):
        check(unsigned)


def test_receipt_presented_as_approval_is_rejected() -> None:
    data = (ASSETS / "receipts" / "proven.json").read_bytes()
    with pytest.raises(ApprovalError, match="unexpected payloadType"):
        check(data)


def test_approval_error_is_a_receipt_error() -> None:
    with pytest.raises(ReceiptError):
        check(b"garbage")


VALID_BODY: dict[str, object] = {
    "approver": "octocat",
    "approved_at": "2025-01-02T04:00:00Z",
    "patch_sha256": sample.PATCH_SHA256,
    "policy_fingerprint": sample.POLICY_FINGERPRINT,
}


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"approver": "a"}, "payload must have"),
        ({**VALID_BODY, "extra": 1}, "payload must have"),
        ({**VALID_BODY, "approver": 1}, "approver is not a string"),
        ({**VALID_BODY, "approver": "  "}, "approver is empty"),
        ({**VALID_BODY, "approved_at": "yesterday"}, "not RFC 3339"),
        ({**VALID_BODY, "approved_at": "2025-01-02T04:00:00+02:00"}, "not RFC 3339 UTC"),
        ({**VALID_BODY, "patch_sha256": sample.PATCH_SHA256.upper()}, "64 lowercase hex"),
        ({**VALID_BODY, "note": 3}, "note is not a string"),
    ],
    ids=["missing", "extra", "approver-int", "approver-blank", "date", "not-utc", "upper", "note"],
)
def test_malformed_signed_approval_is_rejected(body: dict[str, object], match: str) -> None:
    data = receipt.sign(canonical_json(body), TRUSTED, payload_type=APPROVAL_PAYLOAD_TYPE)
    with pytest.raises(ApprovalError, match=match):
        check(data)
