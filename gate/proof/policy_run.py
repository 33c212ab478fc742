"""The policy as a proof runs it: its inputs read through the evidence port (issue 16).

`gate.policy` is pure; this reads what it wants from the proven tree, bounded, and is
the one function `prove` and `benchmarks/replay.py` both call, so the replay figures
measure the policy the product runs. The blast radius's per-file analysis (a Python
file's imports) is kept in the per-user cache by git blob id, so only files whose blob
was never seen are parsed, and a repeated proof of the same tree parses nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from gate import policy
from gate.errors import TagLookupError
from gate.git.interface import EvidenceSource
from gate.model import BlobId, Evidence, PolicyResult, PolicySpec
from gate.policy import blast
from gate.proof import workflow_audit
from gate.util import usercache

__all__ = [
    "MAX_ANALYZED_BYTES",
    "MAX_CI_BYTES",
    "MAX_PARSED_BYTES",
    "MAX_SCANNED_BINARY_BYTES",
    "TagOracle",
    "import_index",
    "judge_policy",
    "look_up_tags",
    "read_ci_files",
]


class TagOracle(Protocol):
    """What an upstream repository calls its tags (the Action: the GitHub API)."""

    def tag(self, repository: str, tag: str) -> policy.TagAnswer:
        """`repository` is owner/name; an answer with exists=False for no such tag.

        Raises:
            TagLookupError: the look-up could not be made.
        """
        ...


def look_up_tags(oracle: TagOracle | None, wanted: set[tuple[str, str]]) -> policy.PinTags | None:
    """The answers to `wanted` (None without an oracle: a local run). Every look-up or
    none: one failure, or more than policy.MAX_LOOKUPS wanted, verifies nothing."""
    if oracle is None:
        return None
    if len(wanted) > policy.MAX_LOOKUPS:
        return policy.PinTags(
            unavailable=f"{len(wanted)} tag look-ups wanted, more than {policy.MAX_LOOKUPS}"
        )
    answers: dict[tuple[str, str], policy.TagAnswer] = {}
    for repository, tag in sorted(wanted):
        try:
            answers[(repository, tag)] = oracle.tag(repository, tag)
        except TagLookupError as e:
            return policy.PinTags(unavailable=f"the tag look-up failed: {e}")
    return policy.PinTags(answers=answers)


MAX_ANALYZED_BYTES = 64 * 1024 * 1024  # manifests, lockfiles, changed sources held at once
# The import graph reads the tree's other Python files one at a time (their imports by blob
# id from the cache, else parsed): memory does not grow with the tree; this bounds the
# time a cold cache costs, and beyond it the analysis is named incomplete (issue 46).
MAX_PARSED_BYTES = 512 * 1024 * 1024
MAX_SCANNED_BINARY_BYTES = 16 * 1024 * 1024  # binary additions the secrets rules read
MAX_CI_BYTES = 8 * 1024 * 1024  # each side's workflow and action files, read whole

Imports = tuple[blast.RawImport, ...] | None  # a file's imports; None: it does not parse


def _decode_imports(raw: object) -> Imports:
    """One cached entry back into the analysis's value; ValueError if it is not one."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ValueError("not a list of imports")
    out: list[blast.RawImport] = []
    for item in raw:
        match item:
            case [int() as level, str() as module, list() as names] if all(
                isinstance(n, str) for n in names
            ):
                out.append((level, module, tuple(names)))
            case _:
                raise ValueError("not an import")
    return tuple(out)


def _encode_imports(value: Imports) -> object:
    return None if value is None else [[lvl, mod, list(names)] for lvl, mod, names in value]


def import_index(directory: Path | None = None) -> usercache.BlobIndex[Imports]:
    """The blast radius's imports by blob id, from the per-user cache (or `directory`)."""
    return usercache.BlobIndex(
        "imports",
        blast.IMPORTS_VERSION,
        decode=_decode_imports,
        encode=_encode_imports,
        directory=directory,
    )


def read_ci_files(evidence: EvidenceSource, ev: Evidence) -> policy.CiFiles:
    """Both sides' workflow and action files, whole (SPEC §2.1), and zizmor's findings on
    the ones the change touches: what the CI rules judge. Every proof reads them, since a
    script a privileged job runs is judged by the workflow that runs it.

    Raises:
        RepoError: a tree is not readable.
    """
    sides = []
    for tree in (ev.base.tree, ev.proven_tree or ev.head.tree):
        files = evidence.read_tree_files(tree, policy.wants_ci_file, max_bytes=MAX_CI_BYTES)
        if files is None:
            return policy.CiFiles(
                unreadable=f"the workflow and action files are more than {MAX_CI_BYTES} bytes"
            )
        sides.append(files)
    base, head = sides
    changed = {p for e in ev.inventory for p in (e.path, e.old_path) if p is not None}
    touched = [p for p in changed if policy.wants_ci_file(p)]
    audit = None
    if touched:
        audit = workflow_audit.audit(
            {p: base[p] for p in touched if p in base}, {p: head[p] for p in touched if p in head}
        )
    return policy.CiFiles(base=base, head=head, audit=audit)


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n} bytes"


