"""Fault injection with real processes: the daemon dies, memory or disk runs out, Ctrl-C.

Each fault must end in a non-PROVEN verdict with a reason, leave the user's repository
byte-identical, and leave no container and no private object store behind.

The faults hit a PRIVATE Docker daemon that these tests start themselves (its own data
root, exec root and socket, no bridge, no iptables), never the machine's daemon that other
tests share. The clean-room image is copied into it with `docker save | docker load`.
proofgate runs as a subprocess (`python -m gate prove`) with DOCKER_HOST pointing at the
private daemon and TMPDIR at a directory of the test's own, so that a private object store
left behind (`proofgate-store-*`, see gate/git/store.py) can be seen.

Starting a daemon needs root and `dockerd`; without them the tests are skipped (which
fails a run under CI=true, see tests/conftest.py).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from tests.conftest import CLEANROOM_IMAGE, CONTAINER_LABEL
from tests.gitutil import commit, make_repo, repo_dir, snapshot

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STORE_PREFIX = "proofgate-store-"  # gate/git/store.py: tempfile.mkdtemp(prefix=...)


def _mountpoints_under(root: Path) -> list[str]:
    prefix = str(root) + "/"
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix) or point == str(root):
                points.append(point)
    return sorted(points, key=len, reverse=True)


class PrivateDaemon:
    """A dockerd of our own under `root`, optionally with its data root on a tmpfs."""

    def __init__(self, root: Path, *, tmpfs_size: str | None = None) -> None:
        self.root = root
        self.data = root / "data"
        self.exec_root = root / "exec"
        self.sock = root / "docker.sock"
        self.host = f"unix://{self.sock}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.data.mkdir(parents=True)
        if tmpfs_size is not None:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={tmpfs_size}", "tmpfs", str(self.data)],
                check=True,
            )

    def start(self) -> None:
        # Its own network namespace: a daemon started with --bridge=none in the host's
        # namespace deletes the host's docker0, which the machine's daemon still needs.
        argv = [
            "unshare", "--net",
            "dockerd",
            "--data-root", str(self.data),
            "--exec-root", str(self.exec_root),
            "--host", self.host,
            "--pidfile", str(self.root / "docker.pid"),
            "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
        ]  # fmt: skip
        with open(self.root / "dockerd.log", "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the private dockerd exited: {self.log_tail()}")
            try:
                with contextlib.closing(self.client()) as c:
                    c.ping()
                return
            except docker.errors.DockerException:
                time.sleep(0.3)
        raise RuntimeError(f"the private dockerd did not answer: {self.log_tail()}")

    def log_tail(self) -> str:
        path = self.root / "dockerd.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.host, timeout=60)

    def kill(self) -> None:
        """SIGKILL: the daemon dies without cleaning anything up.

        Its containerd notices and exits on its own (and must have, before a restart can
        take its lock); the shims and the container's processes live on."""
        assert self.proc is not None
        containerd = self._containerd_pid()
        self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc = None
        deadline = time.monotonic() + 30
        while containerd is not None and _alive(containerd) and time.monotonic() < deadline:
            time.sleep(0.2)
        # Where PID 1 does not reap orphans (some containers), the dead containerd stays a
        # zombie, and a restarted dockerd that finds its pid file waits for it forever.
        if containerd is not None and not _alive(containerd):
            (self.exec_root / "containerd" / "containerd.pid").unlink(missing_ok=True)

    def _containerd_pid(self) -> int | None:
        path = self.exec_root / "containerd" / "containerd.pid"
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    def load_cleanroom_image(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        save = subprocess.Popen(
            ["docker", "save", CLEANROOM_IMAGE], stdout=subprocess.PIPE, env=env
        )
        assert save.stdout is not None
        load = subprocess.run(
            ["docker", "-H", self.host, "load", "-q"],
            stdin=save.stdout,
            capture_output=True,
            check=False,
            env=env,
        )
        save.stdout.close()
        if save.wait() != 0 or load.returncode != 0:
            raise RuntimeError(f"cannot copy the clean-room image: {load.stderr.decode()}")

    def labeled_containers(self) -> list[str]:
        with contextlib.closing(self.client()) as c:
            # sparse: no per-container inspect, which races with containers removed meanwhile
            found = c.containers.list(all=True, sparse=True, filters={"label": CONTAINER_LABEL})
            return [x.id for x in found]

    def running_labeled(self) -> bool:
        with contextlib.closing(self.client()) as c:
            return bool(c.containers.list(sparse=True, filters={"label": CONTAINER_LABEL}))

    def running_command(self, command: str) -> bool:
        """Whether a process `command` runs in a labeled container (no sleep races)."""
        with contextlib.closing(self.client()) as c:
            for container in c.containers.list(sparse=True, filters={"label": CONTAINER_LABEL}):
                try:
                    rows = container.top().get("Processes") or []
                except docker.errors.APIError:
                    continue  # it went away meanwhile
                if any(command in " ".join(map(str, row)) for row in rows):
                    return True
        return False

    def _kill_orphaned_containers(self) -> None:
        """Last resort when the daemon could not be brought back: the shims this daemon's
        containerd started (found by their -address), the processes in their containers'
        cgroups, and those cgroups. Only processes of our own daemon are touched."""
        address = str(self.exec_root / "containerd" / "containerd.sock")
        for shim, argv in _processes():
            if "-address" not in argv or address not in argv or "-id" not in argv:
                continue
            cid = argv[argv.index("-id") + 1]
            for pid, _ in _processes():
                try:
                    if cid in Path(f"/proc/{pid}/cgroup").read_text():
                        os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.kill(shim, signal.SIGKILL)
            except OSError:
                pass
            time.sleep(0.5)
            for cgroup in Path("/sys/fs/cgroup").glob(f"*/docker/{cid}"):
                with contextlib.suppress(OSError):
                    cgroup.rmdir()

    def destroy(self) -> None:
        """Stop the daemon (restarting it first if it was killed, so that it stops the
        containers it left), unmount everything under root and delete it."""
        if self.proc is None and self.sock.parent.exists():
            try:
                self.start()
            except RuntimeError:
                pass
        self.stop()
        self._kill_orphaned_containers()
        for point in _mountpoints_under(self.root):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _processes() -> list[tuple[int, list[str]]]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            out.append((int(entry.name), raw.decode(errors="replace").split("\0")))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _private_daemon_problem() -> str | None:
    if os.geteuid() != 0:
        return "starting a private dockerd needs root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is needed to give the private daemon its own network"
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        return "dockerd and the docker CLI are needed to start a private daemon"
    return None


@pytest.fixture(scope="module")
def daemon() -> Iterator[PrivateDaemon]:
    problem = _private_daemon_problem()
    if problem is not None:
        pytest.skip(problem)
    d = PrivateDaemon(Path(tempfile.mkdtemp(prefix="pgd-")))
    try:
        d.start()
        d.load_cleanroom_image()
        yield d
    finally:
        d.destroy()


def _config(check: str, memory: str = "128m", phase: str = "test") -> bytes:
    phases = f"{phase}: {json.dumps(check)}" + (', test: "true"' if phase != "test" else "")
    return (
        f"version: 1\nimage: {CLEANROOM_IMAGE}\n"
        f"defaults: {{timeout: 60, memory: {memory}, pids: 64}}\n"
        f"checks:\n  - {{name: unit, {phases}}}\n"
    ).encode()


def _repo(tmp_path: Path, check: str, memory: str = "128m", phase: str = "test") -> Path:
    repo = make_repo(tmp_path)
    config = _config(check, memory, phase)
    base = commit(repo, {b".github/proofgate.yml": config, b"a.txt": b"1\n"})
    commit(repo, {b"a.txt": b"2\n"}, branch="pr", parent=base)
    return repo_dir(repo)


class Proof:
    """`python -m gate prove` as a subprocess against the private daemon."""

    def __init__(self, repo: Path, out: Path, daemon: PrivateDaemon, tmpdir: Path) -> None:
        tmpdir.mkdir(exist_ok=True)
        self.out = out
        self.tmpdir = tmpdir
        env = dict(os.environ, DOCKER_HOST=daemon.host, TMPDIR=str(tmpdir))
        env["PYTHONPATH"] = str(ROOT)
        argv = [sys.executable, "-m", "gate", "prove", "--repo", str(repo)]
        argv += ["--base", "main", "--head", "pr", "--out", str(out)]
        self.proc = subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def wait(self, timeout: float = 120) -> tuple[int, str]:
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"prove hung: {err.decode(errors='replace')[-3000:]}") from None
        return self.proc.returncode, err.decode(errors="replace")

    def predicate(self) -> dict[str, object]:
        envelope = json.loads((self.out / "receipt.json").read_bytes())
        statement = json.loads(base64.b64decode(envelope["payload"]))
        predicate: dict[str, object] = statement["predicate"]
        return predicate

    def stores_left(self) -> list[str]:
        return sorted(p.name for p in self.tmpdir.iterdir() if p.name.startswith(STORE_PREFIX))


