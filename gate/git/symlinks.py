"""Symlink chains resolved against the whole tree (issue 16).

A link's text alone does not say where it leads: `a/b -> ..` stays inside, but
`up -> a/b/..` walks through `a/b` first and ends one level above the root. Resolution
here follows the kernel's rules over the tree's own entries (components left to right,
each symlink met on the way replaced by its target, read from the link's directory), up
to MAX_HOPS links per resolution; more counts as escaping (the kernel's ELOOP would
refuse it, a tool that resolves further might not).
"""

from __future__ import annotations

import pygit2
from pygit2.enums import FileMode

__all__ = ["MAX_HOPS", "MAX_LINKS", "escaping_links"]

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


def _walk(link: bytes, links: dict[bytes, bytes]) -> tuple[bool, set[bytes]]:
    """(whether `link` resolves outside the root, the links the resolution passed)."""
    passed = {link}
    stack = link.split(b"/")[:-1]
    target = links[link]
    if target.startswith(b"/"):
        return True, passed
    todo = list(reversed(target.split(b"/")))  # components still to walk, next last
    hops = 1
    while todo:
        comp = todo.pop()
        if comp in (b"", b"."):
            continue
        if comp == b"..":
            if not stack:
                return True, passed
            stack.pop()
            continue
        stack.append(comp)
        here = b"/".join(stack)
        sub = links.get(here)
        if sub is None:
            continue
        passed.add(here)
        hops += 1
        if hops > MAX_HOPS or sub.startswith(b"/"):
            return True, passed
        stack.pop()
        todo.extend(reversed(sub.split(b"/")))
    return False, passed


def escaping_links(repo: pygit2.Repository, tree: pygit2.Tree) -> frozenset[bytes]:
    """Every symlink of `tree` that takes part in a resolution leaving the root: links
    that resolve outside, and the links such a resolution passes through (the patch may
    have added only the link in the middle of the chain).

    Raises:
        pygit2.GitError: an object cannot be read (the caller translates it).
    """
    links = _links(repo, tree)
    out: set[bytes] = set()
    for link in links:
        escapes, passed = _walk(link, links)
        if escapes:
            out |= passed
    return frozenset(out)
