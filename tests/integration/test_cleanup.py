"""A shared Docker daemon: every proof's objects carry its id, cleanups select by it
(gate/sandbox/labels.py, docs/cleanup.md), and nobody removes another's work.

The proofs run as `python -m gate prove` subprocesses, as they would on a laptop or a
self-hosted runner with two jobs; "another process" gets a `PROOFGATE_LABELS` value of
its own, as another test session would.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from gate.faces.cli import main
from gate.sandbox import labels
from gate.util import usercache
from tests.conftest import TEST_LABEL, clean_up, labeled, own_filter, own_value
from tests.gitutil import Symlink
from tests.provecli import cli_prove, config_yaml, pr_repo, receipt_predicate

pytestmark = pytest.mark.docker

# two test commands and a report: a holder, two volumes, three containers over the run
SLOW = (
    "  - {name: slow, test: ['sleep 4', 'mkdir -p r && cp j.xml r/j.xml'], junit: r/j.xml,"
    " differential: 'off'}\n"
)
REPORT = b'<testsuite><testcase classname="t" name="a"/></testsuite>\n'


def _repo(tmp_path: Path) -> Path:
    base = {b".github/proofgate.yml": config_yaml(SLOW), b"j.xml": REPORT}
    return pr_repo(tmp_path, base, {b"a": b"1"})[1]


class Prove:
    """`python -m gate prove` in a subprocess, with a `proofgate.test` value of its own."""

    def __init__(self, repo: Path, out: Path, value: str) -> None:
        self.value = value
        env = {**os.environ, "PROOFGATE_LABELS": f"{TEST_LABEL}={value}"}
        argv = ["prove", "--repo", str(repo), "--base", "main", "--head", "pr"]
        self.proc = subprocess.Popen(  # noqa: S603 - our own CLI
            [sys.executable, "-m", "gate", *argv, "--out", str(out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

        self.head = b""  # what `running` read of stderr

    def running(self) -> None:
        """Wait for the first progress line: the CLI's own signal handling is in place (a
        signal during the interpreter's start-up is Python's, not proofgate's)."""
        assert self.proc.stderr is not None
        while not self.head.endswith(b"\n") or b"proofgate: " not in self.head:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.head += line

    def wait(self, timeout: float = 180) -> tuple[int, str]:
        _, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, (self.head + err).decode("utf-8", "replace")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def other_value(docker_client: docker.DockerClient) -> Iterator[str]:
    """Another process's `proofgate.test` value; whatever carries it is removed afterwards."""
    value = f"other-{secrets.token_hex(6)}"
    yield value
    for thing in sorted(labeled(docker_client, value), key=lambda t: not t.startswith("cont")):
        with contextlib.suppress(docker.errors.APIError):
            _remove(docker_client, thing)


def _remove(client: docker.DockerClient, thing: str) -> None:
    kind, _, ident = thing.partition(" ")
    if kind == "container":
        client.api.remove_container(ident, force=True)
    elif kind == "volume":
        client.api.remove_volume(ident, force=True)
    elif kind == "network":
        client.api.remove_network(ident)
    else:
        client.api.remove_image(ident, force=True)


def _short(thing: str) -> str:
    """`kind id` as `labels.sweep` names what it removed (the id's first 12 characters)."""
    kind, _, ident = thing.partition(" ")
    return f"{kind} {ident[:12]}"


def _wait_for_objects(client: docker.DockerClient, value: str, proc: Prove) -> set[str]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = {t for t in labeled(client, value) if t.startswith("container")}
        if len(found) >= 1 and any(t.startswith("volume") for t in labeled(client, value)):
            return labeled(client, value)
        if proc.proc.poll() is not None:
            raise AssertionError(f"prove ended before its check ran: {proc.wait()}")
        time.sleep(0.1)
    raise AssertionError("the proof's containers did not appear")


