"""Core values: frozen dataclasses and enums shared by the core and the adapters.

Its size (~660 lines) is honest: every value the receipt carries, each with its
`to_dict`; nothing here does I/O or decides anything.

Everything here is plain data. Adapters (git/, sandbox/, github/) produce these values;
the pure core (config, policy, verdict, receipt) consumes them. Each value that goes
into the receipt has a `to_dict()` giving JSON-ready data.

Paths are bytes in git. In JSON a path is written as `path` (UTF-8 text) when its bytes
are valid UTF-8, and otherwise as `path_b64` (standard base64 of the exact bytes) next
to a display-only `path` in which undecodable bytes appear as backslash escapes. A
reader that needs exact bytes takes `path_b64` when present, else `path` encoded as UTF-8.
"""

from __future__ import annotations

import base64
import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NewType

CommitId = NewType("CommitId", str)  # 40-hex git object id
TreeId = NewType("TreeId", str)  # 40-hex git object id
BlobId = NewType("BlobId", str)  # 40-hex git object id
Sha256 = NewType("Sha256", str)  # 64-hex

JsonDict = dict[str, object]


def path_to_dict(path: bytes, key: str = "path") -> JsonDict:
    """Lossless JSON form of a git path (see the module docstring)."""
    try:
        return {key: path.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            key: path.decode("utf-8", "backslashreplace"),
            f"{key}_b64": base64.b64encode(path).decode("ascii"),
        }


def path_display(path: bytes) -> str:
    """Human form of a git path; never used for identity."""
    return path.decode("utf-8", "backslashreplace")


class Verdict(enum.StrEnum):
    PROVEN = "PROVEN"
    FAILED = "FAILED"
    HELD = "HELD"
    BLOCKED = "BLOCKED"
    INCONCLUSIVE = "INCONCLUSIVE"

    @property
    def severity(self) -> int:
        """Worst wins: BLOCKED > INCONCLUSIVE > FAILED > HELD > PROVEN (SPEC §3)."""
        return _SEVERITY[self]

    @property
    def exit_code(self) -> int:
        return _EXIT[self]

    @property
    def conclusion(self) -> str:
        """The check-run conclusion; never neutral or skipped (GitHub counts those as passing)."""
        return _CONCLUSION[self]


_SEVERITY = {
    Verdict.PROVEN: 0,
    Verdict.HELD: 1,
    Verdict.FAILED: 2,
    Verdict.INCONCLUSIVE: 3,
    Verdict.BLOCKED: 4,
}
_EXIT = {
    Verdict.PROVEN: 0,
    Verdict.FAILED: 10,
    Verdict.HELD: 11,
    Verdict.BLOCKED: 12,
    Verdict.INCONCLUSIVE: 13,
}
_CONCLUSION = {
    Verdict.PROVEN: "success",
    Verdict.FAILED: "failure",
    Verdict.HELD: "action_required",
    Verdict.BLOCKED: "failure",
    Verdict.INCONCLUSIVE: "failure",
}


def worst(verdicts: tuple[Verdict, ...] | list[Verdict]) -> Verdict:
    """The worst of the given verdicts; PROVEN for none."""
    return max(verdicts, key=lambda v: v.severity, default=Verdict.PROVEN)


class Decision(enum.StrEnum):
    """A policy decision; worst wins: DENY > HOLD > ALLOW."""

    ALLOW = "ALLOW"
    HOLD = "HOLD"
    DENY = "DENY"

    @property
    def severity(self) -> int:
        return {"ALLOW": 0, "HOLD": 1, "DENY": 2}[self.value]


def worst_decision(decisions: tuple[Decision, ...] | list[Decision]) -> Decision:
    return max(decisions, key=lambda d: d.severity, default=Decision.ALLOW)


