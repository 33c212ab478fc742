"""The egress broker when the Docker daemon dies mid-setup (a private dockerd, killed).

The private daemon has no default bridge (it runs in a network namespace of its own), so
the broker's outside leg joins a network created in it (the test-only
PROOFGATE_UNSAFE_EGRESS_NETWORK). Nothing is reached; only what is left behind matters.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from gate.faces.cli import main
from gate.sandbox.egress import UNSAFE_NETWORK_ENV
from tests.gitutil import commit, make_repo, repo_dir
from tests.integration.test_faults import CLEANROOM_IMAGE, PrivateDaemon, Proof, daemon

pytestmark = pytest.mark.docker
__all__ = ["daemon"]  # the private-daemon fixture of test_faults


def _wait_for_setup(d: PrivateDaemon, proof: Proof, seconds: float = 90) -> None:
    """Until the check's own container runs (the broker, labeled with a role, starts first)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proof.proc.poll() is not None:
            raise AssertionError(f"prove ended before its setup ran: {proof.wait()}")
        with contextlib.closing(d.client()) as c:
            # sparse: no per-container inspect, which races with containers removed meanwhile
            running = c.containers.list(
                sparse=True, filters={"label": "proofgate=1", "status": "running"}
            )
            if any("proofgate.role" not in (x.attrs.get("Labels") or {}) for x in running):
                time.sleep(1.0)  # let the exec of `sleep 30` begin
                return
        time.sleep(0.2)
    raise AssertionError("the check's container did not start")


def test_daemon_killed_mid_setup_leaves_no_broker(
    daemon: PrivateDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with contextlib.closing(daemon.client()) as c:
        outside = c.networks.create("egress-outside", driver="bridge")
    monkeypatch.setenv(UNSAFE_NETWORK_ENV, outside.name)
    config = (
        f"version: 1\nimage: {CLEANROOM_IMAGE}\n"
        "defaults: {timeout: 60, memory: 128m, pids: 64}\n"
        "checks:\n  - {name: unit, network: setup, egress: ['index.example.org:443'], "
        "setup: 'sleep 30', test: 'true'}\n"
    ).encode()
    repo = make_repo(tmp_path)
    base = commit(repo, {b".github/proofgate.yml": config, b"a.txt": b"1\n"})
    commit(repo, {b"a.txt": b"2\n"}, branch="pr", parent=base)
    proof = Proof(repo_dir(repo), tmp_path / "out", daemon, tmp_path / "tmpdir")
    _wait_for_setup(daemon, proof)
    daemon.kill()
    code, err = proof.wait()
    assert code in (10, 13), err
    assert "Traceback" not in err, err
    daemon.start()
    time.sleep(2)  # the restarted daemon restores, and with AutoRemove removes, containers
    left = daemon.labeled_containers()
    with contextlib.closing(daemon.client()) as c:
        networks = [n.name for n in c.networks.list(filters={"label": "proofgate=1"})]
        # Documented in docs/egress.md: the internal network outlives a dead daemon, and
        # `proofgate cache prune` removes it (the proof's process has ended)
        monkeypatch.setenv("DOCKER_HOST", daemon.host)
        assert main(["cache", "prune"]) == 0
        pruned = [n.name for n in c.networks.list(filters={"label": "proofgate=1"})]
        for cid in left:
            c.containers.get(cid).remove(force=True)
        for name in pruned:
            c.networks.get(name).remove()
        c.networks.get(outside.name).remove()
    assert left == []  # neither the check's container nor the broker
    assert len(networks) == 1
    assert pruned == []
