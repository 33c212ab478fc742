"""Receipt verification: a typed `VerifiedReceipt`, and what a caller expects as data.

Verification trusts nothing before the signature holds, and fails closed in one place:

1. size limit, then a strict parse of the envelope (exact keys and types, no duplicates);
2. `payloadType` must be ours; the payload and signatures must be canonical base64;
3. every signature is tried against every key of the `Signed` expectation (a `keyid` is
   only a hint); without a `Signed` expectation nothing verifies;
4. only then is the payload parsed: statement type, predicate type, subjects, the journal
   chain, and the agreement of subjects with the predicate;
5. finally every other expectation, in the order given; the first that does not hold
   raises `VerificationError(field, want, got)`.

Expectations compose like sigstore-python's `verify/policy.py`:

    expect = AllOf(Signed(keys), Subject(commit=sha), Branch("refs/heads/main"),
                   ConfigBlob(blob), TriggerIn({MERGE_GROUP, PULL_REQUEST}), AtLeast(PROVEN))
    verified = verify(envelope, expect)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gate.model import JsonDict, TriggerKind, Verdict
from gate.receipt.canonical import parse_json
from gate.receipt.dsse import MAX_RECEIPT_BYTES, PAYLOAD_TYPE, open_envelope, parse_envelope
from gate.receipt.errors import ReceiptError, VerificationError
from gate.receipt.keys import keyid
from gate.receipt.predicate import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    SUBJECT_HEAD,
    SUBJECT_PATCH,
    SUBJECT_TREE,
    Predicate,
)
from gate.receipt.shape import check_predicate_shape
from gate.util import journal

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

_SHA256 = re.compile(r"[0-9a-f]{64}")
_GIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 object ids


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedReceipt:
    """A receipt whose signature, structure, journal chain and subjects hold."""

    statement: JsonDict
    predicate: Predicate
    keyid: str  # of the trusted key whose signature held

    @property
    def verdict(self) -> Verdict:
        return self.predicate.verdict


class Expectation(Protocol):
    """One thing a caller requires of a verified receipt."""

    def keys(self) -> tuple[Ed25519PublicKey, ...]:
        """The trusted keys this expectation contributes (only `Signed` has any)."""
        ...

    def check(self, receipt: VerifiedReceipt) -> None:
        """Raises: VerificationError when the receipt does not meet it."""
        ...


class _NoKeys:
    __slots__ = ()

    def keys(self) -> tuple[Ed25519PublicKey, ...]:
        return ()


class Signed:
    """Signed by one of `keys` (checked over the PAE before anything else is read)."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[Ed25519PublicKey]) -> None:
        self._keys = tuple(keys)

    def keys(self) -> tuple[Ed25519PublicKey, ...]:
        return self._keys

    def check(self, receipt: VerifiedReceipt) -> None:
        """Nothing left to do: `verify` opened the envelope with these keys."""


class AllOf:
    """Every expectation holds, checked in the order given."""

    __slots__ = ("_children",)

    def __init__(self, *children: Expectation) -> None:
        self._children = children

    def keys(self) -> tuple[Ed25519PublicKey, ...]:
        return tuple(k for c in self._children for k in c.keys())

    def check(self, receipt: VerifiedReceipt) -> None:
        for child in self._children:
            child.check(receipt)


class Subject(_NoKeys):
    """The head commit and/or the proven tree are exactly these (full hex ids, any case)."""

    __slots__ = ("commit", "tree")

    def __init__(self, *, commit: str | None = None, tree: str | None = None) -> None:
        self.commit = commit.lower() if commit is not None else None
        self.tree = tree.lower() if tree is not None else None

    def check(self, receipt: VerifiedReceipt) -> None:
        p = receipt.predicate
        if self.commit is not None and self.commit != p.head_commit:
            raise VerificationError(
                "subject head",
                self.commit,
                p.head_commit,
                f"receipt is for commit {p.head_commit}, not {self.commit}",
            )
        if self.tree is not None:
            if p.proven_tree is None:
                raise VerificationError(
                    "subject proven-tree",
                    self.tree,
                    None,
                    f"receipt proves no tree (verdict {p.verdict}), not {self.tree}",
                )
            if self.tree != p.proven_tree:
                raise VerificationError(
                    "subject proven-tree",
                    self.tree,
                    p.proven_tree,
                    f"receipt is for tree {p.proven_tree}, not {self.tree}",
                )


