"""CI files as GitHub reads them, and what each job can reach (SPEC §2.1). Pure.

A workflow (`.github/workflows/*.y{a,}ml`, reusable ones included) or a composite action
(`**/action.y{a,}ml`) is parsed with YAML 1.1's safe loader, as GitHub reads it (the bare
key `on` is the boolean True there), bounded in bytes, nodes and depth, keeping each
value's line. A job's reach is what the files grant it: `permissions` write scopes or
`id-token: write` (the workflow's or the job's, `write-all`), a secret other than
`GITHUB_TOKEN`, `secrets: inherit`, an `environment`, a runner that is not GitHub-hosted,
a trigger that runs with privileges on untrusted input. The repository's default token is
not in the files: a job with no `permissions` anywhere relies on it, and reaches a write
token only when the base config says `ci: {default-token: write}`.

What lies one step outside the lists here: a GitHub-hosted label added after this list
was written counts as self-hosted (held, not missed); a secret reached other than through
a `secrets.` expression (an action reading `GITHUB_TOKEN` from its default input) reaches
no more than the job's token, which `permissions` already shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gate.policy.context import basename

if TYPE_CHECKING:
    import yaml

__all__ = [
    "MAX_CI_FILE_BYTES",
    "AuditFinding",
    "CiAudit",
    "CiFiles",
    "PRIVILEGED_TRIGGERS",
    "Job",
    "Step",
    "Workflow",
    "WorkflowError",
    "is_action_file",
    "is_workflow_file",
    "full_sha",
    "parse_workflow",
    "privileged_jobs",
    "uses_parts",
    "wants_ci_file",
]

MAX_CI_FILE_BYTES = 1024 * 1024
_MAX_NODES = 200_000
_MAX_DEPTH = 64

# Triggers that run with secrets or a write token on input an outsider controls: what a
# pull request's author writes (a comment, a review, a title), what its own CI reports
# back (a check run or suite, a commit status, a deployment status: branch names and
# outputs of the pull request's runs), or an event any GitHub user causes.
PRIVILEGED_TRIGGERS = frozenset(
    {
        "pull_request_target",
        "workflow_run",
        "issue_comment",
        "issues",
        "pull_request_review",
        "pull_request_review_comment",
        "discussion",
        "discussion_comment",
        "check_run",
        "check_suite",
        "status",
        "deployment_status",
        "fork",
        "watch",
        "gollum",
    }
)
# GitHub-hosted runner labels (standard and larger runners). Anything else is a runner
# the repository provides: it reaches the network and the machine it sits on.
_HOSTED = re.compile(
    r"^(?:ubuntu|windows|macos)-(?:latest|slim|[0-9][0-9.]*)"
    r"(?:-arm|-arm64|-intel)?(?:-large|-xlarge)?$"
)
_SECRET = re.compile(r"\bsecrets\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_-]*)|\[\s*['\"]([^'\"]+)['\"])")
_DYNAMIC_SECRET = re.compile(r"\bsecrets\s*\[\s*[^'\"\s]|\btoJSON\s*\(\s*secrets\s*\)", re.I)
_MATRIX_KEY = re.compile(r"\bmatrix\.([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)")
_LITERAL = re.compile(r"'([^']*)'")
# what remains of an expression once its matrix keys, literals and operators are gone
_EXPR = re.compile(r"\bmatrix(?:\.[A-Za-z0-9_-]+)+|'[^']*'|\|\||&&|[()!=<>]")
_OTHER_CONTEXT = re.compile(r"[A-Za-z_]")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")

Value = object  # a parsed YAML value: dict[str, Value] | list[Value] | str | int | ...
Route = tuple[str | int, ...]


class WorkflowError(ValueError):
    """A CI file that cannot be read as GitHub reads it."""


def is_workflow_file(path: bytes) -> bool:
    return path.startswith(b".github/workflows/") and path.endswith((b".yml", b".yaml"))


def is_action_file(path: bytes) -> bool:
    return basename(path) in (b"action.yml", b"action.yaml")


def wants_ci_file(path: bytes) -> bool:
    """The files SPEC §2.1 parses on both sides: workflows and action definitions."""
    return is_workflow_file(path) or is_action_file(path)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    index: int
    line: int
    uses: str | None
    run: str | None
    body: str  # canonical JSON: two steps are the same step when these are equal


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One job (or, for a composite action, its steps as the job `(action)`)."""

    id: str
    line: int
    grants: tuple[tuple[str, int], ...]  # what the job's own keys grant, with the line
    permissions: bool  # the job declares `permissions`
    needs: tuple[str, ...]
    steps: tuple[Step, ...]
    uses: str | None  # a reusable workflow it calls
    images: tuple[tuple[str, int], ...]  # container and service images
    body: str  # canonical JSON of what runs: steps, if, env, container, services, uses, ...
    shape: str  # canonical JSON of the whole job less its name: a renamed job keeps it
    text: str  # every string the job holds, for the scripts and packages it runs


