"""A local stand-in for the GitHub REST API: a real HTTP server on 127.0.0.1.

It implements the 14 operations of `openapi-subset.json` over in-memory state and validates
every request and every response against that description with openapi-core. Anything that
does not match is recorded in `violations`; the pytest fixture fails the test when the list
is not empty at the end. Every request is recorded in `requests`, so tests can assert what
the client did (e.g. that no second check run was created).

Fault knobs (`inject`): 5xx before or after processing, a 403 secondary rate limit with a
`retry-after` header and GitHub's documented message, slow responses (client timeouts), and
per-repository `checks_write=False`, which answers check-run writes with GitHub's
403 "Resource not accessible by integration". Fault responses are not in the operations'
documented response lists, so their bodies are validated against `basic-error` instead.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

from openapi_core.testing import MockRequest, MockResponse
from openapi_schema_validator import OAS30Validator

from tests.github_standin import spec

OUTPUT_LIMIT_BYTES = 65535
SECONDARY_RATE_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID "
    "DBA4:2E6A:5F0C1:6F3A1:65A0B1C2."
)
NOT_ACCESSIBLE_MESSAGE = "Resource not accessible by integration"
SPEC_HOST = "https://api.github.com"

JsonObj = dict[str, object]


@dataclass
class Fault:
    """One injected failure, consumed by the next `times` requests to `operation`.

    kind: "server-error" (502 before processing), "server-error-after" (processed, then
    502: the client cannot know it worked), "secondary-rate-limit" (403 + retry-after),
    "slow" (process the request, then sleep `delay` seconds before answering: the
    client times out although the call took effect), "too-many-requests" (429 +
    retry-after), "together" (the next `times` requests each wait, at most `delay`
    seconds, until all of them have arrived, then are processed: two clients racing).
    """

    operation: str
    kind: str
    times: int = 1
    delay: float = 0.0
    retry_after: int = 1
    barrier: threading.Barrier | None = None

    def __post_init__(self) -> None:
        if self.kind == "together":
            self.barrier = threading.Barrier(self.times, timeout=self.delay or 30.0)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str  # as received, including any GHES prefix
    operation: str | None
    status: int
    body: object
    query: tuple[tuple[str, str], ...]


@dataclass
class Repo:
    full_name: str
    id: int
    default_branch: str = "main"
    fork: bool = False
    checks_write: bool = True


@dataclass
class Pull:
    number: int
    head_sha: str
    head_ref: str
    head_repo: str  # full name; differs from the base repository for a fork
    base_ref: str
    base_sha: str
    user: str
    state: str = "open"


@dataclass
class Review:
    id: int
    user: str
    state: str
    commit_id: str
    submitted_at: str
    body: str = ""


@dataclass
class CheckRun:
    id: int
    repo: str
    head_sha: str
    name: str
    status: str
    conclusion: str | None
    external_id: str | None
    details_url: str | None
    started_at: str | None
    completed_at: str | None
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    annotations: list[JsonObj] = field(default_factory=list)
    actions: list[JsonObj] = field(default_factory=list)


@dataclass
class Status:
    id: int
    sha: str
    state: str
    context: str
    description: str | None
    target_url: str | None
    created_at: str


@dataclass
class Answer:
    status: int
    body: object
    headers: dict[str, str] = field(default_factory=dict)
    documented: bool = True  # False: validate the body against basic-error only


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


_SEG = r"(?P<{}>[^/]+)"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = []


def _route(method: str, template: str, operation: str) -> None:
    pattern = re.escape(template)
    for name in re.findall(r"\{(\w+)\}", template):
        pattern = pattern.replace(re.escape("{" + name + "}"), _SEG.format(name))
    _ROUTES.append((method, re.compile(f"^{pattern}$"), operation))


_route("GET", "/repos/{owner}/{repo}", "repos/get")
_route("POST", "/repos/{owner}/{repo}/check-runs", "checks/create")
_route("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}", "checks/get")
_route("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", "checks/update")
_route(
    "GET",
    "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations",
    "checks/list-annotations",
)
_route(
    "GET",
    "/repos/{owner}/{repo}/collaborators/{username}/permission",
    "repos/get-collaborator-permission-level",
)
# `ref` of repos/get-commit is `x-multi-segment` (`tags/TAG_NAME`); see _validated_path
_route("GET", "/repos/{owner}/{repo}/commits/tags/{tag}", "repos/get-commit")
_route("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs", "checks/list-for-ref")
_route("GET", "/repos/{owner}/{repo}/commits/{ref}/statuses", "repos/list-commit-statuses-for-ref")
_route("GET", "/repos/{owner}/{repo}/commits/{ref}/status", "repos/get-combined-status-for-ref")
_route("GET", "/repos/{owner}/{repo}/commits/{ref}", "repos/get-commit")
_route("POST", "/repos/{owner}/{repo}/statuses/{sha}", "repos/create-commit-status")
_route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", "pulls/get")
_route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", "pulls/list-reviews")
_route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}", "pulls/get-review")


def _rewrite_urls(node: object, api_url: str, web_url: str) -> object:
    """Point every URL of an example at the stand-in (PyGithub follows `url` fields)."""
    if isinstance(node, dict):
        return {k: _rewrite_urls(v, api_url, web_url) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite_urls(v, api_url, web_url) for v in node]
    if isinstance(node, str):
        if node.startswith(SPEC_HOST):
            return api_url + node[len(SPEC_HOST) :]
        if node.startswith("https://github.com"):
            return web_url + node[len("https://github.com") :]
    return node


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Answer:
    body = {
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": str(status),
    }
    return Answer(status, body, headers or {}, documented=False)


class GitHubStandIn:
    """The server and its state. Use `start()`/`stop()` (or the fixture)."""

    def __init__(self, *, base_path: str = "", token: str = "test-token") -> None:  # noqa: S107
        self.base_path = base_path.rstrip("/")
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.pulls: dict[tuple[str, int], Pull] = {}
        self.reviews: dict[tuple[str, int], list[Review]] = {}
        self.permissions: dict[tuple[str, str], tuple[str, str]] = {}
        self.runs: dict[int, CheckRun] = {}
        self.statuses: dict[tuple[str, str], list[Status]] = {}
        self.commit_trees: dict[tuple[str, str], str] = {}
        self.tags: dict[tuple[str, str], str] = {}  # (repo, tag) -> the commit it names
        self.requests: list[Recorded] = []
        self.violations: list[str] = []
        self.faults: list[Fault] = []
        self._ids = itertools.count(1001)
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> GitHubStandIn:
        standin = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                standin._serve(self)

            def do_POST(self) -> None:  # noqa: N802
                standin._serve(self)

            def do_PATCH(self) -> None:  # noqa: N802
                standin._serve(self)

            def do_PUT(self) -> None:  # noqa: N802
                standin._serve(self)

            def do_DELETE(self) -> None:  # noqa: N802
                standin._serve(self)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            if self._thread is not None and self._thread.is_alive():
                self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """What GITHUB_API_URL would be: `.../api/v3` in GHES mode."""
        return self.root + self.base_path

    @property
    def web_url(self) -> str:
        return self.root + "/web"

    # --- state helpers for tests -------------------------------------------------------

    def add_repo(self, full_name: str, *, default_branch: str = "main") -> Repo:
        with self._lock:
            repo = Repo(full_name=full_name, id=next(self._ids), default_branch=default_branch)
            self.repos[full_name] = repo
            return repo

    def add_pull(
        self,
        full_name: str,
        number: int,
        *,
        head_sha: str,
        base_sha: str,
        base_ref: str = "main",
        head_ref: str = "feature",
        head_repo: str | None = None,
        user: str = "contributor",
    ) -> Pull:
        with self._lock:
            pull = Pull(
                number=number,
                head_sha=head_sha,
                head_ref=head_ref,
                head_repo=head_repo or full_name,
                base_ref=base_ref,
                base_sha=base_sha,
                user=user,
            )
            self.pulls[(full_name, number)] = pull
            return pull

    def set_commit_tree(self, full_name: str, sha: str, tree: str) -> None:
        """What repos/get-commit answers as `commit.tree.sha` for `sha`."""
        with self._lock:
            self.commit_trees[(full_name, sha)] = tree

    def add_tag(self, full_name: str, tag: str, sha: str) -> None:
        """A tag of `full_name` (added as a repository if it is not one): what
        repos/get-commit answers for `tags/TAG`. Pin bumps' verification reads it."""
        with self._lock:
            if full_name not in self.repos:
                self.add_repo(full_name)
            self.tags[(full_name, tag)] = sha

    def set_permission(
        self, full_name: str, login: str, permission: str, role_name: str | None = None
    ) -> None:
        with self._lock:
            self.permissions[(full_name, login)] = (permission, role_name or permission)

    def add_review(
        self,
        full_name: str,
        number: int,
        *,
        user: str,
        state: str,
        commit_id: str,
        submitted_at: str = "2026-01-02T03:04:05Z",
    ) -> Review:
        with self._lock:
            review = Review(
                id=next(self._ids),
                user=user,
                state=state,
                commit_id=commit_id,
                submitted_at=submitted_at,
            )
            self.reviews.setdefault((full_name, number), []).append(review)
            return review

    def inject(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)

    def check_runs(self, *, head_sha: str | None = None) -> list[CheckRun]:
        with self._lock:
            return [r for r in self.runs.values() if head_sha is None or r.head_sha == head_sha]

    def calls(self, operation: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.operation == operation]

    # --- HTTP ------------------------------------------------------------------------

    def _take_fault(self, operation: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.operation == operation and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None

    def _serve(self, http: BaseHTTPRequestHandler) -> None:
        method = http.command
        split = urlsplit(http.path)
        raw_path = split.path
        query = tuple(parse_qsl(split.query, keep_blank_values=True))
        length = int(http.headers.get("Content-Length") or 0)
        raw_body = http.rfile.read(length) if length else b""
        headers = dict(http.headers.items())

        operation: str | None = None
        answer: Answer
        body_obj: object = None
        try:
            if raw_body:
                body_obj = json.loads(raw_body)
        except ValueError:
            self._violate(f"{method} {raw_path}: request body is not JSON")
        if not raw_path.startswith(self.base_path + "/"):
            self._violate(f"{method} {raw_path}: outside the API base path {self.base_path!r}")
            answer = _error(404, "Not Found")
        else:
            path = raw_path[len(self.base_path) :]
            match = None
            for route_method, pattern, op in _ROUTES:
                m = pattern.match(path)
                if m and route_method == method:
                    operation, match = op, m
                    break
            if operation is None or match is None:
                self._violate(f"{method} {raw_path}: not an operation of the OpenAPI subset")
                answer = _error(404, "Not Found")
            else:
                request = MockRequest(
                    SPEC_HOST,
                    method,
                    _validated_path(path, match),
                    args=dict(query),
                    headers=headers,
                    data=raw_body or None,
                    content_type=headers.get("Content-Type", "application/json").split(";")[0],
                )
                for err in spec.openapi().iter_request_errors(request):
                    self._violate(f"{operation} request: {_explain(err)}")
                answer = self._dispatch(
                    operation, match.groupdict(), body_obj, headers, dict(query)
                )
                self._check_response(operation, request, answer)
        with self._lock:
            self.requests.append(
                Recorded(method, raw_path, operation, answer.status, body_obj, query)
            )
        payload = json.dumps(answer.body).encode() if answer.body is not None else b""
        http.send_response(answer.status)
        http.send_header("Content-Type", "application/json; charset=utf-8")
        http.send_header("Content-Length", str(len(payload)))
        for key, value in answer.headers.items():
            http.send_header(key, value)
        http.end_headers()
        try:
            http.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _violate(self, message: str) -> None:
        with self._lock:
            self.violations.append(message)

    def _check_response(self, operation: str, request: MockRequest, answer: Answer) -> None:
        if not answer.documented:
            errors = list(OAS30Validator(spec.schema("basic-error")).iter_errors(answer.body))
            for err in errors:
                self._violate(f"{operation} error response: {err.message}")
            return
        response = MockResponse(
            json.dumps(answer.body).encode(),
            status_code=answer.status,
            headers=answer.headers,
            content_type="application/json",
        )
        for err in spec.openapi().iter_response_errors(request, response):
            self._violate(f"{operation} response {answer.status}: {_explain(err)}")

    def _dispatch(
        self,
        operation: str,
        params: dict[str, str],
        body: object,
        headers: Mapping[str, str],
        query: dict[str, str],
    ) -> Answer:
        auth = headers.get("Authorization", "")
        if auth not in (f"token {self.token}", f"Bearer {self.token}"):
            self._violate(f"{operation}: missing or wrong Authorization header")
            return _error(401, "Bad credentials")
        fault = self._take_fault(operation)
        if fault is not None and fault.barrier is not None:
            fault.barrier.wait()  # outside the lock: the others must get here too
        if fault is not None and fault.kind == "too-many-requests":
            return _error(429, "Too Many Requests", {"retry-after": str(fault.retry_after)})
        if fault is not None and fault.kind == "server-error":
            return _error(502, "Server Error")
        if fault is not None and fault.kind == "secondary-rate-limit":
            return _error(
                403, SECONDARY_RATE_LIMIT_MESSAGE, {"retry-after": str(fault.retry_after)}
            )
        full_name = f"{params['owner']}/{params['repo']}"
        with self._lock:
            repo = self.repos.get(full_name)
            if repo is None:
                return _error(404, "Not Found")
            handler = _HANDLERS[operation]
            answer = handler(self, params, body if isinstance(body, dict) else None, query)
        if fault is not None and fault.kind == "server-error-after":
            return _error(502, "Server Error")
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.delay)
        return answer

    # --- rendering -------------------------------------------------------------------

    def _repo_url(self, full_name: str) -> str:
        return f"{self.api_url}/repos/{full_name}"

    def render_repo(self, repo: Repo) -> JsonObj:
        data = spec.example_object("full-repository-default-response")
        for key in ("parent", "source", "template_repository"):
            data.pop(key, None)  # not a fork, not from a template
        data["language"] = None  # quirk 3: the example omits a required key
        owner, name = repo.full_name.split("/", 1)
        data["id"] = repo.id
        data["name"] = name
        data["full_name"] = repo.full_name
        data["default_branch"] = repo.default_branch
        data["fork"] = repo.fork
        out = _rewrite_urls(data, self.api_url, self.web_url)
        assert isinstance(out, dict)
        out["url"] = self._repo_url(repo.full_name)
        owner_obj = out["owner"]
        assert isinstance(owner_obj, dict)
        owner_obj["login"] = owner
        return out

    def render_run(self, run: CheckRun) -> JsonObj:
        url = f"{self._repo_url(run.repo)}/check-runs/{run.id}"
        return {
            "id": run.id,
            "node_id": base64.b64encode(f"CheckRun{run.id}".encode()).decode(),
            "head_sha": run.head_sha,
            "external_id": run.external_id,
            "url": url,
            "html_url": f"{self.web_url}/{run.repo}/runs/{run.id}",
            "details_url": run.details_url,
            "status": run.status,
            "conclusion": run.conclusion,
            "started_at": run.started_at,
            "completed_at": run.completed_at,
            "output": {
                "title": run.title,
                "summary": run.summary,
                "text": run.text,
                "annotations_count": len(run.annotations),
                "annotations_url": f"{url}/annotations",
            },
            "name": run.name,
            "check_suite": {"id": 7},
            "app": None,
            "pull_requests": [],
        }

    def render_pull(self, full_name: str, pull: Pull) -> JsonObj:
        data = spec.example_object("pull-request")
        teams = data.get("requested_teams")
        for team in teams if isinstance(teams, list) else []:
            if isinstance(team, dict):
                team.setdefault("type", "organization")  # quirk 3
        out = _rewrite_urls(data, self.api_url, self.web_url)
        assert isinstance(out, dict)
        url = f"{self._repo_url(full_name)}/pulls/{pull.number}"
        out.update(
            url=url,
            number=pull.number,
            state=pull.state,
            merged=False,
            mergeable=None,
            review_comments_url=f"{url}/comments",
        )
        user = out["user"]
        assert isinstance(user, dict)
        user["login"] = pull.user
        for side, ref, sha, repo_name in (
            ("head", pull.head_ref, pull.head_sha, pull.head_repo),
            ("base", pull.base_ref, pull.base_sha, full_name),
        ):
            part = out[side]
            assert isinstance(part, dict)
            part["ref"] = ref
            part["sha"] = sha
            part["label"] = f"{repo_name.split('/')[0]}:{ref}"
            repo_obj = part["repo"]
            assert isinstance(repo_obj, dict)
            repo_obj["full_name"] = repo_name
            repo_obj["name"] = repo_name.split("/", 1)[1]
            repo_obj["fork"] = repo_name != full_name
            repo_obj["url"] = self._repo_url(repo_name)
        return out

    def render_review(self, full_name: str, number: int, review: Review) -> JsonObj:
        items = spec.example("pull-request-review-items")
        assert isinstance(items, list)
        data = _rewrite_urls(items[0], self.api_url, self.web_url)
        assert isinstance(data, dict)
        pull_url = f"{self._repo_url(full_name)}/pulls/{number}"
        data.update(
            id=review.id,
            state=review.state,
            commit_id=review.commit_id,
            submitted_at=review.submitted_at,
            body=review.body,
            pull_request_url=pull_url,
        )
        user = data["user"]
        assert isinstance(user, dict)
        user["login"] = review.user
        return data

    def render_status(self, full_name: str, status: Status) -> JsonObj:
        data = _rewrite_urls(spec.example("status"), self.api_url, self.web_url)
        assert isinstance(data, dict)
        data.update(
            id=status.id,
            state=status.state,
            context=status.context,
            description=status.description,
            target_url=status.target_url,
            created_at=status.created_at,
            updated_at=status.created_at,
            url=f"{self._repo_url(full_name)}/statuses/{status.sha}",
        )
        return data


