"""The Docker clean room: every check in a brand-new, locked-down container.

`DockerSandbox` implements the `Sandbox` port with the Docker SDK. Per check it creates a
container from the resolved image *id* (a tag can move between resolution and use),
streams a fresh copy of the proven tree into `/workspace`, runs the phases' commands one
by one with `exec`, and removes the container in a `finally` whatever happens (timeout,
Ctrl-C, daemon error). Nothing is bind-mounted, so the gate itself may run inside a
container that only has the Docker socket (as GitHub container actions do).

**The workspace lives in memory.** `/workspace` is a tmpfs (`rw,exec,nosuid,nodev`) the
size of the check's `memory` limit, and the tree is streamed into it through the stdin of
`tar -x` run in the container: unpacking thousands of small files into a tmpfs takes a
fraction of the time the overlay writable layer needs. Its pages are charged to the
container's memory cgroup (measured on a cgroup v1 host with Docker 20.10: writing 48 MiB
into the tmpfs raised the container's `memory.usage_in_bytes` by ~50 MB, all of it
`shmem` in `memory.stat`, and deleting the file gave it back; with `memory: 64m` a `dd`
of 128 MB into it was OOM-killed at ~62 MiB). So the tree plus whatever the check writes
into `/workspace` plus its processes share the `memory` limit: a tree that does not fit
fails the copy (the check does not start), and an image without `tar` gets the previous
method instead, a container without the tmpfs filled by the daemon (`put_archive`, with
`noOverwriteDirNonDir`); the journal's `tree-copied` event names the method. Docker copies
an image's own `/workspace` content into the tmpfs (as `put_archive` used to merge with
it).

Hardening, and what each choice does *not* cover:

- **Fresh container per check, tree streamed in.** No check sees another check's changes
  or the user's checkout (SPEC §1). Not covered: what the image itself contains; it is
  pinned by id and recorded in the receipt, and it is trusted like the configuration.
- **No network** (`network_mode="none"`: only a loopback interface). With `network: setup`
  and a non-empty `egress` allowlist the container starts on a per-check internal network
  whose only exit is the egress broker (`gate.sandbox.egress`), and is disconnected from
  it before the build phase; the disconnection is verified, and a failure ends the run as
  a clean-room error. With an empty allowlist there is no network at all. Not covered:
  what the setup phase downloads from an allowed host (pin and hash it in your setup).
- **No host environment.** A command sees only the configured `env`, the image's own
  `ENV`, and what the runtime adds: `PATH` (the image's, or Docker's default), `HOME`
  (from the container's passwd), `HOSTNAME`. No secrets or tokens of the host process.
- **No mounts, no Docker socket, no devices, not privileged, private IPC namespace.**
- **No capabilities** (`cap_drop=ALL`, `cap_add` only as configured) and
  `no-new-privileges` (setuid binaries cannot raise privileges). Root inside the
  container still owns the container's files, but cannot change ownership, bypass file
  permissions of others, mount, trace, load modules, use raw sockets or change the
  network. Not covered: kernel exploits (the container shares the host kernel; Docker's
  default seccomp and AppArmor profiles narrow that surface but do not remove it) — use
  a VM-isolated runtime such as gVisor or Kata via the daemon's default runtime if that
  matters to you.
- **Limits**: `pids_limit` (fork bombs), `mem_limit` with an equal `memswap_limit` (no
  swap; an out-of-memory kill is reported as `oom_killed`), `nano_cpus` (CPU share), and a
  per-phase deadline enforced from the host (the container is killed at the deadline).
  PID 1 is Docker's init (`init=True`) so orphaned processes are reaped. A disk flood
  inside `/workspace` is bounded by the memory limit (the tmpfs is memory; the writer is
  OOM-killed or gets "no space left"). Not covered: disk usage *outside* `/workspace`
  (`/tmp`, `$HOME`, ... are in the container's writable layer, which can grow until the
  daemon's disk is full; so is the workspace of an image without `tar`), disk and
  network I/O bandwidth, and the log volume (output is hashed in full but only a bounded
  tail is kept; nothing is written to the daemon's logs).
- **User**: the image's default user unless `user` is configured. The tree is copied in
  owned by root (`tar` runs as root with `--no-same-owner`); when the effective user is
  not root, `/workspace` and every entry are made writable for everyone inside the
  container (only write bits are added; exec bits are kept; no sticky bit) so that builds
  and test reports can write into the workspace. The JUnit report is read back with a
  `tar -c` run as the check's user (the daemon's archive API cannot see into a tmpfs).

Output of a command (stdout and stderr interleaved, as the process wrote them) is read on
a separate thread: its SHA-256 covers the full log, its byte count is recorded, and only
the last `log_tail_bytes` are kept (decoded as UTF-8 with replacement characters).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import posixpath
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

import docker
import docker.errors
import requests
from docker.utils.socket import frames_iter

from gate.journal import Journal
from gate.model import (
    CheckResult,
    CheckSpec,
    Command,
    CommandResult,
    ImageRef,
    Phase,
    PhaseResult,
    Sha256,
)
from gate.sandbox.egress import EgressBroker, EgressStartError
from gate.sandbox.interface import ImageError, SandboxError

if TYPE_CHECKING:
    from gate.sandbox.interface import Sandbox

log = logging.getLogger("gate.sandbox")

WORKSPACE = "/workspace"
LABELS = {"proofgate": "1"}
JUNIT_MAX_BYTES = 16 * 1024 * 1024
_TAR_EXTRACT = ("tar", "-x", "--no-same-owner", "-f", "-", "-C", WORKSPACE)
_COPY_OUTPUT_MAX = 64 * 1024  # of tar's output kept for the error message
_KILL_GRACE_S = 10.0  # how long to wait for an output stream to close after a kill
_DAEMON_HELP = (
    "Start Docker (on Debian as root, scripts/ensure-docker installs and starts it), "
    "or point DOCKER_HOST at a running daemon."
)

# Failures that mean the daemon itself is gone or unusable, as opposed to one request
# being refused (docker.errors.APIError).
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    ConnectionError,
)


def _is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, docker.errors.APIError):
        return False
    return isinstance(exc, (*_TRANSPORT_ERRORS, docker.errors.DockerException))


def _daemon_gone(what: str, exc: BaseException) -> SandboxError:
    return SandboxError(f"the Docker daemon stopped answering while {what} ({exc}). {_DAEMON_HELP}")


class DockerSandbox:
    """Runs checks in fresh Docker containers; see the module docstring for the hardening.

    Raises (constructor):
        SandboxError: no Docker daemon answers.
    """

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        *,
        allow_pull: bool = False,
        log_tail_bytes: int = 16384,
    ) -> None:
        if log_tail_bytes < 0:
            raise ValueError("log_tail_bytes must not be negative")
        try:
            self._client = client if client is not None else docker.from_env()
            self._client.ping()
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise SandboxError(f"cannot reach the Docker daemon ({e}). {_DAEMON_HELP}") from e
        self._api = self._client.api
        self._allow_pull = allow_pull
        self._tail = log_tail_bytes
        # Image ids found to lack `tar`: their checks go straight to `put_archive`.
        self._without_tar: set[str] = set()
        # Writing to an exec's stdin needs the raw socket: not over SSH or a named pipe.
        base_url = str(self._api.base_url)
        self._stdin_to_exec = not (
            base_url.startswith("http+docker://ssh") or base_url == "http+docker://localnpipe"
        )

    # --- images ----------------------------------------------------------------------

    def resolve_image(self, name: str) -> ImageRef:
        """Resolve `name` to the local image id and, when known, its repo digest.

        Pulls only when the sandbox was created with `allow_pull=True`.

        Raises:
            SandboxError: the daemon does not answer.
            ImageError: the image is not present locally and pulling is not allowed, or
                the pull failed, or the name is not a valid image reference.
        """
        try:
            try:
                image = self._client.images.get(name)
            except docker.errors.ImageNotFound:
                if not self._allow_pull:
                    raise ImageError(
                        f"the image {name} is not present on the Docker host and pulling is "
                        "not allowed. Build or pull it first (for the clean-room image: "
                        "make image), or allow pulling."
                    ) from None
                image = self._pull(name)
        except docker.errors.APIError as e:
            raise ImageError(f"cannot resolve the image {name}: {e.explanation or e}") from e
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise SandboxError(f"cannot reach the Docker daemon ({e}). {_DAEMON_HELP}") from e
        attrs = image.attrs
        digests = [str(d) for d in (attrs.get("RepoDigests") or [])]
        return ImageRef(name=name, id=str(image.id), repo_digest=_pick_repo_digest(name, digests))

    def _pull(self, name: str) -> object:
        repository, tag, digest = _split_reference(name)
        log.warning("pulling %s (pulling was allowed)", name)
        try:
            return self._client.images.pull(repository, tag=digest or tag or "latest")
        except docker.errors.APIError as e:
            raise ImageError(f"cannot pull the image {name}: {e.explanation or e}") from e

    # --- checks ----------------------------------------------------------------------

    def run_check(
        self,
        spec: CheckSpec,
        image: ImageRef,
        tree_tar: Callable[[], Iterator[bytes]],
        journal: Journal,
    ) -> CheckResult:
        """Run one check in a brand-new container; see `Sandbox.run_check`.

        Raises:
            SandboxError: the daemon went away, or the network could not be taken away
                after the setup phase, or the container could not be removed.
        """
        run = _CheckRun(self, spec, image, journal)
        try:
            try:
                result = run.execute(tree_tar)
            except BaseException:
                run.remove(raise_on_failure=False)
                raise
            run.remove(raise_on_failure=True)
        finally:
            if run.egress is not None:  # after the container: the network must be free
                run.egress.close()
        return result


@dataclass
class _LogSink:
    """Consumes one command's output stream: full SHA-256, byte count, bounded tail."""

    tail_limit: int
    sha256: hashlib._Hash = field(default_factory=hashlib.sha256)
    size: int = 0
    tail: bytearray = field(default_factory=bytearray)
    error: BaseException | None = None

    def consume(self, stream: Iterator[bytes]) -> None:
        try:
            for chunk in stream:
                if not chunk:
                    continue
                self.sha256.update(chunk)
                self.size += len(chunk)
                self.tail += chunk
                if len(self.tail) > 2 * self.tail_limit + 65536:
                    del self.tail[: len(self.tail) - self.tail_limit]
        except BaseException as e:  # noqa: BLE001 — handed to the main thread
            self.error = e

    def tail_text(self) -> str:
        data = bytes(self.tail[len(self.tail) - self.tail_limit :]) if self.tail_limit else b""
        return data.decode("utf-8", "replace")