@dataclass(frozen=True, slots=True, kw_only=True)
class Workflow:
    path: bytes
    action: bool  # a composite action rather than a workflow
    triggers: tuple[str, ...]
    grants: tuple[tuple[str, int], ...]  # the workflow-level ones: triggers, permissions
    permissions: bool  # the workflow declares `permissions`
    context: str  # canonical JSON of the triggers and workflow-level env
    context_line: int
    jobs: Mapping[str, Job] = field(default_factory=dict)

    def reach(self, job: Job, *, default_write: bool) -> tuple[tuple[str, int], ...]:
        """Everything `job` can reach, with the line that grants it."""
        out = list(self.grants) + list(job.grants)
        if not job.permissions and not self.permissions and not self.action and default_write:
            out.append(("the repository's default token (ci.default-token: write)", job.line))
        return tuple(out)

    def on_default_token(self, job: Job) -> bool:
        return not self.action and not job.permissions and not self.permissions


# --- YAML with lines --------------------------------------------------------------


@dataclass(slots=True)
class _Doc:
    lines: dict[Route, int]
    nodes: int = 0


def _load(data: bytes) -> tuple[Value, dict[Route, int]]:
    import yaml  # the safe loader: YAML 1.1, as GitHub reads workflows

    if len(data) > MAX_CI_FILE_BYTES:
        raise WorkflowError(f"{len(data)} bytes, more than {MAX_CI_FILE_BYTES}")
    try:
        text = data.decode("utf-8")
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise WorkflowError(str(e).replace("\n", " ")) from e
    if node is None:
        raise WorkflowError("an empty document")
    doc = _Doc(lines={})
    try:
        value = _value(loader, node, (), doc, 0)
    except yaml.YAMLError as e:
        raise WorkflowError(str(e).replace("\n", " ")) from e
    return value, doc.lines


def _value(loader: yaml.SafeLoader, node: yaml.Node, route: Route, doc: _Doc, depth: int) -> Value:
    import yaml

    doc.nodes += 1
    if doc.nodes > _MAX_NODES or depth > _MAX_DEPTH:
        raise WorkflowError(f"more than {_MAX_NODES} values or {_MAX_DEPTH} levels")
    doc.lines.setdefault(route, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Value] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise WorkflowError(f"line {k.start_mark.line + 1}: a key that is not a scalar")
            key_value = loader.construct_object(k)
            # YAML 1.1: the bare key `on` (or `yes`) is the boolean True to the loader;
            # GitHub reads it as the trigger key, so its text is the key
            key = k.value if not isinstance(key_value, str) else key_value
            if key in out:
                raise WorkflowError(f"line {k.start_mark.line + 1}: duplicate key {key!r}")
            doc.lines[(*route, key)] = k.start_mark.line + 1
            out[key] = _value(loader, v, (*route, key), doc, depth + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_value(loader, v, (*route, i), doc, depth + 1) for i, v in enumerate(node.value)]
    return loader.construct_object(node)


# --- reading a workflow --------------------------------------------------------------


def _dict(v: Value) -> dict[str, Value]:
    return v if isinstance(v, dict) else {}


def _list(v: Value) -> list[Value]:
    return v if isinstance(v, list) else []


def _canon(v: Value) -> str:
    return json.dumps(v, sort_keys=True, default=str, separators=(",", ":"))


def _strings(v: Value) -> Iterator[str]:
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield str(k)
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)