class ReasonCode(enum.StrEnum):
    """Stable codes for every non-PROVEN reason. Values are part of the contract."""

    # evidence (SPEC §3 (1), (2)); unresolvable revisions are usage errors (exit 2)
    COVERAGE_INCOMPLETE = "coverage-incomplete"
    PATCH_MISMATCH = "patch-mismatch"
    MERGE_CONFLICT = "merge-conflict"
    UNSAFE_TREE = "unsafe-tree"
    # configuration (3)
    NO_CONFIG = "no-config"
    UNTRUSTED_CONFIG = "untrusted-config"
    # policy (4)
    POLICY_HOLD = "policy-hold"
    POLICY_DENY = "policy-deny"
    APPROVAL_INVALID = "approval-invalid"
    # clean room (5)
    DOCKER_UNAVAILABLE = "docker-unavailable"
    IMAGE_UNRESOLVED = "image-unresolved"
    CONTAINER_FAILED = "container-failed"
    # commands (6)
    CHECK_FAILED = "check-failed"
    CHECK_TIMED_OUT = "check-timed-out"
    CHECK_OOM_KILLED = "check-oom-killed"
    CHECK_NOT_RUN = "check-not-run"
    # tests (7)
    NO_TEST_PHASE = "no-test-phase"
    JUNIT_MISSING = "junit-missing"
    JUNIT_INVALID = "junit-invalid"
    JUNIT_NO_TESTS = "junit-no-tests"
    JUNIT_FAILURES = "junit-failures"
    # egress (8): the broker's record of setup's connections could not be read whole
    EGRESS_UNRECORDED = "egress-unrecorded"
    # the differential (9), SPEC §3.1
    REGRESSION = "regression"
    EXPECTATION_CHANGED = "expectation-changed"
    TESTS_LOST = "tests-lost"
    # SPEC §3.2: the trusted run loaded a pytest plugin, or ran a module of the tree before
    # the harness, that the base run did not
    PLUGIN_LOADED = "plugin-loaded"
    # a head or trusted run gave no per-test outcomes: the differential never fails open
    DIFFERENTIAL_INCOMPLETE = "differential-incomplete"
    ENVIRONMENT_CHANGED = "environment-changed"
    # SPEC §3.2: a workspace file the base's tests read, and the change edits it
    TEST_INPUT_CHANGED = "test-input-changed"
    # trusted evidence (8), SPEC §3.2: the witness in pytest contradicts what was read
    EVIDENCE_TAMPERED = "evidence-tampered"
    # the run itself
    INTERRUPTED = "interrupted"
    # shards, SPEC §3.3: a shard receipt alone is never a whole proof; a set of shard
    # receipts that does not make one proof is refused by `aggregate`
    SHARD_PARTIAL = "shard-partial"
    SHARDS_DISAGREE = "shards-disagree"
    SHARDS_INCOMPLETE = "shards-incomplete"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reason:
    code: ReasonCode
    message: str
    check: str | None = None

    def to_dict(self) -> JsonDict:
        d: JsonDict = {"code": self.code.value, "message": self.message}
        if self.check is not None:
            d["check"] = self.check
        return d


class TriggerKind(enum.StrEnum):
    """How the change reached proofgate (SPEC §4 `trigger.kind`)."""

    PULL_REQUEST = "pull_request"
    MERGE_GROUP = "merge_group"
    COMMIT = "commit"  # a re-proof of one commit (e.g. workflow_dispatch with a SHA)
    LOCAL = "local"  # the CLI on someone's machine


@dataclass(frozen=True, slots=True, kw_only=True)
class Trigger:
    """What a receipt vouches for: the event kind and the branch the change lands on."""

    kind: TriggerKind
    base_ref: str | None = None  # "refs/heads/<branch>" when known
    pull_request: int | None = None

    def __post_init__(self) -> None:
        if self.base_ref is not None and not self.base_ref.startswith("refs/"):
            raise ValueError(f"trigger base_ref must be a full ref, got {self.base_ref!r}")

    def to_dict(self) -> JsonDict:
        d: JsonDict = {"kind": self.kind.value, "base_ref": self.base_ref}
        if self.pull_request is not None:
            d["pull_request"] = self.pull_request
        return d