def test_two_proofs_and_the_suites_cleanup_at_once_disturb_nobody(
    docker_client: docker.DockerClient,
    tmp_path: Path,
    other_value: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process proves while this test proves, and while both run, the suite's own
    cleanup (as under CI=true, which removes) and `proofgate cache prune` run again and
    again: both proofs end PROVEN, and neither cleanup took anything of theirs."""
    path = _repo(tmp_path)
    other = Prove(path, tmp_path / "other", other_value)
    mine = Prove(path, tmp_path / "mine", own_value())
    try:
        seen_other = _wait_for_objects(docker_client, other_value, other)
        _wait_for_objects(docker_client, own_value(), mine)
        monkeypatch.setenv("CI", "true")
        removed_by_cleanup: set[str] = set()
        pruned: list[str] = []
        seen_mine: set[str] = set()
        while other.proc.poll() is None or mine.proc.poll() is None:
            # the cleanup of a *finished* test with another value: the usual case on a
            # shared daemon (it must take nothing of either running proof)
            removed_by_cleanup |= clean_up(docker_client, f"{own_value()}-next")
            pruned += labels.prune_dead(docker_client.api).removed
            seen_other |= labeled(docker_client, other_value)
            seen_mine |= labeled(docker_client, own_value())
            time.sleep(0.2)
        code_other, err_other = other.wait()
        code_mine, err_mine = mine.wait()
    finally:
        other.kill()
        mine.kill()
    assert (code_other, code_mine) == (0, 0), (err_other[-2000:], err_mine[-2000:])
    assert removed_by_cleanup == set()
    # both proofs were alive throughout: nothing of theirs was pruned (what else the
    # shared daemon holds of processes that have ended is not this test's to judge)
    theirs = {_short(t) for t in seen_other | seen_mine}
    assert [p for p in pruned if _short(p) in theirs] == []
    assert any(t.startswith("volume") for t in seen_other)
    # each proof removed all of its own, and only its own
    assert labeled(docker_client, other_value) == set()
    assert labeled(docker_client, own_value()) == set()
    for out in ("other", "mine"):
        events = receipt_predicate(tmp_path / out)["journal"]["events"]  # type: ignore[index]
        proof = events[0]["data"]["proof"]  # type: ignore[index]
        assert events[0]["kind"] == "run-started"  # type: ignore[index]
        assert len(proof) == 16


def test_the_suites_cleanup_takes_its_own_leftovers_and_nothing_else(
    docker_client: docker.DockerClient,
    tmp_path: Path,
    other_value: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """This test's own leftover (a killed proof's) is removed by the suite's cleanup while
    another process's proof runs on: that one ends PROVEN."""
    path = _repo(tmp_path)
    other = Prove(path, tmp_path / "other", other_value)
    mine = Prove(path, tmp_path / "mine", own_value())
    try:
        _wait_for_objects(docker_client, other_value, other)
        _wait_for_objects(docker_client, own_value(), mine)
        mine.kill()  # SIGKILL: no finally runs, its containers keep running
        leftovers = labeled(docker_client, own_value())
        assert any(t.startswith("container") for t in leftovers)
        monkeypatch.setenv("CI", "true")
        assert clean_up(docker_client, own_value()) == leftovers
        assert labeled(docker_client, own_value()) == set()
        code, err = other.wait()
    finally:
        other.kill()
        mine.kill()
    assert code == 0, err[-2000:]
    assert labeled(docker_client, other_value) == set()


def test_cache_prune_removes_a_dead_proofs_leftovers_and_never_a_live_ones(
    docker_client: docker.DockerClient, tmp_path: Path, other_value: str
) -> None:
    """A proof killed with SIGKILL leaves its containers running and its volumes; while
    another proof runs, `proofgate cache prune` removes the dead one's objects (its owner
    process is gone) and leaves the live one's alone: it ends PROVEN."""
    path = _repo(tmp_path)
    dead = Prove(path, tmp_path / "dead", own_value())
    live = Prove(path, tmp_path / "live", other_value)
    try:
        _wait_for_objects(docker_client, own_value(), dead)
        _wait_for_objects(docker_client, other_value, live)
        dead.kill()
        assert labeled(docker_client, own_value())
        assert main(["cache", "prune", "--keep", "10"]) == 0
        assert labeled(docker_client, own_value()) == set()
        assert labeled(docker_client, other_value)  # still running, untouched
        code, err = live.wait()
    finally:
        dead.kill()
        live.kill()
    assert code == 0, err[-2000:]