def _explain(err: Exception) -> str:
    parts = [repr(err)]
    cause = err.__cause__
    while cause is not None:
        schema_errors = getattr(cause, "schema_errors", None)
        if schema_errors:
            parts.extend(f"{'/'.join(map(str, e.path))}: {e.message}" for e in schema_errors)
        else:
            parts.append(str(cause))
        cause = cause.__cause__
    return "; ".join(parts)[:2000]


# --- operation handlers (state lock held) ---------------------------------------------


def _check_output_bytes(s: GitHubStandIn, operation: str, body: JsonObj) -> Answer | None:
    """GitHub counts the 65,535 limit in bytes; the schema's maxLength counts characters."""
    output = body.get("output")
    if isinstance(output, dict):
        for key in ("summary", "text"):
            value = output.get(key)
            if isinstance(value, str) and len(value.encode("utf-8")) > OUTPUT_LIMIT_BYTES:
                s._violate(f"{operation}: output.{key} is over {OUTPUT_LIMIT_BYTES} bytes")
                return _error(422, f"output.{key} is too long")
    return None


def _apply_output(run: CheckRun, body: JsonObj) -> None:
    output = body.get("output")
    if isinstance(output, dict):
        for key in ("title", "summary", "text"):
            if key in output:
                setattr(run, key, output[key])
        annotations = output.get("annotations")
        if isinstance(annotations, list):
            run.annotations.extend(a for a in annotations if isinstance(a, dict))
    for key in ("name", "details_url", "external_id", "started_at", "completed_at"):
        if key in body:
            setattr(run, key, body[key])
    if "actions" in body and isinstance(body["actions"], list):
        run.actions = [a for a in body["actions"] if isinstance(a, dict)]
    if "conclusion" in body:
        run.conclusion = str(body["conclusion"])
        run.status = "completed"
        run.completed_at = run.completed_at or _now()
    elif "status" in body:
        run.status = str(body["status"])


