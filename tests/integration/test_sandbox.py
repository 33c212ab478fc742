"""The Docker clean room against a real daemon and the local clean-room image.

Every protection is tested from inside a container by a command that would succeed if
the protection were missing. The trees are small tar archives built here, so these tests
do not depend on the git adapter.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import socket
import tarfile
import threading
from collections.abc import Callable, Iterator

import docker
import docker.errors
import pytest

from gate.git.interface import UnsafeTreeError
from gate.model import CheckResult, CheckSpec, Command, DifferentialMode, ImageRef, Limits, Phase
from gate.sandbox import envcache
from gate.sandbox.docker import DockerSandbox
from gate.sandbox.interface import ImageError, SandboxError
from gate.util.journal import Journal

pytestmark = pytest.mark.docker

TreeFn = Callable[[], Iterator[bytes]]


def make_tree(
    files: dict[str, bytes | tuple[bytes, int]], symlinks: dict[str, str] | None = None
) -> TreeFn:
    buf = io.BytesIO()
    dirs: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, value in files.items():
            data, mode = value if isinstance(value, tuple) else (value, 0o644)
            parts = name.split("/")
            for i in range(1, len(parts)):  # as git archives a tree: every directory
                parent = "/".join(parts[:i])
                if parent not in dirs:
                    dirs.add(parent)
                    d = tarfile.TarInfo(parent)
                    d.type = tarfile.DIRTYPE
                    d.mode = 0o777
                    tar.addfile(d)
            mode |= 0o666  # the clean room's archive has umask 0
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    data = buf.getvalue()

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(data), 4096):
            yield data[i : i + 4096]

    return chunks


def spec(
    *,
    setup: list[str] | None = None,
    build: list[str] | None = None,
    test: list[str] | None = None,
    junit: str | None = None,
    name: str = "check",
    **limits: object,
) -> CheckSpec:
    phases = []
    for phase, scripts in ((Phase.SETUP, setup), (Phase.BUILD, build), (Phase.TEST, test)):
        if scripts is not None:
            phases.append((phase, tuple(Command.shell(s) for s in scripts)))
    base = {"timeout": 60, "memory": 512 * 1024**2, "cpus": 1.0, "pids": 128}
    base.update(limits)
    return CheckSpec(name=name, phases=tuple(phases), limits=Limits(**base), junit=junit)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sandbox(docker_client: docker.DockerClient) -> DockerSandbox:
    return DockerSandbox(docker_client, log_tail_bytes=1024)


@pytest.fixture(scope="module")
def image(sandbox: DockerSandbox) -> ImageRef:
    return sandbox.resolve_image("proofgate/cleanroom:latest")


TREE = make_tree(
    {
        "broken.flag": b"",
        "bin/hello": (b"#!/bin/sh\necho hello\n", 0o755),
        "src/data.txt": b"exact bytes\n",
    },
    symlinks={"link": "src/data.txt"},
)


def run(
    sandbox: DockerSandbox, image: ImageRef, check: CheckSpec, tree: TreeFn = TREE
) -> tuple[CheckResult, Journal]:
    journal = Journal()
    return sandbox.run_check(check, image, tree, journal), journal


def last(result: CheckResult) -> tuple[int | None, str]:
    command = result.phases[-1].commands[-1]
    return command.exit_code, command.log_tail


# --- images ---------------------------------------------------------------------------


def test_resolve_image_gives_local_id(sandbox: DockerSandbox, image: ImageRef) -> None:
    assert image.id.startswith("sha256:")
    assert image.name == "proofgate/cleanroom:latest"
    assert image.repo_digest is None  # imported locally, never pushed
    assert image.digest == image.id


def test_missing_image_is_not_pulled(sandbox: DockerSandbox) -> None:
    with pytest.raises(ImageError, match="not present.*pulling is not allowed"):
        sandbox.resolve_image("proofgate/does-not-exist:never")


# --- running --------------------------------------------------------------------------


def test_exit_codes_recorded_and_failure_stops_the_check(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    result, journal = run(
        sandbox, image, spec(setup=["true", "exit 0"], build=["exit 3", "true"], test=["true"])
    )
    assert result.started
    assert [p.phase for p in result.phases] == [Phase.SETUP, Phase.BUILD]
    assert [c.exit_code for c in result.phases[0].commands] == [0, 0]
    assert [c.exit_code for c in result.phases[1].commands] == [3]
    assert not result.phases[1].ok
    kinds = [e["kind"] for e in journal.events()]
    # the workspace, then proofgate's own and setup's and build's prefix
    # (gate/witness/host.py); the check's first container and the holder, through which
    # the daemon fills them at once
    first = kinds.index("command-started")
    assert kinds[:5] == ["volume-created"] * 3 + ["container-created"] * 2
    assert kinds.count("volume-removed") == 3
    assert sorted(kinds[5:first]) == ["bytecode-linked", "tree-copied"]
    roles = [e["data"]["role"] for e in journal.events() if e["kind"] == "container-created"]
    assert roles[:2] == ["check", "holder"]
    assert kinds[-1] == "volume-removed"
    assert kinds.count("command-finished") == 3


def test_tree_is_copied_exactly_into_workspace(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(
        sandbox,
        image,
        spec(
            test=[
                'test "$(pwd)" = /workspace',
                'test "$(bin/hello)" = hello',
                'test "$(readlink link)" = src/data.txt',
                'test "$(cat link)" = "exact bytes"',
                "test ! -x src/data.txt",
            ]
        ),
    )
    assert result.phases[-1].ok, result.phases[-1].commands[-1].log_tail


def test_fresh_copy_per_check_catches_false_pass(sandbox: DockerSandbox, image: ImageRef) -> None:
    """The post-mortem's fixture: one check deleting a file must not hide it from the next."""
    first, _ = run(sandbox, image, spec(name="one", test=["rm broken.flag"]))
    second, _ = run(sandbox, image, spec(name="two", test=["test ! -e broken.flag"]))
    assert first.phases[-1].ok
    assert last(second)[0] == 1  # it sees a fresh copy, where broken.flag exists


