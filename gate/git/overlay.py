"""Trees for the differential (SPEC §3.1), written into the private object store only.

`overlay(store, onto, source, selected)` is `onto` with every selected path taken from
`source`: selected paths of `onto` that `source` lacks are removed, selected paths of
`source` are added or replace what `onto` had. The trusted tree is
`overlay(proven, base, is_trusted_test)`; the proving tree `overlay(base, head, is_test)`.
"""

from __future__ import annotations

from collections.abc import Callable

import pygit2
from pygit2.enums import FileMode

__all__ = ["overlay"]

Entry = tuple[pygit2.Oid, int]


def _flatten(
    repo: pygit2.Repository, tree: pygit2.Tree, prefix: bytes, out: dict[bytes, Entry]
) -> None:
    for entry in tree:
        path = prefix + (entry.raw_name or b"")
        mode = int(entry.filemode)
        if mode == int(FileMode.TREE):
            _flatten(repo, repo[entry.id].peel(pygit2.Tree), path + b"/", out)
        else:
            out[path] = (entry.id, mode)


def _write(repo: pygit2.Repository, files: dict[bytes, Entry]) -> pygit2.Oid:
    here: dict[bytes, Entry] = {}
    below: dict[bytes, dict[bytes, Entry]] = {}
    for path, entry in files.items():
        head, sep, rest = path.partition(b"/")
        if sep:
            below.setdefault(head, {})[rest] = entry
        else:
            here[head] = entry
    builder = repo.TreeBuilder()
    for name, (oid, mode) in sorted(here.items()):
        builder.insert(name.decode("utf-8", "surrogateescape"), oid, mode)
    for name, sub in sorted(below.items()):
        if name in here:  # a file and a directory of one name: the directory's files win
            builder.remove(name.decode("utf-8", "surrogateescape"))
        builder.insert(name.decode("utf-8", "surrogateescape"), _write(repo, sub), FileMode.TREE)
    return builder.write()


def overlay(
    repo: pygit2.Repository,
    onto: pygit2.Oid,
    source: pygit2.Oid,
    selected: Callable[[bytes], bool],
) -> pygit2.Oid:
    """`onto` with its selected paths replaced by `source`'s selected paths; the new tree
    is written into `repo` (the private store).

    Raises:
        KeyError: a tree is not in the store.
    """
    base: dict[bytes, Entry] = {}
    _flatten(repo, repo[onto].peel(pygit2.Tree), b"", base)
    theirs: dict[bytes, Entry] = {}
    _flatten(repo, repo[source].peel(pygit2.Tree), b"", theirs)
    files = {p: e for p, e in base.items() if not selected(p)}
    files.update({p: e for p, e in theirs.items() if selected(p)})
    return _write(repo, files)