def _routed_strings(v: Value, route: Route) -> Iterator[tuple[Route, str]]:
    if isinstance(v, str):
        yield route, v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield (*route, k), str(k)
            yield from _routed_strings(x, (*route, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _routed_strings(x, (*route, i))


def _triggers(on: Value) -> tuple[str, ...]:
    if isinstance(on, str):
        return (on,)
    if isinstance(on, list):
        return tuple(str(t) for t in on)
    return tuple(str(t) for t in _dict(on))


def _permission_grants(
    perms: Value, lines: dict[Route, int], route: Route, line: int
) -> list[tuple[str, int]]:
    if isinstance(perms, str):
        return [(f"permissions: {perms}", line)] if perms.strip() == "write-all" else []
    out = []
    for scope, level in _dict(perms).items():
        if str(level).strip() == "write":
            out.append((f"permissions {scope}: write", lines.get((*route, scope), line)))
    return out


def _secrets(text: str) -> set[str]:
    found = {m.group(1) or m.group(2) for m in _SECRET.finditer(text)}
    if _DYNAMIC_SECRET.search(text):
        found.add("(a secret chosen at run time)")
    return {s for s in found if s.upper() != "GITHUB_TOKEN"}


def _runner_labels(job: dict[str, Value]) -> list[str]:
    runs_on = job.get("runs-on")
    if isinstance(runs_on, dict):
        group = runs_on.get("group")
        labels = _list(runs_on.get("labels")) or [runs_on.get("labels")]
        out = [f"group {group}"] if group is not None else []
        return out + [str(x) for x in labels if x is not None]
    if isinstance(runs_on, list):
        return [str(x) for x in runs_on]
    return [] if runs_on is None else [str(runs_on)]


def _at_path(value: Value, path: list[str]) -> Value:
    for key in path:
        value = _dict(value).get(key)
    return value


def _matrix_values(job: dict[str, Value], key: str) -> list[str] | None:
    """Every value `matrix.key` takes (`key` may be a path: `config.os`); None when the
    matrix or a value comes from an expression."""
    raw = _dict(job.get("strategy")).get("matrix")
    if isinstance(raw, str):
        return None
    matrix = _dict(raw)
    first, *rest = key.split(".")
    found: list[Value] = []
    values = matrix.get(first)
    if isinstance(values, list):
        found += [_at_path(v, rest) for v in values]
    elif values is not None:
        return None
    found += [_at_path(_dict(inc).get(first), rest) for inc in _list(matrix.get("include"))]
    out = [v for v in found if v is not None]
    if any(not isinstance(v, str) or "${{" in v for v in out):
        return None
    return [str(v) for v in out]


def _label_values(job: dict[str, Value], label: str) -> list[str] | None:
    """The labels `label` may stand for: itself, or for an expression the values of the
    `matrix` keys it reads and the string literals it holds (`${{ matrix.os ||
    'ubuntu-latest' }}`); None when it reads anything else (an input, a variable)."""
    text = label.strip()
    if "${{" not in text:
        return [text]
    expr = _EXPR.sub(" ", text.replace("${{", " ").replace("}}", " "))
    if _OTHER_CONTEXT.search(expr):
        return None
    out = _LITERAL.findall(text)
    for key in _MATRIX_KEY.findall(text):
        values = _matrix_values(job, key)
        if values is None:
            return None
        out += values
    return out or None


def _self_hosted(job: dict[str, Value]) -> list[str]:
    out = []
    for label in _runner_labels(job):
        values = _label_values(job, label)
        if not values:
            out.append(label)
            continue
        out += [v for v in values if not _HOSTED.match(v.strip())]
    return out


def _job(job_id: str, raw: Value, lines: dict[Route, int], route: Route) -> Job:
    job = _dict(raw)
    line = lines.get(route, 0)

    def at(*key: str | int) -> int:
        return lines.get((*route, *key), line)

    grants: list[tuple[str, int]] = []
    if "permissions" in job:
        grants += _permission_grants(
            job["permissions"], lines, (*route, "permissions"), at("permissions")
        )
    named: dict[str, int] = {}
    for where, value in _routed_strings(job, route):
        for name in _secrets(value):
            named.setdefault(name, lines.get(where, line))
    grants += [(f"secret {name}", at_line) for name, at_line in sorted(named.items())]
    if str(job.get("secrets", "")).strip() == "inherit":
        grants.append(("secrets: inherit", at("secrets")))
    if job.get("environment") is not None:
        env = job["environment"]
        grants.append((f"environment {_dict(env).get('name', env)}", at("environment")))
    for label in _self_hosted(job):
        grants.append((f"a runner that is not GitHub-hosted ({label})", at("runs-on")))
    steps = []
    for i, s in enumerate(_list(job.get("steps"))):
        step = _dict(s)
        uses, run = step.get("uses"), step.get("run")
        steps.append(
            Step(
                index=i,
                line=lines.get((*route, "steps", i), line),
                uses=str(uses) if uses is not None else None,
                run=str(run) if run is not None else None,
                body=_canon(s),
            )
        )
    images = []
    container = job.get("container")
    if container is not None:
        image = _dict(container).get("image") if isinstance(container, dict) else container
        if image is not None:
            images.append((str(image), at("container")))
    for name, svc in _dict(job.get("services")).items():
        image = _dict(svc).get("image") if isinstance(svc, dict) else svc
        if image is not None:
            images.append((str(image), lines.get((*route, "services", name), line)))
    needs = job.get("needs") or []
    runs = {
        k: job.get(k)
        for k in (
            "steps",
            "if",
            "env",
            "container",
            "services",
            "uses",
            "with",
            "defaults",
            "secrets",
        )
    }
    return Job(
        id=job_id,
        line=line,
        grants=tuple(grants),
        permissions="permissions" in job,
        needs=tuple(str(n) for n in (needs if isinstance(needs, list) else [needs])),
        steps=tuple(steps),
        uses=str(job["uses"]) if job.get("uses") is not None else None,
        images=tuple(images),
        body=_canon(runs),
        shape=_canon({k: v for k, v in job.items() if k != "name"}),
        text="\n".join(_strings(job)),
    )


def parse_workflow(path: bytes, data: bytes) -> Workflow:
    """A workflow or composite action as GitHub reads it.

    Raises:
        WorkflowError: it is not YAML GitHub would run (too large, not a mapping,
            aliases out of bounds, duplicate keys, no jobs).
    """
    doc, lines = _load(data)
    if not isinstance(doc, dict):
        raise WorkflowError("not a mapping")
    if is_action_file(path) and not is_workflow_file(path):
        runs = _dict(doc.get("runs"))
        job = _job("(action)", {"steps": runs.get("steps", []), "runs": runs}, lines, ("runs",))
        images = job.images
        if str(runs.get("using", "")).strip() == "docker" and runs.get("image") is not None:
            images = (*images, (str(runs["image"]), lines.get(("runs", "image"), 1)))
        uses = tuple(
            Step(index=-1, line=lines.get(("runs", k), 1), uses=None, run=str(runs[k]), body="")
            for k in ("pre", "main", "post")
            if runs.get(k) is not None
        )
        job = Job(
            id=job.id,
            line=job.line,
            grants=job.grants,
            permissions=False,
            needs=(),
            steps=job.steps + uses,
            uses=None,
            images=images,
            body=_canon(runs),
            shape=_canon(runs),
            text=job.text,
        )
        return Workflow(
            path=path,
            action=True,
            triggers=(),
            grants=(),
            permissions=False,
            context="",
            context_line=1,
            jobs={job.id: job},
        )
    on = doc.get("on")
    triggers = _triggers(on)
    on_line = lines.get(("on",), 1)
    grants = [
        (f"trigger {t}", lines.get(("on", t), on_line))
        for t in triggers
        if t in PRIVILEGED_TRIGGERS
    ]
    if "permissions" in doc:
        grants += _permission_grants(
            doc["permissions"], lines, ("permissions",), lines.get(("permissions",), 1)
        )
    for where, value in _routed_strings(doc.get("env"), ("env",)):
        grants += [(f"secret {s} (workflow env)", lines.get(where, 1)) for s in _secrets(value)]
    jobs_raw = doc.get("jobs")
    if not isinstance(jobs_raw, dict):
        raise WorkflowError("no `jobs` mapping")
    jobs = {str(k): _job(str(k), v, lines, ("jobs", k)) for k, v in jobs_raw.items()}
    return Workflow(
        path=path,
        action=False,
        triggers=triggers,
        grants=tuple(grants),
        permissions="permissions" in doc,
        context=_canon({"on": on, "env": doc.get("env")}),
        context_line=on_line,
        jobs=jobs,
    )


def privileged_jobs(wf: Workflow, *, default_write: bool) -> frozenset[str]:
    """The jobs that reach something, and every job one of them `needs`, directly or
    through others (its outputs and artifacts are what the privileged job uses)."""
    out = {j.id for j in wf.jobs.values() if wf.reach(j, default_write=default_write)}
    todo = list(out)
    while todo:
        job = wf.jobs.get(todo.pop())
        for n in job.needs if job is not None else ():
            if n not in out:
                out.add(n)
                todo.append(n)
    return frozenset(out)


def full_sha(ref: str) -> bool:
    return bool(_HEX40.match(ref))


def uses_parts(uses: str) -> tuple[str, str | None]:
    """(what, ref): `owner/repo` (sub-path dropped) and the ref for an action,
    `docker://image` and its tag or digest, a local path and None."""
    u = uses.strip()
    if u.startswith("./") or u.startswith("../"):
        return u, None
    if u.startswith("docker://"):
        image = u.removeprefix("docker://")
        if "@" in image:
            name, digest = image.split("@", 1)
            return f"docker://{name}", digest
        name, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
        return f"docker://{name}", tag or "latest"
    name, _, ref = u.partition("@")
    parts = name.split("/")
    return "/".join(parts[:2]), ref or None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditFinding:
    """One finding of the workflow auditor (zizmor): its audit id, the file, where in
    the file by keys (`jobs`, job id, `steps`, index: stable when lines shift) and line."""

    ident: str
    path: bytes
    route: Route
    line: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CiAudit:
    """The auditor's findings on both sides, or why there are none."""

    base: tuple[AuditFinding, ...] = ()
    head: tuple[AuditFinding, ...] = ()
    unavailable: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CiFiles:
    """Both sides' workflow and action files (`wants_ci_file`), whole: what the CI
    rules judge. `unreadable` says why they could not be read (too large)."""

    base: Mapping[bytes, bytes] = field(default_factory=dict)
    head: Mapping[bytes, bytes] = field(default_factory=dict)
    audit: CiAudit | None = None
    unreadable: str | None = None