# --- git evidence -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Revision:
    """A resolved revision: what the user typed, the commit and its tree."""

    spec: str
    commit: CommitId
    tree: TreeId

    def to_dict(self) -> JsonDict:
        return {"commit": self.commit, "tree": self.tree}


class ChangeStatus(enum.StrEnum):
    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"
    RENAMED = "renamed"
    TYPE_CHANGED = "type-changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class InventoryEntry:
    """One changed path of the patch (merge-base -> head)."""

    path: bytes  # new path (old path for deletions)
    status: ChangeStatus
    old_path: bytes | None = None  # set for renames
    old_mode: int | None = None  # octal git mode, e.g. 0o100644; None when added
    new_mode: int | None = None  # None when deleted
    binary: bool = False
    size: int | None = None  # new blob size in bytes (None when deleted or a gitlink)
    old_size: int | None = None
    symlink_target: bytes | None = None  # raw target bytes when the new entry is a symlink
    symlink_absolute: bool = False
    symlink_escapes: bool = False  # resolves outside the repository root
    # its resolution never ends: the links it walks, from this one to the one met again
    # (a -> b -> a), gate/git/symlinks.py
    symlink_loop: tuple[bytes, ...] = ()
    gitlink: bool = False  # a submodule pointer (mode 160000) on either side
    lines_added: int = 0
    lines_deleted: int = 0

    @property
    def display(self) -> str:
        return path_display(self.path)

    def to_dict(self) -> JsonDict:
        d: JsonDict = path_to_dict(self.path)
        d["status"] = self.status.value
        if self.old_path is not None:
            d.update(path_to_dict(self.old_path, "old_path"))
        d["old_mode"] = None if self.old_mode is None else f"{self.old_mode:06o}"
        d["new_mode"] = None if self.new_mode is None else f"{self.new_mode:06o}"
        d["binary"] = self.binary
        d["size"] = self.size
        if self.symlink_target is not None:
            d.update(path_to_dict(self.symlink_target, "symlink_target"))
            d["symlink_absolute"] = self.symlink_absolute
            d["symlink_escapes"] = self.symlink_escapes
            if self.symlink_loop:  # for people: each path as `path_display` shows it
                d["symlink_loop"] = [path_display(p) for p in self.symlink_loop]
        if self.gitlink:
            d["gitlink"] = True
        d["lines_added"] = self.lines_added
        d["lines_deleted"] = self.lines_deleted
        return d


@dataclass(frozen=True, slots=True, kw_only=True)
class Coverage:
    """What the evidence does and does not cover (SPEC §1, §4)."""

    complete: bool
    notes: tuple[str, ...] = ()

    def to_dict(self) -> JsonDict:
        return {"complete": self.complete, "notes": list(self.notes)}


@dataclass(frozen=True, slots=True, kw_only=True)
class PatchCapture:
    """The exact, binary-safe patch from merge-base to head, and its digest."""

    data: bytes = field(repr=False)
    sha256: Sha256
    files: int

    def to_dict(self) -> JsonDict:
        return {"sha256": self.sha256, "bytes": len(self.data), "files": self.files}


@dataclass(frozen=True, slots=True, kw_only=True)
class WorktreeCapture:
    """A `--worktree` head: the working tree captured as a synthetic commit (issue 20)."""

    untracked: tuple[bytes, ...] = ()  # non-ignored untracked files that are in the head

    def to_dict(self) -> JsonDict:
        return {"untracked": [path_to_dict(p) for p in self.untracked]}


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """Everything git says about the change (SPEC §1).

    `proven_tree` is set only when the patch re-applied to the base tip and the three-way
    merge agree; otherwise `reasons` says why (patch-mismatch, merge-conflict, ...).
    """

    repository: str
    base: Revision
    head: Revision
    merge_base: CommitId
    patch: PatchCapture
    inventory: tuple[InventoryEntry, ...]
    coverage: Coverage
    proven_tree: TreeId | None
    reasons: tuple[Reason, ...] = ()
    worktree: WorktreeCapture | None = None  # set when head is the working tree


