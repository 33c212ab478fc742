"""One check's containers, workspace volume and commands (SPEC §1, §3.2).

A check runs like this (docs/security.md, "The clean room", says why):

1. a fresh Docker volume (local driver, labeled `proofgate=1` and with the proof's id,
   gate/sandbox/labels.py) becomes `/workspace`; the daemon extracts proofgate's own
   files into its volumes through the *holder* (a container of the configured image in
   which nothing of the check ever runs, the only one that mounts proofgate's volumes
   writable) and, at the same time, the tree into the workspace (`copy_in`) through the
   first container, which runs only the configured image's `sleep` (a first container
   from a cached environment starts only once the holder has filled every volume);
2. setup and build run in a writable container; with `network: setup` and a non-empty
   `egress` allowlist, setup runs on the check's internal network whose only exit is the
   egress broker (`gate.sandbox.egress`), with the broker as DNS server and the proxy
   variables in each setup command's environment only (never in the container's, so the
   commit below carries none into the test phase); before build the container is taken
   off that network (verified) and the broker is stopped and its log read; an empty
   allowlist means no network at all;
3. before the test phase that container is committed to a temporary image (labeled like
   the rest) and killed; every test command then runs in its own new container from that
   image (or from the configured image when there is nothing to commit) with a read-only
   root filesystem, fresh tmpfs mounts for /tmp and HOME, and the same volume, so no test
   command can change the files, the PATH, the site-packages or the processes a later
   one runs with; a container is removed while the next one starts, and is gone before
   the next command runs;
4. after the last command the container is killed and removed, so every process of the
   check has ended; then the daemon reads the report from the volume (`readback`)
   through the holder;
5. containers, the temporary image and the volume are removed in a `finally`, then the
   broker and its network (`close_egress`).

Every command gets `PYTHONPYCACHEPREFIX` (never the tree's `__pycache__`), and test
commands `PYTHONNOUSERSITE=1`. Setup and build compile into a volume of their own at
`/opt/proofgate-pycache`, which no test container mounts; test commands get
`/opt/proofgate/links` in proofgate's volume (gate/witness/host.py), read-only to every
container of the check, with only the image's own bytecode linked in
(gate/sandbox/bytecode.py): bytecode the change's code wrote while setup or build ran
never runs in the test phase, and no test command can leave any for a later one. Each
daemon request runs under the client's timeout; a command under its phase's deadline,
after which its container is killed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import docker.types
from docker import APIClient

from gate import differential
from gate.differential import junitpath, tarprotect
from gate.differential.paths import WORKSPACE
from gate.model import (
    CheckResult,
    CheckSpec,
    Command,
    CommandResult,
    EnvRecord,
    ImageRef,
    Phase,
    PhaseResult,
    Sha256,
)
from gate.sandbox import bytecode, envcache, execs
from gate.sandbox.copy_in import close_iterator, copy_tree
from gate.sandbox.egress import EgressBroker, EgressStartError
from gate.sandbox.envrecord import Recorder
from gate.sandbox.errors import DockerRefused, daemon_gone, docker_errors, is_transport_error
from gate.sandbox.execs import concurrently, lone, non_root, overlaps
from gate.sandbox.interface import SandboxError
from gate.sandbox.labels import ProofLabels, new_proof_id
from gate.sandbox.output import LogSink, check_stop, join_until
from gate.sandbox.readback import passwd_home, read_file, read_report
from gate.util.journal import Journal
from gate.witness import host as witness

log = logging.getLogger("gate.sandbox")

_KILL_GRACE_S = 10.0  # how long to wait for an output stream to close after a kill
_GONE_S = 30.0  # how long a killed container may take to disappear


class CheckRun:
    """State of one check: its volume, its current container, what has run so far."""

    def __init__(
        self,
        api: APIClient,
        spec: CheckSpec,
        image: ImageRef,
        journal: Journal,
        *,
        log_tail_bytes: int,
        egress_environ: Mapping[str, str] | None = None,
        stop: threading.Event | None = None,
        start_image: str | None = None,
        commit_labels: dict[str, str] | None = None,
        record_environment: bool = False,
        start_env: EnvRecord | None = None,
        labels: ProofLabels | None = None,
    ) -> None:
        self.api = api
        # on every object of the check; a check run on its own is a proof of its own
        self.labels = labels if labels is not None else ProofLabels(proof=new_proof_id())
        self.stop = stop  # set: kill what runs, remove everything, KeyboardInterrupt
        self.start_image = start_image or image.id  # a cached environment, or the image
        self.commit_labels = commit_labels  # set: commit the container once all succeeded
        self.committed: str | None = None
        # SPEC §3.2: what setup and build left, outside /workspace and in it, recorded
        # once they have ended (gate/sandbox/envrecord.py), on top of what a cached
        # environment's setup left (`start_env`); a run with no setup or build has that
        self.recorder: Recorder | None = None
        self._initial_env: EnvRecord | None = None
        if record_environment:
            self.recorder = Recorder(api, journal, spec.name, start_env=start_env, stop=stop)
            if not any(p is not Phase.TEST for p, _ in spec.phases):
                self._initial_env = start_env or EnvRecord()  # nothing runs before the tests
        self.spec = spec
        self.image = image
        self.journal = journal
        self.tail = log_tail_bytes
        self.cid: str | None = None
        self.holder: str | None = None  # holds the volume mounted; nothing of the check
        self.stale: list[str] = []  # replaced containers whose removal failed
        self.volume: str | None = None
        self.witness_volume: str | None = None  # the witness plugin, read-only to the check
        self.prefix_volume: str | None = None  # setup's and build's bytecode; no test's
        self.env: dict[str, str] = {}  # the image's environment with the check's over it
        self.temp_image: str | None = None  # the commit after build, removed at the end
        self.test_image = self.start_image  # what test containers start from
        self.writable = False  # the current container's root filesystem
        self.networked = False  # the current container is on the egress network
        self.egress: EgressBroker | None = None
        self.egress_environ = egress_environ  # where the test-only overrides come from
        self.user = ""
        self.home: str | None = None
        self._ended_code: int | None = None
        self.t_started = 0.0

    @property
    def env_changes(self) -> EnvRecord | None:
        if self.recorder is None:
            return None
        return self.recorder.record or self._initial_env

    @property
    def container_id(self) -> str:
        if self.cid is None:
            raise RuntimeError("the check's container does not exist (yet or any more)")
        return self.cid

    # --- the check ------------------------------------------------------------------

    def execute(self, tree_tar: Callable[[], Iterator[bytes]]) -> CheckResult:
        problem = self._prepare(tree_tar)
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
        else:
            if self.commit_labels is not None:
                setup = envcache.encode_setup(phases)
                self._commit_environment({**self.commit_labels, envcache.SETUP_LABEL: setup})
        read_back = test_ran and self.spec.junit is not None and error is None
        # SPEC §3.2: nothing of the check runs during read-back
        self._end_processes(keep_holder=read_back)
        egress = self.egress.finish() if self.egress is not None else None
        junit = self._read_junit(self.spec.junit) if read_back and self.spec.junit else None
        return CheckResult(
            name=self.spec.name,
            image=self.image,
            started=True,
            phases=tuple(phases),
            error=error,
            junit_report=junit,
            egress=egress,
            env_changes=self.env_changes,
        )

    def _prepare(self, tree_tar: Callable[[], Iterator[bytes]]) -> str | None:
        """Volumes, first container, start, tree; a message when the check cannot start.

        The volume is a tmpfs of the local driver: mounted while a container using it
        runs, so the daemon extracts the tree into it through a started (idle) container,
        and it is always held by a running container until read-back. Starting the
        holder and the first container at once, and filling each volume through one of
        them, takes one start off the check's path.
        """
        limits = self.spec.limits
        first = self.spec.phases[0][0] if self.spec.phases else Phase.TEST
        # SPEC §2 `egress`: setup reaches only the allowlist, through the broker; with an
        # empty allowlist `network: setup` means no network at all.
        self.networked = limits.network == "setup" and first is Phase.SETUP and bool(limits.egress)
        try:
            if self.networked:
                self.egress = EgressBroker.start(
                    self.api,
                    check=self.spec.name,
                    image=self.image,
                    allowlist=limits.egress,
                    journal=self.journal,
                    environ=self.egress_environ,
                    labels=self.labels,
                )
            with docker_errors(f"inspect the image {self.image.name}"):
                config = self.api.inspect_image(self.image.id).get("Config") or {}
            self.user = limits.user or str(config.get("User") or "")
            image_env = dict(str(e).partition("=")[::2] for e in config.get("Env") or [])
            opened = non_root(self.user)
            self.env = {**image_env, **dict(limits.env)}
            # 0777 for a non-root user; no sticky bit, so it may remove root's entries. A
            # check with a differential: sticky and not the check's
            # (gate/differential/tarprotect.py).
            mode = "0777" if opened else "0755"
            if differential.enabled(self.spec):
                mode = f"1777,uid={tarprotect.PROTECTED_UID},gid={tarprotect.PROTECTED_UID}"
            options = f"nosuid,nodev,size={limits.memory},mode={mode}"
            with docker_errors("create the check's workspace volume"):
                created = self.api.create_volume(
                    driver="local",
                    driver_opts={"type": "tmpfs", "device": "tmpfs", "o": options},
                    labels=self.labels.labels(),
                )
            self.volume = str(created["Name"])
            self.journal.append("volume-created", check=self.spec.name, volume=self.volume[:12])
            # proofgate's own volume (gate/witness/host.py): the start-up hook, the witness
            # and the test phase's prefix, read-only to every container of the check; and
            # for setup and build a prefix of their own, which no test container mounts
            self.witness_volume = self._volume("witness", limits.memory, "0555")
            if first is not Phase.TEST:
                self.prefix_volume = self._volume("prefix", limits.memory, "1777")
            env_home = dict(limits.env).get("HOME") or image_env.get("HOME")
            if first is Phase.TEST:
                # unknown for a non-root user without HOME: no tmpfs there, read-only
                self.home = env_home or (None if opened else "/root")
            self.cid = self._create(self.start_image, read_only=first is Phase.TEST)
            self.writable = first is not Phase.TEST
            if first is not Phase.TEST:
                self.home = env_home or passwd_home(self.api, self.container_id, self.user)
            # the trusted files (with a differential) and committed bytecode protected
            # (gate/differential/tarprotect.py), and the tree noted as materialized
            chosen = differential.trusted_selector(self.spec)
            judged = differential.enabled(self.spec)
            source = tree_tar

            manifest = self.recorder.manifest if self.recorder is not None else None

            def tree_tar() -> Iterator[bytes]:
                if manifest is not None:
                    manifest.clear()
                return tarprotect.protect(
                    source(),
                    chosen if judged else lambda _: False,
                    directories=judged,
                    manifest=manifest,
                )

            cid = self.container_id
            # The daemon fills proofgate's volumes through the holder, a container of the
            # configured image in which nothing of the check ever runs; it alone mounts
            # them writable. The first container's `sleep` is the configured image's, or
            # an environment's that setup made (gate/sandbox/envcache.py): then the
            # change's, so it starts only once the daemon has filled every volume.
            holder = self._create(self.image.id, read_only=True, role="holder")
            self.holder = holder

            def fill_witness() -> None:
                self._start(holder)
                self._fill_witness(holder)

            def fill_tree(into: str) -> None:
                check_stop(self.stop)
                copy_tree(self.api, into, tree_tar, self.journal, check=self.spec.name)

            def start_and_fill_tree() -> None:
                self._start(cid)
                fill_tree(cid)

            if self.start_image == self.image.id and self.recorder is None and lone(self.spec):
                # one container from start to end, holding the volumes: the daemon fills
                # proofgate's through the holder unstarted (it mounts a stopped container's
                # volumes per request); started only if the first container missed it
                self._start(cid)
                concurrently(lambda: fill_tree(cid), lambda: self._fill_witness(holder, False))
                if read_file(self.api, cid, witness.BOOT_FILE, 1 << 20) is None:
                    fill_witness()
            elif self.start_image == self.image.id:
                # nothing of the change runs in either: the tree goes in through the first
                # container (the image's `sleep`) beside proofgate's files through the holder
                concurrently(start_and_fill_tree, fill_witness)
            else:
                fill_witness()
                fill_tree(holder)
                self._start(cid)
        except (DockerRefused, EgressStartError) as e:
            return str(e)
        return None

    def _fill_witness(self, holder: str, started: bool = True) -> None:
        """The witness volume, and setup's and build's prefix, with the image's own
        bytecode linked in both (gate/sandbox/bytecode.py), extracted by the daemon
        through the holder: a container of the configured image in which nothing of the
        check runs (not `started`: it starts only to list bytecode not cached)."""
        if not started and bytecode.listed(self.image.id) is None:
            self._start(holder)
        found = bytecode.listing(self.api, holder, self.image.id)
        self.journal.append("bytecode-linked", check=self.spec.name, files=len(found))
        with docker_errors("copy the witness into the container"):
            data = witness.plugin_tar(bytecode=found, pytest_config=self.spec.pytest_config)
            self.api.put_archive(holder, witness.MOUNT, data)
            if self.prefix_volume is not None:
                prefix = witness.prefix_tar(bytecode=found)
                self.api.put_archive(holder, witness.PYCACHE, prefix)
            if self.spec.shard is not None:  # SPEC §3.3: this shard's share of the tests
                self.api.put_archive(holder, witness.MOUNT, witness.shard_tar(self.spec.shard))

    def _volume(self, what: str, size: int, mode: str) -> str:
        """A tmpfs volume of proofgate's (`witness`, `prefix`), owned by `PROTECTED_UID`.

        Raises:
            DockerRefused, SandboxError: the daemon refused, or did not answer in time.
        """
        uid = tarprotect.PROTECTED_UID
        with docker_errors(f"create the check's {what} volume"):
            created = self.api.create_volume(
                driver="local",
                driver_opts={
                    "type": "tmpfs",
                    "device": "tmpfs",
                    "o": f"nosuid,nodev,noexec,size={size},mode={mode},uid={uid},gid={uid}",
                },
                labels=self.labels.labels(),
            )
        name = str(created["Name"])
        self.journal.append("volume-created", check=self.spec.name, volume=name[:12])
        return name

    def _create(self, image: str, *, read_only: bool, role: str = "check") -> str:
        """A container of the check (or with `role="holder"`, the holder); its id."""
        limits = self.spec.limits
        assert self.volume is not None  # noqa: S101 - created first
        tmpfs: dict[str, str] = {}
        if read_only:
            # Fresh per container (Docker copies the image's content into each one).
            size = f"size={limits.memory}"
            tmpfs["/tmp"] = f"rw,exec,nosuid,nodev,{size},mode=1777"  # noqa: S108
            home = self.home
            if home and home.startswith("/") and not overlaps(home, ("/", "/tmp", WORKSPACE)):  # noqa: S108
                tmpfs[home] = f"rw,exec,nosuid,nodev,{size}"
        egress = self.egress if self.networked and not read_only else None
        host_config = self.api.create_host_config(
            network_mode=egress.network if egress is not None else "none",
            dns=egress.dns if egress is not None else None,
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
            # The daemon removes a container once it stops: if the daemon dies mid-check,
            # our `finally` cannot reach it, but a restarted daemon cleans up.
            auto_remove=True,
            read_only=read_only,
            tmpfs=tmpfs or None,
            mounts=self._mounts(role, read_only),
        )
        with docker_errors(f"create a container from {self.image.name}"):
            created = self.api.create_container(
                image,
                entrypoint=["sleep", "infinity"],
                command=[],
                user=limits.user or "",
                working_dir=WORKSPACE,
                environment=[f"{k}={v}" for k, v in limits.env],
                labels=self.labels.labels(),
                hostname="cleanroom",
                host_config=host_config,
                network_disabled=False,
            )
        cid = str(created["Id"])
        self.journal.append(
            "container-created",
            check=self.spec.name,
            container=cid[:12],
            image=image,
            network="setup" if egress is not None else "none",
            root="read-only" if read_only else "writable",
            role=role,
        )
        return cid

    def _mounts(self, role: str, read_only: bool) -> list[docker.types.Mount]:
        """The workspace; proofgate's volume, read-only but to the holder (which fills
        it); setup's and build's prefix for the holder and a writable container only: no
        test container ever sees the bytecode they wrote (SPEC §3.2)."""
        assert self.volume is not None  # noqa: S101 - created first
        holder = role == "holder"
        mounts = [
            docker.types.Mount(WORKSPACE, self.volume, type="volume", no_copy=True),
            docker.types.Mount(
                witness.MOUNT,
                self.witness_volume or "",
                type="volume",
                no_copy=True,
                read_only=not holder,
            ),
        ]
        if self.prefix_volume is not None and (holder or not read_only):
            mounts.append(
                docker.types.Mount(witness.PYCACHE, self.prefix_volume, type="volume", no_copy=True)
            )
        return mounts

    def _start(self, cid: str) -> None:
        with docker_errors("start the clean-room container"):
            self.api.start(cid)
        if not self.t_started and cid == self.cid:
            self.t_started = time.monotonic()  # the check's first container

    def _to_test_container(self) -> str | None:
        """A new read-only container for the next test command; after build, from a
        commit of the build container. The old one is removed while the new one starts:
        both are gone or started before the command runs. With an environment record
        (SPEC §3.2) the build container is frozen instead, and the daemon lists what it
        changed while the tests run; it is removed once that is read, always before
        anything of the check is read back. A message when that fails."""
        try:
            frozen = False
            if self.writable:
                # from a cached environment: the snapshot must not pass for one
                unmark = dict.fromkeys(envcache.MARKS, "")
                frozen = self.recorder is not None
                committed = self._snapshot(unmark, "snapshot the container after the build")
                self.temp_image = self.test_image = str(committed["Id"])
                self.journal.append("image-committed", check=self.spec.name, image=self.temp_image)
            old, self.cid = self.container_id, None

            def replace() -> None:
                self.cid = self._create(self.test_image, read_only=True)
                self.writable = False
                self._start(self.cid)

            def remove_old() -> None:
                try:
                    self._remove(old)
                except BaseException:
                    self.stale.append(old)  # for `remove` to try again
                    raise

            if self.recorder is not None and frozen:
                recorder, holder = self.recorder, self.holder
                assert holder is not None  # noqa: S101 - started with the check
                recorder.start(old, self._tmpfs_homes())
                # SPEC §3.2: /workspace as setup and build left it, before any test runs
                # in it; read through the holder while the test container is created
                created: list[str] = []
                concurrently(
                    lambda: recorder.workspace(holder),
                    lambda: created.append(self._create(self.test_image, read_only=True)),
                )
                self.cid = created[0]
                self.writable = False
                self._start(self.cid)
            else:
                concurrently(replace, remove_old)
        except DockerRefused as e:
            return str(e)
        return None

    def _snapshot(
        self, labels: dict[str, str], what: str, *, label_record: bool = False
    ) -> dict[str, object]:
        """Commit the writable container. With a record wanted (SPEC §3.2), its
        processes are frozen first and stay so until it is removed: what is judged is
        what is committed (with `label_record`, the record is read first, to label the
        image with it). Without one, not paused (40 ms): the root filesystem is the
        change's either way, whatever a process the build left behind writes into it
        meanwhile.

        Raises:
            DockerRefused, SandboxError: the daemon refused, or did not answer in time.
        """
        cid = self.container_id
        if self.recorder is not None:
            self.recorder.freeze(cid)
            if label_record:
                self.recorder.outside(cid, self._tmpfs_homes())
                self.recorder.compose()
                assert self.env_changes is not None  # noqa: S101 - just recorded
                record = envcache.encode_changes(self.env_changes)
                labels = {**labels, envcache.CHANGES_LABEL: record}
        with docker_errors(what):
            got: dict[str, object] = self.api.commit(cid, pause=False, conf={"Labels": labels})
        return got

    def _finish_recording(self) -> None:
        """Wait for the record, then remove the frozen build container.

        Raises:
            DockerRefused, SandboxError: the daemon refused, or did not answer in time.
        """
        if self.recorder is not None:
            self.recorder.finish(self._remove, self.stale)

    def _tmpfs_homes(self) -> tuple[str, ...]:
        """HOME, when test containers get a fresh tmpfs there (`_create`): what setup and
        build left in it reaches no test."""
        home = self.home
        if home and home.startswith("/") and not overlaps(home, ("/", "/tmp", WORKSPACE)):  # noqa: S108
            return (home,)
        return ()

    def _commit_environment(self, labels: dict[str, str]) -> None:
        """The environment cache (gate/sandbox/envcache.py): keep what setup made, and
        (where recorded) what it changed outside /workspace, for the runs that start
        from it."""
        try:
            got = self._snapshot(labels, "commit the environment after setup", label_record=True)
        except DockerRefused as e:
            raise SandboxError(str(e)) from e
        self.committed = str(got["Id"])
        self.journal.append("environment-committed", check=self.spec.name, image=self.committed)

    def _detach_network(self) -> None:
        """SPEC §2 `network: setup`: take the network away before build and test, and
        stop the broker (nothing is left to reach); its record is kept for the result."""
        if self.egress is None:
            raise RuntimeError("a networked check without its egress broker")
        self.egress.detach(self.container_id)
        self.networked = False
        self.journal.append("network-detached", check=self.spec.name)
        self.egress.finish()

    # --- ending and removing ------------------------------------------------------------

    def _remove_container(self) -> None:
        cid, self.cid = self.cid, None
        self._remove(cid)

    def _remove(self, cid: str | None) -> None:
        """Kill the container and wait until the daemon has removed it: after this no
        process of it runs (SPEC §3.2).

        Raises:
            DockerRefused, SandboxError: the daemon refused, or did not answer in time.
        """
        if cid is None:
            return
        with contextlib.suppress(DockerRefused), docker_errors("stop the check's container"):
            self.api.remove_container(cid, force=True, v=False)
        deadline = time.monotonic() + _GONE_S
        while True:
            try:
                with docker_errors("wait for the check's container to go"):
                    self.api.inspect_container(cid)
            except DockerRefused as e:
                if e.not_found:
                    break
                raise
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"the clean-room container {cid[:12]} is still there {_GONE_S:.0f} s "
                    f"after it was killed; remove it by hand: docker rm -f {cid[:12]}"
                )
            time.sleep(0.05)
        self.journal.append("container-removed", check=self.spec.name, container=cid[:12])

    def _end_processes(self, *, keep_holder: bool) -> None:
        """Kill the last container of the check; the holder too, unless it is kept to
        read the report through."""
        try:
            if keep_holder:
                concurrently(self._remove_container, self._finish_recording)
            else:
                concurrently(self._remove_container, self._remove_holder, self._finish_recording)
        except DockerRefused as e:
            raise SandboxError(str(e)) from e

    def remove(self, *, raise_on_failure: bool) -> None:
        """Remove what the check created: container, temporary image, volume.

        Raises:
            SandboxError: with `raise_on_failure`, something could not be removed.
        """
        failures: list[str] = []

        def attempt(what: str, step: Callable[[], None]) -> None:
            try:
                step()
            except SandboxError as e:
                log.warning("could not remove the check's %s: %s", what, e)
                self.journal.append("remove-failed", check=self.spec.name, what=what, error=str(e))
                failures.append(f"{what}: {e}")

        # the containers at once; the image and the volumes once both are gone
        concurrently(
            lambda: attempt("container", self._remove_container),
            lambda: attempt("container", self._remove_holder),
            lambda: attempt("container", self._remove_stale),
            lambda: attempt("container", self._finish_recording),
        )
        if self.temp_image is not None:
            attempt("image", self._remove_temp_image)
        if self.volume is not None:
            attempt("volume", self._remove_volume)
        if self.witness_volume is not None:
            attempt("volume", self._remove_witness_volume)
        if self.prefix_volume is not None:
            attempt("volume", self._remove_prefix_volume)
        if failures and raise_on_failure:
            raise SandboxError(
                "cannot remove what the check created (" + "; ".join(failures) + "). "
                "Remove it by hand: docker ps -a, docker images, docker volume ls and "
                f"docker network ls with --filter label={self.labels.selector['label'][0]}"
            )

    def close_egress(self) -> None:
        """Remove the broker and its network (after the containers: the network must be
        free); best effort and idempotent, on every path."""
        if self.egress is not None:
            self.egress.close()

    def _remove_stale(self) -> None:
        while self.stale:
            self._remove(self.stale[-1])
            self.stale.pop()

    def _remove_holder(self) -> None:
        holder, self.holder = self.holder, None
        self._remove(holder)

    def _remove_temp_image(self) -> None:
        image, self.temp_image = self.temp_image, None
        if image is None:
            return
        try:
            with docker_errors("remove the check's temporary image"):
                self.api.remove_image(image, force=True, noprune=False)
        except DockerRefused as e:
            if not e.not_found:
                raise
        self.journal.append("image-removed", check=self.spec.name, image=image)

    def _remove_prefix_volume(self) -> None:
        volume, self.prefix_volume = self.prefix_volume, None
        self._remove_named_volume(volume)

    def _remove_witness_volume(self) -> None:
        volume, self.witness_volume = self.witness_volume, None
        self._remove_named_volume(volume)

    def _remove_volume(self) -> None:
        volume, self.volume = self.volume, None
        self._remove_named_volume(volume)

    def _remove_named_volume(self, volume: str | None) -> None:
        if volume is None:
            return
        deadline = time.monotonic() + _GONE_S
        while True:
            try:
                with docker_errors("remove the check's workspace volume"):
                    self.api.remove_volume(volume, force=True)
                break
            except DockerRefused as e:
                if e.not_found:
                    break
                # 409: a container being removed still holds it for a moment
                if e.status != 409 or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.journal.append("volume-removed", check=self.spec.name, volume=volume[:12])

    # --- commands -------------------------------------------------------------------

    def _run_phase(
        self, phase: Phase, commands: tuple[Command, ...]
    ) -> tuple[list[CommandResult], str | None]:
        deadline = time.monotonic() + self.spec.limits.timeout
        results: list[CommandResult] = []
        for command in commands:
            check_stop(self.stop)
            if phase is Phase.TEST and (self.writable or results):
                problem = self._to_test_container()
                if problem is not None:
                    return results, problem
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
        sink = LogSink(self.tail, scanner=witness.Scanner() if phase is Phase.TEST else None)
        self.journal.append("command-started", check=self.spec.name, phase=phase, argv=argv)
        exit_code: int | None = None
        timed_out = False
        oom = False
        error: str | None = None
        prefix = witness.TEST_PYCACHE if phase is Phase.TEST else witness.PYCACHE
        environment = [f"PYTHONPYCACHEPREFIX={prefix}"]
        if phase is Phase.TEST:
            environment.append("PYTHONNOUSERSITE=1")
            environment.extend(
                witness.test_environment(
                    self.env,
                    self.spec.pytest_config,
                    differential=differential.enabled(self.spec),
                )
            )
        if phase is Phase.SETUP and self.networked and self.egress is not None:
            environment.extend(self.egress.env)  # this command only: not in the commit
        if deadline - started <= 0:
            timed_out = True
        else:
            try:
                with docker_errors(f"run {list(argv)} in the container"):
                    exec_id = self.api.exec_create(
                        self.container_id,
                        list(argv),
                        stdout=True,
                        stderr=True,
                        tty=False,
                        user=self.spec.limits.user or "",
                        workdir=WORKSPACE,
                        environment=environment,
                    )["Id"]
                    stream = self.api.exec_start(exec_id, stream=True, demux=False)
            except DockerRefused as e:
                # e.g. the container stopped because a command killed its init.
                error = str(e)
            else:
                left_behind: int | None = None  # the exit status, when processes outlived it
                self._ended_code = None
                reader = threading.Thread(
                    target=sink.consume, args=(stream,), name="proofgate-log", daemon=True
                )
                reader.start()
                try:
                    # SPEC §3.2: in the test phase a command ends with its process; what
                    # it left behind is killed with its container before anything is read
                    ended = (lambda: self._exec_ended(exec_id)) if phase is Phase.TEST else None
                    join_until(reader, deadline, ended, self.stop)
                    if reader.is_alive() and self.stop is not None and self.stop.is_set():
                        self._kill()
                        close_iterator(stream)
                        reader.join(_KILL_GRACE_S)
                        check_stop(self.stop)
                    if reader.is_alive() and time.monotonic() < deadline:
                        left_behind = self._ended_code
                        self._kill()
                        close_iterator(stream)
                        reader.join(_KILL_GRACE_S)
                finally:
                    if reader.is_alive():
                        timed_out = True
                        self._kill()
                        close_iterator(stream)
                        reader.join(_KILL_GRACE_S)
                if not timed_out and sink.error is not None and is_transport_error(sink.error):
                    raise daemon_gone("read a command's output", sink.error)
                if left_behind is not None:
                    exit_code = left_behind
                    self.journal.append(
                        "processes-killed", check=self.spec.name, phase=phase, argv=argv
                    )
                    if exit_code != 0:
                        oom = execs.oom_killed(self.api, self.container_id, wall_started, exit_code)
                elif not timed_out:
                    exit_code = execs.exit_code(self.api, exec_id)
                    if exit_code is None:
                        error = f"{list(argv)} ended without an exit status"
                    elif exit_code != 0:
                        oom = execs.oom_killed(self.api, self.container_id, wall_started, exit_code)
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
            witness=tuple(sink.scanner.sessions) if sink.scanner else (),
            witness_problems=tuple(sink.scanner.problems) if sink.scanner else (),
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

    def _kill(self) -> None:
        with contextlib.suppress(DockerRefused), docker_errors("kill the container"):
            self.api.kill(self.container_id)  # a refusal: it has already stopped

    def _exec_ended(self, exec_id: str) -> bool:
        try:
            with docker_errors("inspect a command"):
                info = self.api.exec_inspect(exec_id)
        except DockerRefused:
            return False
        if info.get("Running") or info.get("ExitCode") is None:
            return False
        self._ended_code = int(info["ExitCode"])
        return True

    # --- reports --------------------------------------------------------------------

    def _read_junit(self, rel: str) -> bytes | None:
        """The report, read by the daemon through the reader container."""
        try:
            path = junitpath.normalize(rel)
        except ValueError:
            self.journal.append("junit-refused", check=self.spec.name, path=rel)
            return None
        assert self.holder is not None  # noqa: S101 - started with the test phase
        return read_report(self.api, self.holder, path, self.journal, check=self.spec.name)
