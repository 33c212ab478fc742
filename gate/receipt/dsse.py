"""DSSE v1: the Pre-Authentication Encoding, the envelope codec, signing, and opening an
envelope with trusted keys (nothing in the payload is read before a signature holds).

Signing and verifying use `cryptography` and a few lines of DSSE, not securesystemslib's
`Envelope`: its `verify` only considers signatures whose keyid equals the key's own
(securesystemslib#416; SPEC §4 makes keyid a hint), its decoder tolerates non-canonical
base64, and importing it costs about twice as much as `cryptography` on the `verify` path.
The test suite verifies our receipts with securesystemslib, so a second implementation
agrees with this one.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from gate.model import JsonDict
from gate.receipt.canonical import canonical_json, parse_json
from gate.receipt.errors import ReceiptError
from gate.receipt.keys import keyid

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
MAX_RECEIPT_BYTES: Final = 64 * 1024 * 1024

_B64_STD = re.compile(r"[A-Za-z0-9+/]*")
_B64_URL = re.compile(r"[A-Za-z0-9_-]*")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 Pre-Authentication Encoding (lengths are byte lengths, in ASCII decimal)."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


def sign(
    payload: bytes,
    key: Ed25519PrivateKey | None,
    *,
    payload_type: str = PAYLOAD_TYPE,
) -> bytes:
    """A DSSE envelope (JSON bytes, newline-terminated) around `payload`.

    With `key=None` the envelope has no signatures: `verify` never accepts it, but the
    receipt still records what happened.
    """
    signatures: list[JsonDict] = []
    if key is not None:
        sig = key.sign(pae(payload_type, payload))
        signatures.append(
            {"keyid": keyid(key.public_key()), "sig": base64.b64encode(sig).decode("ascii")}
        )
    envelope: JsonDict = {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": signatures,
    }
    return canonical_json(envelope) + b"\n"


def b64decode(text: str, *, what: str) -> bytes:
    """Canonical base64, standard or URL-safe alphabet, with or without padding.

    Anything else (mixed alphabets, whitespace, stray or excess padding, non-zero unused
    bits) is rejected, so one byte sequence has exactly one accepted encoding per alphabet
    and padding choice.

    Raises:
        ReceiptError: `text` is not such an encoding.
    """
    body = text.rstrip("=")
    pad = len(text) - len(body)
    if _B64_STD.fullmatch(body):
        altchars = None
    elif _B64_URL.fullmatch(body):
        altchars = b"-_"
    else:
        raise ReceiptError(f"{what} is not base64")
    if len(body) % 4 == 1 or (pad and (len(body) + pad) % 4) or pad > 2:
        raise ReceiptError(f"{what} is not base64 (bad length or padding)")
    raw = body.encode("ascii")
    try:
        data = base64.b64decode(raw + b"=" * (-len(raw) % 4), altchars=altchars, validate=True)
    except binascii.Error as e:  # pragma: no cover - excluded by the checks above
        raise ReceiptError(f"{what} is not base64") from e
    canonical = base64.b64encode(data, altchars=altchars).rstrip(b"=")
    if canonical != raw:
        raise ReceiptError(f"{what} is not canonical base64")
    return data


def parse_envelope(
    envelope: bytes, *, payload_type: str, max_bytes: int
) -> tuple[bytes, list[tuple[str | None, bytes]]]:
    """(payload, [(keyid hint, signature)]) of a well-formed DSSE envelope; nothing verified."""
    if len(envelope) > max_bytes:
        raise ReceiptError(f"receipt is larger than the {max_bytes}-byte limit")
    env = parse_json(envelope, what="receipt")
    if not isinstance(env, dict):
        raise ReceiptError("receipt is not a DSSE envelope (expected a JSON object)")
    expected = {"payloadType", "payload", "signatures"}
    if set(env) != expected:
        extra = sorted(set(env) - expected)
        missing = sorted(expected - set(env))
        detail = f"missing {', '.join(missing)}" if missing else f"unexpected {', '.join(extra)}"
        raise ReceiptError(f"receipt is not a DSSE envelope ({detail})")
    ptype, payload_text, sigs = env["payloadType"], env["payload"], env["signatures"]
    if not isinstance(ptype, str) or not isinstance(payload_text, str):
        raise ReceiptError("receipt is not a DSSE envelope (payloadType/payload not strings)")
    if not isinstance(sigs, list):
        raise ReceiptError("receipt is not a DSSE envelope (signatures is not a list)")
    if ptype != payload_type:
        raise ReceiptError(f"unexpected payloadType {ptype!r} (expected {payload_type!r})")
    payload = b64decode(payload_text, what="receipt payload")
    decoded: list[tuple[str | None, bytes]] = []
    for i, s in enumerate(sigs):
        if not isinstance(s, dict) or "sig" not in s or not set(s) <= {"keyid", "sig"}:
            raise ReceiptError(f"signature {i} is malformed (expected {{keyid?, sig}})")
        kid, sig = s.get("keyid"), s["sig"]
        if not isinstance(sig, str) or not (kid is None or isinstance(kid, str)):
            raise ReceiptError(f"signature {i} is malformed (keyid/sig not strings)")
        decoded.append((kid, b64decode(sig, what=f"signature {i}")))
    return payload, decoded


def open_envelope(
    envelope: bytes,
    keys: Sequence[Ed25519PublicKey],
    *,
    payload_type: str,
    max_bytes: int = MAX_RECEIPT_BYTES,
) -> tuple[bytes, Ed25519PublicKey]:
    """The payload of a DSSE envelope signed by one of `keys`, and that key.

    Nothing inside the payload is looked at: the caller parses it only after this returns.

    Raises:
        ReceiptError: too large, malformed, another payloadType, unsigned, or no signature
            verifies with a trusted key.
    """
    from cryptography.exceptions import InvalidSignature

    payload, decoded = parse_envelope(envelope, payload_type=payload_type, max_bytes=max_bytes)
    if not decoded:
        raise ReceiptError("receipt is not signed")
    if not keys:
        raise ReceiptError("no trusted public key given")
    message = pae(payload_type, payload)
    # keyid is an unauthenticated hint (SPEC §4): every signature meets every trusted key.
    for _kid, sig in decoded:
        for key in keys:
            try:
                key.verify(sig, message)
            except InvalidSignature:
                continue
            return payload, key
    hints = ", ".join(sorted({(k or "none")[:16] for k, _ in decoded}))
    raise ReceiptError(
        f"no valid signature by a trusted key ({len(decoded)} signature(s), keyid {hints})"
    )
