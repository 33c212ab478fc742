"""The signed receipt: an in-toto Statement v1 inside a DSSE envelope (SPEC §4).

Signing serializes the statement once (`serialize`, canonical JSON) and signs exactly those
bytes: Ed25519 over `PAE(payloadType, payload)`. Verification works in the opposite order
and trusts nothing before the signature holds (see `verify`).

    canonical.py  canonical JSON (what gets signed) and the strict JSON parser
    keys.py       Ed25519 keys: generate, load, keyid
    dsse.py       PAE, the envelope codec, sign, open an envelope with trusted keys
    predicate.py  the frozen `Predicate`, `Preflight`, `build_predicate`, the statement
    verify.py     `verify(envelope, expect) -> VerifiedReceipt` and the expectations
    shape.py      the predicate's documented shape, checked by `verify` once it is signed
    files.py      the three receipt files (receipt.json, receipt.md, patch.diff)
"""

from gate.receipt.canonical import canonical_json, parse_json
from gate.receipt.dsse import MAX_RECEIPT_BYTES, PAYLOAD_TYPE, b64decode, open_envelope, pae, sign
from gate.receipt.errors import ReceiptError, VerificationError
from gate.receipt.files import write_receipt_files
from gate.receipt.keys import (
    generate_keypair,
    keyid,
    load_private_key,
    load_public_key,
    public_pem,
)
from gate.receipt.predicate import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    SUBJECT_HEAD,
    SUBJECT_PATCH,
    SUBJECT_TREE,
    Builder,
    Predicate,
    Preflight,
    build_predicate,
    build_statement,
    serialize,
)
from gate.receipt.verify import (
    AllOf,
    AtLeast,
    Branch,
    Changed,
    ConfigBlob,
    Expectation,
    PatchFile,
    Repository,
    Signed,
    Subject,
    TriggerIn,
    VerifiedReceipt,
    WholeProof,
    expectations,
    satisfies,
    unverified_statement,
    verify,
    verify_statement,
)

__all__ = [
    "MAX_RECEIPT_BYTES",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "SUBJECT_HEAD",
    "SUBJECT_PATCH",
    "SUBJECT_TREE",
    "AllOf",
    "AtLeast",
    "Branch",
    "Builder",
    "Changed",
    "ConfigBlob",
    "Expectation",
    "PatchFile",
    "Predicate",
    "Preflight",
    "ReceiptError",
    "Repository",
    "Signed",
    "Subject",
    "TriggerIn",
    "VerificationError",
    "VerifiedReceipt",
    "WholeProof",
    "b64decode",
    "build_predicate",
    "build_statement",
    "canonical_json",
    "expectations",
    "generate_keypair",
    "keyid",
    "load_private_key",
    "load_public_key",
    "open_envelope",
    "pae",
    "parse_json",
    "public_pem",
    "satisfies",
    "serialize",
    "sign",
    "unverified_statement",
    "verify",
    "verify_statement",
    "write_receipt_files",
]
