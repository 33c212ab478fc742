"""Ed25519 keys: generate, load from PEM, and the keyid hint (SPEC §4).

`cryptography` is imported lazily: rendering and parsing never pay for it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import TYPE_CHECKING, Final

from gate.errors import SigningKeyError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )


# A PEM Ed25519 key is about 120 bytes; a key file named on the command line may hold
# comments around it, never more than this (gate/util/bounded.py).
MAX_KEY_BYTES: Final = 64 * 1024


def generate_keypair() -> tuple[bytes, bytes]:
    """A new Ed25519 key pair: (PKCS#8 PEM private key, SubjectPublicKeyInfo PEM public key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return private_pem, public_pem(private.public_key())


def public_pem(pub: Ed25519PublicKey) -> bytes:
    """The SubjectPublicKeyInfo PEM form of `pub`."""
    from cryptography.hazmat.primitives import serialization

    return pub.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def keyid(pub: Ed25519PublicKey) -> str:
    """SHA-256 (hex) of the public key's DER SubjectPublicKeyInfo: a hint, never trust."""
    return hashlib.sha256(_ED25519_SPKI_PREFIX + pub.public_bytes_raw()).hexdigest()


def _pem_kind(pem: bytes) -> str:
    m = re.search(rb"-----BEGIN ([A-Z0-9 ]+)-----", pem)
    return m.group(1).decode("ascii") if m else ""


# Ed25519 keys have fixed DER encodings (RFC 8410): a constant prefix and 32 key bytes.
# Reading them directly keeps `cryptography...serialization` (and the RSA/EC/SSH modules it
# pulls in, ~20 ms) off the `verify` path; anything else takes the general loader below.
_ED25519_SPKI_PREFIX: Final = bytes.fromhex("302a300506032b6570032100")
_ED25519_PKCS8_PREFIX: Final = bytes.fromhex("302e020100300506032b657004220420")


def _ed25519_der(pem: bytes, label: bytes, prefix: bytes) -> bytes | None:
    """The 32 key bytes of a plain Ed25519 PEM of the given label, or None."""
    m = re.fullmatch(
        rb"\s*-----BEGIN %b-----\s*([A-Za-z0-9+/=\s]+?)\s*-----END %b-----\s*" % (label, label),
        pem,
    )
    if m is None:
        return None
    try:
        der = base64.b64decode(re.sub(rb"\s+", b"", m.group(1)), validate=True)
    except binascii.Error:
        return None
    if len(der) != len(prefix) + 32 or not der.startswith(prefix):
        return None
    return der[len(prefix) :]


def load_private_key(pem: bytes, *, source: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from unencrypted PEM (PKCS#8) text.

    Raises:
        SigningKeyError: the text is not an unencrypted PEM Ed25519 private key; the
            message names `source` (a file path or an environment variable).
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    raw = _ed25519_der(pem, b"PRIVATE KEY", _ED25519_PKCS8_PREFIX)
    if raw is not None:
        return Ed25519PrivateKey.from_private_bytes(raw)

    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    kind = _pem_kind(pem)
    if "PUBLIC" in kind:
        raise SigningKeyError(
            f"{source}: is a public key; signing needs the private key "
            "(`proofgate keygen --out DIR` writes DIR/proofgate.key)"
        )
    try:
        key = serialization.load_pem_private_key(pem.strip() + b"\n", password=None)
    except TypeError as e:  # encrypted PEM without a password
        raise SigningKeyError(
            f"{source}: the private key is encrypted; proofgate needs an unencrypted "
            "PKCS#8 PEM key (keep it in a CI secret instead)"
        ) from e
    except (ValueError, UnsupportedAlgorithm) as e:
        raise SigningKeyError(
            f"{source}: not a PEM private key (expected '-----BEGIN PRIVATE KEY-----' "
            "as written by `proofgate keygen`)"
        ) from e
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(
            f"{source}: is a {type(key).__name__.removesuffix('PrivateKey') or 'non'} key; "
            "proofgate signs with Ed25519 keys only (`proofgate keygen`)"
        )
    return key


def load_public_key(pem: bytes, *, source: str) -> Ed25519PublicKey:
    """An Ed25519 public key from SubjectPublicKeyInfo PEM text.

    Raises:
        SigningKeyError: the text is not a PEM Ed25519 public key; the message names `source`.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = _ed25519_der(pem, b"PUBLIC KEY", _ED25519_SPKI_PREFIX)
    if raw is not None:
        return Ed25519PublicKey.from_public_bytes(raw)

    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    kind = _pem_kind(pem)
    if "PRIVATE" in kind:
        raise SigningKeyError(
            f"{source}: is a private key; verification takes the public key "
            "(DIR/proofgate.pub); do not hand out the private key"
        )
    try:
        key = serialization.load_pem_public_key(pem.strip() + b"\n")
    except (ValueError, UnsupportedAlgorithm) as e:
        raise SigningKeyError(
            f"{source}: not a PEM public key (expected '-----BEGIN PUBLIC KEY-----' "
            "as written by `proofgate keygen`)"
        ) from e
    if not isinstance(key, Ed25519PublicKey):
        raise SigningKeyError(
            f"{source}: is a {type(key).__name__.removesuffix('PublicKey') or 'non'} key; "
            "proofgate receipts are signed with Ed25519 keys only"
        )
    return key