class PatchFile(_NoKeys):
    """`patch.diff`'s bytes hash to the patch subject (given as the bytes, or as their
    SHA-256 when they were hashed as they were read)."""

    __slots__ = ("sha256",)

    def __init__(self, data: bytes | None = None, *, sha256: str | None = None) -> None:
        if (data is None) == (sha256 is None):
            raise ValueError("PatchFile takes the patch's bytes or their sha256, exactly one")
        self.sha256 = hashlib.sha256(data).hexdigest() if data is not None else str(sha256)

    def check(self, receipt: VerifiedReceipt) -> None:
        want = receipt.predicate.patch_sha256
        if self.sha256 != want:
            raise VerificationError(
                "subject patch.diff",
                want,
                self.sha256,
                f"patch has sha256 {self.sha256}; the receipt is for {want}",
            )


class Repository(_NoKeys):
    """`predicate.repository` is exactly `name` (OWNER/REPO, as the API spells it)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def check(self, receipt: VerifiedReceipt) -> None:
        got = receipt.predicate.repository
        if got != self.name:
            message = f"receipt is for repository {got!r}, not {self.name!r}"
            raise VerificationError("repository", self.name, got, message)


class Branch(_NoKeys):
    """`trigger.base_ref` is `ref` (a full `refs/heads/...` name): the change was proven for
    this branch, under this branch's configuration."""

    __slots__ = ("ref",)

    def __init__(self, ref: str) -> None:
        self.ref = ref

    def check(self, receipt: VerifiedReceipt) -> None:
        trigger = receipt.predicate.trigger
        got = trigger.base_ref if trigger is not None else None
        if got != self.ref:
            raise VerificationError("trigger.base_ref", self.ref, got)


class ConfigBlob(_NoKeys):
    """The receipt's configuration is a base-tree blob equal to `blob`, or to what
    `blob_at(path)` says is at the receipt's configuration path in the released tree
    (None: no such file there). With `path`, that path must also be exactly `path`: a
    laxer configuration file elsewhere in the same tree (a second workflow's quick
    checks, an example) is not the configuration releases are judged by."""

    __slots__ = ("_blob", "_blob_at", "_path")

    def __init__(
        self,
        blob: str | None = None,
        *,
        blob_at: Callable[[str], str | None] | None = None,
        path: str | None = None,
    ) -> None:
        if (blob is None) == (blob_at is None):
            raise ValueError("ConfigBlob takes a blob or blob_at, exactly one")
        self._blob = blob
        self._blob_at = blob_at
        self._path = path

    def check(self, receipt: VerifiedReceipt) -> None:
        config = receipt.predicate.config
        if config.source != "base-tree" or config.path is None:
            raise VerificationError("config.source", "base-tree", config.source)
        if self._path is not None and config.path != self._path:
            raise VerificationError("config.path", self._path, config.path)
        want = self._blob if self._blob_at is None else self._blob_at(config.path)
        field = f"config.blob ({config.path})"
        if want is None:
            message = f"{field} is {config.blob!r}; the released tree has no such file"
            raise VerificationError(field, None, config.blob, message)
        if config.blob != want:
            raise VerificationError(field, want, config.blob)


class TriggerIn(_NoKeys):
    """`trigger.kind` is one of `kinds`."""

    __slots__ = ("kinds",)

    def __init__(self, kinds: Iterable[TriggerKind]) -> None:
        self.kinds = frozenset(kinds)

    def check(self, receipt: VerifiedReceipt) -> None:
        trigger = receipt.predicate.trigger
        got = trigger.kind.value if trigger is not None else None
        if trigger is None or trigger.kind not in self.kinds:
            want = " or ".join(sorted(k.value for k in self.kinds))
            raise VerificationError("trigger.kind", want, got)


class Changed(_NoKeys):
    """The receipt judged a change: its proven tree is not its base's own tree.

    A pull request (or queue group) that changes nothing on top of a commit pushed straight
    to the branch is PROVEN with an empty patch no policy judged, exactly like a re-proof
    of that commit (`trigger.kind: commit`), so it counts only where a re-proof does."""

    __slots__ = ()

    def check(self, receipt: VerifiedReceipt) -> None:
        p = receipt.predicate
        base = p.document.get("base")
        base_commit = base.get("commit") if isinstance(base, dict) else None
        base_tree = base.get("tree") if isinstance(base, dict) else None
        if p.proven_tree is not None and (base_tree is None or base_tree == p.proven_tree):
            message = (
                f"patch is empty: the proven tree {p.proven_tree} is the base's own tree "
                f"(base {base_commit}); a re-proof counts only with --accept-reproof"
            )
            raise VerificationError("base.tree", f"not {p.proven_tree}", base_tree, message)


