"""The signed receipt: an in-toto Statement v1 inside a DSSE envelope (SPEC §4).

Signing serializes the statement once (`serialize`, canonical JSON) and signs exactly those
bytes: Ed25519 over `PAE(payloadType, payload)`. Verification works in the opposite order
and trusts nothing before the signature holds:

1. size limit, then a strict parse of the envelope (exact keys and types, no duplicates);
2. `payloadType` must be ours; the payload and signatures must be canonical base64
   (standard or URL-safe alphabet, padding optional);
3. every signature is tried against every trusted key (a `keyid` is only a hint);
4. only then is the payload parsed: statement type, predicate type, subjects, the journal
   chain, and the agreement of subjects with the predicate;
5. finally the caller's expectations: commit, tree, patch bytes, required verdict.

Signing and verifying use `cryptography` and a few lines of DSSE, not securesystemslib's
`Envelope`: its `verify` only considers signatures whose keyid equals the key's own
(securesystemslib#416; SPEC §4 makes keyid a hint), its decoder tolerates non-canonical
base64, and importing it costs about twice as much as `cryptography` on the `verify` path.
The test suite verifies our receipts with securesystemslib, so a second implementation
agrees with this one.

`cryptography` is imported lazily: rendering and parsing never pay for it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

from gate.errors import SigningKeyError
from gate.journal import canonical_json, verify_chain
from gate.model import JsonDict, Verdict

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PREDICATE_TYPE: Final = "https://proofgate.dev/receipt/v1"
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
MAX_RECEIPT_BYTES: Final = 64 * 1024 * 1024

SUBJECT_PATCH: Final = "patch.diff"
SUBJECT_HEAD: Final = "head"
SUBJECT_TREE: Final = "proven-tree"

_SHA256 = re.compile(r"[0-9a-f]{64}")
_GIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 object ids
_B64_STD = re.compile(r"[A-Za-z0-9+/]*")
_B64_URL = re.compile(r"[A-Za-z0-9_-]*")


class ReceiptError(Exception):
    """A receipt (or approval) failed verification; `str(e)` is one clear reason line."""


# --- building and signing -------------------------------------------------------------


def build_statement(
    predicate: Mapping[str, object],
    *,
    patch_sha256: str,
    head_commit: str,
    proven_tree: str | None,
) -> JsonDict:
    """An in-toto Statement v1 around `predicate`.

    Subjects, in this order: the patch (sha256 first, so sha256-only verifiers such as
    cosign can check it against `patch.diff`), the head commit, and the proven tree when
    there is one (SPEC §4).
    """
    subjects: list[JsonDict] = [
        {"name": SUBJECT_PATCH, "digest": {"sha256": patch_sha256}},
        {"name": SUBJECT_HEAD, "digest": {"gitCommit": head_commit}},
    ]
    if proven_tree is not None:
        subjects.append({"name": SUBJECT_TREE, "digest": {"gitTree": proven_tree}})
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": dict(predicate),
    }


def serialize(statement: Mapping[str, object]) -> bytes:
    """The exact payload bytes that get signed; serialize once and keep them."""
    return canonical_json(statement)


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


# --- keys ------------------------------------------------------------------------------


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


# --- verification ----------------------------------------------------------------------


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


def _reject_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    d: dict[str, object] = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def parse_json(data: bytes, *, what: str) -> object:
    """Strict JSON: UTF-8, no duplicate keys, no NaN/Infinity; a ReceiptError otherwise.

    Raises:
        ReceiptError: `data` is not such JSON.
    """
    try:
        text = data.decode("utf-8")
        return json.loads(
            text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
        )
    except UnicodeDecodeError as e:
        raise ReceiptError(f"{what} is not UTF-8 text") from e
    except ValueError as e:  # JSONDecodeError, duplicate keys, too many integer digits
        raise ReceiptError(f"{what} is not valid JSON: {str(e).splitlines()[0]}") from e
    except RecursionError as e:
        raise ReceiptError(f"{what} is nested too deeply") from e


def _parse_envelope(
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

    payload, decoded = _parse_envelope(envelope, payload_type=payload_type, max_bytes=max_bytes)
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


def unverified_statement(envelope: bytes, *, max_bytes: int = MAX_RECEIPT_BYTES) -> JsonDict:
    """The statement of a receipt WITHOUT checking any signature, chain or subject.

    For display and for reading digests to approve (`show` without `--key`, `approve
    --receipt`); never evidence. Callers must say that the result is unverified.

    Raises:
        ReceiptError: the envelope or its payload is malformed, or another payloadType.
    """
    payload, _ = _parse_envelope(envelope, payload_type=PAYLOAD_TYPE, max_bytes=max_bytes)
    statement = parse_json(payload, what="receipt statement")
    if not isinstance(statement, dict):
        raise ReceiptError("receipt statement is not a JSON object")
    return statement


def _subject_digests(subjects: object) -> dict[str, tuple[str, str]]:
    """name -> (algorithm, digest) for exactly our subjects, in SPEC order."""
    if not isinstance(subjects, list):
        raise ReceiptError("statement subject is not a list")
    want = [(SUBJECT_PATCH, "sha256"), (SUBJECT_HEAD, "gitCommit"), (SUBJECT_TREE, "gitTree")]
    if len(subjects) not in (2, 3):
        raise ReceiptError(f"statement has {len(subjects)} subjects (expected 2 or 3)")
    out: dict[str, tuple[str, str]] = {}
    for s, (name, alg) in zip(subjects, want, strict=False):
        if not isinstance(s, dict) or set(s) != {"name", "digest"}:
            raise ReceiptError("statement subject is malformed (expected {name, digest})")
        digest = s["digest"]
        if s["name"] != name or not isinstance(digest, dict) or set(digest) != {alg}:
            raise ReceiptError(f"statement subjects are not [{', '.join(n for n, _ in want)}]")
        value = digest[alg]
        pattern = _SHA256 if alg == "sha256" else _GIT_ID
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise ReceiptError(f"subject {name} has a malformed {alg} digest")
        out[name] = (alg, value)
    return out


def _field(predicate: Mapping[str, object], *path: str) -> object:
    cur: object = predicate
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return cur


def satisfies(verdict: Verdict, require: Verdict) -> bool:
    """Whether `verdict` meets `--require`: at most as severe (SPEC §3 worst-wins order).

    PROVEN is met only by PROVEN; HELD by PROVEN or HELD; FAILED by PROVEN, HELD or
    FAILED; and so on up to BLOCKED, which every verdict meets.
    """
    return verdict.severity <= require.severity


def verify(
    envelope: bytes,
    keys: Sequence[Ed25519PublicKey],
    *,
    commit: str | None = None,
    tree: str | None = None,
    patch: bytes | None = None,
    require: Verdict | None = None,
    max_bytes: int = MAX_RECEIPT_BYTES,
) -> JsonDict:
    """The statement of a receipt signed by one of `keys`, after every check holds.

    `commit` and `tree` (full hex ids, any case) must equal both the subject and the
    predicate's field; `patch` is the patch file's bytes, whose SHA-256 must equal the
    patch subject and `predicate.patch.sha256`; `require` is the worst acceptable verdict
    (see `satisfies`).

    Raises:
        ReceiptError: the first check that fails, as one line; never anything else for
            malformed input.
    """
    payload, _key = open_envelope(envelope, keys, payload_type=PAYLOAD_TYPE, max_bytes=max_bytes)
    statement = parse_json(payload, what="receipt statement")
    if not isinstance(statement, dict):
        raise ReceiptError("receipt statement is not a JSON object")
    if statement.get("_type") != STATEMENT_TYPE:
        raise ReceiptError(f"statement _type is not {STATEMENT_TYPE}")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise ReceiptError(f"predicateType is not {PREDICATE_TYPE}")
    subjects = _subject_digests(statement.get("subject"))
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        raise ReceiptError("statement predicate is not a JSON object")

    events = _field(predicate, "journal", "events")
    if not isinstance(events, list):
        raise ReceiptError("predicate has no journal")
    broken = verify_chain(events, _field(predicate, "journal", "head"))
    if broken is not None:
        raise ReceiptError(f"journal chain is broken: {broken}")

    patch_digest = subjects[SUBJECT_PATCH][1]
    head_commit = subjects[SUBJECT_HEAD][1]
    proven_tree = subjects[SUBJECT_TREE][1] if SUBJECT_TREE in subjects else None
    if _field(predicate, "patch", "sha256") != patch_digest:
        raise ReceiptError("patch subject disagrees with predicate.patch.sha256")
    if _field(predicate, "head", "commit") != head_commit:
        raise ReceiptError("head subject disagrees with predicate.head.commit")
    if predicate.get("proven_tree") != proven_tree:
        raise ReceiptError("proven-tree subject disagrees with predicate.proven_tree")
    raw_verdict = predicate.get("verdict")
    if not isinstance(raw_verdict, str) or raw_verdict not in {v.value for v in Verdict}:
        raise ReceiptError(f"predicate verdict {raw_verdict!r} is not a verdict")
    verdict = Verdict(raw_verdict)

    if commit is not None and commit.lower() != head_commit:
        raise ReceiptError(f"receipt is for commit {head_commit}, not {commit}")
    if tree is not None:
        if proven_tree is None:
            raise ReceiptError(f"receipt proves no tree (verdict {verdict}), not {tree}")
        if tree.lower() != proven_tree:
            raise ReceiptError(f"receipt is for tree {proven_tree}, not {tree}")
    if patch is not None:
        actual = hashlib.sha256(patch).hexdigest()
        if actual != patch_digest:
            raise ReceiptError(f"patch has sha256 {actual}; the receipt is for {patch_digest}")
    if require is not None and not satisfies(verdict, require):
        raise ReceiptError(f"verdict is {verdict}; {require} is required")
    return statement