def _tree_imports(
    evidence: EvidenceSource,
    ids: dict[bytes, BlobId],
    index: usercache.BlobIndex[Imports],
    changed: list[bytes],
    present: list[bytes],
) -> tuple[dict[bytes, Imports], str | None]:
    """The imports the import graph needs of the tree's unchanged Python files (`ids`:
    path -> blob id; `present`: the tree's other Python files): from `index` where it has
    them; of the others, each read once for its words and only those that could import a
    changed module or one of its importers parsed (`blast.GraphReader`), up to
    MAX_PARSED_BYTES anew; past that, why the import graph is incomplete."""
    known: dict[bytes, Imports] = {}
    reader = blast.GraphReader(changed, [*ids, *present])
    for path, blob in sorted(ids.items()):
        if blob in index:
            known[path] = index[blob]
            reader.add(path, known[path])
        else:
            reader.unknown(path, blast.import_words(evidence.read_blob(blob), reader.words))
    parsed = 0
    while want := reader.wanted():
        for path in sorted(want):
            source = evidence.read_blob(ids[path])
            parsed += len(source)
            if parsed > MAX_PARSED_BYTES:
                return known, (
                    f"the tree's Python sources not yet in the cache that the import graph "
                    f"needs are over the {_size(MAX_PARSED_BYTES)} it parses in one run "
                    f"({len(known)} of {len(ids)} files read)"
                )
            known[path] = found = blast.imports_from_source(source)
            reader.add(path, found)
            if len(source) <= blast.MAX_PARSE_BYTES:
                index[ids[path]] = found
    return known, None


def judge_policy(
    evidence: EvidenceSource,
    ev: Evidence,
    spec: PolicySpec,
    *,
    config_path: str,
    imports: usercache.BlobIndex[Imports] | None = None,
    tags: TagOracle | None = None,
) -> PolicyResult:
    """The policy as `prove` runs it (and benchmarks/replay.py measures it): the proven
    tree's manifests and changed files (up to MAX_ANALYZED_BYTES; unchanged lockfiles by
    name only), the
    imports of its other Python files (read one at a time, up to MAX_PARSED_BYTES parsed
    anew; past either bound the import graph is named incomplete, never silently weaker),
    the binary files the patch adds (up to MAX_SCANNED_BINARY_BYTES, read from head's
    tree when no proven tree was computed) and the base's copies of the changed Python
    files (as much again). The imports of the tree's Python files come from `imports`
    (default: `import_index()`) where it has them; what was parsed anew is saved there.
    With `tags` (the Action's GitHub API) the tags that the change's pin bumps and new
    `uses:` SHAs name are looked up, so a verified bump is not held. Both sides' workflow
    files are read whole (`read_ci_files`).

    Raises:
        RepoError: a tree is not readable.
    """
    tree_files = binary_files = None
    tree_imports: dict[bytes, Imports] | None = None
    unanalyzed = None
    index = imports
    if ev.proven_tree is not None:
        index = index if index is not None else import_index()
        changed = {p for e in ev.inventory for p in (e.path, e.old_path) if p is not None}

        def by_id(p: bytes) -> bool:  # unchanged files whose contents are not held
            return p not in changed and (
                policy.wants_tree_imports_only(p) or policy.wants_tree_path_only(p)
            )

        tree_files = evidence.read_tree_files(
            ev.proven_tree,
            lambda p: policy.wants_tree_file(p) and not by_id(p),
            max_bytes=MAX_ANALYZED_BYTES,
        )
        listed = evidence.read_tree_blob_ids(ev.proven_tree, by_id)
        ids = {p: b for p, b in listed.items() if policy.wants_tree_imports_only(p)}
        if tree_files is None:
            unanalyzed = (
                "the proven tree's manifests and changed Python files are over "
                f"the {_size(MAX_ANALYZED_BYTES)} the policy reads"
            )
        else:
            tree_files.update(dict.fromkeys(listed, b""))  # present; imports below
            changed_py = sorted(p for p in changed if p.endswith(b".py"))
            present = [p for p in tree_files if p.endswith(b".py") and p not in ids]
            tree_imports, unanalyzed = _tree_imports(evidence, ids, index, changed_py, present)
    binaries = policy.binary_scan_paths(ev.inventory, max_bytes=MAX_SCANNED_BINARY_BYTES)
    if binaries:
        binary_files = evidence.read_tree_files(
            ev.proven_tree or ev.head.tree,
            binaries.__contains__,
            max_bytes=MAX_SCANNED_BINARY_BYTES,
        )
    base_files: dict[bytes, bytes] = {}
    budget = MAX_SCANNED_BINARY_BYTES
    for e in ev.inventory:
        old = policy.wants_base_file(e)
        if old is None or (e.old_size or 0) > budget:
            continue
        found = evidence.read_blob_at(ev.base.commit, old.decode("utf-8", "surrogateescape"))
        if found is not None:
            base_files[old] = found[1]
            budget -= len(found[1])
    ci = read_ci_files(evidence, ev)
    wanted = policy.pin_lookups(ev.inventory, ev.patch.data, tree_files, ci)
    pin_tags = look_up_tags(tags, wanted) if wanted else None
    result = policy.evaluate(
        ev.inventory,
        ev.patch.data,
        spec,
        config_path=config_path,
        tree_files=tree_files,
        binary_files=binary_files,
        base_files=base_files,
        import_cache=index,
        pin_tags=pin_tags if tags is not None else None,
        ci=ci,
        tree_imports=tree_imports,
        unanalyzed=unanalyzed,
    )
    if index is not None:
        index.save()
    return result