def _codes(predicate: dict[str, object]) -> set[str]:
    reasons = predicate["reasons"]
    assert isinstance(reasons, list)
    return {r["code"] for r in reasons}


def _wait_for_running_check(d: PrivateDaemon, proof: Proof, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proof.proc.poll() is not None:
            raise AssertionError(f"prove ended before its check ran: {proof.wait()}")
        if d.running_command("sleep 30"):  # the check's command itself has started
            return
        time.sleep(0.2)
    raise AssertionError("no clean-room container started")


# --- the daemon killed mid-proof ------------------------------------------------------


class KilledRun:
    def __init__(self, code: int, err: str, proof: Proof, same: bool, left: list[str]) -> None:
        self.code, self.err, self.proof, self.repo_unchanged = code, err, proof, same
        self.containers_after_restart = left


@pytest.fixture(scope="module")
def killed_run(daemon: PrivateDaemon, tmp_path_factory: pytest.TempPathFactory) -> KilledRun:
    tmp = tmp_path_factory.mktemp("killed")
    path = _repo(tmp, "sleep 30")
    before = snapshot(path)
    proof = Proof(path, tmp / "out", daemon, tmp / "tmpdir")
    _wait_for_running_check(daemon, proof)
    daemon.kill()
    code, err = proof.wait()
    same = snapshot(path) == before
    daemon.start()
    time.sleep(2)  # the restarted daemon restores (and, with AutoRemove, removes) containers
    left = daemon.labeled_containers()
    # whatever the outcome, the next fault starts clean
    with contextlib.closing(daemon.client()) as c:
        for cid in left:
            c.containers.get(cid).remove(force=True)
    return KilledRun(code, err, proof, same, left)


def test_daemon_killed_mid_proof_is_not_proven(killed_run: KilledRun) -> None:
    assert "Traceback" not in killed_run.err, killed_run.err
    assert killed_run.code in (10, 13), killed_run.err
    predicate = killed_run.proof.predicate()
    assert predicate["verdict"] in ("INCONCLUSIVE", "FAILED")
    assert _codes(predicate) & {"docker-unavailable", "check-failed", "container-failed"}
    assert killed_run.repo_unchanged
    assert killed_run.proof.stores_left() == []


def test_daemon_killed_mid_proof_leaves_no_container(killed_run: KilledRun) -> None:
    assert killed_run.containers_after_restart == []


# --- a container OOM-killed -----------------------------------------------------------


def test_oom_killed_check_is_failed(daemon: PrivateDaemon, tmp_path: Path) -> None:
    path = _repo(tmp_path, "python3 -c \"b = b'x' * (512 << 20)\"", memory="64m")
    before = snapshot(path)
    proof = Proof(path, tmp_path / "out", daemon, tmp_path / "tmpdir")
    code, err = proof.wait()
    assert code == 10, err
    predicate = proof.predicate()
    assert predicate["verdict"] == "FAILED"
    assert "check-oom-killed" in _codes(predicate)
    assert snapshot(path) == before
    assert proof.stores_left() == []
    assert daemon.labeled_containers() == []


# --- Ctrl-C during a proof ------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_ctrl_c_during_a_check_is_not_proven_and_cleans_up(
    daemon: PrivateDaemon, tmp_path: Path, signum: signal.Signals
) -> None:
    """Ctrl-C, or the runner's SIGTERM on cancel, while the check's command runs."""
    path = _repo(tmp_path, "sleep 30")
    before = snapshot(path)
    proof = Proof(path, tmp_path / "out", daemon, tmp_path / "tmpdir")
    _wait_for_running_check(daemon, proof)
    t0 = time.monotonic()
    proof.proc.send_signal(signum)
    code, err = proof.wait(timeout=60)
    assert time.monotonic() - t0 < 25, "Ctrl-C did not stop the running check"
    assert code == 13, err  # a receipt is still written: INCONCLUSIVE, interrupted
    predicate = proof.predicate()
    assert predicate["verdict"] == "INCONCLUSIVE"
    assert "interrupted" in _codes(predicate)
    assert snapshot(path) == before
    assert proof.stores_left() == []
    assert daemon.labeled_containers() == []