class WholeProof(_NoKeys):
    """SPEC §3.3: the receipt proves the whole change, not one shard of it. A shard
    receipt counts only through `proofgate aggregate` (which verifies it with `Signed`
    alone); every release and CLI verification includes this expectation."""

    __slots__ = ()

    def check(self, receipt: VerifiedReceipt) -> None:
        shard = receipt.predicate.document.get("shard")
        if shard is None:
            return
        which = "?"
        if isinstance(shard, dict):
            which = f"{shard.get('index')}/{shard.get('count')}"
        raise VerificationError(
            "shard",
            "a whole proof (no shard)",
            which,
            f"this is the receipt of shard {which} only, never a whole proof: verify the "
            "receipt `proofgate aggregate` signs over all the shards",
        )


def satisfies(verdict: Verdict, require: Verdict) -> bool:
    """Whether `verdict` meets `--require`: at most as severe (SPEC §3 worst-wins order).

    PROVEN is met only by PROVEN; HELD by PROVEN or HELD; FAILED by PROVEN, HELD or
    FAILED; and so on up to BLOCKED, which every verdict meets.
    """
    return verdict.severity <= require.severity


class AtLeast(_NoKeys):
    """The verdict meets `require` (see `satisfies`)."""

    __slots__ = ("require",)

    def __init__(self, require: Verdict) -> None:
        self.require = require

    def check(self, receipt: VerifiedReceipt) -> None:
        if not satisfies(receipt.verdict, self.require):
            raise VerificationError(
                "verdict",
                self.require.value,
                receipt.verdict.value,
                f"verdict is {receipt.verdict}; {self.require} is required",
            )


# --- verification ----------------------------------------------------------------------


def unverified_statement(envelope: bytes, *, max_bytes: int = MAX_RECEIPT_BYTES) -> JsonDict:
    """The statement of a receipt WITHOUT checking any signature, chain or subject.

    For display and for reading digests to approve (`show` without `--key`, `approve
    --receipt`); never evidence. Callers must say that the result is unverified.

    Raises:
        ReceiptError: the envelope or its payload is malformed, or another payloadType.
    """
    payload, _ = parse_envelope(envelope, payload_type=PAYLOAD_TYPE, max_bytes=max_bytes)
    statement = parse_json(payload, what="receipt statement")
    if not isinstance(statement, dict):
        raise ReceiptError("receipt statement is not a JSON object")
    return statement


def _subject_digests(subjects: object) -> dict[str, tuple[str, str]]:
    """name -> (algorithm, digest) for exactly our subjects, in SPEC order."""
    if not isinstance(subjects, list):
        raise ReceiptError("statement subject is not a list")
    want = [(SUBJECT_PATCH, "sha256"), (SUBJECT_HEAD, "gitCommit"), (SUBJECT_TREE, "gitTree")]
    if len(subjects) not in (2, 3):
        raise ReceiptError(f"statement has {len(subjects)} subjects (expected 2 or 3)")
    out: dict[str, tuple[str, str]] = {}
    for s, (name, alg) in zip(subjects, want, strict=False):
        if not isinstance(s, dict) or set(s) != {"name", "digest"}:
            raise ReceiptError("statement subject is malformed (expected {name, digest})")
        digest = s["digest"]
        if s["name"] != name or not isinstance(digest, dict) or set(digest) != {alg}:
            raise ReceiptError(f"statement subjects are not [{', '.join(n for n, _ in want)}]")
        value = digest[alg]
        pattern = _SHA256 if alg == "sha256" else _GIT_ID
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise ReceiptError(f"subject {name} has a malformed {alg} digest")
        out[name] = (alg, value)
    return out


def _field(predicate: object, *path: str) -> object:
    cur = predicate
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return cur


