"""Verified pin bumps: a change that only moves pins to a newer released tag (issue 29). Pure.

A GitHub Action bump (`uses: actions/checkout@<sha> # v4.2.2` -> `@<sha> # v4.3.0`) or a
pre-commit autoupdate (`rev: v0.6.9` -> `rev: v0.7.0`) is code that runs in CI or on
developers' machines, so on its face it is `ci-workflow-changed` / `build-hook-changed`.
What the pull request controls is the line; what it does not control is what the upstream
repository calls its tags. A file whose every changed line moves a pin of one upstream
(the same `owner/repo` on both sides) from one released tag to a newer released tag of
that upstream — the tag named in the comment (or the `rev:` itself), the SHA exactly that
tag's commit on both sides — is a verified pin bump: finding `pin-bump-verified` (ALLOW by
default; `policy.rules: {pin-bump-verified: hold}` holds it again), and the rules that
would hold the file skip it.

The tags are looked up by the caller (`gate.proof.policy_run`, through a `TagOracle`: the
GitHub API when the Action runs) and handed in as `PinTags`; without them (a local run)
nothing is verified and the hold says why. A commit from a fork of the upstream (GitHub
serves those under the upstream's name), a downgrade, a moved major tag (`v4` -> `v4`),
a non-version tag, a changed `repo:` or any other changed line keeps the hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from gate.model import ChangeStatus, InventoryEntry
from gate.policy.context import Context, as_text, basename
from gate.policy.patch import FileDiff

__all__ = [
    "LOCAL_RUN",
    "MAX_LOOKUPS",
    "PinMove",
    "PinTags",
    "TagAnswer",
    "lookups",
    "pin_candidate",
    "pin_moves",
    "pin_status",
    "verify",
]

MAX_LOOKUPS = 64  # tag look-ups one change may cause; beyond that nothing is verified
LOCAL_RUN = (
    "tag look-ups need the GitHub API: the Action has it; a local run has it with GITHUB_TOKEN "
    "or GH_TOKEN set"
)

_USES = re.compile(
    r"""^(\s*(?:-\s*)?uses:\s*)["']?([^@\s"']+)@([^\s"'#]+)["']?\s*(?:#\s*(.*?))?\s*$"""
)
_REPO = re.compile(r"""^\s*(?:-\s*)?repo:\s*["']?([^\s"'#]+)["']?\s*(?:#.*)?$""")
_REV = re.compile(
    r"""^(\s*(?:-\s*)?rev:\s*)["']?([^\s"'#]+)["']?\s*(?:#\s*(?:frozen:\s*)?(.*?))?\s*$"""
)
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_GITHUB_REPO = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")
_OWNER_REPO = re.compile(r"^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:/[^@\s]*)?$")
# a release version: `v4.3.0`, `0.7.0`, `21.9b0`, `2.0.0rc1` (pre-releases order before
# the release; anything else, e.g. `main` or `latest`, is no release)
_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?$")
_PRE_RANK = {"a": 0, "b": 1, "rc": 2, None: 3}


@dataclass(frozen=True, slots=True)
class TagAnswer:
    """What the upstream says a tag is: it exists, and (when known) its commit."""

    exists: bool
    commit: str | None = None


@dataclass(frozen=True, slots=True)
class PinTags:
    """The tag look-ups' answers, keyed by (owner/repo, tag); `unavailable` says why
    there are none (no API, the API failed, too many look-ups)."""

    answers: Mapping[tuple[str, str], TagAnswer] = field(default_factory=dict)
    unavailable: str | None = None


@dataclass(frozen=True, slots=True)
class PinMove:
    """One pin moved: `name` as written (an action path or the hook repository's URL),
    its upstream `owner/repo` (None when not a GitHub repository), old and new ref and
    the tag each side names (the comment for a SHA, the ref itself for a tag)."""

    name: str
    upstream: str | None
    old_ref: str
    old_tag: str | None
    new_ref: str
    new_tag: str | None
    line: int

    def describe(self) -> str:
        return f"{_short(self.name)} {_side(self.old_ref, self.old_tag)} → " + _side(
            self.new_ref, self.new_tag
        )


