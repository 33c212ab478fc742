"""Deterministic policy: (inventory, patch, PolicySpec) -> decision and findings (SPEC §2, §3).

Pure. Every rule of the catalog (`gate.policy.catalog`) reads every effect — each inventory
entry and each added/deleted line of the patch; nothing stops early; the worst decision
wins (DENY > HOLD > ALLOW). `policy.rules` in the config overrides a built-in rule's
decision; `policy.protected` / `policy.deny` add path rules (glob semantics in
`gate.policy.paths`). Findings of ALLOW rules are still recorded: the receipt shows what
was seen even when nobody needs to look.

The policy fingerprint binds an approval to the rules it was given under: SHA-256 over
the canonical JSON of the catalog version, every rule id with its default and effective
decision, the user rules, budgets, blast-radius thresholds, the checks' egress allowlists
(only when some check has one) and the config path. Any change to the effective policy
changes it; nothing else does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from gate.model import (
    ChangeStatus,
    Decision,
    Finding,
    InventoryEntry,
    JsonDict,
    PolicyResult,
    PolicySpec,
    Sha256,
    worst_decision,
)
from gate.policy.blast import ImportCache, RawImport, Thresholds, blast_radius
from gate.policy.catalog import CATALOG
from gate.policy.ci import ci_lookups, ci_record
from gate.policy.context import Context, Rule, basename
from gate.policy.manifests import (
    PYTHON_READ_WHOLE,
    is_build_time_path,
    is_lockfile,
    is_requirements_file,
)
from gate.policy.manifests import wants_tree_file as _manifest_or_source
from gate.policy.patch import FileDiff, parse_patch
from gate.policy.paths import (
    glob_match,
    glob_problem,
    is_ci_path,
    is_git_plumbing_path,
)
from gate.policy.pinbump import MAX_LOOKUPS, PinTags, TagAnswer, lookups, pin_candidate, pin_moves
from gate.policy.scan import scan_changed
from gate.policy.testing import is_pytest_config
from gate.policy.workflows import AuditFinding, CiAudit, CiFiles, wants_ci_file
from gate.util.journal import canonical_json

__all__ = [
    "CATALOG_VERSION",
    "DEFAULT_CONFIG_PATH",
    "MAX_LOOKUPS",
    "RULES",
    "AuditFinding",
    "CiAudit",
    "CiFiles",
    "PinTags",
    "Rule",
    "TagAnswer",
    "Thresholds",
    "binary_scan_paths",
    "wants_base_file",
    "effective_decisions",
    "evaluate",
    "fingerprint",
    "glob_match",
    "pin_lookups",
    "glob_problem",
    "validate_rule_ids",
    "wants_ci_file",
    "wants_tree_file",
    "wants_tree_imports_only",
    "wants_tree_path_only",
]

# Bump whenever a rule's id, default or behaviour changes: it is part of the fingerprint,
# so an approval given under an older catalog no longer applies.
# 2: module-shadowing and test-config-changed added; tests-skipped reads `__test__`,
#    `collect_ignore` and module-level `pytestmark`; tests-deleted reads single tests.
# 3: compiled-code-added, plugin-metadata-added, test-plugin-added; binary-* leave
#    compiled code to compiled-code-added; tests-skipped reads Python with `ast`;
#    thresholds come from the spec; symlink chains resolve against the tree;
#    test-config-changed ignores marker registrations.
# 4: pin-bump-verified (a pins-only move to a newer released tag, looked up, is not held
#    by ci-workflow-changed / build-hook-changed); dependency-changed holds a requirements
#    file only when a check or the project's packaging reads it; tox.ini, noxfile.py,
#    .pre-commit-config.yaml and Makefiles are build hooks only when a check runs their
#    tool; ci-matrix-changed (a workflow's test matrix only) is not held;
#    assertions-removed fires on one assertion fewer; a test file renamed to a name
#    pytest does not collect is tests-deleted.
# 5: SPEC §2.1, CI judged by reach: ci-privilege-changed, ci-privileged-job-changed,
#    ci-action-unverified, ci-audit-finding hold; ci-workflow-changed is the ALLOW record
#    of the jobs a change touched; `ci.default-token` is part of the fingerprint.
#    Also: blast-radius-future holds a change whose import graph did not complete,
#    naming why (a large tree gets no weaker rules than a small one: issue 46).
CATALOG_VERSION: Final[str] = "5"
DEFAULT_CONFIG_PATH: Final[str] = ".github/proofgate.yml"

RULES: Mapping[str, Rule] = MappingProxyType({r.id: r for r, _ in CATALOG})


def validate_rule_ids(spec: PolicySpec) -> list[str]:
    """Ids in `spec.rules` that name no built-in rule (sorted); empty when all are known."""
    return sorted({rid for rid, _ in spec.rules if rid not in RULES})


def effective_decisions(spec: PolicySpec) -> dict[str, Decision]:
    """Each rule id's decision after `policy.rules` overrides (later entries win).

    Raises:
        ValueError: `spec.rules` names an unknown rule (the config loader rejects these
            first, with a key path; see `validate_rule_ids`).
    """
    unknown = validate_rule_ids(spec)
    if unknown:
        raise ValueError(f"unknown policy rule ids: {', '.join(unknown)}")
    out = {rid: r.default for rid, r in RULES.items()}
    out.update(dict(spec.rules))
    return out


def fingerprint(
    spec: PolicySpec,
    *,
    config_path: str = DEFAULT_CONFIG_PATH,
    thresholds: Thresholds | None = None,
) -> Sha256:
    """SHA-256 (hex) of the canonical JSON of the effective policy. `thresholds`
    defaults to the spec's own (`policy.thresholds`).

    Raises:
        ValueError: unknown rule ids in `spec.rules`.
    """
    effective = effective_decisions(spec)
    doc: JsonDict = {
        "catalog_version": CATALOG_VERSION,
        "rules": {
            rid: {"default": r.default.value, "effective": effective[rid].value}
            for rid, r in RULES.items()
        },
        "overrides": {rid: d.value for rid, d in sorted(dict(spec.rules).items())},
        "protected": list(spec.protected),
        "deny": list(spec.deny),
        "budgets": {"files": spec.budgets.files, "lines": spec.budgets.lines},
        "thresholds": _thresholds(spec, thresholds).to_dict(),
        "config_path": config_path,
        **({"egress": {name: list(hosts) for name, hosts in spec.egress}} if spec.egress else {}),
        **({"commands": list(spec.commands)} if spec.commands else {}),
        **({"ci": {"default-token": "write"}} if spec.ci_default_token_write else {}),
    }
    return Sha256(hashlib.sha256(canonical_json(doc)).hexdigest())


def binary_scan_paths(inventory: Sequence[InventoryEntry], *, max_bytes: int) -> frozenset[bytes]:
    """Binary regular files the patch adds or changes, smallest first, up to `max_bytes`
    in total (by the inventory's sizes): what to supply as `evaluate(binary_files=...)`."""
    wanted = sorted(
        (e.size or 0, e.path)
        for e in inventory
        if e.binary and e.new_mode in (0o100644, 0o100755) and e.status is not ChangeStatus.DELETED
    )
    out: set[bytes] = set()
    total = 0
    for size, path in wanted:
        total += size
        if total > max_bytes:
            break
        out.add(path)
    return frozenset(out)


def wants_tree_file(path: bytes) -> bool:
    """Files of the proven tree the policy reads when given (`evaluate(tree_files=...)`):
    Python sources, structured manifests, lockfiles, and every file pytest may read its
    configuration from."""
    return _manifest_or_source(path) or is_pytest_config(path)


def wants_tree_imports_only(path: bytes) -> bool:
    """Python files of the proven tree whose contents no rule reads when unchanged: only
    their imports (`evaluate(tree_imports=...)`) and that they exist (b"" in
    `tree_files`), so a large tree's sources need not be held at once (issue 46)."""
    return path.endswith(b".py") and basename(path) not in PYTHON_READ_WHOLE


def wants_tree_path_only(path: bytes) -> bool:
    """Files of the proven tree of which, unchanged, only the existence matters
    (lockfiles: `lockfile-drift`): b"" in `tree_files` is enough, however large they are."""
    return is_lockfile(path) and not is_requirements_file(path) and not is_pytest_config(path)


def wants_base_file(entry: InventoryEntry) -> bytes | None:
    """The base path whose contents `evaluate(base_files=...)` wants for this entry: the
    old side of a changed Python file (tests: `tests-skipped`; other code:
    `harness-tampering`) or of a file pytest may read its configuration from (compared
    parsed, `test-config-changed`); None for anything else."""
    old = entry.old_path or entry.path
    if entry.status is ChangeStatus.ADDED or entry.binary:
        return None
    if is_pytest_config(old):
        return old
    if entry.status is ChangeStatus.DELETED:
        return None
    return old if old.endswith(b".py") else None


def pin_lookups(
    inventory: Sequence[InventoryEntry],
    patch: bytes,
    tree_files: Mapping[bytes, bytes] | None = None,
    ci: CiFiles | None = None,
) -> set[tuple[str, str]]:
    """The (owner/repo, tag) look-ups that verifying the change's pin bumps and the
    SHAs of its new `uses:` (given both sides' CI files, `ci`) needs: what to answer as
    `evaluate(pin_tags=...)` (at most MAX_LOOKUPS are worth making)."""
    diffs = parse_patch(patch)
    by_path = {d.path: d for d in diffs}
    out: set[tuple[str, str]] = set()
    if ci is not None:
        out |= ci_lookups(_context(inventory, diffs, PolicySpec(), ci=ci))
    for e in inventory:
        d = by_path.get(e.path)
        if d is None or not pin_candidate(e, ci=is_ci_path(e.path)):
            continue
        content = tree_files.get(e.path) if tree_files is not None else None
        moves, problem = pin_moves(d, content)
        if problem is None:
            out |= lookups(moves)
    return out


def _context(
    inventory: Sequence[InventoryEntry], diffs: Sequence[FileDiff], spec: PolicySpec, *, ci: CiFiles
) -> Context:
    """A context with no tree, blast radius or thresholds: for the look-ups' questions."""
    by_path: dict[bytes, FileDiff] = {}
    for d in diffs:
        by_path.setdefault(d.path, d)
    return Context(
        inventory=(*inventory, *_synthesized(diffs, inventory)),
        diffs=by_path,
        spec=spec,
        config_path=b"",
        tree_files=None,
        binary_files=None,
        base_files=None,
        blast_scores={},
        thresholds={},
        ci=ci,
    )


def _thresholds(spec: PolicySpec, given: Thresholds | None) -> Thresholds:
    if given is not None:
        return given
    return Thresholds(immediate=spec.thresholds[0], future=spec.thresholds[1])


def _synthesized(
    diffs: Sequence[FileDiff], inventory: Sequence[InventoryEntry]
) -> list[InventoryEntry]:
    """Entries for files the patch changes but the inventory lacks: no effect goes unread."""
    known = {e.path for e in inventory} | {e.old_path for e in inventory if e.old_path}
    out: list[InventoryEntry] = []
    for d in diffs:
        if d.path in known or (d.old_path is not None and d.old_path in known):
            continue
        if d.new_path is None:
            status = ChangeStatus.DELETED
        elif d.old_path is None:
            status = ChangeStatus.ADDED
        elif d.old_path != d.new_path:
            status = ChangeStatus.RENAMED
        else:
            status = ChangeStatus.MODIFIED
        out.append(
            InventoryEntry(
                path=d.path,
                status=status,
                old_path=d.old_path if status is ChangeStatus.RENAMED else None,
                binary=d.binary,
                lines_added=len(d.added),
                lines_deleted=len(d.deleted),
            )
        )
        known.add(d.path)
    return out


def evaluate(
    inventory: Sequence[InventoryEntry],
    patch: bytes,
    spec: PolicySpec,
    *,
    config_path: str = DEFAULT_CONFIG_PATH,
    thresholds: Thresholds | None = None,
    tree_files: Mapping[bytes, bytes] | None = None,
    binary_files: Mapping[bytes, bytes] | None = None,
    base_files: Mapping[bytes, bytes] | None = None,
    import_cache: ImportCache | None = None,
    pin_tags: PinTags | None = None,
    ci: CiFiles | None = None,
    tree_imports: Mapping[bytes, tuple[RawImport, ...] | None] | None = None,
    unanalyzed: str | None = None,
) -> PolicyResult:
    """Judge a change. Pure; total over any patch bytes.

    `tree_files` (optional) maps paths of the proven tree to their contents. The policy
    reads changed `pyproject.toml` / `package.json` / `Cargo.toml` from it to tell which
    section a changed line is in (without it, a line whose section the patch does not
    show counts as a build-hook and dependency change), uses its paths to know that a
    lockfile exists (`lockfile-drift`), and the blast radius builds the import graph from
    its `*.py` files. Supply the files `wants_tree_file` selects (lockfiles may map to
    b""); with None the import-graph analyzer is recorded as not run. Content that
    disagrees with the patch's new side is ignored.

    `binary_files` (optional) maps paths of binary files the patch adds or changes to
    their new contents (`binary_scan_paths` selects them, bounded): the secrets rules
    read them, since one NUL byte makes git call a private-key file binary.
    `base_files` (optional) maps the old paths of changed Python files to their
    contents in the base (`wants_base_file` selects them): `tests-skipped` then reads
    both copies of a test file with `ast` (import aliases, marker objects, raised skip
    exceptions) rather than line patterns, and `harness-tampering` does not count what
    the base's copy of a file already did. `thresholds` defaults to the spec's
    `policy.thresholds`. `import_cache` (optional) holds the imports of files by git blob
    id, read and added to by the blast radius (see `blast.ImportCache`); it changes no
    result. `pin_tags` (optional) are the upstreams' answers to `pin_lookups`: with them a
    change that only moves pins to newer released tags is `pin-bump-verified`; without
    them (a local run) such a change stays held and the finding says why. `ci` (optional)
    holds both sides' workflow and action files whole (`wants_ci_file` selects them) and the
    auditor's findings: the CI rules judge a change to them by what it can reach (SPEC
    §2.1); without them a changed workflow is held, what it grants unread.
    `tree_imports` (optional) are the imports of the tree's Python files that
    `tree_files` holds no contents for (it may map them to b""): a large tree's import
    graph without its sources in memory. `unanalyzed` (optional) says why the import
    graph cannot be complete; it is recorded as not run, and a `policy.thresholds.future`
    then holds the change, naming why (a large tree gets no weaker rules than a small one).

    Raises:
        ValueError: unknown rule ids in `spec.rules` (see `validate_rule_ids`).
    """
    effective = effective_decisions(spec)
    diffs = parse_patch(patch)
    entries = (*inventory, *_synthesized(diffs, inventory))
    by_path: dict[bytes, FileDiff] = {}
    for d in diffs:
        by_path.setdefault(d.path, d)
    cfg = config_path.encode("utf-8", "surrogateescape")
    thresholds = _thresholds(spec, thresholds)

    def sensitive(p: bytes) -> bool:
        return (
            p == cfg
            or is_ci_path(p)
            or is_git_plumbing_path(p)
            or any(glob_match(g, p) for g in (*spec.protected, *spec.deny))
        )

    imports: ImportCache = import_cache if import_cache is not None else {}
    scans = scan_changed(by_path.values(), tree_files, base_files, imports)
    blast = blast_radius(
        entries,
        build_time=lambda p: is_build_time_path(p) or is_ci_path(p) or is_git_plumbing_path(p),
        ci=is_ci_path,
        sensitive=sensitive,
        tree_files=tree_files,
        thresholds=thresholds,
        import_cache=imports,
        tree_imports=tree_imports,
        unanalyzed=unanalyzed,
    )
    # not supplied (a caller's choice, or no proven tree: never PROVEN) is not incomplete
    incomplete = {"future": unanalyzed} if unanalyzed is not None else {}
    th = thresholds
    ctx = Context(
        inventory=entries,
        diffs=by_path,
        spec=spec,
        config_path=cfg,
        tree_files=tree_files,
        binary_files=binary_files,
        base_files=base_files,
        blast_scores={"immediate": blast.immediate, "future": blast.future},
        thresholds={"immediate": th.immediate, "future": th.future},
        pin_tags=pin_tags,
        ci=ci,
        scans=scans,
        incomplete=incomplete,
    )
    found: set[Finding] = set()
    for rule, check in CATALOG:  # every rule, every effect: nothing stops early
        decision = effective[rule.id]
        for raw in check(ctx):
            found.add(
                Finding(
                    rule=rule.id,
                    decision=decision,
                    path=raw.path,
                    line=raw.line,
                    message=raw.message,
                )
            )
    findings = tuple(sorted(found, key=lambda f: (f.path or b"", f.line or 0, f.rule, f.message)))
    return PolicyResult(
        decision=worst_decision([f.decision for f in findings]),
        findings=findings,
        fingerprint=fingerprint(spec, config_path=config_path, thresholds=thresholds),
        blast_radius=blast.detail,
        ci=ci_record(ctx),
    )
