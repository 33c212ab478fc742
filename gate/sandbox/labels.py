"""The labels on every Docker object a proof creates, and the cleanups that select by them.

Every container, volume, network and temporary image of a proof (the egress broker's
too) carries:

- `proofgate=1`: an object of a proof, removed when the proof ends (a cached environment
  is `proofgate=env-cache` instead, and carries no proof: it outlives the proof on purpose);
- `proofgate.proof=<id>`: the proof's id, also in the receipt's journal (`run-started`);
- `proofgate.owner=<host>/<pid namespace>/<pid>/<start time>`: the process that runs the
  proof, so a later `proofgate cache prune` on the same machine can tell a dead proof's
  leftovers from a live proof's objects (`owner_state`);
- whatever `PROOFGATE_LABELS` names (`key=value,...`): tag your proofs' objects, e.g. on a
  shared runner, or a test suite its own.

A proof's cleanup removes what it created by id, and at its end `sweep` removes whatever
still carries its id (an object whose creation the proof never heard back about). Nothing
here ever selects by `proofgate=1` alone: another process's proof may be running on the
same daemon.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from pathlib import Path

import docker.errors
from docker import APIClient

from gate.errors import UsageError
from gate.sandbox.errors import TRANSPORT_ERRORS

__all__ = [
    "EXTRA_ENV",
    "OWNER",
    "PROOF",
    "ROLE",
    "Leftovers",
    "OwnerState",
    "ProofLabels",
    "extra_labels",
    "new_proof_id",
    "owner_state",
    "prune_dead",
    "sweep",
    "this_owner",
]

log = logging.getLogger("gate.sandbox")

BASE = "proofgate"
PROOF = "proofgate.proof"
OWNER = "proofgate.owner"
ROLE = "proofgate.role"
EXTRA_ENV = "PROOFGATE_LABELS"
# what PROOFGATE_LABELS may not set: proofgate's own marks (gate/sandbox/envcache.py too)
_RESERVED = re.compile(r"^proofgate(?:\.(?:proof|owner|role|env-.*))?$")
_KEY = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,126}[a-z0-9])?$")
_VALUE = re.compile(r"^[A-Za-z0-9._:/@+-]{0,256}$")
_ID = re.compile(r"^[0-9a-f]{16,64}$")
_GONE_S = 15.0


def new_proof_id() -> str:
    """A fresh proof id: 16 hex digits, random."""
    return secrets.token_hex(8)


def extra_labels(environ: Mapping[str, str]) -> dict[str, str]:
    """The labels `PROOFGATE_LABELS` asks for (`key=value,...`; empty: none).

    Raises:
        UsageError: a malformed entry, or one that would set one of proofgate's own labels.
    """
    text = environ.get(EXTRA_ENV, "").strip()
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not _KEY.match(key) or not _VALUE.match(value):
            raise UsageError(
                f"{EXTRA_ENV}: {item!r} is not key=value (a key of lower-case letters, digits, "
                "'.', '_', '-'; a value of letters, digits and ._:/@+-)"
            )
        if _RESERVED.match(key):
            raise UsageError(f"{EXTRA_ENV}: {key!r} is one of proofgate's own labels")
        out[key] = value
    return out


def _stat_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").removeprefix("pid:").strip("[]")
    except OSError:
        return "-"


def this_owner() -> str:
    """host/pid namespace/pid/start time of this process (`-` where unknown)."""
    pid = os.getpid()
    host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:64] or "-"
    return f"{host}/{_pid_namespace()}/{pid}/{_stat_start(pid) or '-'}"


class OwnerState(Enum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"  # another machine or container, or unparseable: never touched


def owner_state(owner: str, *, mine: str | None = None) -> OwnerState:
    """Whether the process `owner` names still runs, judged only when it ran here (same
    host and pid namespace as this process); a pid reused by a later process does not
    count (its start time differs)."""
    parts = owner.split("/")
    here = (mine or this_owner()).split("/")
    if len(parts) != 4 or parts[:2] != here[:2] or not parts[2].isdigit():
        return OwnerState.UNKNOWN
    pid, started = int(parts[2]), parts[3]
    if started != "-":
        now = _stat_start(pid)
        if now is not None:
            return OwnerState.ALIVE if now == started else OwnerState.DEAD
        if Path("/proc/self/stat").exists():
            return OwnerState.DEAD  # /proc works here and has no such process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return OwnerState.DEAD
    except PermissionError:
        return OwnerState.ALIVE  # another user's live process
    return OwnerState.ALIVE


@dataclass(frozen=True, slots=True)
class ProofLabels:
    """The labels of one proof's objects (see the module docstring)."""

    proof: str
    owner: str = field(default_factory=this_owner)
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def for_proof(cls, proof: str | None, environ: Mapping[str, str]) -> ProofLabels:
        """Raises: UsageError: a malformed proof id or PROOFGATE_LABELS."""
        if proof is not None and not _ID.match(proof):
            raise UsageError(f"a proof id is 16 to 64 lower-case hex digits, not {proof!r}")
        return cls(proof=proof or new_proof_id(), extra=extra_labels(environ))

    def labels(self, **more: str) -> dict[str, str]:
        return {**self.extra, BASE: "1", PROOF: self.proof, OWNER: self.owner, **more}

    @property
    def selector(self) -> dict[str, list[str]]:
        return {"label": [f"{PROOF}={self.proof}"]}