# --- configuration ------------------------------------------------------------------


class Phase(enum.StrEnum):
    SETUP = "setup"
    BUILD = "build"
    TEST = "test"


PHASE_ORDER: tuple[Phase, ...] = (Phase.SETUP, Phase.BUILD, Phase.TEST)


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """A command as configured: a string runs under `/bin/sh -c`, a list is an argv."""

    argv: tuple[str, ...]

    @classmethod
    def shell(cls, script: str) -> Command:
        return cls(argv=("/bin/sh", "-c", script))


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    timeout: int = 900  # seconds, per phase
    network: str = "none"  # none | setup
    memory: int = 2 * 1024**3  # bytes
    cpus: float = 2.0
    pids: int = 512
    user: str | None = None
    cap_add: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    egress: tuple[str, ...] = ()  # SPEC §2: the host:port pairs setup may reach

    def to_dict(self) -> JsonDict:
        d: JsonDict = {
            "timeout": self.timeout,
            "network": self.network,
            "memory": self.memory,
            "cpus": self.cpus,
            "pids": self.pids,
            "user": self.user,
            "cap_add": list(self.cap_add),
            "env": sorted(k for k, _ in self.env),  # names only: values may be sensitive
        }
        if self.egress:
            d["egress"] = list(self.egress)
        return d


class DifferentialMode(enum.StrEnum):
    """`checks[].differential` (SPEC §3.1): which runs judge the change's tests."""

    OFF = "off"
    TRUSTED = "trusted"  # head + base + trusted
    FULL = "full"  # ... + proving (fail-to-pass)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardFilter:
    """SPEC §3.3: which of a check's test files shard `index` of `count` runs (1-based).

    `assigned` maps every test file of the base tree to its shard, or, for a file in
    `by_unit` (one that holds a large part of the suite), each of its top-level test
    classes and functions as `path::Name`; anything not listed (a file or unit only in
    the head, a doctest's module) goes by the hash of its key (`shard_of`). The witness
    plugin applies the same rule inside pytest (gate/witness/plugin.py).
    """

    index: int
    count: int
    assigned: tuple[tuple[str, int], ...]
    by_unit: tuple[str, ...] = ()

    def shard_of(self, path: str, unit: str | None = None) -> int:
        key = f"{path}::{unit}" if unit is not None and path in self.by_unit else path
        return dict(self.assigned).get(key) or hashed_shard(key, self.count)

    def to_dict(self) -> JsonDict:
        return {
            "index": self.index,
            "count": self.count,
            "assigned": dict(self.assigned),
            "by_unit": list(self.by_unit),
        }


