"""Changes to CI, judged by what they can reach (SPEC §2.1). Pure.

Both sides of every changed workflow or composite action are parsed (`workflows`); a job
is privileged when the files grant it something (`Workflow.reach`) or a privileged job
`needs` it. The rules:

- `ci-privilege-changed` (HOLD): a grant added or widened, a `permissions` block removed,
  a side that does not parse (what it grants cannot be read).
- `ci-privileged-job-changed` (HOLD): what a privileged job runs was edited (its steps,
  `if`, `env`, `container`, `services`, the workflow's triggers or env), or a repository
  file it runs (a script named in `run:`, a `python -m` package, a local action, the
  Makefile, tox/nox/pre-commit configuration), other than a verified pin bump.
- `ci-action-unverified` (HOLD): in a privileged job a `uses:` added or changed to a
  reference that is not a full SHA verified as a release tag of the same repository; in
  any job a `uses:` moved from a full SHA to a tag or branch, or an action repository or
  image no base workflow used, by such a reference.
- `ci-audit-finding` (HOLD): a finding of the workflow auditor (zizmor) the base did not
  have, by audit id and location (a renamed job keeps its findings).
- `ci-workflow-changed` (ALLOW): the record of every changed CI file and the jobs it
  touched.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from gate.model import ChangeStatus, InventoryEntry, JsonDict
from gate.policy.context import Context, RawFinding, as_text, basename
from gate.policy.pinbump import LOCAL_RUN, PinTags
from gate.policy.workflows import (
    AuditFinding,
    Job,
    Workflow,
    WorkflowError,
    full_sha,
    is_workflow_file,
    parse_workflow,
    privileged_jobs,
    uses_parts,
    wants_ci_file,
)

__all__ = [
    "check_action_unverified",
    "check_audit_finding",
    "check_ci_workflow",
    "check_privilege",
    "check_privileged_job",
    "ci_lookups",
    "ci_record",
]

_VERSION = re.compile(r"^v?\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?$")
_COMMENT_TAG = re.compile(r"#\s*(?:tag\s*[:=]\s*)?(v?\d[\w.+-]*)")
_MAKE = ("make", re.compile(r"(?:^|[\s;&|(])make\b"))
# configuration files of the tools a job may run, by basename: (tool, how it is run)
_RUN_TOOL = {
    b"Makefile": _MAKE,
    b"makefile": _MAKE,
    b"GNUmakefile": _MAKE,
    b"tox.ini": ("tox", re.compile(r"\btox\b")),
    b"noxfile.py": ("nox", re.compile(r"\bnox\b")),
    b".pre-commit-config.yaml": ("pre-commit", re.compile(r"\bpre-commit\b")),
}
# a file named in `run:` that runs: a script (a requirements or data file named there is
# what a step reads, not what it runs; its installs are judged as dependencies)
_SCRIPT = re.compile(
    r"(?:\.(?:sh|bash|zsh|ksh|py|pyw|ps1|psm1|pl|rb|js|mjs|cjs|ts|bat|cmd|php|lua|r|jl|swift|go)"
    r"|(?:^|/)[^./]+)$",
    re.I,
)
_ROOT_ACTION = frozenset({"action.yml", "action.yaml", "Dockerfile"})
_PYTHON_M = re.compile(r"\bpython[0-9.]*\s+(?:-[A-Za-z]+\s+)*-m\s+([A-Za-z_][\w.]*)")


@lru_cache(maxsize=512)
def _parse(path: bytes, data: bytes) -> Workflow | str:
    try:
        return parse_workflow(path, data)
    except WorkflowError as e:
        return str(e)


def _where(path: bytes, job: str | None, line: int) -> str:
    who = f"job `{job}`" if job else "the workflow"
    return f"{as_text(path)}, {who}, line {line}"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pair:
    """One changed CI file: both sides parsed (None: the side does not exist)."""

    entry: InventoryEntry
    old: bytes | None
    new: bytes | None
    base: Workflow | None
    head: Workflow | None
    problem: str | None  # why a side could not be read
    renamed: Mapping[str, str]  # head job id -> base job id, for renamed jobs

    def base_job(self, head_id: str) -> Job | None:
        if self.base is None:
            return None
        return self.base.jobs.get(self.renamed.get(head_id, head_id))


def _renames(base: Workflow | None, head: Workflow | None) -> dict[str, str]:
    if base is None or head is None:
        return {}
    gone = {j.shape: j.id for j in base.jobs.values() if j.id not in head.jobs}
    return {
        j.id: gone[j.shape] for j in head.jobs.values() if j.id not in base.jobs and j.shape in gone
    }


def _pairs(ctx: Context) -> Iterator[_Pair]:
    ci = ctx.ci
    for e in ctx.inventory:
        old = (e.old_path or e.path) if e.status is not ChangeStatus.ADDED else None
        new = e.path if e.status is not ChangeStatus.DELETED else None
        if not any(p is not None and wants_ci_file(p) for p in (old, new)):
            continue
        if ci is None or ci.unreadable is not None:
            why = ci.unreadable if ci is not None else None
            yield _Pair(
                entry=e, old=old, new=new, base=None, head=None, renamed={},
                problem=why or "the workflow files of both sides were not read",
            )  # fmt: skip
            continue
        sides: list[Workflow | None] = []
        problem = None
        for label, side, files in (("base", old, ci.base), ("head", new, ci.head)):
            data = files.get(side) if side is not None and wants_ci_file(side) else None
            parsed = _parse(side, data) if side is not None and data is not None else None
            if isinstance(parsed, str):
                problem = f"the {label} side does not parse as a workflow ({parsed})"
                parsed = None
            sides.append(parsed)
        base, head = sides
        yield _Pair(
            entry=e, old=old, new=new, base=base, head=head, problem=problem,
            renamed=_renames(base, head),
        )  # fmt: skip


def _default_write(ctx: Context) -> bool:
    return ctx.spec.ci_default_token_write


def _privileged(ctx: Context, pair: _Pair) -> frozenset[str]:
    """Head job ids judged privileged: privileged on the head side, or (by their base
    id) on the base side."""
    dw = _default_write(ctx)
    head = privileged_jobs(pair.head, default_write=dw) if pair.head is not None else frozenset()
    if pair.base is None or pair.head is None:
        return head
    base = privileged_jobs(pair.base, default_write=dw)
    return head | {h for h in pair.head.jobs if pair.renamed.get(h, h) in base}


def _matrix_only(ctx: Context, entry: InventoryEntry) -> bool:
    from gate.policy.paths import matrix_only

    return matrix_only(ctx, entry)


def _verified_pin(ctx: Context, entry: InventoryEntry) -> bool:
    from gate.policy.paths import pin_hold_note

    return pin_hold_note(ctx, entry) == ""


# --- ci-privilege-changed -----------------------------------------------------------


def check_privilege(ctx: Context) -> Iterator[RawFinding]:
    from gate.policy.paths import is_ci_path

    for e in ctx.inventory:  # CI of other systems: not GitHub's files, not read here
        if not e.path.startswith(b".github/") and not wants_ci_file(e.path) and is_ci_path(e.path):
            yield RawFinding(
                e.path,
                f"{as_text(e.path)} {e.status.value}: CI configuration that is not a GitHub "
                "workflow: what it grants cannot be read",
            )
    for pair in _pairs(ctx):
        path = pair.new or pair.old or b""
        if _verified_pin(ctx, pair.entry) or (ctx.ci is None and _matrix_only(ctx, pair.entry)):
            continue  # pins or a test matrix only: nothing else changed, no grant can
        if pair.problem is not None:
            yield RawFinding(
                path, f"{as_text(path)}: {pair.problem}: what it grants cannot be read"
            )
            continue
        if pair.head is None or pair.head.action:
            continue
        dw = _default_write(ctx)
        for job in pair.head.jobs.values():
            before = pair.base_job(job.id)
            had = (
                {g for g, _ in pair.base.reach(before, default_write=dw)}
                if pair.base is not None and before is not None
                else set()
            )
            for grant, line in pair.head.reach(job, default_write=dw):
                if grant not in had:
                    yield RawFinding(path, f"{_where(path, job.id, line)}: adds {grant}", line=line)
            if (
                pair.base is not None
                and before is not None
                and (before.permissions or pair.base.permissions)
                and not (job.permissions or pair.head.permissions)
            ):
                yield RawFinding(
                    path,
                    f"{_where(path, job.id, job.line)}: its `permissions` block is removed, so it "
                    "falls back to the repository's default token, which the files cannot show",
                    line=job.line,
                )


# --- ci-privileged-job-changed ------------------------------------------------------


def _first_change(job: Job, before: Job) -> int:
    for i, step in enumerate(job.steps):
        if i >= len(before.steps) or before.steps[i].body != step.body:
            return step.line
    return job.line


def _runs_file(job: Job, path: bytes) -> str | None:
    """How `job` runs the repository file `path`, or None."""
    text = as_text(path)
    runs = "\n".join(s.run for s in job.steps if s.run is not None)
    for step in job.steps:
        local = (step.uses or "").strip()
        if local.startswith("./"):
            where = local.removeprefix("./").rstrip("/")
            # `./` is the repository's own action: its definition and image, not every file
            inside = text.startswith(where + "/") if where else text in _ROOT_ACTION
            if inside or text == where:
                return f"the local action `{local}`"
    if job.uses is not None and job.uses.strip().removeprefix("./") == text:
        return f"the reusable workflow `{job.uses}`"
    named = re.search(rf"(?:^|[\s'\"=/(]|\./){re.escape(text)}(?:$|[\s'\";&|)])", runs, re.M)
    if named and _SCRIPT.search(text):
        return f"`{text}` named in `run:`"
    tool = _MAKE if path.endswith(b".mk") else _RUN_TOOL.get(basename(path))
    if tool is not None and tool[1].search(job.text):
        return f"it runs {tool[0]}, which `{text}` configures"
    for m in _PYTHON_M.finditer(runs):
        package = m.group(1).split(".")[0]
        for root in ("", "src/"):
            if text.startswith(f"{root}{package}/") or text == f"{root}{package}.py":
                return f"`python -m {m.group(1)}`"
    return None


def check_privileged_job(ctx: Context) -> Iterator[RawFinding]:
    for pair in _pairs(ctx):
        if pair.head is None or pair.base is None or _verified_pin(ctx, pair.entry):
            continue
        path = pair.new or b""
        privileged = _privileged(ctx, pair)
        for job in pair.head.jobs.values():
            before = pair.base_job(job.id)
            if job.id not in privileged or before is None or before.body == job.body:
                continue
            line = _first_change(job, before)
            yield RawFinding(
                path,
                f"{_where(path, job.id, line)}: edits what a privileged job runs "
                f"(it reaches {_reach_words(pair.head, job, ctx)})",
                line=line,
            )
        if pair.head.context != pair.base.context and privileged:
            names = ", ".join(f"`{j}`" for j in sorted(privileged))
            yield RawFinding(
                path,
                f"{as_text(path)}, line {pair.head.context_line}: edits the triggers or the "
                f"workflow-level env of privileged job(s) {names}",
                line=pair.head.context_line,
            )
    yield from _files_run(ctx)


def _reach_words(wf: Workflow, job: Job, ctx: Context) -> str:
    grants = [g for g, _ in wf.reach(job, default_write=_default_write(ctx))]
    return ", ".join(grants) if grants else "what a privileged job that needs it uses"


def _files_run(ctx: Context) -> Iterator[RawFinding]:
    """Repository files that a privileged job (of either side) runs."""
    ci = ctx.ci
    if ci is None or ci.unreadable is not None:
        return
    dw = _default_write(ctx)
    jobs: list[tuple[bytes, Job, Workflow]] = []
    for files in (ci.head, ci.base):
        for p, data in sorted(files.items()):
            wf = _parse(p, data)
            if isinstance(wf, Workflow) and not wf.action:
                jobs += [(p, wf.jobs[j], wf) for j in sorted(privileged_jobs(wf, default_write=dw))]
    for e in ctx.inventory:
        if is_workflow_file(e.path) or _verified_pin(ctx, e):
            continue  # a workflow's own jobs are judged above; an action by its users
        for p, job, wf in jobs:
            how = _runs_file(job, e.path)
            if how is not None:
                yield RawFinding(
                    e.path,
                    f"{as_text(e.path)} {e.status.value}: the privileged job `{job.id}` of "
                    f"{as_text(p)} (line {job.line}) runs it ({how}); it reaches "
                    f"{_reach_words(wf, job, ctx)}",
                    line=job.line,
                )
                break


# --- ci-action-unverified -----------------------------------------------------------


def _comment_tag(data: bytes | None, line: int) -> str | None:
    if data is None:
        return None
    lines = as_text(data).split("\n")
    if not 0 < line <= len(lines):
        return None
    m = _COMMENT_TAG.search(lines[line - 1].partition("#")[1] + lines[line - 1].partition("#")[2])
    return m.group(1) if m else None


def _uses(job: Job) -> Iterator[tuple[str, int]]:
    for s in job.steps:
        if s.uses is not None:
            yield s.uses.strip(), s.line
    if job.uses is not None:
        yield job.uses.strip(), job.line
    for image, line in job.images:
        yield (image if image.startswith("docker://") else f"docker://{image}"), line


def _all_used(files: Mapping[bytes, bytes]) -> set[str]:
    out: set[str] = set()
    for p, data in files.items():
        wf = _parse(p, data)
        if isinstance(wf, Workflow):
            for job in wf.jobs.values():
                out |= {uses_parts(u)[0] for u, _ in _uses(job)}
    return out


def _verification(what: str, ref: str | None, tag: str | None, tags: PinTags | None) -> str | None:
    """None when `what@ref` is a full SHA that the release tag `tag` of the same
    repository points at; else why not."""
    if what.startswith("docker://"):
        return None if ref is not None and ref.startswith("sha256:") else "not pinned by digest"
    if ref is None or not full_sha(ref):
        return f"`{ref}` is not a full commit SHA"
    if tag is None or not _VERSION.match(tag):
        return "the SHA names no release tag (# vX.Y.Z)"
    if tags is None:
        return f"could not verify: {LOCAL_RUN}"
    if tags.unavailable is not None:
        return f"could not verify: {tags.unavailable}"
    answer = tags.answers.get((what, tag))
    if answer is None or not answer.exists:
        return f"{what} has no tag {tag}"
    if answer.commit != ref:
        return f"{what} {tag} is {(answer.commit or '?')[:12]}, not {ref[:12]}"
    return None


def _wanted_uses(ctx: Context, pair: _Pair) -> Iterator[tuple[Job, str, str, str | None, int]]:
    """(job, uses, what, ref, line) of the head side's uses the base's job lacked."""
    if pair.head is None:
        return
    for job in pair.head.jobs.values():
        before = pair.base_job(job.id)
        had = {u for u, _ in _uses(before)} if before is not None else set()
        for u, line in _uses(job):
            what, ref = uses_parts(u)
            if u not in had and not what.startswith((".", "/")):
                yield job, u, what, ref, line


def ci_lookups(ctx: Context) -> set[tuple[str, str]]:
    """The (owner/repo, tag) look-ups verifying the change's new `uses:` needs."""
    out: set[tuple[str, str]] = set()
    for pair in _pairs(ctx):
        data = ctx.ci.head.get(pair.new) if ctx.ci is not None and pair.new else None
        for _, _, what, ref, line in _wanted_uses(ctx, pair):
            tag = _comment_tag(data, line)
            if ref is not None and full_sha(ref) and tag is not None and "/" in what:
                out.add((what, tag))
    return out