def test_corrupted_copy_does_not_reach_next_check(sandbox: DockerSandbox, image: ImageRef) -> None:
    first, _ = run(sandbox, image, spec(name="one", test=["echo corrupt > src/data.txt"]))
    second, _ = run(
        sandbox, image, spec(name="two", test=['test "$(cat src/data.txt)" = "exact bytes"'])
    )
    assert first.phases[-1].ok
    assert second.phases[-1].ok


def test_timeout_kills_the_command_and_the_container(
    sandbox: DockerSandbox, image: ImageRef, docker_client: docker.DockerClient
) -> None:
    result, journal = run(sandbox, image, spec(timeout=2, test=["sleep 600"], build=["true"]))
    command = result.phases[-1].commands[-1]
    assert command.timed_out
    assert command.exit_code is None
    assert not command.ok
    assert command.duration_s < 20
    created = next(e for e in journal.events() if e["kind"] == "container-created")
    container_id = created["data"]["container"]  # type: ignore[index]
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(container_id)


def test_phase_deadline_is_shared_by_its_commands(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(sandbox, image, spec(timeout=3, test=["sleep 2", "sleep 2"]))
    first, second = result.phases[-1].commands
    assert first.ok
    assert second.timed_out


def test_log_flood_is_hashed_in_full_and_tail_bounded(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    size = 50_000_000
    result, _ = run(sandbox, image, spec(test=[f"yes | head -c {size}"]))
    command = result.phases[-1].commands[-1]
    assert command.ok
    assert command.log_bytes == size
    assert command.log_sha256 == hashlib.sha256(b"y\n" * (size // 2)).hexdigest()
    assert command.log_tail == "y\n" * 512  # log_tail_bytes=1024


def test_stdout_and_stderr_both_logged(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(sandbox, image, spec(test=["echo out; echo err >&2"]))
    command = result.phases[-1].commands[-1]
    assert sorted(command.log_tail.split()) == ["err", "out"]
    assert command.log_bytes == 8


# --- hardening ------------------------------------------------------------------------


class _Listener:
    """A TCP server on the host that a container could reach over Docker's bridge."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))  # noqa: S104 — must be reachable from the bridge
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[_Listener]:
    server = _Listener()
    yield server
    server.sock.close()


@pytest.fixture(scope="module")
def bridge_gateway(docker_client: docker.DockerClient, cleanroom_image: str) -> str:
    container = docker_client.containers.create(
        cleanroom_image, command=["sleep", "30"], network_mode="bridge", labels={"proofgate": "1"}
    )
    try:
        container.start()
        container.reload()
        gateway = container.attrs["NetworkSettings"]["Gateway"]
    finally:
        container.remove(force=True)
    assert gateway
    return str(gateway)


def _connect(host: str, port: int) -> str:
    return f"python3 -c \"import socket; socket.create_connection(('{host}', {port}), timeout=3)\""


def test_network_is_unreachable_from_the_clean_room(
    sandbox: DockerSandbox, image: ImageRef, listener: _Listener, bridge_gateway: str
) -> None:
    result, _ = run(sandbox, image, spec(test=[_connect(bridge_gateway, listener.port)]))
    exit_code, tail = last(result)
    assert exit_code != 0, tail
    assert "OSError" in tail or "unreachable" in tail.lower()
    interfaces, _ = run(sandbox, image, spec(test=['test "$(ls /sys/class/net)" = lo']))
    assert interfaces.phases[-1].ok


def test_setup_network_without_egress_allowlist_is_no_network(
    sandbox: DockerSandbox, image: ImageRef, listener: _Listener, bridge_gateway: str
) -> None:
    # SPEC §2: `network: setup` with an empty `egress` allowlist means no network (the
    # broker's own lifecycle and the detach before build: tests/integration/test_egress.py).
    before = listener.accepted
    connect = _connect(bridge_gateway, listener.port)
    result, _ = run(sandbox, image, spec(network="setup", setup=[connect], test=["true"]))
    (setup,) = result.phases
    assert setup.commands[0].exit_code != 0
    assert listener.accepted == before


def test_host_environment_does_not_leak(
    sandbox: DockerSandbox, image: ImageRef, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROOFGATE_TEST_SECRET", "s3cr3t-value")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_notreal")
    result, _ = run(
        sandbox,
        image,
        spec(
            env=(("GREETING", "hi"),),
            test=[
                'test "$GREETING" = hi',
                "! env | grep -q -e s3cr3t -e ghs_ -e PROOFGATE_TEST_SECRET -e GITHUB_TOKEN",
                "env | cut -d= -f1 | sort | tr '\\n' ' '",
            ],
        ),
    )
    assert result.phases[-1].ok, last(result)[1]
    names = set(last(result)[1].split())
    # SPEC §3.2, set by proofgate (the last two load the witness into pytest)
    ours = {"PYTHONPYCACHEPREFIX", "PYTHONNOUSERSITE", "PYTEST_ADDOPTS", "PYTHONPATH"}
    assert names <= {"GREETING", "HOME", "HOSTNAME", "PATH", "PWD", "LANG", "SHLVL", "_"} | ours


def test_no_docker_socket_inside(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(
        sandbox,
        image,
        spec(
            test=[
                'python3 -c "import socket; s = socket.socket(socket.AF_UNIX); '
                "s.connect('/var/run/docker.sock')\""
            ]
        ),
    )
    exit_code, tail = last(result)
    assert exit_code != 0
    assert "FileNotFoundError" in tail


def test_no_host_mounts_inside(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(
        sandbox,
        image,
        spec(
            test=[
                # HOME and /tmp are the container's own tmpfs mounts
                "! grep -E ' (/var/run|/home|/root) ' /proc/mounts | grep -v '^tmpfs '",
                # the workspace is the check's own volume, nothing else of the host
                "test \"$(grep -c ' /workspace ' /proc/mounts)\" = 1",
            ]
        ),
    )
    assert result.phases[-1].ok, last(result)[1]


def test_root_in_the_clean_room_has_no_capabilities(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    result, _ = run(
        sandbox,
        image,
        spec(
            test=[
                "id -u",
                "grep CapEff /proc/self/status",
                "python3 -c \"import os; os.chown('src/data.txt', 1, 1)\"",
            ]
        ),
    )
    uid, capeff, chown = result.phases[-1].commands
    assert uid.log_tail.strip() == "0"
    assert capeff.log_tail.split() == ["CapEff:", "0000000000000000"]
    assert chown.exit_code != 0
    assert "PermissionError" in chown.log_tail


def test_cap_add_grants_only_the_named_capability(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(
        sandbox,
        image,
        spec(
            cap_add=("CHOWN",),
            test=[
                "python3 -c \"import os; os.chown('src/data.txt', 1, 1)\"",
                "python3 -c \"import os; os.mknod('dev', 0o20600, os.makedev(1, 3))\"",
            ],
        ),
    )
    chown, mknod = result.phases[-1].commands
    assert chown.ok
    assert mknod.exit_code != 0


def test_setuid_cannot_raise_privileges(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(sandbox, image, spec(user="1000:1000", test=["su -c true root </dev/null"]))
    assert last(result)[0] != 0


def test_pids_limit_stops_a_fork_flood(sandbox: DockerSandbox, image: ImageRef) -> None:
    flood = (
        'python3 -c "import subprocess\n'
        "ps = [subprocess.Popen(['sleep', '30']) for _ in range(100)]\n"
        'print(len(ps))"'
    )
    result, _ = run(sandbox, image, spec(pids=32, test=[flood]))
    exit_code, tail = last(result)
    assert exit_code != 0
    assert "BlockingIOError" in tail or "Resource temporarily unavailable" in tail


def test_memory_limit_oom_kills(sandbox: DockerSandbox, image: ImageRef) -> None:
    hog = "python3 -c \"x = bytearray(512 * 1024 * 1024); x[::4096] = b'1' * len(x[::4096])\""
    result, _ = run(sandbox, image, spec(memory=64 * 1024**2, test=[hog]))
    command = result.phases[-1].commands[-1]
    assert command.exit_code != 0
    assert command.oom_killed
    assert not command.ok


def test_non_root_user_can_write_the_workspace(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(
        sandbox,
        image,
        spec(
            user="1000:1000",
            test=[
                'test "$(id -u)" = 1000',
                "echo new > src/data.txt && mkdir -p reports/x && touch top && bin/hello",
                "test -x bin/hello && test ! -x src/data.txt",
                # root-owned top-level entries can go too (no sticky bit on /workspace)
                "rm broken.flag && mv src source && rm -r source",
            ],
        ),
    )
    assert result.phases[-1].ok, last(result)[1]


# --- the workspace in memory -----------------------------------------------------------

MIB = 1024**2


def _copied(journal: Journal) -> dict[str, object]:
    event = next(e for e in journal.events() if e["kind"] == "tree-copied")
    return event["data"]  # type: ignore[return-value]


def test_workspace_is_a_fresh_tmpfs_volume_filled_by_the_daemon(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    result, journal = run(
        sandbox,
        image,
        spec(
            memory=64 * MIB,
            test=[
                "grep '^tmpfs /workspace tmpfs ' /proc/mounts",
                'test "$(cat src/data.txt)" = "exact bytes"',
            ],
        ),
    )
    assert result.phases[-1].ok, [c.log_tail for c in result.phases[-1].commands]
    mounts = result.phases[-1].commands[0].log_tail
    assert "size=65536k" in mounts
    assert "nosuid" in mounts
    assert "nodev" in mounts
    assert "noexec" not in mounts
    assert _copied(journal)["method"] == "put-archive"
    kinds = [e["kind"] for e in journal.events()]
    assert "volume-created" in kinds
    assert kinds[-1] == "volume-removed"


@pytest.fixture(scope="module")
def image_without_tar(
    docker_client: docker.DockerClient, sandbox: DockerSandbox, cleanroom_image: str
) -> Iterator[ImageRef]:
    """The clean-room image with tar removed, committed locally (nothing pulled)."""
    container = docker_client.containers.create(
        cleanroom_image, entrypoint=["rm", "-f", "/usr/bin/tar", "/bin/tar"], command=[]
    )
    try:
        container.start()
        assert container.wait(timeout=60)["StatusCode"] == 0
        committed = container.commit(
            repository="proofgate/cleanroom-without-tar", tag="test", changes=["ENTRYPOINT []"]
        )
    finally:
        container.remove(force=True)
    try:
        yield sandbox.resolve_image("proofgate/cleanroom-without-tar:test")
    finally:
        docker_client.images.remove(committed.id, force=True)


def test_image_without_tar_needs_no_tar(
    docker_client: docker.DockerClient, image_without_tar: ImageRef
) -> None:
    """Copy-in and read-back are the daemon's: no program of the image takes part."""
    fresh = DockerSandbox(docker_client, log_tail_bytes=1024)
    result, journal = run(
        fresh,
        image_without_tar,
        spec(
            user="1000:1000",
            junit="reports/junit.xml",
            test=[
                "! command -v tar && rm broken.flag && echo new > src/data.txt && mkdir reports",
                'test "$(bin/hello)" = hello && test "$(readlink link)" = src/data.txt',
                "python3 -m pytest -q -p no:cacheprovider --junit-xml=reports/junit.xml",
            ],
        ),
        make_tree(
            {
                "broken.flag": b"",
                "bin/hello": (b"#!/bin/sh\necho hello\n", 0o755),
                "src/data.txt": b"x\n",
                "test_demo.py": b"def test_one():\n    pass\n",
            },
            symlinks={"link": "src/data.txt"},
        ),
    )
    assert result.phases[-1].ok, last(result)[1]
    assert result.junit_report is not None
    assert b'tests="1"' in result.junit_report
    assert _copied(journal)["method"] == "put-archive"


# --- reports --------------------------------------------------------------------------

_PYTEST_TREE = make_tree(
    {
        "test_demo.py": b"def test_one():\n    assert 1 + 1 == 2\n",
        "bad_link_target": b"",
    }
)


def test_junit_report_is_read_back(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(
        sandbox,
        image,
        spec(
            junit="reports/junit.xml",
            test=["python3 -m pytest -q -p no:cacheprovider --junit-xml=reports/junit.xml"],
        ),
        _PYTEST_TREE,
    )
    assert result.phases[-1].ok, last(result)[1]
    assert result.junit_report is not None
    assert b"<testsuite" in result.junit_report
    assert b'tests="1"' in result.junit_report


def test_junit_symlink_is_refused(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, journal = run(
        sandbox,
        image,
        spec(junit="junit.xml", test=["ln -s /etc/passwd junit.xml"]),
    )
    assert result.phases[-1].ok
    assert result.junit_report is None
    assert "junit-refused" in [e["kind"] for e in journal.events()]


def test_junit_missing_gives_none(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, journal = run(sandbox, image, spec(junit="reports/none.xml", test=["true"]))
    assert result.junit_report is None
    assert "junit-missing" in [e["kind"] for e in journal.events()]


# --- failures of the clean room itself -----------------------------------------------


def test_container_that_cannot_start_is_reported(sandbox: DockerSandbox, image: ImageRef) -> None:
    result, _ = run(sandbox, image, spec(user="no-such-user", test=["true"]))
    assert not result.started
    assert result.error is not None
    assert "no-such-user" in result.error


def test_interrupt_while_copying_removes_the_container(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    def interrupted() -> Iterator[bytes]:
        yield b"\0" * 512
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(sandbox, image, spec(test=["true"]), interrupted)
    # the autouse fixture of tests/conftest.py asserts nothing labeled proofgate=1 is left


def test_unsafe_tree_error_propagates_and_container_is_removed(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    def hostile() -> Iterator[bytes]:
        yield from TREE()
        raise UnsafeTreeError("../escape")

    with pytest.raises(UnsafeTreeError, match="escape"):
        run(sandbox, image, spec(test=["true"]), hostile)


def test_unreachable_daemon_is_a_sandbox_error(monkeypatch: pytest.MonkeyPatch) -> None:
    client = docker.DockerClient(
        base_url="unix:///nonexistent/docker.sock", version="1.41", timeout=2
    )
    with pytest.raises(SandboxError, match="cannot reach the Docker daemon"):
        DockerSandbox(client)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError, match="Start Docker"):
        DockerSandbox()


class _SocketProxy:
    """TCP -> the Docker socket, with a switch that makes the daemon vanish mid-run."""

    def __init__(self, unix_path: str) -> None:
        self.unix_path = unix_path
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.unix_path)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def vanish(self) -> None:
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def test_daemon_vanishing_mid_run_is_a_sandbox_error(
    docker_client: docker.DockerClient, image: ImageRef
) -> None:
    socket_path = "/var/run/docker.sock"
    if docker_client.api.base_url != "http+docker://localhost" or not os.path.exists(socket_path):
        pytest.skip("the daemon is not on the default Unix socket")  # fails the run under CI
    proxy = _SocketProxy(socket_path)
    client = docker.DockerClient(base_url=f"tcp://127.0.0.1:{proxy.port}", version="1.41")
    journal = Journal()
    timer = threading.Timer(2.0, proxy.vanish)
    timer.start()
    try:
        with pytest.raises(SandboxError, match="stopped answering"):
            DockerSandbox(client).run_check(spec(test=["sleep 30"]), image, TREE, journal)
    finally:
        timer.cancel()
        proxy.vanish()
        created = [e for e in journal.events() if e["kind"] == "container-created"]
        for event in created:  # the vanished "daemon" could not remove it; we can
            docker_client.containers.get(event["data"]["container"]).remove(force=True)  # type: ignore[index]
        for event in journal.events():
            if event["kind"] == "volume-created":
                volume = str(event["data"]["volume"])  # type: ignore[index]
                for v in docker_client.volumes.list(filters={"label": "proofgate=1"}):
                    if v.name.startswith(volume):
                        v.remove(force=True)
    assert created
    assert journal.events()[-1]["kind"] == "remove-failed"


# --- trusted evidence (SPEC §3.2) ------------------------------------------------------


def test_test_phase_runs_read_only_after_a_writable_build(
    sandbox: DockerSandbox, image: ImageRef, docker_client: docker.DockerClient
) -> None:
    result, journal = run(
        sandbox,
        image,
        spec(
            build=[
                "echo built > /usr/local/bin/from-build && echo ok > src/built.txt",
                # compiles into the build's prefix
                "echo X = 1 > src/mod.py "
                "&& python3 -c 'import sys; sys.path[:0] = [\"src\"]; import mod'",
                'find "$PYTHONPYCACHEPREFIX/workspace" -name "mod.*.pyc" | grep -q .',
            ],
            test=[
                # the build's files are there, the image cannot be changed any more
                "test -f /usr/local/bin/from-build && test -f src/built.txt",
                "! touch /usr/local/bin/python3-shim 2>/dev/null",
                'site="$(python3 -c "import site; print(site.getsitepackages()[0])")" '
                '&& test -d "$site" && ! touch "$site/shim.pth" 2>/dev/null',
                # /tmp and HOME are writable, and fresh for every test command
                "touch /tmp/mark $HOME/mark && mkdir -p reports",
                "test ! -e /tmp/mark && test ! -e $HOME/mark && test -d reports",
                'test "$PYTHONNOUSERSITE" = 1',
                'test "$PYTHONPYCACHEPREFIX" = /opt/proofgate/links',
                # what build compiled is not the tests' (they never mount its prefix), and
                # no test command can add to theirs
                "! find \"$PYTHONPYCACHEPREFIX\"/ -name 'mod.*.pyc' | grep -q .",
                "test ! -e /opt/proofgate-pycache/usr",
                '! mkdir -p "$PYTHONPYCACHEPREFIX/x" 2>/dev/null',
            ],
        ),
    )
    assert result.phases[-1].ok, [(c.argv, c.exit_code) for c in result.phases[-1].commands]
    kinds = [e["kind"] for e in journal.events()]
    assert "image-committed" in kinds
    committed = next(e for e in journal.events() if e["kind"] == "image-committed")
    with pytest.raises(docker.errors.ImageNotFound):  # removed with the check
        docker_client.images.get(str(committed["data"]["image"]))  # type: ignore[index]
    assert kinds[-1] == "volume-removed"


_IMAGE_BYTECODE = (
    "import importlib.util as u, json, os, sys; p = u.cache_from_source(json.__file__); "
    "assert p.startswith(os.environ['PYTHONPYCACHEPREFIX'] + '/'), p; "
    "target = os.path.join(os.path.dirname(json.__file__), '__pycache__', os.path.basename(p)); "
    "assert os.path.islink(p) or os.path.islink(os.path.dirname(p)), p; "
    "assert os.path.realpath(p) == os.path.realpath(target), p; "
    "assert sys.modules['json'].__spec__.cached == p"
)


@pytest.mark.parametrize("build", [None, ["true"]], ids=["test-only", "after-build"])
def test_the_images_own_bytecode_is_linked_into_the_prefix(
    sandbox: DockerSandbox, image: ImageRef, build: list[str] | None
) -> None:
    """A test command imports the standard library from the image's bytecode, not from a
    fresh compile; nothing of the tree or the witness is linked."""
    result, journal = run(
        sandbox,
        image,
        spec(
            build=build,
            test=[
                f'python3 -c "{_IMAGE_BYTECODE}"',
                'test -z "$(ls -A "$PYTHONPYCACHEPREFIX/workspace")"',
                'test -z "$(ls -A "$PYTHONPYCACHEPREFIX/opt/proofgate")"',
            ],
        ),
    )
    assert result.phases[-1].ok, [c.log_tail for c in result.phases[-1].commands]
    linked = next(e for e in journal.events() if e["kind"] == "bytecode-linked")
    assert int(linked["data"]["files"]) > 100  # type: ignore[index,call-overload]


def test_a_lone_test_command_cannot_change_the_linked_bytecode(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    """The daemon fills proofgate's volume through the holder: the check's one container
    mounts it read-only, and nothing in it is the check's besides."""
    change = (
        'p="$PYTHONPYCACHEPREFIX"; d="$(dirname "$(find "$p/usr" -type l | head -1)")"; '
        'test -n "$d" && ! chmod 0777 "$d" 2>/dev/null && ! touch "$d/planted.pyc" 2>/dev/null '
        '&& ! rm -f "$(find "$p/usr" -type l | head -1)" 2>/dev/null '
        '&& test -n "$(find "$p/usr" -type l | head -1)"'
    )
    result, journal = run(sandbox, image, spec(test=[change]))
    assert result.phases[-1].ok, last(result)[1]
    roles = [e["data"]["role"] for e in journal.events() if e["kind"] == "container-created"]
    assert roles == ["check", "holder"]


def test_a_test_command_cannot_leave_a_process_for_the_next(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    result, _ = run(
        sandbox,
        image,
        spec(
            test=[
                "setsid sh -c 'sleep 1; echo tampered > late.txt' >/dev/null 2>&1 &",
                "sleep 2; test ! -e late.txt",
            ]
        ),
    )
    assert result.phases[-1].ok, last(result)[1]


def test_read_back_uses_no_program_of_the_container_and_no_process_survives(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    """A `tar` first on the PATH that hangs, and a background process that rewrites the
    report after the command ended: the daemon reads the report the command wrote."""
    forge = "sleep 2; echo forged > reports/junit.xml"
    result, journal = run(
        sandbox,
        image,
        spec(
            timeout=20,
            env=(("PATH", "/workspace/bin:/usr/local/bin:/usr/bin:/bin"),),
            junit="./reports/../reports/junit.xml",
            test=[
                "mkdir -p bin reports && printf '#!/bin/sh\\nsleep 600\\n' > bin/tar "
                f"&& chmod +x bin/tar && (setsid sh -c '{forge}' >/dev/null 2>&1 &) "
                "&& echo '<testsuite tests=\"1\"/>' > reports/junit.xml"
            ],
        ),
    )
    assert result.phases[-1].ok, last(result)[1]
    assert result.junit_report == b'<testsuite tests="1"/>\n'
    assert "junit-read" in [e["kind"] for e in journal.events()]


def test_editable_install_in_build_is_importable_in_the_read_only_test_phase(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    """`pip install -e .` in build (as proofgate's own config does) still works: the
    test phase runs from a commit of the build container."""
    tree = make_tree(
        {
            "pyproject.toml": (
                b'[build-system]\nrequires = ["setuptools"]\n'
                b'build-backend = "setuptools.build_meta"\n'
                b'[project]\nname = "demo"\nversion = "0"\n'
            ),
            "src/demo/__init__.py": b"VALUE = 42\n",
        }
    )
    pip = "python3 -m pip install --break-system-packages --quiet --no-deps"
    result, _ = run(
        sandbox,
        image,
        spec(
            build=[f"{pip} --no-build-isolation --no-index -e ."],
            test=["cd /tmp && python3 -c 'import demo; assert demo.VALUE == 42'"],
        ),
        tree,
    )
    assert result.phases[-1].phase is Phase.TEST, [
        c.log_tail for p in result.phases for c in p.commands
    ]
    assert result.phases[-1].ok, last(result)[1]


@pytest.mark.parametrize("phase", ["build", "test"])
def test_stop_event_kills_the_running_command_and_removes_everything(
    sandbox: DockerSandbox, image: ImageRef, phase: str
) -> None:
    """A check in a worker thread, where no Ctrl-C arrives: the orchestrator sets `stop`,
    the running command is killed, containers, image and volume are removed (the autouse
    fixture checks) and the worker ends with KeyboardInterrupt."""
    stop = threading.Event()
    began = threading.Event()

    def on_event(event: dict[str, object]) -> None:
        if event["kind"] == "command-started" and event["data"]["phase"] == phase:  # type: ignore[index]
            began.set()

    journal = Journal(on_event=on_event)
    slow, fast = ["sleep 120"], ["true"]
    check = spec(build=slow, test=fast) if phase == "build" else spec(build=fast, test=slow)
    raised: list[BaseException] = []

    def worker() -> None:
        try:
            sandbox.run_check(check, image, TREE, journal, stop=stop)
        except BaseException as e:  # noqa: BLE001 - what the worker ends with
            raised.append(e)

    thread = threading.Thread(target=worker)
    thread.start()
    assert began.wait(120), "the command never started"
    stop.set()
    thread.join(120)
    assert not thread.is_alive()
    (error,) = raised
    assert isinstance(error, KeyboardInterrupt), raised
    assert "volume-removed" in [e["kind"] for e in journal.events()]


# --- the environment cache (gate/sandbox/envcache.py) ------------------------------------


ENV_SETUP = (
    # setup sees only its inputs; what it writes outside /workspace is the environment
    "test -f requirements.txt && test ! -e app.txt && "
    "{ cat requirements.txt; head -c 8 /dev/urandom | od -An -tx1; } > /opt/env-marker"
)
ENV_TEST = "test -f app.txt && cat /opt/env-marker"


def _cached_check(tree: TreeFn, sandbox: DockerSandbox, image: ImageRef) -> CheckResult:
    check = dataclasses.replace(
        spec(setup=[ENV_SETUP], test=[ENV_TEST]), setup_inputs=("requirements*.txt",)
    )
    result, _ = run(sandbox, image, check, tree)
    assert result.started, result.error
    assert all(p.ok for p in result.phases), result.phases
    return result


def test_setup_result_is_cached_by_its_inputs(
    sandbox: DockerSandbox, image: ImageRef, env_cache: None
) -> None:
    first = _cached_check(
        make_tree({"requirements.txt": b"click==8\n", "app.txt": b"1"}), sandbox, image
    )
    assert first.environment is not None
    assert first.environment["cache"] == "miss"
    assert [p.phase for p in first.phases] == [Phase.SETUP, Phase.TEST]
    marker = first.phases[-1].commands[-1].log_tail
    assert marker.startswith("click==8")

    # another change to the tree, the same inputs: setup does not run again
    again = _cached_check(
        make_tree({"requirements.txt": b"click==8\n", "app.txt": b"2"}), sandbox, image
    )
    assert again.environment == {**first.environment, "cache": "hit"}
    assert again.phases[0] == first.phases[0]  # the results that made the environment
    assert again.phases[-1].commands[-1].log_tail == marker

    changed = _cached_check(
        make_tree({"requirements.txt": b"click==9\n", "app.txt": b"2"}), sandbox, image
    )
    assert changed.environment is not None
    assert changed.environment["cache"] == "miss"
    assert changed.environment["key"] != first.environment["key"]
    assert changed.phases[-1].commands[-1].log_tail.startswith("click==9")


def test_failed_setup_is_not_cached(
    sandbox: DockerSandbox, image: ImageRef, env_cache: None
) -> None:
    check = dataclasses.replace(
        spec(setup=["false"], test=["true"]), setup_inputs=("requirements.txt",)
    )
    tree = make_tree({"requirements.txt": b"x\n"})
    for _ in range(2):
        result, _ = run(sandbox, image, check, tree)
        assert result.environment is not None
        assert result.environment["cache"] == "miss"
        assert not result.phases[0].ok


def test_a_build_snapshot_from_a_cached_environment_is_never_a_cached_environment(
    sandbox: DockerSandbox, image: ImageRef, env_cache: None, docker_client: docker.DockerClient
) -> None:
    """The commit after build inherits the cached image's labels; if it kept them, a
    concurrent check with the same key would start from a pull request's build."""
    seen: list[dict[str, str]] = []

    def on_event(event: dict[str, object]) -> None:
        if event["kind"] == "image-committed":
            snapshot = str(event["data"]["image"])  # type: ignore[index]
            labels = docker_client.api.inspect_image(snapshot)["Config"]["Labels"] or {}
            seen.append(labels)
            assert snapshot not in {e.image for e in envcache.entries(docker_client.api)}

    check = dataclasses.replace(
        spec(setup=["true"], build=["touch /opt/built"], test=["true"]),
        setup_inputs=("requirements.txt",),
    )
    tree = make_tree({"requirements.txt": b"snapshot\n"})
    for state in ("miss", "hit"):
        result = sandbox.run_check(check, image, tree, Journal(on_event=on_event))
        assert result.environment is not None
        assert result.environment["cache"] == state
        assert all(p.ok for p in result.phases)
    assert len(seen) == 2
    assert all(labels.get(envcache.CACHE_LABEL) != "1" for labels in seen), seen


def test_the_cache_is_bounded(
    sandbox: DockerSandbox, image: ImageRef, env_cache: None, docker_client: docker.DockerClient
) -> None:
    check = dataclasses.replace(spec(setup=["true"], test=["true"]), setup_inputs=("r.txt",))
    made = set()
    for n in range(2):
        result, _ = run(sandbox, image, check, make_tree({"r.txt": str(n).encode()}))
        assert result.environment is not None
        made.add(result.environment["image"])
    total = len(envcache.entries(docker_client.api))
    removed = envcache.prune(docker_client.api, keep=total - 1)
    assert len(removed) == 1
    left = {e.image for e in envcache.entries(docker_client.api)}
    assert len(left) == total - 1
    assert len(made & left) == 1 or removed[0].image not in made


# --- the witness and the protected test files (SPEC §3.2, docs/security.md) ------------

_TEST_CALC = b"from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
WITNESSED_TREE = make_tree(
    {
        "calc.py": b"def add(a, b):\n    return a + b\n",
        "tests/test_calc.py": _TEST_CALC,
        "tests/conftest.py": b"",
    }
)
_PYTEST = "python3 -m pytest -q -p no:cacheprovider --junitxml=reports/junit.xml tests"


def test_pytest_runs_under_the_witness_and_its_line_matches_the_report(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    check = dataclasses.replace(
        spec(test=[_PYTEST], junit="reports/junit.xml"), differential=DifferentialMode.TRUSTED
    )
    result, _ = run(sandbox, image, check, WITNESSED_TREE)
    command = result.phases[-1].commands[-1]
    assert command.ok, command.log_tail
    [session] = command.witness
    assert session.exitstatus == 0
    assert session.counts["passed"] == 1
    assert result.junit_report is not None
    assert session.junit_path == "/workspace/reports/junit.xml"
    assert session.junit_sha256 == hashlib.sha256(result.junit_report).hexdigest()
    assert [p for p, _ in session.conftests] == ["/workspace/tests/conftest.py"]
    assert session.tampered == ()


def test_a_check_cannot_change_the_witness_or_a_protected_test_file(
    sandbox: DockerSandbox, image: ImageRef
) -> None:
    check = dataclasses.replace(
        spec(
            build=[
                "echo built > built.txt",
                # proofgate's volume is read-only to setup and build too
                "! touch /opt/proofgate/x /opt/proofgate/links/x 2>/dev/null",
                "! sh -c 'echo x >> /opt/proofgate/boot/sitecustomize.py' 2>/dev/null",
                # bytecode it writes (a `compileall`, or one planted for a base test file)
                # goes to its own prefix, which the test phase does not see
                'test "$PYTHONPYCACHEPREFIX" = /opt/proofgate-pycache',
                'mkdir -p "$PYTHONPYCACHEPREFIX/workspace/tests"',
                'echo planted > "$PYTHONPYCACHEPREFIX/workspace/tests/test_calc.cpython-311.pyc"',
            ],
            test=[
                'test -z "$(ls -A "$PYTHONPYCACHEPREFIX/workspace")"',
                "test ! -e /opt/proofgate-pycache/workspace",
                '! touch "$PYTHONPYCACHEPREFIX/workspace/x" 2>/dev/null',
                # the hook and the witness: readable, not writable, not replaceable
                "test -r /opt/proofgate/witness/proofgate_witness/__init__.py",
                "test -r /opt/proofgate/boot/sitecustomize.py",
                "! sh -c 'echo x >> /opt/proofgate/witness/proofgate_witness/__init__.py' "
                "2>/dev/null",
                "! rm -f /opt/proofgate/boot/sitecustomize.py 2>/dev/null",
                "! touch /opt/proofgate/other.py /opt/proofgate/witness/x.py 2>/dev/null",
                "! touch /opt/proofgate/links/x.pyc 2>/dev/null",
                # a trusted test file: not writable, removable, renamable or chmod-able
                "! sh -c 'echo x >> tests/test_calc.py' 2>/dev/null",
                "! rm -f tests/test_calc.py 2>/dev/null",
                "! mv tests/test_calc.py tests/moved.py 2>/dev/null",
                "! chmod 666 tests/test_calc.py 2>/dev/null",
                # but the check adds files anywhere and changes the code under test
                "echo new > tests/new.txt && echo '# edited' >> calc.py && test -f built.txt",
                'test "$(sha256sum tests/test_calc.py | cut -c1-64)" = '
                + hashlib.sha256(_TEST_CALC).hexdigest(),
            ],
            junit="reports/junit.xml",
        ),
        differential=DifferentialMode.TRUSTED,
    )
    result, _ = run(sandbox, image, check, WITNESSED_TREE)
    failed = [c for p in result.phases for c in p.commands if not c.ok]
    assert not failed, [(c.argv, c.log_tail) for c in failed]
