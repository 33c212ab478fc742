"""The environment cache: the result of a check's setup phase, committed to a local image
and reused by later checks and proofs with the same key (docs/performance.md).

Only a check with `setup_inputs` is cached. Its setup runs in a container whose
/workspace holds only the files those globs name, so everything setup could have read is
in the key: the configured image's id, the setup commands, the network and egress
configuration, the egress broker's test-only overrides in force (a hit under other
overrides is a miss), the environment and user, and the content (paths, modes, bytes,
symlink targets) of those files. What setup writes outside /workspace is the cached environment;
/workspace itself is dropped on a miss as on a hit, and the full tree is materialized
afresh for build and test.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from docker import APIClient

from gate.model import (
    CheckSpec,
    CommandResult,
    EnvRecord,
    ImageRef,
    JsonDict,
    Phase,
    PhaseResult,
    Sha256,
)
from gate.policy.paths import glob_match
from gate.sandbox.egress import UnsafeOverrides
from gate.sandbox.errors import DockerRefused, docker_errors
from gate.sandbox.labels import OWNER, PROOF
from gate.util.canonical import canonical_json

CACHE_LABEL = "proofgate.env-cache"
KEY_LABEL = "proofgate.env-key"
SETUP_LABEL = "proofgate.env-setup"  # the setup phase's results, shown again on a hit
# what setup changed outside /workspace (gate/differential/environment.py), where recorded
CHANGES_LABEL = "proofgate.env-changes"
MARKS = (CACHE_LABEL, KEY_LABEL, SETUP_LABEL, CHANGES_LABEL)  # what an image made from one inherits
KEEP = 10  # cached environments kept, newest first
VERSION = 2  # 2: whether setup's changes are recorded is part of the key


def labels(key: str) -> dict[str, str]:
    # `proofgate` is overridden: the commit would inherit the container's `proofgate=1`,
    # which marks what a check must remove when it ends; and the proof's id and owner
    # are blanked (a label cannot be removed), so neither the proof's own sweep nor a
    # prune of dead proofs' leftovers takes a cached environment (gate/sandbox/labels.py).
    return {CACHE_LABEL: "1", KEY_LABEL: key, "proofgate": "env-cache", PROOF: "", OWNER: ""}


class _Chunks(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._rest:
            try:
                self._rest = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._rest))
        buffer[:n] = self._rest[:n]
        self._rest = self._rest[n:]
        return n


def setup_inputs(
    tree_tar: Callable[[], Iterator[bytes]], globs: tuple[str, ...]
) -> tuple[bytes, str]:
    """The tar of only the entries `globs` name (with their directories) and the digest of
    their content, independent of the archive's mtimes.

    Raises:
        UnsafeTreeError: the tree stream refused a hostile entry.
    """
    out = io.BytesIO()
    digest: list[list[object]] = []
    dirs: set[str] = set()
    stream = io.BufferedReader(_Chunks(tree_tar()), buffer_size=1 << 20)
    with (
        tarfile.open(fileobj=stream, mode="r|") as tar,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as kept,
    ):
        for member in tar:
            if member.isdir() or not (member.isfile() or member.issym()):
                continue
            name = member.name.removeprefix("./")
            if not any(glob_match(g, name.encode("utf-8", "surrogateescape")) for g in globs):
                continue
            parts = name.split("/")
            for k in range(1, len(parts)):
                parent = "/".join(parts[:k])
                if parent not in dirs:
                    dirs.add(parent)
                    d = tarfile.TarInfo(parent)
                    d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o777, member.mtime
                    kept.addfile(d)
            if member.issym():
                digest.append([name, "link", member.linkname])
                kept.addfile(member)
                continue
            data = tar.extractfile(member)
            body = data.read() if data is not None else b""
            digest.append([name, member.mode & 0o111, hashlib.sha256(body).hexdigest()])
            kept.addfile(member, io.BytesIO(body))
    return out.getvalue(), hashlib.sha256(canonical_json(sorted(digest))).hexdigest()


def key(
    spec: CheckSpec,
    image: ImageRef,
    inputs: str,
    overrides: UnsafeOverrides | None = None,
    *,
    recorded: bool = False,
) -> str:
    """Everything the setup phase's result can depend on (docs/performance.md):
    `overrides` are the egress broker's test-only overrides the sandbox applies, and
    `recorded` whether the entry carries the record of what setup changed (SPEC §3.2)."""
    limits = spec.limits
    setup = [list(c.argv) for p, cmds in spec.phases if p is Phase.SETUP for c in cmds]
    body: JsonDict = {
        "version": VERSION,
        "image": image.id,
        "setup": setup,
        "network": limits.network,
        "egress": list(limits.egress),
        "env": [list(kv) for kv in limits.env],  # values too: they change what setup does
        "user": limits.user,
        "cap_add": list(limits.cap_add),
        "inputs": inputs,
        "recorded": recorded,
    }
    # what the broker reaches and how it resolves names shape what setup installs; only
    # where a broker runs, and only when set (keys made without them stay as they were)
    if overrides is not None and overrides.active and limits.network == "setup" and limits.egress:
        body["egress_overrides"] = {
            "allow_nets": list(overrides.allow_nets),
            "hosts": [[h, list(a)] for h, a in overrides.hosts],
            "network": overrides.network,
        }
    return hashlib.sha256(canonical_json(body)).hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    image: str
    key: str
    created: int
    size: int


def entries(api: APIClient) -> list[Entry]:
    """The cached environments, newest first."""
    with docker_errors("list the cached environments"):
        found = api.images(filters={"label": f"{CACHE_LABEL}=1"})
    got = [
        Entry(
            image=str(i["Id"]),
            key=str((i.get("Labels") or {}).get(KEY_LABEL, "")),
            created=int(i.get("Created") or 0),
            size=int(i.get("Size") or 0),
        )
        for i in found
        # an image committed from a container of the check (`proofgate=1`) is never one
        if (i.get("Labels") or {}).get("proofgate") == "env-cache"
    ]
    return sorted(got, key=lambda e: (-e.created, e.image))


REPOSITORY = "proofgate-env-cache"


def tag(api: APIClient, image: str, key: str) -> None:
    """Tag a new cached environment: untagged, removing an image made from it (a check's
    build snapshot) would remove it too, as a dangling parent."""
    with docker_errors("tag the cached environment"):
        api.tag(image, REPOSITORY, key)


def encode_setup(phases: list[PhaseResult]) -> str:
    commands = [dataclasses.asdict(c) for p in phases if p.phase is Phase.SETUP for c in p.commands]
    return json.dumps(commands, sort_keys=True)


def _decode_setup(label: str) -> tuple[PhaseResult, ...]:
    try:
        raw = json.loads(label)
        commands = tuple(
            CommandResult(
                argv=tuple(str(a) for a in c["argv"]),
                exit_code=None if c["exit_code"] is None else int(c["exit_code"]),
                duration_s=float(c["duration_s"]),
                timed_out=bool(c["timed_out"]),
                oom_killed=bool(c["oom_killed"]),
                log_sha256=Sha256(str(c["log_sha256"])),
                log_bytes=int(c["log_bytes"]),
                log_tail=str(c["log_tail"]),
                started_offset_s=float(c["started_offset_s"]),
            )
            for c in raw
        )
    except (ValueError, TypeError, KeyError):
        return ()
    return (PhaseResult(phase=Phase.SETUP, commands=commands),) if commands else ()


_PACKED = "zlib:"  # a label's record, compressed (a whole install's can be large)


def encode_changes(record: EnvRecord) -> str:
    text = json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"))
    if len(text) < 16 * 1024:
        return text
    return _PACKED + base64.b64encode(zlib.compress(text.encode(), 9)).decode()


def _decode_changes(label: str | None) -> EnvRecord | None:
    if label is None:
        return None
    try:
        if label.startswith(_PACKED):
            packed = base64.b64decode(label[len(_PACKED) :], validate=True)
            label = zlib.decompressobj().decompress(packed, 64 << 20).decode()
        raw = json.loads(label)
        return EnvRecord.from_dict(raw) if isinstance(raw, dict) else None
    except (ValueError, TypeError, KeyError, zlib.error):
        return None


@dataclass(frozen=True, slots=True)
class Hit:
    image: str
    setup: tuple[PhaseResult, ...]  # the setup results that made it
    changes: EnvRecord | None  # what that setup changed outside /workspace, if recorded


def lookup(api: APIClient, wanted: str) -> Hit | None:
    """The newest cached environment of that key."""
    for entry in entries(api):
        if entry.key == wanted:
            with docker_errors("inspect a cached environment"):
                got = api.inspect_image(entry.image).get("Config") or {}
            labels = got.get("Labels") or {}
            phases = _decode_setup(str(labels.get(SETUP_LABEL, "")))
            if phases and all(p.ok for p in phases):
                return Hit(entry.image, phases, _decode_changes(labels.get(CHANGES_LABEL)))
    return None


def prune(api: APIClient, keep: int = KEEP) -> list[Entry]:
    """Remove all but the `keep` newest; one in use by a running check stays."""
    removed: list[Entry] = []
    for entry in entries(api)[keep:]:
        try:
            with docker_errors("remove a cached environment"):
                api.remove_image(entry.image, force=False, noprune=False)
        except DockerRefused:
            continue
        removed.append(entry)
    return removed