def _sleeping_checks(d: PrivateDaemon) -> int:
    with contextlib.closing(d.client()) as c:
        running = 0
        for container in c.containers.list(filters={"label": CONTAINER_LABEL}):
            try:
                rows = container.top().get("Processes") or []
            except docker.errors.APIError:
                continue
            running += any("sleep 30" in " ".join(map(str, row)) for row in rows)
        return running


def test_ctrl_c_during_concurrent_checks_stops_and_removes_every_one(
    daemon: PrivateDaemon, tmp_path: Path
) -> None:
    """Two checks whose commands run at once: the SIGINT reaches the main thread only;
    both workers are told to stop and remove their containers."""
    repo = make_repo(tmp_path)
    config = (
        f"version: 1\nimage: {CLEANROOM_IMAGE}\n"
        "defaults: {timeout: 60, memory: 128m, pids: 64, cpus: 0.5}\n"
        'checks:\n  - {name: one, test: "sleep 30"}\n  - {name: two, test: "sleep 30"}\n'
    ).encode()
    base = commit(repo, {b".github/proofgate.yml": config, b"a.txt": b"1\n"})
    commit(repo, {b"a.txt": b"2\n"}, branch="pr", parent=base)
    proof = Proof(repo_dir(repo), tmp_path / "out", daemon, tmp_path / "tmpdir")
    deadline = time.monotonic() + 60
    while _sleeping_checks(daemon) < 2:
        assert proof.proc.poll() is None, proof.wait()
        assert time.monotonic() < deadline, "the two checks never ran at once"
        time.sleep(0.2)
    proof.proc.send_signal(signal.SIGINT)
    code, err = proof.wait(timeout=60)
    assert code == 13, err
    predicate = proof.predicate()
    assert "interrupted" in _codes(predicate)
    assert proof.stores_left() == []
    assert daemon.labeled_containers() == []


