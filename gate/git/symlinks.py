"""Symlink chains resolved against the whole tree (issue 16).

A link's text alone does not say where it leads: `a/b -> ..` stays inside, but
`up -> a/b/..` walks through `a/b` first and ends one level above the root. Resolution
here follows the kernel's rules over the tree's own entries (components left to right,
each symlink met on the way replaced by its target, read from the link's directory), up
to MAX_HOPS links per resolution; more counts as escaping (the kernel's ELOOP would
refuse it, a tool that resolves further might not).

A loop is told apart (issue 46): a link met again while its own target is still being
walked (`a -> b`, `b -> a`; `a -> a`; `d -> d/x`) would be walked again the same way for
ever, wherever the resolution started. It does not leave the tree, and says so: its chain
(`a -> b -> a`) is what the policy names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

import pygit2
from pygit2.enums import FileMode

__all__ = ["MAX_HOPS", "MAX_LINKS", "LinkFaults", "link_faults"]

MAX_HOPS = 40  # Linux follows at most 40 links in one lookup
MAX_LINKS = 10_000  # links of one tree resolved; beyond this, each is judged by its text
_LINK = int(FileMode.LINK)
_TREE = int(FileMode.TREE)


def _links(repo: pygit2.Repository, tree: pygit2.Tree) -> dict[bytes, bytes]:
    """path -> target of the tree's symlinks (the first MAX_LINKS found)."""
    out: dict[bytes, bytes] = {}
    stack: list[tuple[bytes, pygit2.Tree]] = [(b"", tree)]
    while stack and len(out) < MAX_LINKS:
        prefix, node = stack.pop()
        for entry in node:
            path = prefix + (entry.raw_name or b"")
            mode = int(entry.filemode)
            if mode == _TREE:
                stack.append((path + b"/", repo[entry.id].peel(pygit2.Tree)))
            elif mode == _LINK:
                out[path] = bytes(repo.odb.read(entry.id)[1])
    return out


class _Ends(Enum):
    INSIDE = "inside"
    ESCAPES = "escapes"
    LOOPS = "loops"


def _walk(link: bytes, links: dict[bytes, bytes]) -> tuple[_Ends, set[bytes], tuple[bytes, ...]]:
    """Where `link`'s resolution ends, the links it passed, and for a loop its chain: the
    links whose targets were being walked, from `link`, and the one met again."""
    passed = {link}
    walking = [link]  # links whose targets are being walked, outermost first
    stack = link.split(b"/")[:-1]
    target = links[link]
    if target.startswith(b"/"):
        return _Ends.ESCAPES, passed, ()
    # components still to walk, next last; None where a link's target ends
    todo: list[bytes | None] = [None, *reversed(target.split(b"/"))]
    hops = 1
    while todo:
        comp = todo.pop()
        if comp is None:
            walking.pop()
            continue
        if comp in (b"", b"."):
            continue
        if comp == b"..":
            if not stack:
                return _Ends.ESCAPES, passed, ()
            stack.pop()
            continue
        stack.append(comp)
        here = b"/".join(stack)
        sub = links.get(here)
        if sub is None:
            continue
        if here in walking:  # its target, walked from its own directory, comes back here
            return _Ends.LOOPS, passed, (*walking, here)
        passed.add(here)
        hops += 1
        if hops > MAX_HOPS or sub.startswith(b"/"):
            return _Ends.ESCAPES, passed, ()
        stack.pop()
        walking.append(here)
        todo.append(None)
        todo.extend(reversed(sub.split(b"/")))
    return _Ends.INSIDE, passed, ()


@dataclass(frozen=True, slots=True)
class LinkFaults:
    """The symlinks of a tree that cannot be resolved inside it.

    `escaping`: links that resolve outside the root, and the links such a resolution
    passes through (the patch may have added only the link in the middle of the chain).
    `loops`: link -> the chain of a resolution that never ends: its own (`a -> b -> a`; a
    link on the way into a loop, `c -> a -> b -> a`), or, for a link that resolves but that
    such a resolution passes through, that resolution's (a chain that does not name it). A
    link is in one of them at most."""

    escaping: frozenset[bytes]
    loops: Mapping[bytes, tuple[bytes, ...]]


def link_faults(repo: pygit2.Repository, tree: pygit2.Tree) -> LinkFaults:
    """Every symlink of `tree` whose resolution leaves the root or never ends, or that
    such a resolution passes through.

    Raises:
        pygit2.GitError: an object cannot be read (the caller translates it).
    """
    links = _links(repo, tree)
    walks = {link: _walk(link, links) for link in links}
    loops = {link: chain for link, (ends, _, chain) in walks.items() if ends is _Ends.LOOPS}
    # a loop more than MAX_HOPS links deep reads as escaping to whoever entered it: its own
    # links still say what they are
    escaping = {p for ends, passed, _ in walks.values() if ends is _Ends.ESCAPES for p in passed}
    escaping -= loops.keys()
    through: dict[bytes, tuple[bytes, ...]] = {}
    for ends, passed, chain in walks.values():
        if ends is _Ends.LOOPS:
            for p in sorted(passed - loops.keys() - escaping):
                through.setdefault(p, chain)
    return LinkFaults(escaping=frozenset(escaping), loops={**loops, **through})