def hashed_shard(path: str, count: int) -> int:
    """The shard (1-based) of a file the split does not list: by the SHA-256 of its path.
    The witness plugin computes the same."""
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckSpec:
    name: str
    phases: tuple[tuple[Phase, tuple[Command, ...]], ...]  # in SETUP, BUILD, TEST order
    limits: Limits
    junit: str | None = None
    tests: tuple[str, ...] = ()  # trusted test file globs (SPEC §3.1); () = the defaults
    differential: DifferentialMode = DifferentialMode.OFF
    # the only files setup sees; set, setup's result is cached (gate/sandbox/envcache.py)
    setup_inputs: tuple[str, ...] | None = None
    # a differential's runs: the base's pytest configuration (file name, content), given
    # to pytest with `-c` from proofgate's volume (gate/differential/pytestconfig.py)
    pytest_config: tuple[str, bytes] | None = None
    shard: ShardFilter | None = None  # SPEC §3.3: only this shard's test files run


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    files: int | None = None
    lines: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySpec:
    protected: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    budgets: Budgets = Budgets()
    rules: tuple[tuple[str, Decision], ...] = ()  # built-in rule id -> overriding decision
    # check name -> its egress allowlist (SPEC §2): covered by the policy fingerprint
    egress: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # blast-radius thresholds (immediate, future): a score above one is a HOLD finding
    thresholds: tuple[int | None, int | None] = (None, None)
    # every configured check command, as text: which requirements files a check installs
    # (dependency-changed); covered by the policy fingerprint
    commands: tuple[str, ...] = ()
    # SPEC §2.1 `ci.default-token`: the repository's default GITHUB_TOKEN is write, so a
    # job with no `permissions` anywhere is judged as holding a write token
    ci_default_token_write: bool = False

    def to_dict(self) -> JsonDict:
        return {
            "protected": list(self.protected),
            "deny": list(self.deny),
            "budgets": {"files": self.budgets.files, "lines": self.budgets.lines},
            "rules": {k: v.value for k, v in self.rules},
            "thresholds": {"immediate": self.thresholds[0], "future": self.thresholds[1]},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    version: int
    image: str
    checks: tuple[CheckSpec, ...]
    policy: PolicySpec


class ConfigSourceKind(enum.StrEnum):
    BASE_TREE = "base-tree"
    FILE = "file"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSource:
    """Where the configuration came from (SPEC §2): the base tree's blob, or a local file."""

    kind: ConfigSourceKind
    path: str
    blob: str  # git blob id for base-tree, "sha256:<hex>" of the bytes for a file
    sha256: str | None = None  # SHA-256 of the configuration's bytes (SPEC §4)

    def to_dict(self) -> JsonDict:
        d: JsonDict = {"source": self.kind.value, "path": self.path, "blob": self.blob}
        if self.sha256 is not None:
            d["sha256"] = self.sha256
        return d


# --- policy -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    rule: str
    decision: Decision
    path: bytes | None
    message: str
    line: int | None = None

    def to_dict(self) -> JsonDict:
        d: JsonDict = {"rule": self.rule, "decision": self.decision.value}
        if self.path is not None:
            d.update(path_to_dict(self.path))
        if self.line is not None:
            d["line"] = self.line
        d["message"] = self.message
        return d


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyResult:
    decision: Decision
    findings: tuple[Finding, ...]
    fingerprint: Sha256
    blast_radius: Mapping[str, object] = field(default_factory=dict)
    # SPEC §2.1: the default token assumed and the changed workflows' jobs relying on it
    ci: Mapping[str, object] = field(default_factory=dict)

    def to_dict(self) -> JsonDict:
        return {
            "fingerprint": self.fingerprint,
            "decision": self.decision.value,
            "findings": [f.to_dict() for f in self.findings],
            "blast_radius": dict(self.blast_radius),
            **({"ci": dict(self.ci)} if self.ci else {}),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """A verified approval of a HOLD, bound to one patch digest and policy fingerprint."""

    approver: str
    method: str  # "file" | "review" | "requested-action"
    approved_at: str  # RFC 3339 UTC
    patch_sha256: Sha256
    policy_fingerprint: Sha256
    keyid: str | None = None

    def to_dict(self) -> JsonDict:
        d: JsonDict = {
            "approver": self.approver,
            "method": self.method,
            "approved_at": self.approved_at,
            "patch_sha256": self.patch_sha256,
            "policy_fingerprint": self.policy_fingerprint,
        }
        if self.keyid is not None:
            d["keyid"] = self.keyid
        return d


# --- clean room ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRef:
    """A clean-room image resolved before anything runs (SPEC §3 (5))."""

    name: str
    id: str  # local image id, "sha256:<hex>"
    repo_digest: str | None = None  # "name@sha256:<hex>" when the image came from a registry

    @property
    def digest(self) -> str:
        return self.repo_digest or self.id


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessSession:
    """One pytest session as proofgate's witness plugin saw it (gate/witness/host.py)."""

    exitstatus: int
    junit_path: str | None
    junit_sha256: str | None
    counts: dict[str, int]
    conftests: tuple[tuple[str, str | None], ...]  # (absolute path, git blob id)
    tampered: tuple[tuple[str, str], ...]  # (kind, detail)
    xdist: bool
    pid: int = 0  # the pytest process (0: not given)
    ended: bool = True  # the process's closing line was seen (a normal end)
    test_files: tuple[str, ...] = ()  # absolute paths of the files the collected tests are in
    reads: tuple[tuple[str, str], ...] = ()  # (reader, file): workspace files code read
    reads_dropped: int = 0  # reads past the plugin's bound, not listed
    # seconds per top-level test ("file::Name", relative to the workdir), to balance shards
    durations: tuple[tuple[str, float], ...] = ()
    # the plugins the session loaded: "name (file): hook=digest ..." (gate/witness/judge.py)
    plugins: tuple[str, ...] = ()
    # the tree's modules imported before the first conftest: "module (file) sha256"
    early: tuple[str, ...] = ()
    # modules of the tree's packages imported from outside the tree: "module (file)"
    foreign: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    argv: tuple[str, ...]
    exit_code: int | None  # None when the command never produced one (killed, daemon lost)
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    log_sha256: Sha256
    log_bytes: int
    log_tail: str
    started_offset_s: float = 0.0  # seconds since the check's container started
    witness: tuple[WitnessSession, ...] = ()  # test phase: the pytest sessions it ran
    witness_problems: tuple[str, ...] = ()  # witness lines that were not the plugin's

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    def to_dict(self) -> JsonDict:
        return {
            "argv": list(self.argv),
            "exit_code": self.exit_code,
            "duration_s": round(self.duration_s, 3),
            "timed_out": self.timed_out,
            "oom_killed": self.oom_killed,
            "log_sha256": self.log_sha256,
            "log_bytes": self.log_bytes,
            "log_tail": self.log_tail,
            "started_offset_s": round(self.started_offset_s, 3),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseResult:
    phase: Phase
    commands: tuple[CommandResult, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.commands)

    def to_dict(self) -> JsonDict:
        return {"phase": self.phase.value, "commands": [c.to_dict() for c in self.commands]}


@dataclass(frozen=True, slots=True, kw_only=True)
class JunitCounts:
    tests: int
    failures: int
    errors: int
    skipped: int

    @property
    def executed(self) -> int:
        return self.tests - self.skipped


EGRESS_RECORD_MAX = 100  # attempts kept in the receipt per check; the digest covers all


@dataclass(frozen=True, slots=True, kw_only=True)
class EgressAttempt:
    """One connection attempt through a check's egress broker, as the broker logged it."""

    kind: str  # connect | http | dns
    host: str | None
    port: int | None
    allowed: bool
    reason: str | None = None  # the broker's refusal code (not-allowed, private-address, ...)
    address: str | None = None  # the checked address connected to, when allowed
    bytes_up: int = 0
    bytes_down: int = 0
    duration_s: float = 0.0
    open_at_stop: bool = False  # still open when the broker stopped (bytes so far)

    def to_dict(self) -> JsonDict:
        return {
            "kind": self.kind,
            "host": self.host,
            "port": self.port,
            "allowed": self.allowed,
            "reason": self.reason,
            "address": self.address,
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
            "duration_s": round(self.duration_s, 3),
            "open_at_stop": self.open_at_stop,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class EgressRecord:
    """Every attempt of one check's setup phase through the broker (SPEC §2 `egress`).

    `sha256` covers the canonical JSON of the whole list; the receipt keeps the first
    EGRESS_RECORD_MAX. `dropped` counts attempts the broker itself stopped logging
    (its log is bounded); `complete` is False when the log could not be read whole, or
    when the broker dropped any attempt (SPEC §2: every attempt goes into the receipt).
    """

    attempts: tuple[EgressAttempt, ...]
    sha256: Sha256
    dropped: int = 0
    complete: bool = True

    def to_dict(self) -> JsonDict:
        return {
            "attempts": len(self.attempts) + self.dropped,
            "allowed": sum(a.allowed for a in self.attempts),
            "refused": sum(not a.allowed for a in self.attempts),
            "sha256": self.sha256,
            "dropped": self.dropped,
            "complete": self.complete,
            "truncated": len(self.attempts) > EGRESS_RECORD_MAX,
        }


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class EnvChange:
    """One path setup or build left (gate/differential/environment.py): outside
    /workspace against the image, under it against the committed tree."""

    path: str
    kind: str  # modified | added | removed
    sha256: str | None = None  # of the file's bytes; None when removed or unreadable
    why: str = ""  # what it is: file, exec, elf, symlink, dir, other, removed
    key: str | None = None  # the path compared (the project's version put aside)
    norm: str | None = None  # the digest compared (what varies honestly put aside)

    def to_dict(self) -> JsonDict:
        d: JsonDict = {"path": self.path, "kind": self.kind, "why": self.why}
        if self.sha256 is not None:
            d["sha256"] = self.sha256
        if self.key is not None and self.key != self.path:
            d["key"] = self.key
        if self.norm is not None and self.norm != self.sha256:
            d["norm"] = self.norm
        return d

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> EnvChange:
        sha = raw.get("sha256")
        path = str(raw["path"])
        sha256 = None if sha is None else str(sha)
        key, norm = raw.get("key"), raw.get("norm")
        return cls(
            path=path,
            kind=str(raw["kind"]),
            sha256=sha256,
            why=str(raw.get("why") or ""),
            key=path if key is None else str(key),
            norm=sha256 if norm is None else str(norm),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvRecord:
    """What one run's setup and build changed, as far as a test could execute it."""

    changes: tuple[EnvChange, ...] = ()
    complete: bool = True  # False: more changes than were recorded, or unreadable ones

    def to_dict(self) -> JsonDict:
        return {"complete": self.complete, "changes": [c.to_dict() for c in self.changes]}

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> EnvRecord:
        items = raw.get("changes")
        rows = items if isinstance(items, list) else []
        return cls(
            changes=tuple(EnvChange.from_dict(r) for r in rows if isinstance(r, dict)),
            complete=bool(raw.get("complete")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseReceipt:
    """A receipt offered for the base's outcomes (SPEC §3.1, `prove --base-receipt`):
    its predicate once its signature verified with a trusted key, or why it did not."""

    digest: str  # SHA-256 of the envelope's bytes
    predicate: Mapping[str, object] | None = None
    refused: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """What one check did in its own fresh container.

    `started` is False when the container could not be created or started; `error` then
    says why. `junit` is the raw report bytes read back after the test phase (None when
    not configured or not found).
    """

    name: str
    image: ImageRef
    started: bool
    phases: tuple[PhaseResult, ...] = ()
    error: str | None = None
    junit_report: bytes | None = field(default=None, repr=False)
    egress: EgressRecord | None = None  # set when setup ran behind the egress broker
    environment: JsonDict | None = None  # the setup cache: {cache: hit|miss|off, key, image}
    # SPEC §3.2: what setup and build changed outside /workspace (recorded where judged)
    env_changes: EnvRecord | None = None

    def to_dict(self) -> JsonDict:
        d: JsonDict = {
            "name": self.name,
            "image": self.image.name,
            "image_digest": self.image.digest,
            "image_id": self.image.id,
            "started": self.started,
            "phases": [p.to_dict() for p in self.phases],
        }
        if self.error is not None:
            d["error"] = self.error
        if self.egress is not None:
            d["egress"] = [a.to_dict() for a in self.egress.attempts[:EGRESS_RECORD_MAX]]
            d["egress_summary"] = self.egress.to_dict()
        if self.environment is not None:
            d["environment"] = dict(self.environment)
        return d
