"""The labels of a proof's Docker objects and the liveness of their owner
(gate/sandbox/labels.py, docs/cleanup.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gate.errors import UsageError
from gate.sandbox import labels
from gate.sandbox.labels import OwnerState, ProofLabels, owner_state, this_owner


def test_every_object_carries_the_proof_its_owner_and_the_extra_labels() -> None:
    got = ProofLabels.for_proof("0123456789abcdef", {"PROOFGATE_LABELS": "ci.job=42, team=a"})
    assert got.labels(**{labels.ROLE: "egress-broker"}) == {
        "ci.job": "42",
        "team": "a",
        "proofgate": "1",
        "proofgate.proof": "0123456789abcdef",
        "proofgate.owner": this_owner(),
        "proofgate.role": "egress-broker",
    }
    assert got.selector == {"label": ["proofgate.proof=0123456789abcdef"]}
    assert len(ProofLabels.for_proof(None, {}).proof) == 16


@pytest.mark.parametrize(
    "value",
    ["proofgate=2", "proofgate.proof=x", "proofgate.owner=x", "proofgate.env-cache=1", "novalue",
     "Bad=1", "a=b c", "a=b;c"],
)  # fmt: skip
def test_malformed_or_reserved_extra_labels_are_usage_errors(value: str) -> None:
    with pytest.raises(UsageError, match="PROOFGATE_LABELS"):
        labels.extra_labels({"PROOFGATE_LABELS": value})


def test_a_proof_id_is_hex() -> None:
    with pytest.raises(UsageError):
        ProofLabels.for_proof("not-hex", {})


def test_the_owner_is_alive_while_it_runs_and_dead_after() -> None:
    assert owner_state(this_owner()) is OwnerState.ALIVE
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # noqa: S603
    try:
        host, ns, _, _ = this_owner().split("/")
        start = labels._stat_start(proc.pid)
        owner = f"{host}/{ns}/{proc.pid}/{start}"
        assert owner_state(owner) is OwnerState.ALIVE
        # the same pid with another start time: a later process, the proof is dead
        assert owner_state(f"{host}/{ns}/{proc.pid}/1") is OwnerState.DEAD
    finally:
        proc.kill()
        proc.wait()
    assert owner_state(owner) is OwnerState.DEAD


def test_an_owner_elsewhere_is_never_judged() -> None:
    host, ns, pid, start = this_owner().split("/")
    assert owner_state(f"other-host/{ns}/{pid}/{start}") is OwnerState.UNKNOWN
    assert owner_state(f"{host}/4026599999/{os.getpid()}/{start}") is OwnerState.UNKNOWN
    assert owner_state("garbage") is OwnerState.UNKNOWN