@dataclass(frozen=True, slots=True)
class Leftovers:
    removed: tuple[str, ...] = ()  # "container 0123456789ab", ...
    failed: tuple[str, ...] = ()
    live: int = 0  # objects of proofs that still run (prune_dead: untouched)
    unknown: int = 0  # objects whose owner cannot be judged from here (untouched)


def sweep(api: APIClient, selector: Mapping[str, list[str]]) -> Leftovers:
    """Remove every container, image, volume and network `selector` matches: containers
    first (they hold the rest), then images, volumes, networks. Best effort: a refusal
    or a daemon that does not answer is reported, never raised."""
    removed: list[str] = []
    failed: list[str] = []

    def attempt(what: str, ident: str, step: Callable[[], object]) -> None:
        try:
            step()
        except docker.errors.NotFound:
            return
        except (docker.errors.DockerException, *TRANSPORT_ERRORS) as e:
            log.warning("could not remove the %s %s: %s", what, ident[:12], e)
            failed.append(f"{what} {ident[:12]}")
            return
        removed.append(f"{what} {ident[:12]}")

    filters = dict(selector)
    listings: dict[str, Callable[[], list[str]]] = {
        "container": lambda: [str(c["Id"]) for c in api.containers(all=True, filters=filters)],
        "image": lambda: [str(i["Id"]) for i in api.images(all=True, filters=filters)],
        "volume": lambda: [
            str(v["Name"]) for v in api.volumes(filters=filters).get("Volumes") or []
        ],
        "network": lambda: [str(n["Id"]) for n in api.networks(filters=filters)],
    }
    # The four listings at once: every proof ends with them, and they nearly always find
    # nothing. Every check has ended, so nothing of the proof is created meanwhile.
    with ThreadPoolExecutor(max_workers=len(listings), thread_name_prefix="sweep") as pool:
        pending = {kind: pool.submit(listing) for kind, listing in listings.items()}
    found: dict[str, list[str]] = {}
    for kind, future in pending.items():
        try:
            found[kind] = future.result()
        except (docker.errors.DockerException, *TRANSPORT_ERRORS) as e:
            if kind == "container":
                log.warning("cannot list what is left of the proof: %s", e)
                return Leftovers(failed=("the daemon did not answer",))
            found[kind] = []
    # removed in order: containers first, they hold the rest
    for cid in found["container"]:
        attempt("container", cid, partial(api.remove_container, cid, force=True, v=False))
    for iid in found["image"]:
        attempt("image", iid, partial(api.remove_image, iid, force=True))
    for name in found["volume"]:
        attempt("volume", name, partial(_remove_volume, api, name))
    for nid in found["network"]:
        attempt("network", nid, partial(_remove_network, api, nid))
    return Leftovers(removed=tuple(removed), failed=tuple(failed))


def _remove_volume(api: APIClient, name: str) -> None:
    deadline = time.monotonic() + _GONE_S
    while True:
        try:
            api.remove_volume(name, force=True)
            return
        except docker.errors.APIError as e:
            # 409: a container being removed still holds it for a moment
            if e.status_code != 409 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _remove_network(api: APIClient, network: str) -> None:
    deadline = time.monotonic() + _GONE_S
    while True:
        try:
            api.remove_network(network)
            return
        except docker.errors.APIError as e:
            if e.status_code != 403 or time.monotonic() > deadline:  # 403: in use
                raise
        for cid in api.inspect_network(network).get("Containers") or {}:
            with contextlib.suppress(docker.errors.APIError):
                api.disconnect_container_from_network(cid, network, force=True)
        time.sleep(0.1)


def _owners(api: APIClient) -> dict[str, int]:
    """Every owner label value on the daemon's objects -> how many objects carry it."""
    key = {"label": [OWNER]}
    found: list[Mapping[str, object]] = []
    found += api.containers(all=True, filters=key)
    found += api.images(all=True, filters=key)
    found += api.volumes(filters=key).get("Volumes") or []
    found += api.networks(filters=key)
    counts: dict[str, int] = {}
    for thing in found:
        labels = thing.get("Labels") or {}
        value = str(labels.get(OWNER, "")) if isinstance(labels, dict) else ""
        if value:  # a cached environment carries an empty one
            counts[value] = counts.get(value, 0) + 1
    return counts


def prune_dead(api: APIClient) -> Leftovers:
    """Remove the objects of every proof whose process ran on this machine and has ended
    (`owner_state`); a live proof's objects and those of proofs elsewhere stay.

    Raises:
        docker.errors.DockerException: the daemon refused to list its objects.
    """
    mine = this_owner()
    removed: list[str] = []
    failed: list[str] = []
    live = unknown = 0
    for owner, count in sorted(_owners(api).items()):
        state = owner_state(owner, mine=mine)
        if state is OwnerState.ALIVE:
            live += count
            continue
        if state is OwnerState.UNKNOWN:
            unknown += count
            continue
        got = sweep(api, {"label": [f"{OWNER}={owner}"]})
        removed += got.removed
        failed += got.failed
    return Leftovers(removed=tuple(removed), failed=tuple(failed), live=live, unknown=unknown)
