"""Regenerate tests/assets/ (keys, receipts, approvals) from fixed keys and fixed times.

Run as `scripts/make-assets` (or `python -m tests.assets.make` from the repository root).
The output is byte-identical on every run, so `make assets && git diff --exit-code` shows
that the committed assets are what the code produces today.
"""

from __future__ import annotations

import copy
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from gate import receipt
from gate.model import JsonDict, Verdict
from gate.proof.approval import create_approval
from gate.receipt.render import to_markdown
from tests.assets import sample

ASSETS = Path(__file__).resolve().parent


def write(rel: str, data: bytes) -> None:
    path = ASSETS / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    print(f"wrote tests/assets/{rel}")


def envelope(predicate: JsonDict, key_name: str | None) -> bytes:
    proven_tree = predicate["proven_tree"]
    statement = receipt.build_statement(
        predicate,
        patch_sha256=sample.PATCH_SHA256,
        head_commit=sample.HEAD_COMMIT,
        proven_tree=proven_tree if isinstance(proven_tree, str) else None,
    )
    key = sample.key(key_name) if key_name is not None else None
    return receipt.sign(receipt.serialize(statement), key)


def main() -> None:
    for name in ("trusted", "untrusted"):
        key = sample.key(name)
        write(
            f"keys/{name}.key",
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        write(f"keys/{name}.pub", receipt.public_pem(key.public_key()))

    proven = sample.predicate()
    write("receipts/patch.diff", sample.PATCH)
    write("receipts/proven.json", envelope(proven, "trusted"))
    write("receipts/proven.md", to_markdown(proven).encode())
    write("receipts/proven-unsigned.json", envelope(proven, None))
    write("receipts/proven-signed-by-untrusted-key.json", envelope(proven, "untrusted"))

    failed = sample.predicate(
        verdict=Verdict.FAILED,
        reasons=sample.FAILED_REASONS,
        test_tail="    assert add(1, 2) == 3\nE   assert -1 == 3\n1 failed in 0.02s\n",
    )
    write("receipts/failed.json", envelope(failed, "trusted"))
    write("receipts/failed.md", to_markdown(failed).encode())

    # A FAILED run's journal rewritten to say PROVEN, hashes left alone, re-signed with the
    # trusted key: the signature holds, the chain does not.
    edited = copy.deepcopy(failed)
    events = edited["journal"]["events"]  # type: ignore[index]
    events[-1]["data"] = {"verdict": "PROVEN"}
    edited["verdict"] = "PROVEN"
    edited["reasons"] = []
    write("receipts/journal-edited-resigned.json", envelope(edited, "trusted"))

    write(
        "approvals/approval.json",
        create_approval(
            approver="octocat",
            approved_at="2025-01-02T04:00:00Z",
            patch_sha256=sample.PATCH_SHA256,
            policy_fingerprint=sample.POLICY_FINGERPRINT,
            key=sample.key("trusted"),
            note="config change reviewed",
        ),
    )


if __name__ == "__main__":
    main()