def _h_repo_get(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    return Answer(200, s.render_repo(s.repos[f"{p['owner']}/{p['repo']}"]))


def _h_checks_create(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    if not s.repos[full_name].checks_write:
        return _error(403, NOT_ACCESSIBLE_MESSAGE)
    if b is None:
        return _error(400, "Problems parsing JSON")
    too_long = _check_output_bytes(s, "checks/create", b)
    if too_long is not None:
        return too_long
    run = CheckRun(
        id=next(s._ids),
        repo=full_name,
        head_sha=str(b.get("head_sha")),
        name=str(b.get("name")),
        status="queued",
        conclusion=None,
        external_id=None,
        details_url=None,
        started_at=None,
        completed_at=None,
    )
    _apply_output(run, b)
    if run.status == "in_progress" and run.started_at is None:
        run.started_at = _now()
    s.runs[run.id] = run
    return Answer(201, s.render_run(run))


def _run_of(s: GitHubStandIn, p: dict[str, str]) -> CheckRun | None:
    run = s.runs.get(int(p["check_run_id"])) if p["check_run_id"].isdigit() else None
    if run is None or run.repo != f"{p['owner']}/{p['repo']}":
        return None
    return run


def _h_checks_get(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    run = _run_of(s, p)
    if run is None:
        return _error(404, "Not Found")
    return Answer(200, s.render_run(run))


def _h_checks_update(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    if not s.repos[f"{p['owner']}/{p['repo']}"].checks_write:
        return _error(403, NOT_ACCESSIBLE_MESSAGE)
    run = _run_of(s, p)
    if run is None:
        return _error(404, "Not Found")
    if b is None:
        return _error(400, "Problems parsing JSON")
    too_long = _check_output_bytes(s, "checks/update", b)
    if too_long is not None:
        return too_long
    _apply_output(run, b)
    return Answer(200, s.render_run(run))


def _paginate(items: list[JsonObj], query: Mapping[str, str]) -> list[JsonObj]:
    per_page = int(query.get("per_page", "30"))
    page = int(query.get("page", "1"))
    return items[(page - 1) * per_page : page * per_page]


def _h_list_annotations(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    run = _run_of(s, p)
    if run is None:
        return _error(404, "Not Found")
    items: list[JsonObj] = [
        {
            "path": a.get("path"),
            "blob_href": f"{s.web_url}/{run.repo}/blob/{run.head_sha}/{a.get('path')}",
            "start_line": a.get("start_line"),
            "end_line": a.get("end_line"),
            "start_column": a.get("start_column"),
            "end_column": a.get("end_column"),
            "annotation_level": a.get("annotation_level"),
            "title": a.get("title"),
            "message": a.get("message"),
            "raw_details": a.get("raw_details"),
        }
        for a in run.annotations
    ]
    return Answer(200, _paginate(items, q))


def _h_permission(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    found = s.permissions.get((full_name, p["username"]))
    if found is None:
        return _error(404, "Not Found")
    permission, role = found
    data = _rewrite_urls(
        spec.example("repository-collaborator-permission-response-if-user-has-admin-permissions"),
        s.api_url,
        s.web_url,
    )
    assert isinstance(data, dict)
    data["permission"] = permission
    data["role_name"] = role
    user = data["user"]
    assert isinstance(user, dict)
    user["login"] = p["username"]
    user["role_name"] = role  # quirk 3: the example omits it
    return Answer(200, data)


def _h_list_for_ref(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    query = q
    runs = [r for r in s.runs.values() if r.repo == full_name and r.head_sha == p["ref"]]
    if "check_name" in query:
        runs = [r for r in runs if r.name == query["check_name"]]
    if "status" in query:
        runs = [r for r in runs if r.status == query["status"]]
    if query.get("filter", "latest") == "latest":
        latest: dict[str, CheckRun] = {}
        for r in runs:
            latest[r.name] = r  # ids grow: the last one wins
        runs = list(latest.values())
    runs.sort(key=lambda r: -r.id)
    items = [s.render_run(r) for r in runs]
    return Answer(200, {"total_count": len(items), "check_runs": _paginate(items, q)})


def _validated_path(path: str, match: re.Match[str]) -> str:
    """The path as openapi-core validates it. It does not implement the vendor extension
    `x-multi-segment` (repos/get-commit's `ref` may be `tags/TAG_NAME`, and a client may
    send its `/` as is; PyGithub percent-encodes it), so the slash of that one parameter
    is percent-encoded for the validator; every other path is validated as received."""
    tag = match.groupdict().get("tag")
    if tag is None:
        return path
    return path[: -len("tags/" + tag)] + "tags%2F" + tag


def _h_commit(s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    ref = "tags/" + p["tag"] if "tag" in p else unquote(p["ref"])  # PyGithub sends tags%2FX
    if ref.startswith("tags/"):
        sha = s.tags.get((full_name, ref.removeprefix("tags/")))
        if sha is None:
            return Answer(
                422,
                {
                    "message": f"No commit found for SHA: {ref}",
                    "documentation_url": "https://docs.github.com/rest/commits/commits#get-a-commit",
                },
            )
        p = {**p, "ref": sha}
    ref = p["ref"]
    if not re.fullmatch(r"[0-9a-f]{40}", ref):
        return Answer(404, {"message": "No commit found for SHA: " + ref}, documented=True)
    data = _rewrite_urls(spec.example("commit"), s.api_url, s.web_url)
    assert isinstance(data, dict)
    data["sha"] = ref
    data["url"] = f"{s._repo_url(p['owner'] + '/' + p['repo'])}/commits/{ref}"
    tree = s.commit_trees.get((f"{p['owner']}/{p['repo']}", ref))
    commit = data.get("commit")
    if tree is not None and isinstance(commit, dict) and isinstance(commit.get("tree"), dict):
        commit["tree"]["sha"] = tree
    files = data.get("files")
    for f in files if isinstance(files, list) else []:
        if isinstance(f, dict):
            f.setdefault("sha", "0" * 40)  # quirk 3
            f.setdefault("contents_url", data["url"])
    return Answer(200, data)


def _h_create_status(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    body = b or {}
    status = Status(
        id=next(s._ids),
        sha=p["sha"],
        state=str(body.get("state")),
        context=str(body.get("context") or "default"),
        description=body.get("description") if isinstance(body.get("description"), str) else None,  # type: ignore[arg-type]
        target_url=body.get("target_url") if isinstance(body.get("target_url"), str) else None,  # type: ignore[arg-type]
        created_at=_now(),
    )
    s.statuses.setdefault((full_name, p["sha"]), []).append(status)
    return Answer(
        201,
        s.render_status(full_name, status),
        {"Location": f"{s._repo_url(full_name)}/statuses/{p['sha']}"},
    )


def _h_list_statuses(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    found = s.statuses.get((full_name, p["ref"]), [])
    items = [s.render_status(full_name, st) for st in reversed(found)]
    return Answer(200, _paginate(items, q))


def _h_combined(
    s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]
) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    latest: dict[str, Status] = {}
    for st in s.statuses.get((full_name, p["ref"]), []):
        latest[st.context] = st
    data = _rewrite_urls(spec.example("combined-commit-status"), s.api_url, s.web_url)
    assert isinstance(data, dict)
    states = {st.state for st in latest.values()}
    data["state"] = (
        "failure"
        if states & {"failure", "error"}
        else "pending"
        if "pending" in states or not states
        else "success"
    )
    simple = []
    for st in latest.values():
        full = s.render_status(full_name, st)
        simple.append({k: full[k] for k in full if k != "creator"} | {"required": None})
    data["statuses"] = simple
    data["sha"] = p["ref"]
    data["total_count"] = len(simple)
    data["repository"] = _rewrite_urls(data["repository"], s.api_url, s.web_url)
    return Answer(200, data)


def _h_pull(s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    pull = s.pulls.get((full_name, int(p["pull_number"]))) if p["pull_number"].isdigit() else None
    if pull is None:
        return _error(404, "Not Found")
    return Answer(200, s.render_pull(full_name, pull))


def _h_reviews(s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    number = int(p["pull_number"])
    if (full_name, number) not in s.pulls:
        return _error(404, "Not Found")
    items = [s.render_review(full_name, number, r) for r in s.reviews.get((full_name, number), [])]
    return Answer(200, _paginate(items, q))


def _h_review(s: GitHubStandIn, p: dict[str, str], b: JsonObj | None, q: dict[str, str]) -> Answer:
    full_name = f"{p['owner']}/{p['repo']}"
    number = int(p["pull_number"])
    for r in s.reviews.get((full_name, number), []):
        if str(r.id) == p["review_id"]:
            return Answer(200, s.render_review(full_name, number, r))
    return _error(404, "Not Found")


_HANDLERS: dict[
    str, Callable[[GitHubStandIn, dict[str, str], JsonObj | None, dict[str, str]], Answer]
] = {
    "repos/get": _h_repo_get,
    "checks/create": _h_checks_create,
    "checks/get": _h_checks_get,
    "checks/update": _h_checks_update,
    "checks/list-annotations": _h_list_annotations,
    "repos/get-collaborator-permission-level": _h_permission,
    "checks/list-for-ref": _h_list_for_ref,
    "repos/get-commit": _h_commit,
    "repos/create-commit-status": _h_create_status,
    "repos/list-commit-statuses-for-ref": _h_list_statuses,
    "repos/get-combined-status-for-ref": _h_combined,
    "pulls/get": _h_pull,
    "pulls/list-reviews": _h_reviews,
    "pulls/get-review": _h_review,
}