def check_action_unverified(ctx: Context) -> Iterator[RawFinding]:
    base_used = _all_used(ctx.ci.base) if ctx.ci is not None else set()
    for pair in _pairs(ctx):
        if pair.head is None or _verified_pin(ctx, pair.entry):
            continue
        path = pair.new or b""
        data = ctx.ci.head.get(path) if ctx.ci is not None else None
        privileged = _privileged(ctx, pair)
        for job, u, what, ref, line in _wanted_uses(ctx, pair):
            why = _verification(what, ref, _comment_tag(data, line), ctx.pin_tags)
            if why is None:
                continue
            before = pair.base_job(job.id)
            was_sha = before is not None and any(
                uses_parts(b)[0] == what and full_sha(uses_parts(b)[1] or "")
                for b, _ in _uses(before)
            )
            if job.id in privileged or pair.head.action:
                what_done = "a privileged job uses" if not pair.head.action else "the action uses"
            elif was_sha and not full_sha(ref or ""):
                what_done = "moves from a full SHA to"
            elif what not in base_used:
                what_done = "brings in an action or image no base workflow used:"
            else:
                continue
            yield RawFinding(
                path, f"{_where(path, job.id, line)}: {what_done} `{u}` ({why})", line=line
            )


# --- ci-audit-finding ---------------------------------------------------------------


