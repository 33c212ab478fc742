"""The egress broker's lifecycle: one per check whose setup phase has `network: setup`.

SPEC §2 `egress`. The decision itself (`decide`) and the broker program live in
`gate.sandbox.egress_broker`, one stdlib-only file that also runs inside the broker
container. Here, per check:

1. create an internal Docker network (`internal=True`, labeled `proofgate=1`): no route
   out, and `inhibit_ipv4` so the host has no address on it (without it, the host's own
   services would answer on the network's gateway address);
2. create a broker container from the check's own image (trusted like the
   configuration; never pulled; no host ports) on the default bridge, connect it to the
   internal network, copy the broker and its settings in with `put_archive`, start it
   and wait for it under a deadline;
3. hand the setup container the internal network, the broker as its only DNS server
   (which answers REFUSED and logs the name) and the standard proxy variables;
4. after setup: disconnect the setup container (verified), stop the broker, read its log
   through the daemon (`get_archive` on the stopped container: nothing the check runs
   can write there), and remove broker and network; `close()` removes them on every
   other path too (failure, timeout, Ctrl-C). The broker is stopped with SIGTERM, logs
   every connection still open (`open_at_stop`) and a summary line, and waits: the log
   is read from the live container, which is then removed (it is auto-removed, so a
   daemon that died and restarts removes it too).

The log is bounded on both sides: the broker stops logging (and only counts) past
`_MAX_ENTRIES` attempts or `_LOG_MAX_BYTES`, which makes the record incomplete
(`egress-unrecorded`: not every attempt is in it); proofgate waits for the broker's `done`
marker with bodiless requests, reads the log once, refuses one larger than the bound by
its size before reading it, closes every response, and gives up within
`_READBACK_DEADLINE_S` (the record is then incomplete too).

What is not covered: if the Docker daemon dies mid-check, the internal network stays
behind until the proof's final sweep (gate/sandbox/labels.py) finds the daemon back, or
`proofgate cache prune` removes the leftovers of dead proofs; a setup container granted
NET_ADMIN or NET_RAW can craft frames on the internal network's bridge (the defaults
drop both).
"""

from __future__ import annotations

import base64
import hashlib
import io
import ipaddress
import json
import logging
import os
import secrets
import tarfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources

import docker
import docker.errors
import requests

from gate.model import EgressAttempt, EgressRecord, ImageRef, Sha256
from gate.sandbox.egress_broker import (
    PROXY_PORT,
    Allowed,
    Refused,
    decide,
    normalize_host,
    parse_entry,
)
from gate.sandbox.interface import SandboxError
from gate.sandbox.labels import ROLE, ProofLabels, new_proof_id
from gate.util.journal import Journal, canonical_json

__all__ = [
    "UNSAFE_ALLOW_NETS_ENV",
    "UNSAFE_ENV_NAMES",
    "UNSAFE_HOSTS_ENV",
    "UNSAFE_NETWORK_ENV",
    "Allowed",
    "EgressBroker",
    "EgressStartError",
    "Refused",
    "UnsafeOverrides",
    "decide",
    "parse_entry",
    "record_from_log",
    "unsafe_overrides",
]

log = logging.getLogger("gate.sandbox")

# Test-only, read from proofgate's own process environment (never from a repository's
# configuration): CIDRs the broker may connect to although they are private, and a
# name=address map the broker uses instead of DNS ("name=10.0.0.2,other=10.0.0.3").
UNSAFE_ALLOW_NETS_ENV = "PROOFGATE_UNSAFE_EGRESS_ALLOW_NETS"
UNSAFE_HOSTS_ENV = "PROOFGATE_UNSAFE_EGRESS_HOSTS"
# Test-only: the Docker network the broker's outside leg joins instead of the default
# bridge (so a test's packets stay on networks the test created).
UNSAFE_NETWORK_ENV = "PROOFGATE_UNSAFE_EGRESS_NETWORK"
# The Action never reads them (gate.faces.action.action_sandbox): a workflow's env sets them.
UNSAFE_ENV_NAMES = (UNSAFE_ALLOW_NETS_ENV, UNSAFE_HOSTS_ENV, UNSAFE_NETWORK_ENV)