# --- the disk under the daemon full ---------------------------------------------------


@pytest.fixture
def small_disk_daemon(tmp_path: Path) -> Iterator[PrivateDaemon]:
    """A private daemon whose data root is a 900 MiB tmpfs, filled after the image is
    loaded until only about 48 MiB are free."""
    problem = _private_daemon_problem()
    if problem is not None:
        pytest.skip(problem)
    d = PrivateDaemon(Path(tempfile.mkdtemp(prefix="pgd-")), tmpfs_size="900m")
    try:
        d.start()
        d.load_cleanroom_image()
        st = os.statvfs(d.data)
        free = st.f_bavail * st.f_frsize
        filler = d.data / "filler"
        with open(filler, "wb") as f:
            chunk = b"\0" * (1 << 20)
            for _ in range(max(0, (free - (48 << 20)) >> 20)):
                f.write(chunk)
        yield d
    finally:
        d.destroy()


def test_disk_full_under_the_daemon_is_not_proven(
    small_disk_daemon: PrivateDaemon, tmp_path: Path
) -> None:
    d = small_disk_daemon
    # in build: the writable layer, on the daemon's disk (the test phase's /tmp is a tmpfs)
    path = _repo(tmp_path, "dd if=/dev/zero of=/var/tmp/fill bs=1M count=256", phase="build")
    before = snapshot(path)
    proof = Proof(path, tmp_path / "out", d, tmp_path / "tmpdir")
    code, err = proof.wait()
    assert "Traceback" not in err, err
    assert code in (10, 13), err
    predicate = proof.predicate()
    assert predicate["verdict"] in ("FAILED", "INCONCLUSIVE")
    assert _codes(predicate) & {"check-failed", "container-failed", "docker-unavailable"}
    if "check-failed" in _codes(predicate):  # the check itself hit the full disk
        assert "No space left on device" in json.dumps(predicate["checks"])
    assert snapshot(path) == before
    assert proof.stores_left() == []
    assert d.labeled_containers() == []
    with contextlib.closing(d.client()) as c:  # the daemon survived
        assert c.ping()