def _short(name: str) -> str:
    return name.removeprefix("https://github.com/").removesuffix(".git")


def _side(ref: str, tag: str | None) -> str:
    if _HEX40.match(ref):
        return f"{ref[:12]}({tag})" if tag else ref[:12]
    return ref


def _tag_of(ref: str, note: str | None) -> str | None:
    if _HEX40.match(ref):
        return note.split()[0] if note and note.split() else None
    return ref


def pin_candidate(entry: InventoryEntry, *, ci: bool) -> bool:
    """Files whose pins can be verified: modified workflow/action files (`ci`: the
    caller's `is_ci_path`) and `.pre-commit-config.yaml`, same path and mode."""
    if entry.status is not ChangeStatus.MODIFIED or entry.binary or entry.gitlink:
        return False
    if entry.old_mode != entry.new_mode:
        return False
    return ci or basename(entry.path) == b".pre-commit-config.yaml"


def _hook_repo(hunk_before: list[str], content: bytes | None, line: int) -> str | None:
    """The `repo:` a `rev:` line belongs to: the nearest `repo:` above it in the hunk,
    else in the file's new content (`line` is its new-side line number)."""
    for text in reversed(hunk_before):
        m = _REPO.match(text)
        if m:
            return m.group(1)
    if content is None:
        return None
    lines = as_text(content).split("\n")[: max(0, line - 1)]
    for text in reversed(lines):
        m = _REPO.match(text)
        if m:
            return m.group(1)
    return None


def pin_moves(diff: FileDiff, content: bytes | None) -> tuple[tuple[PinMove, ...], str | None]:
    """(moves, problem): the pins the diff moves when nothing else in the file changed;
    `problem` says why the diff is not a pins-only change (then moves may be partial).

    In each hunk the deleted lines pair, in order, with the added lines: each pair must
    be the same `uses:` action, or a `rev:` of the same hook repository, with only the
    ref and its comment changed. `content` is the file's new side (for a `repo:` the
    hunk does not show)."""
    moves: list[PinMove] = []
    if not diff.hunks:
        return (), "no changed lines"
    for hunk in diff.hunks:
        gone = [ln for ln in hunk if ln.kind == "-"]
        came = [ln for ln in hunk if ln.kind == "+"]
        if len(gone) != len(came):
            return tuple(moves), "lines were added or removed, not only pins moved"
        before: list[str] = []
        seen_new: dict[int, list[str]] = {}
        for ln in hunk:
            if ln.kind == "+":
                seen_new[ln.new] = list(before)
            if ln.kind != "-":
                before.append(as_text(ln.text))
        for old, new in zip(gone, came, strict=True):
            ot, nt = as_text(old.text), as_text(new.text)
            ou, nu = _USES.match(ot), _USES.match(nt)
            orv, nrv = _REV.match(ot), _REV.match(nt)
            if ou and nu:
                if ou.group(1) != nu.group(1) or ou.group(2) != nu.group(2):
                    return tuple(moves), f"line {new.new} changes which action is used"
                name = nu.group(2)
                m = _OWNER_REPO.match(name)
                upstream = m.group(1) if m and not name.startswith((".", "docker:")) else None
                o_ref, o_note, n_ref, n_note = ou.group(3), ou.group(4), nu.group(3), nu.group(4)
            elif orv and nrv:
                if orv.group(1) != nrv.group(1):
                    return tuple(moves), f"line {new.new} changes more than the rev"
                url = _hook_repo(seen_new.get(new.new, []), content, new.new)
                if url is None:
                    return tuple(moves), f"the hook repository of line {new.new} is not known"
                name = url
                m = _GITHUB_REPO.match(url)
                upstream = m.group(1) if m else None
                o_ref, o_note = orv.group(2), orv.group(3)
                n_ref, n_note = nrv.group(2), nrv.group(3)
            else:
                return tuple(moves), f"line {new.new} is not a pin"
            moves.append(
                PinMove(
                    name=name,
                    upstream=upstream,
                    old_ref=o_ref,
                    old_tag=_tag_of(o_ref, o_note),
                    new_ref=n_ref,
                    new_tag=_tag_of(n_ref, n_note),
                    line=new.new,
                )
            )
    if not moves:
        return (), "no pin moved"
    return tuple(moves), None