def _audit_key(
    f: AuditFinding, wf: Workflow | None, renamed: Mapping[str, str]
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """(location key, job key) of a finding: the audit id and the job (a renamed job by
    its base id), then the step by what it holds rather than its index (a step inserted
    above does not move a finding) and the keys below it."""
    route: tuple[object, ...] = f.route
    job_id = str(route[1]) if len(route) >= 2 and route[0] == "jobs" else "(action)"
    job = wf.jobs.get(job_id) if wf is not None else None
    rest = route[2:] if route[:1] == ("jobs",) else route[1:] if route[:1] == ("runs",) else route
    if rest[:1] == ("steps",) and len(rest) >= 2 and isinstance(rest[1], int) and job is not None:
        if rest[1] < len(job.steps):
            rest = ("steps", job.steps[rest[1]].body, *rest[2:])
    base_job = renamed.get(job_id, job_id)
    return (f.ident, base_job, *rest), (f.ident, base_job)


def check_audit_finding(ctx: Context) -> Iterator[RawFinding]:
    """New findings by location; where a location moved (a step edited) the same count
    of an audit in a job is not new."""
    ci = ctx.ci
    pairs = [
        p
        for p in _pairs(ctx)
        if p.new is not None and p.head is not None and not _verified_pin(ctx, p.entry)
    ]
    if not pairs or ci is None:
        return
    audit = ci.audit
    if audit is None or audit.unavailable is not None:
        why = audit.unavailable if audit is not None else "the workflow auditor did not run"
        for p in pairs:
            yield RawFinding(p.new, f"{as_text(p.new or b'')}: not audited: {why}")
        return
    for p in pairs:
        base = [_audit_key(f, p.base, {}) for f in audit.base if f.path == (p.old or b"")]
        head = [(f, *_audit_key(f, p.head, p.renamed)) for f in audit.head if f.path == p.new]
        seen = {at for at, _ in base}
        per_job = Counter(job for _, job in base)
        per_job.subtract(Counter(job for _, _, job in head))
        for f, at, job_key in head:
            if at in seen or per_job[job_key] >= 0:
                continue
            job = str(f.route[1]) if len(f.route) >= 2 and f.route[0] == "jobs" else None
            yield RawFinding(
                f.path,
                f"{_where(f.path, job, f.line)}: zizmor {f.ident}: {f.message}",
                line=f.line,
            )


# --- ci-workflow-changed (the record) -----------------------------------------------


def _touched(pair: _Pair) -> tuple[list[str], int | None]:
    """The jobs a change touched, in words, and the line of the first on the head side."""
    base = pair.base.jobs if pair.base is not None else {}
    head = pair.head.jobs if pair.head is not None else {}
    out = []
    lines = []
    for jid, job in head.items():
        before = pair.base_job(jid)
        if before is None:
            out.append(f"{jid} (added)")
        elif before.id != jid:
            out.append(f"{before.id} → {jid} (renamed)")
        elif before.shape != job.shape:
            out.append(jid)
        else:
            continue
        lines.append(job.line)
    kept = {pair.renamed.get(j, j) for j in head}
    out += [f"{j} (removed)" for j in base if j not in kept]
    return out, min(lines) if lines else None


def check_ci_workflow(ctx: Context) -> Iterator[RawFinding]:
    from gate.policy.paths import is_ci_path, matrix_only, pin_hold_note
    from gate.policy.pins import pins_suffix

    for pair in _pairs(ctx):
        note = pin_hold_note(ctx, pair.entry)
        if note == "" or matrix_only(ctx, pair.entry):
            continue
        path = pair.new or pair.old or b""
        touched, line = _touched(pair)
        jobs = ", ".join(touched) or "none (comments, names or layout)"
        tail = pins_suffix(ctx, pair.entry, path) + (note or "")
        where = f"{as_text(path)}{f', line {line}' if line else ''}"
        yield RawFinding(
            path, f"{where}: {pair.entry.status.value} (jobs touched: {jobs}){tail}", line=line
        )
    for e in ctx.inventory:  # other files of action directories: judged by what runs them
        if e.path.startswith(b".github/") and not wants_ci_file(e.path) and is_ci_path(e.path):
            yield RawFinding(e.path, f"CI file {e.status.value}")


def ci_record(ctx: Context) -> JsonDict:
    """What the receipt records of the changed workflows: the repository default token
    assumed (`ci.default-token`) and the jobs that rely on it (no `permissions` anywhere)."""
    pairs = list(_pairs(ctx))
    if not pairs:
        return {}
    jobs = [
        f"{as_text(p.head.path)}#{job.id}"
        for p in pairs
        if p.head is not None
        for job in p.head.jobs.values()
        if p.head.on_default_token(job)
    ]
    return {
        "default_token": "write" if _default_write(ctx) else "read",
        "jobs_on_default_token": sorted(jobs),
    }