_DIR = "/proofgate-egress"
_BROKER_USER = "65534:65534"  # nobody: the broker needs no privilege of its own
_READY_DEADLINE_S = 30.0
_READBACK_DEADLINE_S = 10.0  # from SIGTERM to the log in hand, whatever the daemon does
_LOG_MAX_BYTES = 8 * 1024 * 1024  # the broker logs no more (the summary comes on top)
_READ_MAX_BYTES = _LOG_MAX_BYTES + 64 * 1024  # what proofgate reads of the log file
_MAX_ENTRIES = 100_000
_TRANSPORT = (requests.exceptions.ConnectionError, requests.exceptions.Timeout, ConnectionError)


class EgressStartError(Exception):
    """The broker could not be set up; the check does not start (its message says why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsafeOverrides:
    allow_nets: tuple[str, ...] = ()
    hosts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    network: str | None = None  # the broker's outside network; None: the default bridge

    @property
    def active(self) -> bool:
        return bool(self.allow_nets or self.hosts or self.network)


def unsafe_overrides(environ: Mapping[str, str]) -> UnsafeOverrides:
    """The test-only overrides from proofgate's environment; a warning when any is set.

    Raises:
        EgressStartError: a malformed value (fails closed rather than ignoring it).
    """
    nets_text = environ.get(UNSAFE_ALLOW_NETS_ENV, "").strip()
    hosts_text = environ.get(UNSAFE_HOSTS_ENV, "").strip()
    nets: list[str] = []
    hosts: list[tuple[str, tuple[str, ...]]] = []
    try:
        nets.extend(
            str(ipaddress.ip_network(item, strict=False))
            for item in filter(None, (s.strip() for s in nets_text.split(",")))
        )
        for item in filter(None, (s.strip() for s in hosts_text.split(","))):
            name, _, address = item.partition("=")
            canonical = normalize_host(name)
            if canonical is None:
                raise ValueError(f"bad host name {name!r}")
            hosts.append((canonical, (str(ipaddress.ip_address(address)),)))
    except ValueError as e:
        raise EgressStartError(f"{UNSAFE_ALLOW_NETS_ENV}/{UNSAFE_HOSTS_ENV}: {e}") from e
    network = environ.get(UNSAFE_NETWORK_ENV, "").strip() or None
    overrides = UnsafeOverrides(allow_nets=tuple(nets), hosts=tuple(hosts), network=network)
    if overrides.active:
        log.warning(
            "UNSAFE: the egress broker may reach %s, resolves %s by a fixed map and goes "
            "out through the network %s (test-only settings from %s, %s, %s)",
            ", ".join(nets) or "no private network",
            ", ".join(h for h, _ in hosts) or "no name",
            network or "bridge",
            UNSAFE_ALLOW_NETS_ENV,
            UNSAFE_HOSTS_ENV,
            UNSAFE_NETWORK_ENV,
        )
    return overrides


def record_from_log(data: bytes, *, complete: bool = True) -> EgressRecord:
    """The broker's JSON-lines log -> the receipt's record. Total: a line that does not
    parse is kept as an attempt of kind `unreadable` (and marks the record incomplete)."""
    attempts: list[EgressAttempt] = []
    dropped = 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            attempts.append(EgressAttempt(kind="unreadable", host=None, port=None, allowed=False))
            complete = False
            continue
        if entry.get("kind") == "summary":
            dropped = _int(entry.get("dropped")) or 0
            complete = complete and dropped == 0  # SPEC §2: every attempt is recorded
            continue
        attempts.append(_attempt(entry))
    digest = hashlib.sha256(canonical_json([a.to_dict() for a in attempts])).hexdigest()
    return EgressRecord(
        attempts=tuple(attempts), sha256=Sha256(digest), dropped=dropped, complete=complete
    )


def _attempt(entry: Mapping[str, object]) -> EgressAttempt:
    host = entry.get("host")
    address = entry.get("address")
    reason = entry.get("reason")
    duration = entry.get("duration_s")
    return EgressAttempt(
        kind=str(entry.get("kind", "unknown"))[:16],
        host=None if host is None else str(host)[:255],
        port=_int(entry.get("port")),
        allowed=entry.get("decision") == "allowed",
        reason=None if reason is None else str(reason)[:64],
        address=None if address is None else str(address)[:64],
        bytes_up=_int(entry.get("bytes_up")) or 0,
        bytes_down=_int(entry.get("bytes_down")) or 0,
        duration_s=float(duration) if isinstance(duration, (int, float)) else 0.0,
        open_at_stop=entry.get("open_at_stop") is True,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _broker_source() -> bytes:
    return resources.files("gate.sandbox").joinpath("egress_broker.py").read_bytes()


def _files_tar(files: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        top = tarfile.TarInfo(_DIR.lstrip("/"))
        top.type = tarfile.DIRTYPE
        top.mode = 0o755
        top.uid = top.gid = 65534  # the broker writes its log and ready marker here
        tar.addfile(top)
        for name, data in files.items():
            info = tarfile.TarInfo(f"{_DIR.lstrip('/')}/{name}")
            info.size = len(data)
            info.mode = 0o444
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@contextmanager
def _daemon(what: str) -> Iterator[None]:
    try:
        yield
    except docker.errors.APIError as e:
        raise EgressStartError(f"cannot {what}: {e.explanation or e}") from e
    except (docker.errors.DockerException, *_TRANSPORT) as e:
        raise SandboxError(
            f"the Docker daemon stopped answering while trying to {what} ({e})"
        ) from e


@dataclass(kw_only=True)
class EgressBroker:
    """One check's internal network and broker container (see the module docstring)."""

    api: docker.APIClient
    check: str
    image: ImageRef
    allowlist: tuple[str, ...]
    journal: Journal
    overrides: UnsafeOverrides = field(default_factory=UnsafeOverrides)
    labels: ProofLabels = field(default_factory=lambda: ProofLabels(proof=new_proof_id()))
    network_id: str | None = None
    broker_id: str | None = None
    broker_ip: str | None = None
    subnet: str | None = None
    record: EgressRecord | None = None

    @classmethod
    def start(
        cls,
        api: docker.APIClient,
        *,
        check: str,
        image: ImageRef,
        allowlist: Sequence[str],
        journal: Journal,
        environ: Mapping[str, str] | None = None,
        labels: ProofLabels | None = None,
    ) -> EgressBroker:
        """Create the network and start the broker; on any failure nothing stays behind.

        Raises:
            EgressStartError: the broker cannot be set up (e.g. the image has no python3).
            SandboxError: the daemon stopped answering.
        """
        overrides = unsafe_overrides(os.environ if environ is None else environ)
        broker = cls(
            api=api,
            check=check,
            image=image,
            allowlist=tuple(allowlist),
            journal=journal,
            overrides=overrides,
            labels=labels if labels is not None else ProofLabels(proof=new_proof_id()),
        )
        try:
            broker._start()
        except BaseException:
            broker.close()
            raise
        return broker

    # what the setup container needs ---------------------------------------------

    @property
    def network(self) -> str:
        if self.network_id is None:
            raise RuntimeError("the egress network does not exist")
        return self.network_id

    @property
    def dns(self) -> list[str]:
        return [self.broker_ip] if self.broker_ip else []

    @property
    def env(self) -> list[str]:
        """The standard proxy variables, so pip, npm, cargo and curl use the broker."""
        url = f"http://{self.broker_ip}:{PROXY_PORT}"
        no_proxy = "localhost,127.0.0.1,::1"
        return [
            f"HTTPS_PROXY={url}",
            f"HTTP_PROXY={url}",
            f"https_proxy={url}",
            f"http_proxy={url}",
            f"NO_PROXY={no_proxy}",
            f"no_proxy={no_proxy}",
        ]

    # lifecycle -------------------------------------------------------------------

    def _start(self) -> None:
        t0 = time.monotonic()
        name = f"proofgate-egress-{secrets.token_hex(6)}"
        if self.overrides.active:
            self.journal.append(
                "egress-unsafe-overrides",
                check=self.check,
                allow_nets=list(self.overrides.allow_nets),
                hosts=[h for h, _ in self.overrides.hosts],
                network=self.overrides.network,
            )
        with _daemon("create the check's internal network"):
            created = self.api.create_network(
                name,
                driver="bridge",
                internal=True,
                labels=self.labels.labels(),
                options={
                    # No address for the host on this bridge: nothing of the host's
                    # answers there (an internal network otherwise reaches the host).
                    "com.docker.network.bridge.inhibit_ipv4": "true",
                    "com.docker.network.bridge.enable_ip_masquerade": "false",
                },
                check_duplicate=True,
            )
            self.network_id = str(created["Id"])
            info = self.api.inspect_network(self.network_id)
        configs = (info.get("IPAM") or {}).get("Config") or []
        self.subnet = str(configs[0]["Subnet"]) if configs else None
        if self.subnet is None:
            raise EgressStartError("the check's internal network has no IPv4 subnet")
        settings = {
            "allow": list(self.allowlist),
            "subnet": self.subnet,
            "log": f"{_DIR}/log.jsonl",
            "ready": f"{_DIR}/ready",
            "max_entries": _MAX_ENTRIES,
            "max_bytes": _LOG_MAX_BYTES,
            "unsafe_allow_nets": list(self.overrides.allow_nets),
            "unsafe_hosts": {h: list(a) for h, a in self.overrides.hosts},
        }
        host_config = self.api.create_host_config(
            network_mode=self.overrides.network or "bridge",  # the egress-capable network
            init=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=128,
            mem_limit=256 * 1024**2,
            memswap_limit=256 * 1024**2,
            nano_cpus=1_000_000_000,
            ipc_mode="private",
            privileged=False,
            # DNS on port 53 as an unprivileged user; and never route for anyone.
            sysctls={"net.ipv4.ip_unprivileged_port_start": "0", "net.ipv4.ip_forward": "0"},
            # If the daemon dies mid-check, a restarted daemon removes it (as it does the
            # check's container); the log is read from the running broker (see finish).
            auto_remove=True,
        )
        with _daemon("create the egress broker"):
            broker = self.api.create_container(
                self.image.id,
                entrypoint=["python3", f"{_DIR}/broker.py", f"{_DIR}/settings.json"],
                command=[],
                user=_BROKER_USER,
                working_dir="/",
                environment=[],
                labels=self.labels.labels(**{ROLE: "egress-broker"}),
                hostname="egress",
                host_config=host_config,
            )
            self.broker_id = str(broker["Id"])
            self.api.connect_container_to_network(self.broker_id, self.network_id)
            files = {
                "broker.py": _broker_source(),
                "settings.json": json.dumps(settings, sort_keys=True).encode(),
            }
            self.api.put_archive(self.broker_id, "/", _files_tar(files))
            self.api.start(self.broker_id)
        self._wait_ready()
        with _daemon("inspect the egress broker"):
            networks = (
                self.api.inspect_container(self.broker_id).get("NetworkSettings") or {}
            ).get("Networks") or {}
        ip = next(
            (
                str(n.get("IPAddress"))
                for n in networks.values()
                if n.get("NetworkID") == self.network_id
            ),
            None,
        )
        if not ip:
            raise EgressStartError("the egress broker has no address on the check's network")
        self.broker_ip = ip
        self.journal.append(
            "egress-broker-started",
            check=self.check,
            network=self.network_id[:12],
            broker=self.broker_id[:12],
            allowlist=list(self.allowlist),
            seconds=round(time.monotonic() - t0, 3),
        )

    def _wait_ready(self) -> None:
        if self.broker_id is None:
            raise RuntimeError("the egress broker was not created")
        deadline = time.monotonic() + _READY_DEADLINE_S
        while True:
            with _daemon("inspect the egress broker"):
                state = self.api.inspect_container(self.broker_id).get("State") or {}
                if not state.get("Running"):
                    output = self.api.logs(self.broker_id, stdout=True, stderr=True, tail=20)
                    text = bytes(output).decode("utf-8", "replace").strip()[-500:]
                    raise EgressStartError(
                        f"the egress broker did not start (exit status {state.get('ExitCode')}"
                        f"{': ' + text if text else ''}); its image {self.image.name} needs "
                        "python3 (3.8 or later) on the PATH"
                    )
                if _exists(self.api, self.broker_id, f"{_DIR}/ready", timeout=10.0):
                    return
            if time.monotonic() > deadline:
                raise EgressStartError(
                    f"the egress broker was not ready within {_READY_DEADLINE_S:.0f}s"
                )
            time.sleep(0.05)

    def detach(self, container_id: str) -> None:
        """Take the check's container off the internal network, and verify it.

        Raises:
            SandboxError: the container is still attached to a network afterwards.
        """
        try:
            self.api.disconnect_container_from_network(container_id, self.network, force=True)
            networks = (self.api.inspect_container(container_id).get("NetworkSettings") or {}).get(
                "Networks"
            ) or {}
        except (docker.errors.DockerException, *_TRANSPORT) as e:
            raise SandboxError(f"cannot take the network away after setup: {e}") from e
        if networks:
            raise SandboxError(f"the container is still attached to {sorted(networks)} after setup")

    def finish(self) -> EgressRecord:
        """Stop the broker, read its log through the daemon, remove broker and network.

        Idempotent. A log that cannot be read whole within `_READBACK_DEADLINE_S` (too
        large, no summary, the daemon slow to hand it over) is an incomplete record.

        Raises:
            SandboxError: the daemon stopped answering.
        """
        if self.record is not None:
            return self.record
        data: bytes | None = None
        try:
            if self.broker_id is not None:
                data = self._final_log(self.broker_id)
        except docker.errors.APIError as e:
            self.journal.append("egress-log-unreadable", check=self.check, error=str(e)[:300])
        except (docker.errors.DockerException, *_TRANSPORT) as e:
            raise SandboxError(
                f"the Docker daemon stopped answering while reading the egress log ({e})"
            ) from e
        self.record = record_from_log(data or b"", complete=data is not None)
        self.journal.append(
            "egress-log-read",
            check=self.check,
            attempts=len(self.record.attempts) + self.record.dropped,
            refused=sum(not a.allowed for a in self.record.attempts),
            sha256=self.record.sha256,
            complete=self.record.complete,
        )
        self.close()
        return self.record

    def _final_log(self, broker_id: str) -> bytes | None:
        """SIGTERM the broker, which logs its still-open connections and a summary line,
        marks the log final (`done`) and then only waits; read the log once, under one
        deadline. None (journaled) when that fails: too large, or not final in time.

        Raises:
            docker.errors.APIError: the daemon refused.
            requests.exceptions.ConnectionError: the daemon is gone.
        """
        deadline = time.monotonic() + _READBACK_DEADLINE_S

        def left() -> float:
            return max(0.5, deadline - time.monotonic())

        why: str
        try:
            self.api.kill(broker_id, signal="SIGTERM")
            pause = 0.05
            while not _exists(self.api, broker_id, f"{_DIR}/done", timeout=left()):
                if time.monotonic() + pause > deadline:
                    why = f"the broker did not finish its log within {_READBACK_DEADLINE_S:.0f} s"
                    break
                time.sleep(pause)
                pause = min(pause * 2, 0.5)  # no storm of requests at a busy daemon
            else:
                data, why = _read_log(self.api, broker_id, f"{_DIR}/log.jsonl", deadline)
                if data is not None and _has_summary(data):
                    return data
                why = why or "the log has no summary line"
        except requests.exceptions.Timeout:
            why = f"the daemon did not hand the log over within {_READBACK_DEADLINE_S:.0f} s"
        self.journal.append("egress-log-unreadable", check=self.check, error=why)
        return None

    def close(self) -> None:
        """Remove the broker and the network, whatever state they are in (best effort)."""
        broker_id, self.broker_id = self.broker_id, None
        network_id, self.network_id = self.network_id, None
        if broker_id is not None:
            try:
                self.api.remove_container(broker_id, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                if e.status_code != 409:  # 409: the daemon is already removing it
                    self._cleanup_failed("broker", broker_id, e)
            except (docker.errors.DockerException, *_TRANSPORT) as e:
                self._cleanup_failed("broker", broker_id, e)
        if network_id is not None:
            try:
                self._remove_network(network_id)
            except docker.errors.NotFound:
                pass
            except (docker.errors.DockerException, *_TRANSPORT) as e:
                self._cleanup_failed("network", network_id, e)
            else:
                self.journal.append("egress-removed", check=self.check, network=network_id[:12])

    def _remove_network(self, network_id: str) -> None:
        # Force-disconnect whatever is still attached (the check's container on a failure
        # path), then remove; the daemon can take a moment after a container is removed.
        deadline = time.monotonic() + 15
        while True:
            try:
                self.api.remove_network(network_id)
                return
            except docker.errors.APIError as e:
                if e.status_code != 403 or time.monotonic() > deadline:  # 403: in use
                    raise
            for cid in self.api.inspect_network(network_id).get("Containers") or {}:
                try:
                    self.api.disconnect_container_from_network(cid, network_id, force=True)
                except docker.errors.APIError:
                    pass
            time.sleep(0.1)

    def _cleanup_failed(self, what: str, ident: str, e: BaseException) -> None:
        log.warning("could not remove the egress %s %s: %s", what, ident[:12], e)
        self.journal.append(
            "egress-remove-failed", check=self.check, what=what, id=ident[:12], error=str(e)[:300]
        )


def _has_summary(data: bytes) -> bool:
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        entry = json.loads(last)
    except ValueError:
        return False
    return isinstance(entry, dict) and entry.get("kind") == "summary"


def _archive_url(api: docker.APIClient, container: str) -> str:
    return str(api._url("/containers/{0}/archive", container))


def _exists(api: docker.APIClient, container: str, path: str, *, timeout: float) -> bool:
    """Whether `path` exists in `container`: a HEAD request (no body to read or close).

    Raises:
        docker.errors.APIError: the daemon refused (other than 404).
        requests.exceptions.RequestException: the daemon did not answer in `timeout`.
    """
    res = api.head(_archive_url(api, container), params={"path": path}, timeout=timeout)
    try:
        if res.status_code == 404:
            return False
        api._raise_for_status(res)
        return True
    finally:
        res.close()


def _read_log(
    api: docker.APIClient, container: str, path: str, deadline: float
) -> tuple[bytes | None, str]:
    """The single regular file at `path`, read through the daemon; (None, why) when it
    is larger than `_READ_MAX_BYTES` (judged by its size before reading) or not one
    regular file. The response is closed on every path.

    Raises:
        docker.errors.APIError: the daemon refused.
        requests.exceptions.RequestException: the daemon did not answer in time.
    """
    res = api.get(
        _archive_url(api, container),
        params={"path": path},
        headers={"Accept-Encoding": "identity"},
        stream=True,
        timeout=max(0.5, deadline - time.monotonic()),
    )
    try:
        api._raise_for_status(res)
        stat = _stat(res.headers.get("X-Docker-Container-Path-Stat"))
        size = stat.get("size")
        if not isinstance(size, int) or size > _READ_MAX_BYTES:
            return None, f"the log is too large to read ({size} bytes; at most {_READ_MAX_BYTES})"
        buf = bytearray()
        for chunk in res.iter_content(1 << 16):
            buf += chunk
            if len(buf) > _READ_MAX_BYTES + 64 * 1024:
                return None, "the log grew past its bound while it was read"
            if time.monotonic() > deadline:
                return None, f"reading the log took over {_READBACK_DEADLINE_S:.0f} s"
    finally:
        res.close()
    try:
        with tarfile.open(fileobj=io.BytesIO(bytes(buf)), mode="r:") as tar:
            member = tar.next()
            extracted = tar.extractfile(member) if member is not None and member.isreg() else None
            if extracted is None:
                return None, "the log is not a regular file"
            return extracted.read(), ""
    except tarfile.TarError as e:
        return None, f"the log's archive is unreadable ({e})"


def _stat(header: str | None) -> dict[str, object]:
    if not header:
        return {}
    try:
        got = json.loads(base64.b64decode(header))
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}