def lookups(moves: Iterable[PinMove]) -> set[tuple[str, str]]:
    """The (owner/repo, tag) pairs verifying `moves` needs."""
    out: set[tuple[str, str]] = set()
    for m in moves:
        if m.upstream is None:
            continue
        for tag in (m.old_tag, m.new_tag):
            if tag is not None:
                out.add((m.upstream, tag))
    return out


def _version(tag: str) -> tuple[tuple[int, ...], int, int] | None:
    m = _VERSION.match(tag)
    if m is None:
        return None
    nums = tuple(int(x) for x in m.group(1).split("."))
    nums = nums + (0,) * (4 - len(nums)) if len(nums) < 4 else nums  # 4 == 4.0.0
    return nums, _PRE_RANK[m.group(2)], int(m.group(3) or 0)


def _answer_problem(m: PinMove, ref: str, tag: str | None, tags: PinTags) -> str | None:
    if m.upstream is None or tag is None:
        return f"{_short(m.name)}: no tag to look up"
    answer = tags.answers.get((m.upstream, tag))
    if answer is None or not answer.exists:
        return f"{m.upstream} has no tag {tag}"
    if _HEX40.match(ref):
        if answer.commit is None:
            return f"the commit of {m.upstream} {tag} is not known"
        if answer.commit != ref:
            return f"{m.upstream} {tag} is {answer.commit[:12]}, not {ref[:12]}"
    return None


def _shape_problem(m: PinMove) -> str | None:
    """Why `m` cannot be a move to a newer released tag, before any look-up."""
    if m.upstream is None:
        return f"{_short(m.name)} is not a GitHub repository"
    if m.old_tag is None or m.new_tag is None:
        return f"{m.upstream}: a SHA pin without the tag it stands for (# vX.Y.Z)"
    old_v, new_v = _version(m.old_tag), _version(m.new_tag)
    if old_v is None or new_v is None:
        return f"{m.upstream}: {m.old_tag} → {m.new_tag} are not release versions"
    if new_v <= old_v:
        return f"{m.upstream}: {m.new_tag} is not newer than {m.old_tag}"
    return None


def verify(moves: tuple[PinMove, ...], problem: str | None, tags: PinTags | None) -> str | None:
    """None when every move goes to a newer released tag of its upstream, both SHAs
    being those tags' commits; else why the pins stay held."""
    if problem is not None:
        return problem
    for m in moves:
        why = _shape_problem(m)
        if why is not None:
            return why
    if tags is None:
        return LOCAL_RUN
    if tags.unavailable is not None:
        return tags.unavailable
    for m in moves:
        why = _answer_problem(m, m.old_ref, m.old_tag, tags) or _answer_problem(
            m, m.new_ref, m.new_tag, tags
        )
        if why is not None:
            return why
    return None


def pin_status(
    ctx: Context, entry: InventoryEntry, *, ci: bool
) -> tuple[tuple[PinMove, ...], str | None] | None:
    """(moves, why not verified or None) for a file whose change moves pins; None when
    the file is no pin file or its diff moves no pin at all."""
    if not pin_candidate(entry, ci=ci):
        return None
    diff = ctx.diff_of(entry)
    if diff is None:
        return None
    content = ctx.tree_files.get(entry.path) if ctx.tree_files is not None else None
    moves, problem = pin_moves(diff, content)
    if not moves and not any(_USES.match(t) or _REV.match(t) for t in _changed(diff)):
        return None
    return moves, verify(moves, problem, ctx.pin_tags)


def _changed(diff: FileDiff) -> Iterator[str]:
    for ln in (*diff.deleted, *diff.added):
        yield as_text(ln.text)