class _CheckRun:
    """State of one check: its container and what has run in it so far."""

    def __init__(
        self, sandbox: DockerSandbox, spec: CheckSpec, image: ImageRef, journal: Journal
    ) -> None:
        self.sb = sandbox
        self.api = sandbox._api
        self.spec = spec
        self.image = image
        self.journal = journal
        self.cid: str | None = None
        self.t_started = 0.0
        self.networked = False
        self.workspace_in_memory = False
        self.egress: EgressBroker | None = None

    @property
    def container_id(self) -> str:
        if self.cid is None:
            raise RuntimeError("the check's container does not exist (yet or any more)")
        return self.cid

    # container lifecycle ----------------------------------------------------------

    def execute(self, tree_tar: Callable[[], Iterator[bytes]]) -> CheckResult:
        problem = self._create_and_fill(tree_tar)
        if problem is not None:
            return CheckResult(name=self.spec.name, image=self.image, started=False, error=problem)
        phases: list[PhaseResult] = []
        error: str | None = None
        test_ran = False
        for phase, commands in self.spec.phases:
            if self.networked and phase is not Phase.SETUP:
                self._detach_network()
            results, error = self._run_phase(phase, commands)
            phases.append(PhaseResult(phase=phase, commands=tuple(results)))
            test_ran = test_ran or phase is Phase.TEST
            if error is not None or not all(r.ok for r in results):
                break
        egress = self.egress.finish() if self.egress is not None else None
        junit = None
        if test_ran and self.spec.junit is not None and error is None:
            junit = self._read_junit(self.spec.junit)
        return CheckResult(
            name=self.spec.name,
            image=self.image,
            started=True,
            phases=tuple(phases),
            error=error,
            junit_report=junit,
            egress=egress,
        )

    def _create_and_fill(self, tree_tar: Callable[[], Iterator[bytes]]) -> str | None:
        """Create, fill and start the container; a message when that is impossible.

        The tree goes into a tmpfs at /workspace through `tar -x` run in the container;
        an image without `tar` gets a container without the tmpfs, filled by the daemon
        (`put_archive`) as before. The daemon's archive API cannot write into a tmpfs
        (it writes to the directory hidden under the mount), hence the exec.
        """
        limits = self.spec.limits
        self.networked = limits.network == "setup" and any(
            p is Phase.SETUP for p, _ in self.spec.phases
        )
        # SPEC §2 `egress`: setup reaches only the allowlist, through the broker; with an
        # empty allowlist `network: setup` means no network at all.
        self.networked = self.networked and bool(limits.egress)
        if self.networked:
            try:
                self.egress = EgressBroker.start(
                    self.api,
                    check=self.spec.name,
                    image=self.image,
                    allowlist=limits.egress,
                    journal=self.journal,
                )
            except EgressStartError as e:
                return str(e)
        try:
            user = self._effective_user()
        except docker.errors.APIError as e:
            return f"cannot inspect the image {self.image.name}: {e.explanation or e}"
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise _daemon_gone("inspecting the image", e) from e
        opened = _non_root(user)
        if self.sb._stdin_to_exec and self.image.id not in self.sb._without_tar:
            problem = self._create(tmpfs=True, opened=opened)
            if problem is not None:
                return problem
            outcome = self._fill_with_tar(tree_tar, user, opened)
            if not isinstance(outcome, _NoTar):
                return outcome
            # The image has no tar: start over in a container without the tmpfs.
            self.sb._without_tar.add(self.image.id)
            self.remove(raise_on_failure=True)
        problem = self._create(tmpfs=False, opened=opened)
        if problem is not None:
            return problem
        return self._fill_with_put_archive(tree_tar, user, opened)

    def _create(self, *, tmpfs: bool, opened: bool) -> str | None:
        limits = self.spec.limits
        host_config = self.api.create_host_config(
            network_mode=self.egress.network if self.egress is not None else "none",
            dns=self.egress.dns if self.egress is not None else None,
            init=True,
            cap_drop=["ALL"],
            cap_add=list(limits.cap_add) or None,
            security_opt=["no-new-privileges"],
            pids_limit=limits.pids,
            mem_limit=limits.memory,
            memswap_limit=limits.memory,
            nano_cpus=int(limits.cpus * 1e9),
            ipc_mode="private",
            privileged=False,
            # The daemon removes the container itself once it stops: if the daemon dies
            # mid-check, our `finally` cannot reach it, but a restarted daemon cleans up.
            auto_remove=True,
            # The workspace in memory, charged to the container's memory cgroup; see the
            # module docstring.
            tmpfs={WORKSPACE: _tmpfs_options(limits.memory, opened)} if tmpfs else None,
        )
        try:
            created = self.api.create_container(
                self.image.id,
                entrypoint=["sleep", "infinity"],
                command=[],
                user=limits.user or "",
                working_dir=WORKSPACE,
                environment=[f"{k}={v}" for k, v in limits.env]
                + (self.egress.env if self.egress is not None else []),
                labels=dict(LABELS),
                hostname="cleanroom",
                host_config=host_config,
                network_disabled=False,
            )
        except docker.errors.APIError as e:
            return f"cannot create a container from {self.image.name}: {e.explanation or e}"
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise _daemon_gone("creating a container", e) from e
        self.cid = str(created["Id"])
        self.workspace_in_memory = tmpfs
        self.journal.append(
            "container-created",
            check=self.spec.name,
            container=self.cid[:12],
            image=self.image.id,
            network="setup" if self.networked else "none",
            workspace="tmpfs" if tmpfs else "layer",
        )
        return None

    def _fill_with_tar(
        self, tree_tar: Callable[[], Iterator[bytes]], user: str, opened: bool
    ) -> str | None | _NoTar:
        """Start the container and stream the tree into its tmpfs with `tar -x`.

        None when the tree is in; a message when the check cannot start; `_NO_TAR` when
        the image has no `tar` (the caller falls back to `put_archive`).
        """
        try:
            self.api.start(self.container_id)
        except docker.errors.APIError as e:
            return f"cannot start the clean-room container: {e.explanation or e}"
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise _daemon_gone("starting the container", e) from e
        self.t_started = time.monotonic()
        t0 = time.monotonic()
        try:
            # As root ("0"), whatever the configured user: root owns the tmpfs. With no
            # capabilities it can still write there (it is the owner), and
            # --no-same-owner keeps it from trying to chown (files end up owned by root,
            # as with put_archive). GNU tar strips a leading "/" from member names and
            # refuses members containing "..", on top of the git adapter's own refusal
            # of such names before a byte is streamed.
            exec_id = self.api.exec_create(
                self.container_id,
                list(_TAR_EXTRACT),
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                user="0",
                workdir="/",
            )["Id"]
            sock = self.api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as e:
            return f"cannot copy the tree into the clean room: {e.explanation or e}"
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise _daemon_gone("copying the tree", e) from e
        counter = _Counter(tree_tar())
        chunks = _open_for_all(counter, workspace=True) if opened else iter(counter)
        try:
            output, send_error = _pipe_into_exec(sock, chunks, self.spec.limits.timeout)
        finally:
            _close_iterator(chunks)
            counter.close()
        exit_code = self._exit_code(exec_id)
        text = output.decode("utf-8", "replace").strip()
        # 126/127: the runtime could not start tar. (Not any output mentioning "not
        # found": tar's own messages quote member names, which the tree chooses.)
        if exit_code in (126, 127) or (
            text.startswith("OCI runtime exec failed") and "executable file not found" in text
        ):
            self.journal.append(
                "tree-copy-fallback", check=self.spec.name, reason=text[-500:] or None
            )
            return _NO_TAR
        if exit_code != 0 or send_error is not None:
            if not text:
                status = "no exit status" if exit_code is None else f"exit status {exit_code}"
                text = f"tar ended with {status}" + (
                    f" ({send_error})" if send_error is not None else ""
                )
            self.journal.append(
                "tree-copy-failed", check=self.spec.name, exit_code=exit_code, error=text[-500:]
            )
            if exit_code == 137:
                text += (
                    "; tar was killed: the tree may not fit in the check's memory limit "
                    "(the workspace is held in memory)"
                )
            return f"cannot copy the tree into the clean room: {text}"
        self._journal_copied(counter, t0, "tmpfs-tar", user if opened else None)
        return None

    def _fill_with_put_archive(
        self, tree_tar: Callable[[], Iterator[bytes]], user: str, opened: bool
    ) -> str | None:
        """The daemon's archive API into the writable layer, then start (images without tar)."""
        try:
            t0 = time.monotonic()
            counter = _Counter(tree_tar())
            stream: Iterable[bytes] = counter
            if opened:
                self._put_archive("/", _workspace_dir_tar())
                stream = _open_for_all(counter)
            self._put_archive(WORKSPACE, stream)
            self._journal_copied(counter, t0, "put-archive", user if opened else None)
            self.api.start(self.container_id)
        except docker.errors.APIError as e:
            return f"cannot start the clean-room container: {e.explanation or e}"
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise _daemon_gone("preparing the container", e) from e
        self.t_started = time.monotonic()
        return None

    def _journal_copied(self, counter: _Counter, t0: float, method: str, user: str | None) -> None:
        self.journal.append(
            "tree-copied",
            check=self.spec.name,
            method=method,
            bytes=counter.size,
            sha256=counter.sha256.hexdigest(),
            seconds=round(time.monotonic() - t0, 3),
            opened_for_user=user,
        )

    def _effective_user(self) -> str:
        if self.spec.limits.user:
            return self.spec.limits.user
        config = self.api.inspect_image(self.image.id).get("Config") or {}
        return str(config.get("User") or "")

    def _put_archive(self, path: str, data: Iterable[bytes] | bytes) -> None:
        # The SDK's put_archive lacks noOverwriteDirNonDir: a tree must not replace a
        # directory of the image with a file (or the reverse) behind our back.
        res = self.api._put(
            self.api._url("/containers/{0}/archive", self.container_id),
            params={"path": path, "noOverwriteDirNonDir": "1"},
            data=data,
        )
        self.api._raise_for_status(res)

    def _detach_network(self) -> None:
        """SPEC §2 `network: setup`: take the network away before build and test."""
        if self.egress is None:
            raise RuntimeError("a networked check without its egress broker")
        self.egress.detach(self.container_id)
        self.egress.finish()  # the broker stops before build: nothing is left to reach
        self.networked = False
        self.journal.append("network-detached", check=self.spec.name)

    def remove(self, *, raise_on_failure: bool) -> None:
        if self.cid is None:
            return
        cid, self.cid = self.cid, None
        try:
            self.api.remove_container(cid, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            # auto_remove: the daemon may already be removing the stopped container.
            if e.status_code != 409 or not self._gone(cid):
                self._remove_failed(cid, e, raise_on_failure=raise_on_failure)
                return
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            self._remove_failed(cid, e, raise_on_failure=raise_on_failure)
            return
        self.journal.append("container-removed", check=self.spec.name, container=cid[:12])

    def _gone(self, cid: str, wait_s: float = 15.0) -> bool:
        """Whether the container disappears within `wait_s` (the daemon is removing it)."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                self.api.inspect_container(cid)
            except docker.errors.NotFound:
                return True
            except (docker.errors.DockerException, *_TRANSPORT_ERRORS):
                return False
            time.sleep(0.1)
        return False

    def _remove_failed(self, cid: str, e: Exception, *, raise_on_failure: bool) -> None:
        log.warning("could not remove container %s: %s", cid[:12], e)
        self.journal.append(
            "container-remove-failed", check=self.spec.name, container=cid[:12], error=str(e)
        )
        if raise_on_failure:
            raise SandboxError(
                f"cannot remove the clean-room container {cid[:12]} ({e}); "
                f"remove it by hand: docker rm -f {cid[:12]}"
            ) from e

    def _kill(self) -> None:
        try:
            self.api.kill(self.container_id)
        except docker.errors.APIError:
            pass  # already stopped

    # commands ----------------------------------------------------------------------

    def _run_phase(
        self, phase: Phase, commands: tuple[Command, ...]
    ) -> tuple[list[CommandResult], str | None]:
        deadline = time.monotonic() + self.spec.limits.timeout
        results: list[CommandResult] = []
        for command in commands:
            result, error = self._run_command(phase, command.argv, deadline)
            results.append(result)
            if error is not None or not result.ok:
                return results, error
        return results, None

    def _run_command(
        self, phase: Phase, argv: tuple[str, ...], deadline: float
    ) -> tuple[CommandResult, str | None]:
        started = time.monotonic()
        wall_started = time.time()
        offset = started - self.t_started
        sink = _LogSink(self.sb._tail)
        self.journal.append("command-started", check=self.spec.name, phase=phase, argv=argv)
        exit_code: int | None = None
        timed_out = False
        oom = False
        error: str | None = None
        if deadline - started <= 0:
            timed_out = True
        else:
            try:
                exec_id = self.api.exec_create(
                    self.container_id,
                    list(argv),
                    stdout=True,
                    stderr=True,
                    tty=False,
                    user=self.spec.limits.user or "",
                    workdir=WORKSPACE,
                )["Id"]
                stream = self.api.exec_start(exec_id, stream=True, demux=False)
            except docker.errors.APIError as e:
                # e.g. the container stopped because a command killed its init.
                error = f"cannot run {list(argv)} in the container: {e.explanation or e}"
            except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
                raise _daemon_gone("starting a command", e) from e
            else:
                reader = threading.Thread(
                    target=sink.consume, args=(stream,), name="proofgate-log", daemon=True
                )
                reader.start()
                reader.join(max(0.0, deadline - time.monotonic()))
                if reader.is_alive():
                    timed_out = True
                    self._kill()
                    reader.join(_KILL_GRACE_S)
                elif sink.error is not None and _is_transport_error(sink.error):
                    raise _daemon_gone("reading a command's output", sink.error)
                if not timed_out:
                    exit_code = self._exit_code(exec_id)
                    if exit_code is None:
                        error = f"{list(argv)} ended without an exit status"
                    elif exit_code != 0:
                        oom = self._oom_killed(wall_started, exit_code)
        duration = time.monotonic() - started
        result = CommandResult(
            argv=argv,
            exit_code=exit_code,
            duration_s=duration,
            timed_out=timed_out,
            oom_killed=oom,
            log_sha256=Sha256(sink.sha256.hexdigest()),
            log_bytes=sink.size,
            log_tail=sink.tail_text(),
            started_offset_s=offset,
        )
        self.journal.append(
            "command-finished",
            check=self.spec.name,
            phase=phase,
            argv=argv,
            exit_code=exit_code,
            duration_s=round(duration, 3),
            timed_out=timed_out,
            oom_killed=oom,
            log_sha256=result.log_sha256,
            log_bytes=sink.size,
        )
        return result, error

    def _exit_code(self, exec_id: str) -> int | None:
        # The stream can close a moment before the daemon records the exit status.
        for _ in range(50):
            try:
                info = self.api.exec_inspect(exec_id)
            except docker.errors.APIError:
                return None
            except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
                raise _daemon_gone("reading an exit status", e) from e
            if not info.get("Running"):
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            time.sleep(0.05)
        return None

    def _oom_killed(self, since: float, exit_code: int) -> bool:
        """Whether the kernel's OOM killer struck in this container during the command.

        Docker 20.10 sets State.OOMKilled only when the container's init dies; an OOM
        kill of an exec'd process shows up as an `oom` event. Newer daemons set both.
        """
        try:
            state = self.api.inspect_container(self.container_id).get("State") or {}
            if state.get("OOMKilled"):
                return True
            # A SIGKILL (137) may come from the OOM killer; its event can lag a little.
            until = time.time() + (0.5 if exit_code == 137 else 0.0)
            events = self.api.events(
                since=since - 1,
                until=until,
                filters={"container": [self.container_id], "event": ["oom"]},
                decode=True,
            )
            return any(True for _ in events)
        except docker.errors.APIError:
            return False
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise _daemon_gone("inspecting the container", e) from e

    # reports -----------------------------------------------------------------------

    def _archive_from_tmpfs(self, rel: str) -> bytes | None:
        """A tar of the single entry `rel` of the tmpfs workspace (None when too big).

        The daemon's archive API sees the directory under the tmpfs, not the tmpfs, so
        `tar -c` runs in the container, as the check's user (who wrote the report). It
        archives a symlink as a symlink (no -h), and only the entry (--no-recursion); the
        caller accepts nothing but one regular file.

        Raises:
            docker.errors.NotFound: the entry does not exist or cannot be read.
        """
        exec_id = self.api.exec_create(
            self.container_id,
            ["tar", "-c", "-f", "-", "--no-recursion", "-C", WORKSPACE, "--", rel],
            stdout=True,
            stderr=True,
            tty=False,
            user=self.spec.limits.user or "",
            workdir="/",
        )["Id"]
        stream = self.api.exec_start(exec_id, stream=True, demux=True)
        out = bytearray()
        err = bytearray()
        try:
            for stdout, stderr in stream:
                out += stdout or b""
                err += stderr or b""
                del err[: max(0, len(err) - 4096)]
                if len(out) > JUNIT_MAX_BYTES + 1024 * 1024:
                    return None
        finally:
            _close_iterator(stream)
        if self._exit_code(exec_id) != 0:
            message = err.decode("utf-8", "replace").strip() or "tar failed"
            raise docker.errors.NotFound(message)
        return bytes(out)

    def _read_junit(self, rel: str) -> bytes | None:
        """The JUnit report's bytes, or None when absent, not a regular file or too big."""
        path = posixpath.normpath(posixpath.join(WORKSPACE, rel))
        if not path.startswith(WORKSPACE + "/"):
            self.journal.append("junit-refused", check=self.spec.name, path=rel)
            return None
        try:
            if self.workspace_in_memory:
                data = self._archive_from_tmpfs(path[len(WORKSPACE) + 1 :])
            else:
                stream, stat = self.api.get_archive(self.container_id, path)
                if stat.get("linkTarget") or int(stat.get("size", 0)) > JUNIT_MAX_BYTES:
                    self.journal.append("junit-refused", check=self.spec.name, path=rel)
                    return None
                data = _read_bounded(stream, JUNIT_MAX_BYTES + 1024 * 1024)
        except docker.errors.NotFound:
            self.journal.append("junit-missing", check=self.spec.name, path=rel)
            return None
        except docker.errors.APIError as e:
            self.journal.append("junit-missing", check=self.spec.name, path=rel, error=str(e))
            return None
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as e:
            raise _daemon_gone("reading the JUnit report", e) from e
        report = _single_regular_file(data)
        self.journal.append(
            "junit-read" if report is not None else "junit-refused",
            check=self.spec.name,
            path=rel,
            bytes=None if report is None else len(report),
        )
        return report


# --- helpers ------------------------------------------------------------------------


class _Counter:
    """Passes tar chunks through, counting bytes and hashing them for the journal."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.size = 0
        self.sha256 = hashlib.sha256()

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.size += len(chunk)
            self.sha256.update(chunk)
            yield chunk

    def close(self) -> None:
        """Close the source stream (stops a `git archive` that is not read to the end)."""
        _close_iterator(self._chunks)


class _NoTar:
    """The image has no `tar`: fill the workspace with `put_archive` instead."""


_NO_TAR = _NoTar()


def _tmpfs_options(memory: int, opened: bool) -> str:
    # Docker copies the image's own /workspace (content, owner and mode) into the tmpfs
    # ("tmpcopyup", which Docker 20.10 does not let us switch off), and creates the
    # directory 0755 if the image lacks it, so the mode here rarely survives: the "./"
    # entry that `_open_for_all` adds sets it for a non-root user. 0777 rather than 1777:
    # with the sticky bit that user could not delete or rename the root-owned entries.
    mode = "0777" if opened else "0755"
    return f"rw,exec,nosuid,nodev,size={memory},mode={mode}"


def _close_iterator(it: Iterable[bytes]) -> None:
    close = getattr(it, "close", None)
    if callable(close):
        close()


class _ExecOutput:
    """Reads an exec's multiplexed output (stdout and stderr) to EOF, keeping a tail."""

    def __init__(self, sock: object, limit: int) -> None:
        self._sock = sock
        self._limit = limit
        self.tail = bytearray()
        self.error: BaseException | None = None

    def consume(self, on_end: Callable[[], None]) -> None:
        try:
            for _stream, data in frames_iter(self._sock, tty=False):
                self.tail += data
                if len(self.tail) > 2 * self._limit:
                    del self.tail[: len(self.tail) - self._limit]
        except BaseException as e:  # noqa: BLE001 — handed to the main thread
            self.error = e
        finally:
            on_end()

    def text(self) -> bytes:
        return bytes(self.tail[-self._limit :])


def _pipe_into_exec(
    sock: object, chunks: Iterator[bytes], timeout: float
) -> tuple[bytes, OSError | None]:
    """Write `chunks` to an exec's stdin, close it, and read the exec's output to EOF.

    Returns the output's tail and the error that cut the writing short, if any. The
    output is read on a thread while writing, so a process that writes much (an error
    per file) cannot block on a full pipe while we block on its full stdin. Errors of
    `chunks` itself (an unsafe tree, Ctrl-C) propagate.
    """
    raw = sock if isinstance(sock, socket.socket) else getattr(sock, "_sock", None)
    if not isinstance(raw, socket.socket):
        raise SandboxError(f"cannot write to a command's input over {type(sock).__name__}")
    output = _ExecOutput(sock, _COPY_OUTPUT_MAX)

    def stop_writing() -> None:
        # The output ended: the process is gone (e.g. tar died of an error, or was
        # OOM-killed). The daemon would keep accepting input until its buffers fill, so
        # end a write still blocked in sendall (it fails with EPIPE).
        with contextlib.suppress(OSError):
            raw.shutdown(socket.SHUT_WR)

    reader = threading.Thread(
        target=output.consume, args=(stop_writing,), name="proofgate-copy", daemon=True
    )
    reader.start()
    send_error: OSError | None = None
    finished = False
    try:
        for chunk in chunks:
            try:
                raw.sendall(chunk)
            except OSError as e:  # the process ended early, or the daemon went away
                send_error = e
                break
        if send_error is None:
            try:
                raw.shutdown(socket.SHUT_WR)  # EOF on the process's stdin
            except OSError as e:
                send_error = e
        reader.join(timeout)
        finished = True
    finally:
        if reader.is_alive() or not finished:
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_RDWR)
            reader.join(_KILL_GRACE_S)
        with contextlib.suppress(OSError):
            raw.close()
    if send_error is None and output.error is not None and _is_transport_error(output.error):
        raise _daemon_gone("copying the tree", output.error)
    return output.text(), send_error


