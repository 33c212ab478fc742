"""Receipts: statement shape, DSSE signing, and every way verification must say no (SPEC §4)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gate import receipt
from gate.errors import SigningKeyError
from gate.model import JsonDict, Verdict
from gate.receipt import ReceiptError, canonical_json
from tests.assets import sample

ASSETS = Path(__file__).parent.parent / "assets"
TRUSTED = sample.key("trusted")
UNTRUSTED = sample.key("untrusted")
TRUSTED_PUB = TRUSTED.public_key()


def statement(predicate: JsonDict | None = None) -> JsonDict:
    p = sample.predicate() if predicate is None else predicate
    tree = p.get("proven_tree")
    return receipt.build_statement(
        p,
        patch_sha256=sample.PATCH_SHA256,
        head_commit=sample.HEAD_COMMIT,
        proven_tree=tree if isinstance(tree, str) else None,
    )


def signed(predicate: JsonDict | None = None, key: Ed25519PrivateKey | None = TRUSTED) -> bytes:
    return receipt.sign(receipt.serialize(statement(predicate)), key)


def envelope_dict(env: bytes) -> dict[str, Any]:
    d = json.loads(env)
    assert isinstance(d, dict)
    return d


def reject(env: bytes, match: str, **kwargs: object) -> None:
    with pytest.raises(ReceiptError, match=match):
        receipt.verify_statement(env, [TRUSTED_PUB], **kwargs)  # type: ignore[arg-type]


# --- PAE, statement, envelope ---------------------------------------------------------


def test_pae_matches_dsse_spec_test_vector() -> None:
    assert (
        receipt.pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_counts_bytes_not_characters() -> None:
    assert receipt.pae("t/é", "ü".encode()) == "DSSEv1 4 t/é 2 ü".encode()


def test_statement_subjects_patch_first_then_head_then_tree() -> None:
    st = statement()
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == receipt.PREDICATE_TYPE == "https://proofgate.dev/receipt/v1"
    assert st["subject"] == [
        {"name": "patch.diff", "digest": {"sha256": sample.PATCH_SHA256}},
        {"name": "head", "digest": {"gitCommit": sample.HEAD_COMMIT}},
        {"name": "proven-tree", "digest": {"gitTree": sample.HEAD_TREE}},
    ]


def test_statement_without_proven_tree_has_two_subjects_and_verifies() -> None:
    p = sample.predicate(verdict=Verdict.INCONCLUSIVE)
    st = statement(p)
    subjects = st["subject"]
    assert isinstance(subjects, list)
    assert [s["name"] for s in subjects] == ["patch.diff", "head"]
    assert receipt.verify_statement(signed(p), [TRUSTED_PUB]) == st


def test_envelope_signs_the_exact_serialized_statement() -> None:
    st = statement()
    env = envelope_dict(signed())
    assert env["payloadType"] == "application/vnd.in-toto+json"
    assert base64.b64decode(str(env["payload"])) == canonical_json(st)
    [sig] = env["signatures"]
    assert sig["keyid"] == receipt.keyid(TRUSTED_PUB)
    TRUSTED_PUB.verify(
        base64.b64decode(sig["sig"]), receipt.pae(receipt.PAYLOAD_TYPE, canonical_json(st))
    )


def test_valid_receipt_verifies_with_every_expectation() -> None:
    st = receipt.verify_statement(
        signed(),
        [UNTRUSTED.public_key(), TRUSTED_PUB],
        commit=sample.HEAD_COMMIT.upper(),
        tree=sample.HEAD_TREE,
        patch=sample.PATCH,
        require=Verdict.PROVEN,
    )
    assert st == statement()


def test_sign_is_deterministic() -> None:
    assert signed() == signed()


# --- independent DSSE implementation --------------------------------------------------


def test_our_receipt_verifies_with_securesystemslib() -> None:
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

    env = Envelope.from_dict(envelope_dict(signed()))
    key = SSlibKey.from_crypto(TRUSTED_PUB, keyid=receipt.keyid(TRUSTED_PUB))
    accepted = env.verify([key], 1)
    assert list(accepted) == [receipt.keyid(TRUSTED_PUB)]
    assert env.payload_type == receipt.PAYLOAD_TYPE
    assert json.loads(env.payload) == statement()


def test_securesystemslib_rejects_our_receipt_under_another_key() -> None:
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

    env = Envelope.from_dict(envelope_dict(signed(key=UNTRUSTED)))
    key = SSlibKey.from_crypto(TRUSTED_PUB, keyid=receipt.keyid(UNTRUSTED.public_key()))
    with pytest.raises(VerificationError):
        env.verify([key], 1)


def test_receipt_signed_by_securesystemslib_verifies_with_ours() -> None:
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import (  # type: ignore[attr-defined]
        CryptoSigner,
        SSlibKey,
    )

    payload = receipt.serialize(statement())
    env = Envelope(payload=payload, payload_type=receipt.PAYLOAD_TYPE, signatures={})
    pub = SSlibKey.from_crypto(TRUSTED_PUB, keyid=receipt.keyid(TRUSTED_PUB))
    env.sign(CryptoSigner(TRUSTED, pub))
    data = json.dumps(env.to_dict()).encode()
    assert receipt.verify_statement(data, [TRUSTED_PUB], require=Verdict.PROVEN) == statement()


# --- signatures and keys ----------------------------------------------------------------


def test_receipt_signed_by_untrusted_key_is_rejected() -> None:
    reject(signed(key=UNTRUSTED), "no valid signature by a trusted key")


def test_unsigned_receipt_is_rejected() -> None:
    reject(signed(key=None), "^receipt is not signed$")


def test_no_trusted_keys_rejects_everything() -> None:
    with pytest.raises(ReceiptError, match="no trusted public key"):
        receipt.verify_statement(signed(), [])


def test_trusted_keyid_on_untrusted_signature_is_rejected() -> None:
    env = envelope_dict(signed(key=UNTRUSTED))
    env["signatures"][0]["keyid"] = receipt.keyid(TRUSTED_PUB)
    reject(json.dumps(env).encode(), "no valid signature by a trusted key")


@pytest.mark.parametrize("keyid", [None, "", "not-a-keyid", "0" * 64], ids=str)
def test_keyid_is_only_a_hint(keyid: str | None) -> None:
    env = envelope_dict(signed())
    sig = env["signatures"][0]
    if keyid is None:
        del sig["keyid"]
    else:
        sig["keyid"] = keyid
    assert receipt.verify_statement(json.dumps(env).encode(), [TRUSTED_PUB]) == statement()


def test_untrusted_signature_next_to_a_trusted_one_is_ignored() -> None:
    good = envelope_dict(signed())
    bad = envelope_dict(signed(key=UNTRUSTED))
    good["signatures"] = bad["signatures"] + good["signatures"]
    assert receipt.verify_statement(json.dumps(good).encode(), [TRUSTED_PUB]) == statement()


def test_signature_over_payload_without_pae_is_rejected() -> None:
    payload = receipt.serialize(statement())
    env = envelope_dict(signed())
    env["signatures"] = [{"sig": base64.b64encode(TRUSTED.sign(payload)).decode()}]
    reject(json.dumps(env).encode(), "no valid signature")


def test_generate_keypair_round_trips() -> None:
    private_pem, public_pem = receipt.generate_keypair()
    assert private_pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public_pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    key = receipt.load_private_key(private_pem, source="test.key")
    pub = receipt.load_public_key(public_pem, source="test.pub")
    env = receipt.sign(receipt.serialize(statement()), key)
    assert receipt.verify_statement(env, [pub]) == statement()
    with pytest.raises(ReceiptError):
        receipt.verify_statement(env, [TRUSTED_PUB])


def test_keyid_is_sha256_of_der_subject_public_key_info() -> None:
    der = TRUSTED_PUB.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert receipt.keyid(TRUSTED_PUB) == hashlib.sha256(der).hexdigest()


def test_key_from_env_style_pem_with_surrounding_whitespace_loads() -> None:
    pem = (ASSETS / "keys" / "trusted.key").read_bytes()
    key = receipt.load_private_key(
        b"\n  " + pem.strip() + b"  \n\n", source="PROOFGATE_SIGNING_KEY"
    )
    assert receipt.keyid(key.public_key()) == receipt.keyid(TRUSTED_PUB)


def _pem(key: object) -> tuple[bytes, bytes]:
    assert isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey)
    priv = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return priv, pub


@pytest.mark.parametrize(
    ("pem", "match"),
    [
        (b"", "not a PEM private key"),
        (b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n", "not a PEM"),
        (_pem(ec.generate_private_key(ec.SECP256R1()))[0], "Ed25519 keys only"),
        ((ASSETS / "keys" / "trusted.pub").read_bytes(), "is a public key"),
        (
            TRUSTED.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(b"pw"),
            ),
            "encrypted",
        ),
    ],
    ids=["empty", "garbled", "ecdsa", "public-key", "encrypted"],
)
def test_bad_private_key_is_a_signing_key_error_naming_the_source(pem: bytes, match: str) -> None:
    with pytest.raises(SigningKeyError, match=match) as info:
        receipt.load_private_key(pem, source="ci/secret.key")
    assert str(info.value).startswith("ci/secret.key: ")
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("pem", "match"),
    [
        (b"not a key", "not a PEM public key"),
        (_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))[1], "Ed25519"),
        ((ASSETS / "keys" / "trusted.key").read_bytes(), "is a private key"),
    ],
    ids=["garbled", "rsa", "private-key"],
)
def test_bad_public_key_is_a_signing_key_error_naming_the_source(pem: bytes, match: str) -> None:
    with pytest.raises(SigningKeyError, match=match) as info:
        receipt.load_public_key(pem, source="keys/release.pub")
    assert str(info.value).startswith("keys/release.pub: ")


# --- replay: right signature, wrong subject ------------------------------------------


def test_receipt_replayed_on_other_commit_fails_verify() -> None:
    reject(signed(), "is for commit 3333.*not 5555", commit=sample.OTHER_COMMIT)


def test_receipt_replayed_on_other_tree_fails_verify() -> None:
    reject(signed(), "is for tree 4444.*not 6666", tree=sample.OTHER_TREE)


def test_receipt_replayed_on_other_patch_fails_verify() -> None:
    reject(signed(), "patch has sha256", patch=sample.PATCH + b" ")


def test_receipt_without_proven_tree_fails_a_tree_check() -> None:
    p = sample.predicate(verdict=Verdict.INCONCLUSIVE)
    reject(signed(p), "proves no tree", tree=sample.HEAD_TREE)


def test_subject_disagreeing_with_predicate_is_rejected_even_when_signed() -> None:
    for field, value, match in [
        (("head", "commit"), sample.OTHER_COMMIT, "head subject disagrees"),
        (("patch", "sha256"), "0" * 64, "patch subject disagrees"),
        (("proven_tree",), sample.OTHER_TREE, "proven-tree subject disagrees"),
    ]:
        p = sample.predicate()
        target: dict[str, object] = p
        for k in field[:-1]:
            target = target[k]  # type: ignore[assignment]
        target[field[-1]] = value
        st = receipt.build_statement(
            p,
            patch_sha256=sample.PATCH_SHA256,
            head_commit=sample.HEAD_COMMIT,
            proven_tree=sample.HEAD_TREE,
        )
        reject(receipt.sign(receipt.serialize(st), TRUSTED), match)


@pytest.mark.parametrize(
    ("verdict", "require", "ok"),
    [
        (Verdict.PROVEN, Verdict.PROVEN, True),
        (Verdict.HELD, Verdict.PROVEN, False),
        (Verdict.FAILED, Verdict.PROVEN, False),
        (Verdict.BLOCKED, Verdict.PROVEN, False),
        (Verdict.INCONCLUSIVE, Verdict.PROVEN, False),
        (Verdict.HELD, Verdict.HELD, True),
        (Verdict.FAILED, Verdict.HELD, False),
        (Verdict.PROVEN, Verdict.FAILED, True),
        (Verdict.INCONCLUSIVE, Verdict.BLOCKED, True),
    ],
    ids=lambda v: str(v),
)
def test_require_is_worst_acceptable_verdict(verdict: Verdict, require: Verdict, ok: bool) -> None:
    env = signed(sample.predicate(verdict=verdict))
    if ok:
        receipt.verify_statement(env, [TRUSTED_PUB], require=require)
    else:
        reject(env, f"verdict is {verdict}; {require} is required", require=require)


def test_failed_receipt_relabelled_proven_needs_a_new_signature() -> None:
    env = envelope_dict(signed(sample.predicate(verdict=Verdict.FAILED)))
    st = json.loads(base64.b64decode(str(env["payload"])))
    st["predicate"]["verdict"] = "PROVEN"
    env["payload"] = base64.b64encode(canonical_json(st)).decode()
    reject(json.dumps(env).encode(), "no valid signature")


# --- journal ---------------------------------------------------------------------------


def _journal_variant(kind: str) -> JsonDict:
    p = sample.predicate()
    events: list[dict[str, object]] = p["journal"]["events"]  # type: ignore[index]
    if kind == "removed":
        del events[3]
    elif kind == "reordered":
        events[2], events[3] = events[3], events[2]
    elif kind == "edited":
        events[4]["data"] = {"check": "unit", "exit_code": 1}
    elif kind == "truncated":
        del events[-1]
    return p


@pytest.mark.parametrize("kind", ["removed", "reordered", "edited", "truncated"])
def test_journal_tampered_and_resigned_with_untrusted_key_is_rejected(kind: str) -> None:
    reject(signed(_journal_variant(kind), key=UNTRUSTED), "no valid signature by a trusted key")


@pytest.mark.parametrize("kind", ["removed", "reordered", "edited", "truncated"])
def test_journal_tampered_and_resigned_with_trusted_key_fails_chain(kind: str) -> None:
    reject(signed(_journal_variant(kind)), "journal chain is broken")


def test_journal_edit_resigned_with_trusted_key_still_fails_chain() -> None:
    p = sample.predicate()
    p["journal"]["events"][-1]["data"]["verdict"] = "FAILED"  # type: ignore[index]
    reject(signed(p), "journal chain is broken: journal event 6 was altered")


def test_journal_missing_is_rejected() -> None:
    p = sample.predicate()
    del p["journal"]
    reject(signed(p), "predicate field journal is missing; expected the journal")


# --- payloadType and envelope shape ---------------------------------------------------


def test_payload_type_swapped_in_envelope_is_rejected() -> None:
    env = envelope_dict(signed())
    env["payloadType"] = "application/json"
    reject(json.dumps(env).encode(), "unexpected payloadType 'application/json'")


def test_payload_type_swapped_and_resigned_is_rejected() -> None:
    env = receipt.sign(receipt.serialize(statement()), TRUSTED, payload_type="application/json")
    reject(env, "unexpected payloadType")


def test_approval_envelope_presented_as_receipt_is_rejected() -> None:
    reject((ASSETS / "approvals" / "approval.json").read_bytes(), "unexpected payloadType")


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda e: e.pop("signatures"), "missing signatures"),
        (lambda e: e.update(extra=1), "unexpected extra"),
        (lambda e: e.update(payload=1), "not strings"),
        (lambda e: e.update(signatures={}), "signatures is not a list"),
        (lambda e: e.update(signatures=[{"sig": 1}]), "signature 0 is malformed"),
        (lambda e: e.update(signatures=[{"keyid": "x"}]), "signature 0 is malformed"),
        (lambda e: e.update(signatures=[{"sig": "AA==", "x": 1}]), "signature 0 is malformed"),
        (lambda e: e.update(signatures=[{"sig": "!!"}]), "signature 0 is not base64"),
    ],
    ids=[
        "no-signatures",
        "extra-key",
        "payload-int",
        "sigs-object",
        "sig-int",
        "no-sig",
        "sig-extra-key",
        "sig-not-base64",
    ],
)
def test_malformed_envelope_is_rejected(mutate: object, match: str) -> None:
    env = envelope_dict(signed())
    mutate(env)  # type: ignore[operator]
    reject(json.dumps(env).encode(), match)


def test_duplicate_envelope_keys_are_rejected() -> None:
    env = signed().decode()
    dup = env.replace('{"payload":', '{"payloadType":"x","payload":', 1)
    reject(dup.encode(), "duplicate key")


# --- base64 ------------------------------------------------------------------------------


def _reencode(env: bytes, encode: object) -> bytes:
    d = envelope_dict(env)
    payload = base64.b64decode(str(d["payload"]))
    d["payload"] = encode(payload)  # type: ignore[operator]
    for s in d["signatures"]:
        s["sig"] = encode(base64.b64decode(s["sig"]))  # type: ignore[operator]
    return json.dumps(d).encode()


@pytest.mark.parametrize(
    "encode",
    [
        lambda b: base64.urlsafe_b64encode(b).decode(),
        lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="),
        lambda b: base64.b64encode(b).decode().rstrip("="),
    ],
    ids=["url-safe", "url-safe-unpadded", "standard-unpadded"],
)
def test_other_base64_forms_are_accepted(encode: object) -> None:
    # The sample payload's length is not a multiple of 3, so unpadded forms really differ.
    assert len(receipt.serialize(statement())) % 3 != 0
    assert receipt.verify_statement(_reencode(signed(), encode), [TRUSTED_PUB]) == statement()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("aGk+/-_=", "not base64"),  # mixed alphabets
        ("aGk= ", "not base64"),
        ("aG k=", "not base64"),
        ("aGk===", "bad length or padding"),
        ("aGk", None),
        ("aGl=", "not canonical"),  # non-zero unused bits: another spelling of "hi"
        ("a", "bad length or padding"),
        ("aQ=", "bad length or padding"),
        ("é", "not base64"),
    ],
)
def test_b64decode_is_strict(text: str, match: str | None) -> None:
    if match is None:
        assert receipt.b64decode(text, what="x") == b"hi"
    else:
        with pytest.raises(ReceiptError, match=match):
            receipt.b64decode(text, what="x")


# --- garbage -----------------------------------------------------------------------------


def test_huge_receipt_is_rejected_before_parsing() -> None:
    reject(b" " * (64 * 1024 * 1024 + 1), "larger than the 67108864-byte limit")
    reject(signed(), "larger than the 100-byte limit", max_bytes=100)


def test_deeply_nested_json_is_a_receipt_error() -> None:
    reject(b"[" * 200_000 + b"]" * 200_000, "nested too deeply|not valid JSON")


def test_huge_integer_is_a_receipt_error() -> None:
    reject(b'{"payloadType":' + b"9" * 100_000 + b"}", "not valid JSON")


@pytest.mark.parametrize(
    "data",
    [b"", b"null", b"[]", b'"x"', b"{", b"\xff\xfe", b'{"payload": NaN}', b"\x00" * 10],
    ids=["empty", "null", "list", "string", "truncated", "bad-utf8", "nan", "nul"],
)
def test_garbage_is_a_receipt_error(data: bytes) -> None:
    with pytest.raises(ReceiptError):
        receipt.verify_statement(data, [TRUSTED_PUB])


def test_truncated_receipts_are_receipt_errors() -> None:
    env = signed()
    for n in range(0, len(env) - 1, 7):
        with pytest.raises(ReceiptError):
            receipt.verify_statement(env[:n], [TRUSTED_PUB])


@pytest.mark.parametrize(
    "payload",
    [b"", b"not json", b"[]", b"{}", b'{"_type":"https://in-toto.io/Statement/v1"}'],
    ids=["empty", "text", "list", "object", "type-only"],
)
def test_signed_garbage_payload_is_a_receipt_error(payload: bytes) -> None:
    reject(receipt.sign(payload, TRUSTED), ".")


def test_signed_statement_with_wrong_subjects_is_rejected() -> None:
    good = statement()
    cases = {
        "reordered": [good["subject"][1], good["subject"][0]],  # type: ignore[index]
        "extra": [*good["subject"], {"name": "x", "digest": {"sha256": "0" * 64}}],  # type: ignore[misc]
        "bad-digest": [{"name": "patch.diff", "digest": {"sha256": "ABC"}}, good["subject"][1]],  # type: ignore[index]
        "not-list": {"name": "patch.diff"},
    }
    for name, subjects in cases.items():
        st = copy.deepcopy(good)
        st["subject"] = subjects
        with pytest.raises(ReceiptError, match="subject"):
            receipt.verify_statement(receipt.sign(receipt.serialize(st), TRUSTED), [TRUSTED_PUB])
        assert name


def test_signed_statement_with_other_predicate_type_is_rejected() -> None:
    st = statement()
    st["predicateType"] = "https://slsa.dev/provenance/v1"
    reject(receipt.sign(receipt.serialize(st), TRUSTED), "predicateType is not")


# --- committed assets -----------------------------------------------------------------


def test_asset_receipts_verify_as_documented() -> None:
    pub = receipt.load_public_key((ASSETS / "keys" / "trusted.pub").read_bytes(), source="pub")
    r = ASSETS / "receipts"
    st = receipt.verify_statement(
        (r / "proven.json").read_bytes(),
        [pub],
        commit=sample.HEAD_COMMIT,
        tree=sample.HEAD_TREE,
        patch=(r / "patch.diff").read_bytes(),
        require=Verdict.PROVEN,
    )
    assert st == statement()
    receipt.verify_statement((r / "failed.json").read_bytes(), [pub], require=Verdict.FAILED)
    for name, match in [
        ("proven-unsigned.json", "not signed"),
        ("proven-signed-by-untrusted-key.json", "no valid signature"),
        ("journal-edited-resigned.json", "journal chain is broken"),
        ("failed.json", "FAILED; PROVEN is required"),
    ]:
        with pytest.raises(ReceiptError, match=match):
            receipt.verify_statement((r / name).read_bytes(), [pub], require=Verdict.PROVEN)


# --- unverified reading (show without --key, approve --receipt) ------------------------


def test_unverified_statement_reads_unsigned_and_untrusted_receipts() -> None:
    assert receipt.unverified_statement(signed(key=None)) == statement()
    assert receipt.unverified_statement(signed(key=UNTRUSTED)) == statement()


@pytest.mark.parametrize(
    "data",
    [b"{}", b"garbage", receipt.sign(b"[]", None), receipt.sign(b"{}", None, payload_type="x")],
    ids=["empty-object", "garbage", "payload-not-object", "other-payload-type"],
)
def test_unverified_statement_rejects_malformed_receipts(data: bytes) -> None:
    with pytest.raises(ReceiptError):
        receipt.unverified_statement(data)
