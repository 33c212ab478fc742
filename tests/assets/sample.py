"""A realistic receipt predicate, fixed keys and fixed times, for tests and `make assets`.

Everything here is deterministic: keys come from fixed seeds, the journal clock is a fixed
sequence, and Ed25519 signatures are deterministic, so regenerated assets are byte-identical.
The predicate is assembled from the model's `to_dict()` methods, as prove.py does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gate.model import (
    ChangeStatus,
    CheckResult,
    CommandResult,
    CommitId,
    ConfigSource,
    ConfigSourceKind,
    Coverage,
    Decision,
    Finding,
    ImageRef,
    InventoryEntry,
    JsonDict,
    PatchCapture,
    Phase,
    PhaseResult,
    PolicyResult,
    Reason,
    ReasonCode,
    Revision,
    Sha256,
    TreeId,
    Trigger,
    TriggerKind,
    Verdict,
)
from gate.util.journal import Journal

BASE_COMMIT = CommitId("1111111111111111111111111111111111111111")
BASE_TREE = TreeId("2222222222222222222222222222222222222222")
MERGE_BASE = CommitId("1111111111111111111111111111111111111111")
HEAD_COMMIT = CommitId("3333333333333333333333333333333333333333")
HEAD_TREE = TreeId("4444444444444444444444444444444444444444")
OTHER_COMMIT = "5555555555555555555555555555555555555555"
OTHER_TREE = "6666666666666666666666666666666666666666"
POLICY_FINGERPRINT = Sha256(hashlib.sha256(b"policy: protected [.github/**]").hexdigest())

PATCH = b"""diff --git a/src/calc.py b/src/calc.py
index 0000001..0000002 100644
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
PATCH_SHA256 = Sha256(hashlib.sha256(PATCH).hexdigest())

CONFIG_PATH = ".github/proofgate.yml"
CONFIG_BLOB = "7777777777777777777777777777777777777777"
CONFIG_SHA256 = hashlib.sha256(b"checks: []\n").hexdigest()
TRIGGER = Trigger(kind=TriggerKind.PULL_REQUEST, base_ref="refs/heads/main", pull_request=7)
STARTED_AT = "2025-01-02T03:04:05Z"
FINISHED_AT = "2025-01-02T03:04:17Z"


def key(name: str) -> Ed25519PrivateKey:
    """A fixed test-only key: the seed is public, never use it for anything real."""
    seed = hashlib.sha256(f"proofgate test key: {name}".encode()).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


def _clock() -> Iterator[float]:
    t = 1000.0
    while True:
        yield t
        t += 0.25


def journal(*, verdict: Verdict = Verdict.PROVEN) -> Journal:
    ticks = _clock()
    j = Journal(clock=lambda: next(ticks))
    j.append("evidence-captured", patch_sha256=PATCH_SHA256, files=1)
    j.append("policy-decided", decision="ALLOW", findings=0)
    j.append("image-resolved", image="proofgate/cleanroom:latest", digest="sha256:" + "ab" * 32)
    j.append("container-created", check="unit", container="c0ffee")
    j.append("container-finished", check="unit", exit_code=0)
    j.append("container-removed", check="unit")
    j.append("verdict", verdict=verdict.value)
    return j


def command(
    argv: tuple[str, ...],
    *,
    exit_code: int | None = 0,
    tail: str = "",
    offset: float = 0.0,
    duration: float = 1.5,
    timed_out: bool = False,
) -> CommandResult:
    log = tail.encode()
    return CommandResult(
        argv=argv,
        exit_code=exit_code,
        duration_s=duration,
        timed_out=timed_out,
        log_sha256=Sha256(hashlib.sha256(log).hexdigest()),
        log_bytes=len(log),
        log_tail=tail,
        started_offset_s=offset,
    )


def check(*, test_tail: str = "1 passed in 0.01s\n", exit_code: int | None = 0) -> CheckResult:
    image = ImageRef(name="proofgate/cleanroom:latest", id="sha256:" + "ab" * 32)
    return CheckResult(
        name="unit",
        image=image,
        started=True,
        phases=(
            PhaseResult(
                phase=Phase.BUILD,
                commands=(command(("/bin/sh", "-c", "python -m compileall -q src"), offset=0.2),),
            ),
            PhaseResult(
                phase=Phase.TEST,
                commands=(
                    command(
                        ("python", "-m", "pytest", "-q"),
                        exit_code=exit_code,
                        tail=test_tail,
                        offset=1.8,
                        duration=2.25,
                    ),
                ),
            ),
        ),
    )


def predicate(
    *,
    verdict: Verdict = Verdict.PROVEN,
    reasons: tuple[Reason, ...] = (),
    test_tail: str = "1 passed in 0.01s\n",
) -> JsonDict:
    """A predicate as prove.py assembles it (SPEC §4)."""
    base = Revision(spec="main", commit=BASE_COMMIT, tree=BASE_TREE)
    head = Revision(spec="HEAD", commit=HEAD_COMMIT, tree=HEAD_TREE)
    patch = PatchCapture(data=PATCH, sha256=PATCH_SHA256, files=1)
    entry = InventoryEntry(
        path=b"src/calc.py",
        status=ChangeStatus.MODIFIED,
        old_mode=0o100644,
        new_mode=0o100644,
        size=34,
        old_size=34,
        lines_added=1,
        lines_deleted=1,
    )
    policy = PolicyResult(
        decision=Decision.ALLOW,
        findings=(
            Finding(
                rule="budget-lines",
                decision=Decision.ALLOW,
                path=b"src/calc.py",
                line=2,
                message="2 of 20000 lines",
            ),
        ),
        fingerprint=POLICY_FINGERPRINT,
        blast_radius={"files": 1, "lines": 2},
    )
    config = ConfigSource(
        kind=ConfigSourceKind.BASE_TREE,
        path=CONFIG_PATH,
        blob=CONFIG_BLOB,
        sha256=CONFIG_SHA256,
    )
    proven = verdict is not Verdict.INCONCLUSIVE
    test_exit = 1 if verdict is Verdict.FAILED else 0
    return {
        "verdict": verdict.value,
        "reasons": [r.to_dict() for r in reasons],
        "repository": "example/calc",
        "trigger": TRIGGER.to_dict(),
        "base": base.to_dict(),
        "merge_base": MERGE_BASE,
        "head": head.to_dict(),
        "proven_tree": HEAD_TREE if proven else None,
        "patch": patch.to_dict(),
        "inventory": [entry.to_dict()],
        "coverage": Coverage(complete=True).to_dict(),
        "config": config.to_dict(),
        "policy": policy.to_dict(),
        "checks": [check(test_tail=test_tail, exit_code=test_exit).to_dict()],
        "journal": journal(verdict=verdict).to_dict(),
        "tool": {"name": "proofgate", "version": "0.1.0"},
        "started_at": STARTED_AT,
        "finished_at": FINISHED_AT,
    }


FAILED_REASONS = (
    Reason(
        code=ReasonCode.CHECK_FAILED,
        message="`python -m pytest -q` exited 1 in phase test",
        check="unit",
    ),
)