def _read_bounded(stream: Iterator[bytes], limit: int) -> bytes | None:
    buf = bytearray()
    for chunk in stream:
        buf += chunk
        if len(buf) > limit:
            return None
    return bytes(buf)


def _single_regular_file(data: bytes | None) -> bytes | None:
    if data is None:
        return None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            member = tar.next()
            if member is None or not member.isreg() or member.size > JUNIT_MAX_BYTES:
                return None
            extracted = tar.extractfile(member)
            return extracted.read() if extracted is not None else None
    except tarfile.TarError:
        return None


def _non_root(user: str) -> bool:
    name = user.split(":", 1)[0]
    return name not in ("", "0", "root")


def _workspace_dir_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("workspace")
        info.type = tarfile.DIRTYPE
        info.mode = 0o777
        tar.addfile(info)
    return buf.getvalue()


class _ChunkReader(io.RawIOBase):
    """A file object over an iterator of byte chunks (for tarfile's stream mode)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._it = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def _open_for_all(chunks: Iterable[bytes], *, workspace: bool = False) -> Iterator[bytes]:
    """Re-stream a tar adding write permission for everyone (exec bits unchanged), and
    create missing parent directories likewise, so a non-root user can write into a
    tree that is copied in owned by root. With `workspace`, a first "./" entry makes the
    extraction directory itself 0777 too."""
    out = io.BytesIO()
    src = tarfile.open(fileobj=io.BufferedReader(_ChunkReader(chunks)), mode="r|")
    dst = tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT)
    seen: set[str] = set()
    if workspace:
        top = tarfile.TarInfo("./")
        top.type = tarfile.DIRTYPE
        top.mode = 0o777
        dst.addfile(top)

    def drain() -> bytes:
        data = out.getvalue()
        out.seek(0)
        out.truncate()
        return data

    with src, dst:
        for member in src:
            name = member.name.rstrip("/")
            parts = name.split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                if parent not in seen and parent not in (".", ""):
                    seen.add(parent)
                    d = tarfile.TarInfo(parent)
                    d.type = tarfile.DIRTYPE
                    d.mode = 0o777
                    dst.addfile(d)
            seen.add(name)
            if member.isdir():
                member.mode |= 0o777
            elif member.isreg():
                member.mode |= 0o666
            fileobj: IO[bytes] | None = src.extractfile(member) if member.isreg() else None
            dst.addfile(member, fileobj)
            chunk = drain()
            if chunk:
                yield chunk
    tail = drain()
    if tail:
        yield tail


def _split_reference(name: str) -> tuple[str, str | None, str | None]:
    """`repo[:tag][@digest]` -> (repo, tag, digest)."""
    rest, _, digest = name.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1 :], digest or None
    return rest, None, digest or None


def _pick_repo_digest(name: str, digests: list[str]) -> str | None:
    """The RepoDigests entry for `name`'s repository (Docker Hub names normalized)."""
    if not digests:
        return None
    repository, _, digest = _split_reference(name)

    def norm(repo: str) -> str:
        for prefix in ("docker.io/library/", "index.docker.io/library/", "docker.io/"):
            if repo.startswith(prefix):
                return repo[len(prefix) :]
        return repo

    candidates = [d for d in digests if norm(d.partition("@")[0]) == norm(repository)]
    if digest is not None:
        candidates = [d for d in candidates if d.endswith("@" + digest)] or candidates
    return (candidates or digests)[0]


if TYPE_CHECKING:

    def _implements_the_port(sandbox: DockerSandbox) -> Sandbox:
        return sandbox  # mypy checks DockerSandbox against the Sandbox protocol here