def test_interrupted_proofs_leave_nothing(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    """SIGINT and SIGTERM at several points of a proof: each ends with a verdict or exit
    130, and nothing carrying this test's label is left (the proof's own cleanup and its
    final sweep by proof id; the suite's check after the test asserts it too)."""
    path = _repo(tmp_path)
    for n, (delay, sig) in enumerate(
        [(0.3, signal.SIGINT), (1.5, signal.SIGTERM), (2.5, signal.SIGINT), (4.0, signal.SIGTERM)]
    ):
        proc = Prove(path, tmp_path / f"out{n}", own_value())
        proc.running()  # the delays count from the proof's first line, not the fork
        time.sleep(delay)
        proc.proc.send_signal(sig)
        code, err = proc.wait()
        assert code in (0, 13, 130), err[-2000:]
        assert "Traceback" not in err, err[-2000:]
        assert labeled(docker_client, own_value()) == set(), (delay, sig, err[-1000:])


STORE_PREFIX = "proofgate-store-"  # gate/git/store.py: tempfile.mkdtemp(prefix=...)


def _running(client: docker.DockerClient, command: str) -> bool:
    """Whether one of this test's containers runs `command` (the check itself started)."""
    for container in client.containers.list(filters=own_filter()):
        with contextlib.suppress(docker.errors.APIError):
            rows = container.top().get("Processes") or []
            if any(command in " ".join(map(str, row)) for row in rows):
                return True
    return False


def _of_proof(client: docker.DockerClient, proof: str) -> set[str]:
    """Containers and volumes labelled with the proof's id, left after it ended."""
    label = {"label": [f"{labels.PROOF}={proof}"]}
    found = {
        f"container {c.id}" for c in client.containers.list(all=True, sparse=True, filters=label)
    }
    volumes = client.api.volumes(filters=label).get("Volumes") or []
    return found | {f"volume {v['Name']}" for v in volumes}


def test_sigterm_to_the_console_script_ends_inconclusive_and_leaves_nothing(
    docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    """What a CI system sends on cancel, to the installed `proofgate` script (not `python
    -m gate`) while a check runs: it ends as Ctrl-C does, INCONCLUSIVE `interrupted` (13)
    with its receipt, and leaves no container or volume of its proof and no private object
    store in its TMPDIR."""
    script = Path(sys.executable).with_name("proofgate")
    assert script.is_file(), f"no console script at {script}: run `make dev`"
    checks = "  - {name: slow, test: 'sleep 30', differential: 'off'}\n"
    path = pr_repo(tmp_path, {b".github/proofgate.yml": config_yaml(checks)}, {b"a": b"1"})[1]
    tmpdir, out = tmp_path / "tmp", tmp_path / "out"
    tmpdir.mkdir()
    argv = ["prove", "--repo", str(path), "--base", "main", "--head", "pr", "--out", str(out)]
    proc = subprocess.Popen(  # noqa: S603 - our own CLI
        [str(script), *argv],
        env={**os.environ, "TMPDIR": str(tmpdir)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        while not _running(docker_client, "sleep 30"):
            assert proc.poll() is None, proc.communicate()[1].decode(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "the check's command never started"
            time.sleep(0.2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, raw = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
    err = raw.decode("utf-8", "replace")
    assert time.monotonic() - t0 < 25, "SIGTERM did not stop the running check"
    assert proc.returncode == 13, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    predicate = receipt_predicate(out)
    assert predicate["verdict"] == "INCONCLUSIVE"
    assert "interrupted" in {r["code"] for r in predicate["reasons"]}  # type: ignore[attr-defined]
    events = predicate["journal"]["events"]  # type: ignore[index]
    proof = events[0]["data"]["proof"]  # type: ignore[index]
    assert _of_proof(docker_client, proof) == set()
    assert sorted(p.name for p in tmpdir.iterdir() if p.name.startswith(STORE_PREFIX)) == []


def test_escaping_symlink_is_blocked_before_any_container(tmp_path: Path) -> None:
    """SPEC §1: `up-link -> ../../../../outside` cannot be materialized (the daemon refuses
    to extract it), so it is decided before any container: BLOCKED, with a finding that
    says so, instead of a HOLD followed by an INCONCLUSIVE no approval could lift."""
    _, path = pr_repo(
        tmp_path,
        {b".github/proofgate.yml": config_yaml("  - {name: u, test: 'true'}\n"), b"a": b"1"},
        {b"up-link": Symlink(b"../../../../outside")},
    )
    assert cli_prove(path, tmp_path / "out") == 12
    predicate = receipt_predicate(tmp_path / "out")
    assert predicate["verdict"] == "BLOCKED"
    findings = predicate["policy"]["findings"]  # type: ignore[index]
    (finding,) = [f for f in findings if f["rule"] == "symlink-unmaterializable"]  # type: ignore[index]
    assert finding["decision"] == "DENY"
    assert "cannot materialize" in finding["message"]
    kinds = [e["kind"] for e in predicate["journal"]["events"]]  # type: ignore[index]
    assert "container-created" not in kinds
    assert "check-started" not in kinds


def test_cache_prune_removes_the_bytecode_listings_of_images_that_are_gone(
    docker_client: docker.DockerClient, cleanroom_image: str
) -> None:
    folder = usercache.root() / "bytecode"
    folder.mkdir(parents=True)
    present = str(docker_client.images.get(cleanroom_image).id).replace(":", "-")
    gone = "sha256-" + "0" * 64
    for name in (present, gone, ".tmp-abandoned"):
        (folder / name).write_bytes(b"usr/lib/python3/x.py")
    assert main(["cache", "prune", "--keep", "10"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == [present]
