"""Tampering with a signed receipt: every byte, and arbitrary garbage (SPEC §4)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate import receipt
from gate.model import Verdict
from gate.receipt import ReceiptError
from tests.assets import sample

TRUSTED = sample.key("trusted")
TRUSTED_PUB = TRUSTED.public_key()


def _signed() -> tuple[bytes, dict[str, object]]:
    p = sample.predicate()
    statement = receipt.build_statement(
        p,
        patch_sha256=sample.PATCH_SHA256,
        head_commit=sample.HEAD_COMMIT,
        proven_tree=sample.HEAD_TREE,
    )
    return receipt.sign(receipt.serialize(statement), TRUSTED), statement


ENVELOPE, STATEMENT = _signed()


def _harmless_positions(env: bytes) -> set[int]:
    """Bytes whose change cannot alter meaning: the keyid (a hint) and the final newline."""
    m = re.search(rb'"keyid":"([0-9a-f]{64})"', env)
    assert m is not None
    return set(range(m.start(1), m.end(1))) | {len(env) - 1}


@pytest.mark.parametrize("mask", [0x01, 0x20, 0x80, 0xFF], ids=lambda m: f"xor-{m:#04x}")
def test_every_single_byte_flip_is_rejected_or_harmless(mask: int) -> None:
    """Every position, not a sample: ~6 KB receipt, each flip verified in-process."""
    assert 2_000 < len(ENVELOPE) < 8_000
    harmless = _harmless_positions(ENVELOPE)
    accepted: list[int] = []
    for i in range(len(ENVELOPE)):
        flipped = bytearray(ENVELOPE)
        flipped[i] ^= mask
        try:
            out = receipt.verify_statement(
                bytes(flipped),
                [TRUSTED_PUB],
                commit=sample.HEAD_COMMIT,
                tree=sample.HEAD_TREE,
                patch=sample.PATCH,
                require=Verdict.PROVEN,
            )
        except ReceiptError:
            continue
        accepted.append(i)
        assert out == STATEMENT, f"flip at {i} changed the statement and still verified"
    assert set(accepted) <= harmless, f"flips at {sorted(set(accepted) - harmless)} verified"


# --- hypothesis: garbage never escapes as another exception ---------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def _verify_never_crashes(data: bytes) -> None:
    reason = None
    try:
        out = receipt.verify_statement(data, [TRUSTED_PUB])
    except ReceiptError as e:
        reason = str(e)
    if reason is None:
        assert isinstance(out, dict)
    else:
        assert reason
        assert "\n" not in reason


@given(st.binary(max_size=2_000))
@settings(max_examples=300)
def test_random_bytes_are_receipt_errors(data: bytes) -> None:
    with pytest.raises(ReceiptError):
        receipt.verify_statement(data, [TRUSTED_PUB])


@given(json_values)
@settings(max_examples=300)
def test_random_json_is_a_receipt_error(value: object) -> None:
    with pytest.raises(ReceiptError):
        receipt.verify_statement(json.dumps(value).encode(), [TRUSTED_PUB])


@given(
    payload_type=st.one_of(st.just(receipt.PAYLOAD_TYPE), json_values),
    payload=st.one_of(st.just(json.loads(ENVELOPE)["payload"]), json_values),
    signatures=st.one_of(st.just(json.loads(ENVELOPE)["signatures"]), json_values),
)
@settings(max_examples=300)
def test_envelopes_with_random_fields_never_crash(
    payload_type: object, payload: object, signatures: object
) -> None:
    env = {"payloadType": payload_type, "payload": payload, "signatures": signatures}
    _verify_never_crashes(json.dumps(env).encode())


@given(json_values)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_signed_random_payloads_are_receipt_errors(value: object) -> None:
    """Signed by the trusted key, yet not a statement: parsed only after the signature."""
    with pytest.raises(ReceiptError):
        receipt.verify_statement(receipt.sign(json.dumps(value).encode(), TRUSTED), [TRUSTED_PUB])


@given(
    field=st.sampled_from(
        ["verdict", "head", "patch", "proven_tree", "journal", "reasons", "checks"]
    ),
    value=json_values,
)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_signed_statements_with_random_predicate_fields_never_crash(
    field: str, value: object
) -> None:
    p = sample.predicate()
    p[field] = value
    statement = receipt.build_statement(
        p,
        patch_sha256=sample.PATCH_SHA256,
        head_commit=sample.HEAD_COMMIT,
        proven_tree=sample.HEAD_TREE,
    )
    _verify_never_crashes(receipt.sign(receipt.serialize(statement), TRUSTED))