def verify(
    envelope: bytes, expect: Expectation, *, max_bytes: int = MAX_RECEIPT_BYTES
) -> VerifiedReceipt:
    """The receipt in `envelope`, after its signature and every expectation hold.

    Raises:
        VerificationError: the receipt is valid but an expectation does not hold.
        ReceiptError: the first structural check that fails, as one line; never anything
            else for malformed input.
    """
    payload, key = open_envelope(
        envelope, expect.keys(), payload_type=PAYLOAD_TYPE, max_bytes=max_bytes
    )
    statement = parse_json(payload, what="receipt statement")
    if not isinstance(statement, dict):
        raise ReceiptError("receipt statement is not a JSON object")
    if statement.get("_type") != STATEMENT_TYPE:
        raise ReceiptError(f"statement _type is not {STATEMENT_TYPE}")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise ReceiptError(f"predicateType is not {PREDICATE_TYPE}")
    subjects = _subject_digests(statement.get("subject"))
    raw = statement.get("predicate")
    if not isinstance(raw, dict):
        raise ReceiptError("statement predicate is not a JSON object")
    check_predicate_shape(raw)

    broken = journal.verify_chain(raw["journal"]["events"], raw["journal"]["head"])
    if broken is not None:
        raise ReceiptError(f"journal chain is broken: {broken}")

    proven_tree = subjects[SUBJECT_TREE][1] if SUBJECT_TREE in subjects else None
    if _field(raw, "patch", "sha256") != subjects[SUBJECT_PATCH][1]:
        raise ReceiptError("patch subject disagrees with predicate.patch.sha256")
    if _field(raw, "head", "commit") != subjects[SUBJECT_HEAD][1]:
        raise ReceiptError("head subject disagrees with predicate.head.commit")
    if raw.get("proven_tree") != proven_tree:
        raise ReceiptError("proven-tree subject disagrees with predicate.proven_tree")
    verified = VerifiedReceipt(
        statement=statement, predicate=Predicate.from_dict(raw), keyid=keyid(key)
    )
    expect.check(verified)
    return verified


def expectations(
    keys: Sequence[Ed25519PublicKey],
    *,
    commit: str | None = None,
    tree: str | None = None,
    patch: bytes | None = None,
    patch_sha256: str | None = None,
    repository: str | None = None,
    branch: str | None = None,
    triggers: Iterable[TriggerKind] | None = None,
    changed: bool = False,
    require: Verdict | None = None,
) -> AllOf:
    """`AllOf(Signed(keys), ...)` for the options that are given, in the CLI's order
    (`patch` or `patch_sha256`: the patch file's bytes or their digest; `changed`: the
    receipt must judge a change, see `Changed`)."""
    parts: list[Expectation] = [Signed(keys), WholeProof()]
    if commit is not None or tree is not None:
        parts.append(Subject(commit=commit, tree=tree))
    if patch is not None or patch_sha256 is not None:
        parts.append(PatchFile(patch, sha256=patch_sha256))
    if repository is not None:
        parts.append(Repository(repository))
    if branch is not None:
        parts.append(Branch(branch))
    if triggers is not None:
        parts.append(TriggerIn(triggers))
    if changed:
        parts.append(Changed())
    if require is not None:
        parts.append(AtLeast(require))
    return AllOf(*parts)


def verify_statement(
    envelope: bytes,
    keys: Sequence[Ed25519PublicKey],
    *,
    commit: str | None = None,
    tree: str | None = None,
    patch: bytes | None = None,
    require: Verdict | None = None,
    max_bytes: int = MAX_RECEIPT_BYTES,
) -> JsonDict:
    """The statement of a receipt signed by one of `keys` whose subjects and verdict meet
    the given values: `verify(envelope, expectations(...)).statement`.

    Raises:
        ReceiptError: as for `verify`.
    """
    expect = expectations(keys, commit=commit, tree=tree, patch=patch, require=require)
    return verify(envelope, expect, max_bytes=max_bytes).statement


_BAD_BRANCH = re.compile(r"(^|/)\.|\.\.|//|@\{|[\x00-\x20\x7f~^:?*\[\\]|\.lock(/|$)|/$|\.$|^-|^@$")


def branch_ref(name: str) -> str:
    """The full ref `refs/heads/<name>` for a branch given as `main` or `refs/heads/main`.

    Raises:
        ValueError: empty, another kind of ref (`refs/tags/x`), or not a valid branch name
            (`..`, spaces, `~^:?*[\\`, a trailing `/` or `.lock`, ...).
    """
    if name.startswith("refs/") and not name.startswith("refs/heads/"):
        raise ValueError(f"{name!r} is not a branch (expected NAME or refs/heads/NAME)")
    short = name.removeprefix("refs/heads/")
    if not short or _BAD_BRANCH.search(short):
        raise ValueError(f"{name!r} is not a valid branch name")
    return f"refs/heads/{short}"
