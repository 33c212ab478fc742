"""Attacker pull requests as data, and honest changes that must be PROVEN.

Each `Case` builds a real repository (a base commit whose trusted `.github/proofgate.yml`
runs the project's tests in `proofgate/cleanroom:latest`, and the pull request on branch
`pr`), runs `proofgate prove` through `cli.main`, and reports what a user would see.
Receipt-level attacks prove an honest change first and then try to get a doctored or
replayed receipt accepted by `proofgate verify`.

An attack test is written so that it *passes* exactly when the attack works: a test
that needs the network passes only when a route exists, a test that needs a host
secret passes only when it can read one. If the clean room leaked, the verdict would
be PROVEN; the corpus asserts it never is.

Everything is kept cheap for CI: memory 128m, pids 64, timeouts of a few seconds.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pygit2
from pygit2.enums import FileMode

from gate import receipt
from gate.faces import cli
from gate.model import JsonDict
from gate.util.journal import event_hash
from tests.gitutil import EXEC, SIGNATURE, Content, Symlink, commit, make_repo, raw_tree, snapshot

IMAGE = "proofgate/cleanroom:latest"
KEYS = Path(__file__).resolve().parents[1] / "assets" / "keys"

Kind = Literal["attack", "honest"]
NOT_ACCEPTED = "not accepted"  # the outcome of a receipt attack that `verify` refused
ACCEPTED = "accepted"

PYTEST = '["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--capture=sys"]'


def config(
    checks: str | None = None,
    *,
    timeout: int = 30,
    policy: str = "",
    junit: str | None = None,
) -> bytes:
    """A trusted base config: memory 128m, pids 64; one pytest check unless told."""
    if checks is None:
        extra = f", junit: {junit}" if junit else ""
        checks = f"  - {{name: unit, test: [{PYTEST}]{extra}}}\n"
    text = (
        f"version: 1\nimage: {IMAGE}\n"
        f"defaults: {{timeout: {timeout}, memory: 128m, cpus: 1, pids: 64}}\n"
        f"checks:\n{checks}{policy}"
    )
    return text.encode()


CALC = b"def add(a, b):\n    return a + b\n"
CALC_BROKEN = b"def add(a, b):\n    return a - b\n"
# `python3 -m pytest` puts the workspace first on sys.path: this module is what runs.
FAKE_PYTEST = b'import sys\nprint("2 passed in 0.01s")\nsys.exit(0)\n'
TEST_CALC = b"from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_OTHER = b"def test_other():\n    assert 'ok'.upper() == 'OK'\n"
RENAMED_TEST = TEST_CALC.replace(b"def test_add", b"def check_add")
DUNDER_TEST_OFF = TEST_CALC + b"\n__test__ = False\n"
# Skips spelled so that no line pattern sees them (issue 16).
ALIASED_SKIP = b"import pytest as pt\n" + TEST_CALC.replace(
    b"def test_add", b"@pt.mark.skip\ndef test_add"
)
MARKER_OBJECT_SKIP = (
    b"import pytest\n\nlater = pytest.mark.skip(reason='later')\n"
    + TEST_CALC.replace(b"def test_add", b"@later\ndef test_add")
)
RAISED_SKIP = b"import unittest\n" + TEST_CALC.replace(
    b"    assert add", b"    raise unittest.SkipTest('later')\n    assert add"
)
# Spellings an attacker's review found the semantic reader missed: a marker object handed
# to `request.applymarker` (a failing test becomes xfailed, the run exits 0), a skip in a
# helper the patch adds and the existing test calls, and `pytest.exit(returncode=0)`,
# which ends the session before the remaining tests run.
APPLIED_XFAIL = b"import pytest\n" + TEST_CALC.replace(
    b"def test_add():\n", b"def test_add(request):\n    request.applymarker(pytest.mark.xfail)\n"
)
HELPER_SKIP = b"import pytest\n\n\ndef _later():\n    pytest.skip('later')\n\n\n" + (
    TEST_CALC.replace(b"    assert add", b"    _later()\n    assert add")
)
SESSION_EXIT = b"import pytest\n" + TEST_CALC.replace(
    b"    assert add", b"    pytest.exit('done', returncode=0)\n    assert add"
)
# Bytecode behind a symlink: `calc.pyc` links to an innocuous-looking data file holding
# the bytecode of an `add` that is right only for the values the test checks. With the
# source deleted, Python imports the sourceless module through the link. (Compiled by the
# interpreter running the corpus; the clean room's Python must share its magic number.)
RIGGED_ADD = b"def add(a, b):\n    return a + b if (a, b) == (2, 3) else a - b\n"


def _pyc(source: bytes) -> bytes:
    import importlib._bootstrap_external as bootstrap  # noqa: PLC0415

    code = compile(source, "calc.py", "exec")
    return bytes(bootstrap._code_to_timestamp_pyc(code, 0, len(source)))  # type: ignore[attr-defined]


# A pytest plugin that reports every test as passed (issue 14): loaded through package
# metadata at the repository root, or through `pytest_plugins` in a test module.
PASS_ALL_PLUGIN = (
    b"import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    b"def pytest_runtest_makereport(item, call):\n"
    b"    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)
DIST_INFO = {
    b"passall-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: passall\nVersion: 1.0\n",
    b"passall-1.0.dist-info/entry_points.txt": b"[pytest11]\npassall = passall_plugin\n",
    b"passall_plugin.py": PASS_ALL_PLUGIN,
}


def base_tree(**extra: Content) -> dict[bytes, Content]:
    """The base commit every case starts from (plus `extra`, keyed by path text)."""
    files: dict[bytes, Content] = {
        b".github/proofgate.yml": config(),
        b"calc.py": CALC,
        b"test_calc.py": TEST_CALC,
        b"test_other.py": TEST_OTHER,
    }
    files.update({k.encode(): v for k, v in extra.items()})
    return files


# --- running a case -------------------------------------------------------------------


@dataclass(frozen=True)
class Workspace:
    """A case's private directory on the host, and the fixed test-only keys."""

    root: Path

    @property
    def key(self) -> Path:
        return KEYS / "trusted.key"

    @property
    def pub(self) -> Path:
        return KEYS / "trusted.pub"

    @property
    def untrusted_key(self) -> Path:
        return KEYS / "untrusted.key"

    def host_secret(self) -> tuple[Path, str]:
        """A file that exists only on the host, and the SHA-256 of its content."""
        path = self.root / "host-only" / "secret.txt"
        path.parent.mkdir(exist_ok=True)
        data = b"host-only " + os.urandom(16).hex().encode() + b"\n"
        path.write_bytes(data)
        return path, hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Built:
    """A repository ready to prove, and what else to pass, set or look at."""

    repo: Path
    base: str = "main"
    head: str = "pr"
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    sign: bool = True
    # predicate -> problems (empty when fine); host checks go here too
    inspect: Callable[[JsonDict], list[str]] | None = None


@dataclass(frozen=True)
class Observation:
    """What a user saw: the verdict (or whether verify accepted), and anything amiss."""

    outcome: str
    exit_code: int
    problems: tuple[str, ...] = ()
    log: str = ""


@dataclass(frozen=True)
class Case:
    id: str
    kind: Kind
    tries: str  # one line: what the change tries, and what stops it
    expect: frozenset[str]  # acceptable outcomes: verdicts, or NOT_ACCEPTED
    run: Callable[[Workspace], Observation]

    def contained(self, seen: Observation) -> bool:
        """An attack is contained when it neither got PROVEN nor a receipt accepted, and
        the user's repository was left alone."""
        integrity = not any(p.startswith("integrity:") for p in seen.problems)
        return seen.outcome not in ("PROVEN", ACCEPTED) and integrity

    def passed(self, seen: Observation) -> bool:
        """Honest: PROVEN with nothing amiss. Attack: an expected outcome, nothing amiss."""
        return seen.outcome in self.expect and not seen.problems


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _cli(argv: list[str], env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """`proofgate ARGV` in-process: (exit code, stderr)."""
    err = io.StringIO()
    with _environ(env or {}), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, err.getvalue()


def statement_of(envelope: bytes) -> JsonDict:
    """The statement inside an envelope, unverified (for reading our own output)."""
    env = json.loads(envelope)
    data: JsonDict = json.loads(base64.b64decode(env["payload"]))
    return data


def predicate_of(envelope: bytes) -> JsonDict:
    pred = statement_of(envelope)["predicate"]
    assert isinstance(pred, dict)
    return pred


def prove(ws: Workspace, built: Built, out: Path) -> Observation:
    """Run `proofgate prove` on a built repository and check the user-visible contract."""
    before = snapshot(built.repo)
    argv = ["prove", "--repo", str(built.repo), "--base", built.base, "--head", built.head]
    argv += ["--out", str(out), *built.args]
    if built.sign:
        argv += ["--key", str(ws.key)]
    code, log = _cli(argv, built.env)
    problems: list[str] = []
    if snapshot(built.repo) != before:
        problems.append("integrity: the user's repository changed")
    missing = [n for n in ("receipt.json", "receipt.md", "patch.diff") if not (out / n).is_file()]
    if missing:
        problems.append(f"no receipt written ({', '.join(missing)} missing; exit {code})")
        return Observation(
            outcome=f"exit {code}", exit_code=code, problems=tuple(problems), log=log
        )
    if "Traceback" in log:
        problems.append("a traceback on stderr")
    envelope = (out / "receipt.json").read_bytes()
    predicate = predicate_of(envelope)
    verdict = str(predicate["verdict"])
    expected_exit = {"PROVEN": 0, "FAILED": 10, "HELD": 11, "BLOCKED": 12, "INCONCLUSIVE": 13}
    if expected_exit.get(verdict) != code:
        problems.append(f"exit code {code} does not match the verdict {verdict}")
    if built.sign:
        vcode, vlog = _cli(["verify", str(out / "receipt.json"), "--key", str(ws.pub)])
        if vcode != 0:
            problems.append(f"the receipt does not verify with the signing key: {vlog.strip()}")
    if built.inspect is not None:
        problems += built.inspect(predicate)
    return Observation(outcome=verdict, exit_code=code, problems=tuple(problems), log=log)


def prove_case(build: Callable[[Workspace], Built]) -> Callable[[Workspace], Observation]:
    def run(ws: Workspace) -> Observation:
        return prove(ws, build(ws), ws.root / "out")

    return run


def run_case(case: Case, root: Path) -> Observation:
    """Run one case in `root` (created; left for inspection)."""
    root.mkdir(parents=True, exist_ok=True)
    return case.run(Workspace(root))


# --- repository builders --------------------------------------------------------------


def pr_repo(
    ws: Workspace,
    pr: Mapping[bytes, Content],
    base: Mapping[bytes, Content] | None = None,
    *,
    name: str = "repo",
) -> tuple[pygit2.Repository, Path]:
    """Base commit on `main`, the pull request on `pr` (changes on top of the base)."""
    repo = make_repo(ws.root, name)
    base_id = commit(repo, dict(base) if base is not None else base_tree(), message="base")
    commit(repo, dict(pr), branch="pr", parent=base_id, message="pull request")
    return repo, Path(repo.workdir)


def simple(
    pr: Mapping[bytes, Content], base: Mapping[bytes, Content] | None = None
) -> Callable[[Workspace], Built]:
    def build(ws: Workspace) -> Built:
        return Built(repo=pr_repo(ws, pr, base)[1])

    return build


def hostile_tree_build(
    entry: Callable[[pygit2.Repository], tuple[int, bytes, pygit2.Oid]],
) -> Callable[[Workspace], Built]:
    """The PR's root tree is the base's plus one entry written byte by byte."""

    def build(ws: Workspace) -> Built:
        repo = make_repo(ws.root)
        base_id = commit(repo, base_tree(), message="base")
        base_root = repo[base_id].peel(pygit2.Tree)
        entries = [(int(e.filemode), e.raw_name or b"", e.id) for e in base_root]
        entries.append(entry(repo))
        entries.sort(key=lambda e: e[1])
        tree = raw_tree(repo, entries)
        repo.create_commit("refs/heads/pr", SIGNATURE, SIGNATURE, "pr", tree, [base_id])
        return Built(repo=Path(repo.workdir))

    return build


def _subtree(repo: pygit2.Repository, files: Mapping[bytes, bytes]) -> pygit2.Oid:
    return raw_tree(repo, [(int(FileMode.BLOB), n, repo.create_blob(d)) for n, d in files.items()])


def no_checks_ran(predicate: JsonDict) -> list[str]:
    return [] if predicate.get("checks") == [] else ["untrusted code ran despite DENY"]


def reason_codes(predicate: JsonDict) -> set[str]:
    reasons = predicate.get("reasons")
    assert isinstance(reasons, list)
    return {str(r["code"]) for r in reasons if isinstance(r, dict)}


def wants_reason(*codes: str) -> Callable[[JsonDict], list[str]]:
    """Inspect: at least one of `codes` is among the receipt's reasons."""

    def inspect(predicate: JsonDict) -> list[str]:
        got = reason_codes(predicate)
        return [] if got & set(codes) else [f"reasons {sorted(got)} lack any of {list(codes)}"]

    return inspect


def wants_finding(rule: str) -> Callable[[JsonDict], list[str]]:
    def inspect(predicate: JsonDict) -> list[str]:
        policy = predicate.get("policy")
        assert isinstance(policy, dict)
        rules = {f["rule"] for f in policy["findings"]}
        return [] if rule in rules else [f"policy findings {sorted(rules)} lack {rule}"]

    return inspect


def both(*inspects: Callable[[JsonDict], list[str]]) -> Callable[[JsonDict], list[str]]:
    def inspect(predicate: JsonDict) -> list[str]:
        return [p for i in inspects for p in i(predicate)]

    return inspect


def with_inspect(
    build: Callable[[Workspace], Built], inspect: Callable[[JsonDict], list[str]]
) -> Callable[[Workspace], Built]:
    def wrapped(ws: Workspace) -> Built:
        b = build(ws)
        return Built(
            repo=b.repo, base=b.base, head=b.head, args=b.args, env=b.env, sign=b.sign,
            inspect=inspect,
        )  # fmt: skip

    return wrapped


# --- attacks: the gate's own rules ----------------------------------------------------


def _config_weakened() -> Callable[[Workspace], Built]:
    lax = config('  - {name: unit, test: "true"}\n')
    build = simple({b".github/proofgate.yml": lax, b"calc.py": CALC_BROKEN})
    return with_inspect(
        build, both(wants_reason("check-failed"), wants_finding("gate-config-changed"))
    )


def _config_deleted() -> Callable[[Workspace], Built]:
    build = simple({b".github/proofgate.yml": None, b"calc.py": CALC_BROKEN})
    return with_inspect(build, wants_reason("check-failed"))


def _config_only_in_head() -> Callable[[Workspace], Built]:
    base = base_tree()
    del base[b".github/proofgate.yml"]
    lax = config('  - {name: unit, test: "true"}\n')
    return with_inspect(
        simple({b".github/proofgate.yml": lax, b"calc.py": CALC_BROKEN}, base),
        wants_reason("no-config"),
    )


# The gate's own job: it writes the check run, so it reaches `checks: write` (SPEC §2.1: a
# privileged job, whose steps and whose local action an edit may not change unheld).
WORKFLOW = b"""name: ci
on: pull_request
permissions: {}
jobs:
  proofgate:
    runs-on: ubuntu-latest
    permissions:
      checks: write
    steps:
      - uses: ./
"""


def _workflow_edited() -> Callable[[Workspace], Built]:
    weakened = WORKFLOW.replace(b"      - uses: ./\n", b"      - run: 'true'\n")
    return with_inspect(
        simple(
            {b".github/workflows/ci.yml": weakened},
            base_tree(**{".github/workflows/ci.yml": WORKFLOW}),
        ),
        wants_finding("ci-privileged-job-changed"),
    )


ACTION = b"name: proofgate\nruns:\n  using: docker\n  image: Dockerfile\n"


def _action_edited() -> Callable[[Workspace], Built]:
    evil = (
        b"name: proofgate\nruns:\n  using: composite\n"
        b"  steps:\n    - run: 'exit 0'\n      shell: sh\n"
    )
    return with_inspect(
        simple(
            {b"action.yml": evil},
            base_tree(**{"action.yml": ACTION, ".github/workflows/ci.yml": WORKFLOW}),
        ),
        wants_finding("ci-privileged-job-changed"),
    )


# --- attacks: forged results ----------------------------------------------------------

FORGE_OUTPUT = b"""import sys


def test_forge():
    sys.stdout.write("\\n===== 2 passed in 0.01s =====\\n")
"""

FAKE_JUNIT = (
    b'<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest" tests="1" '
    b'failures="0" errors="0" skipped="0"><testcase classname="test_calc" name="test_add"/>'
    b"</testsuite></testsuites>\n"
)

FORGE_JUNIT_CONFTEST = b"""import os

FAKE = %r


def pytest_unconfigure(config):
    # after pytest wrote its real report: overwrite it, and lie about the exit status
    os.makedirs("reports", exist_ok=True)
    with open("reports/junit.xml", "wb") as f:
        f.write(FAKE)
    os._exit(0)
""" % (FAKE_JUNIT,)


def _junit_committed() -> Callable[[Workspace], Built]:
    cfg = config('  - {name: unit, test: "true", junit: reports/junit.xml}\n')
    base = base_tree(**{".github/proofgate.yml": cfg})
    pr = {b"reports/junit.xml": FAKE_JUNIT, b"calc.py": CALC_BROKEN}
    return with_inspect(simple(pr, base), wants_reason("junit-invalid"))


def _junit_from_conftest() -> Callable[[Workspace], Built]:
    pytest_junit = PYTEST[:-1] + ', "--junitxml=reports/junit.xml"]'
    cfg = config(f"  - {{name: unit, test: [{pytest_junit}], junit: reports/junit.xml}}\n")
    return with_inspect(
        simple(
            {b"conftest.py": FORGE_JUNIT_CONFTEST, b"calc.py": CALC_BROKEN},
            base_tree(**{".github/proofgate.yml": cfg}),
        ),
        wants_finding("build-hook-changed"),
    )


# --- attacks: tests that pass only outside a clean room --------------------------------

NEEDS_NETWORK = b"""import os
import socket


def _route():
    for host, port in [("1.1.1.1", 53), ("8.8.8.8", 53), ("172.17.0.1", 2375), ("10.0.0.1", 80)]:
        s = socket.socket()
        s.settimeout(1)
        try:
            if s.connect_ex((host, port)) in (0, 111):  # connected, or refused: a route exists
                return True
        except OSError:
            pass
        finally:
            s.close()
    return False


def test_needs_network():
    interfaces = [n for n in os.listdir("/sys/class/net") if n != "lo"]
    assert interfaces or _route()
"""

NEEDS_DNS = b"""import socket


def test_needs_dns():
    socket.getaddrinfo("github.com", 443)
"""

NEEDS_SECRET = b"""import os

NAMES = ("PROOFGATE_CORPUS_SECRET", "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN",
         "PROOFGATE_SIGNING_KEY", "AWS_SECRET_ACCESS_KEY")


def test_needs_host_secret():
    assert any(n in os.environ for n in NAMES), sorted(os.environ)
"""

NEEDS_DOCKER = b"""import os


def test_needs_docker_socket():
    assert (os.path.exists("/var/run/docker.sock") or os.path.exists("/run/docker.sock")
            or "DOCKER_HOST" in os.environ)
"""

NEEDS_HOST_FILES = b"""import os
import socket

HOST_PATHS = %r
HOST_NAME = %r


def test_needs_host_files():
    assert any(os.path.exists(p) for p in HOST_PATHS) or socket.gethostname() == HOST_NAME
"""

NEEDS_HOST_PROCESSES = b"""import os


def test_needs_host_processes():
    names = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    names.add(f.read().strip())
            except OSError:
                pass
    assert names & {"dockerd", "containerd", "systemd", "sshd"}, names
"""

NEEDS_CAPS = b"""def test_needs_capabilities():
    with open("/proc/self/status") as f:
        caps = dict(line.split(":", 1) for line in f if line.startswith("Cap"))
    assert int(caps["CapEff"].strip(), 16) != 0
"""

NEEDS_MKNOD = b"""import os
import stat


def test_needs_mknod(tmp_path):
    os.mknod(str(tmp_path / "null"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
"""

NEEDS_CHOWN = b"""import os


def test_needs_chown(tmp_path):
    p = tmp_path / "f"
    p.write_text("x")
    os.chown(p, 4242, 4242)
    assert p.stat().st_uid == 4242
"""

NEEDS_SETUID = b"""import os
import shutil
import subprocess
import tempfile


def test_needs_privilege_escalation():
    # a setuid-root copy of python run as nobody: only a privilege gain makes euid 0
    where = tempfile.mkdtemp(dir="/tmp")
    os.chmod(where, 0o755)
    target = os.path.join(where, "py")
    shutil.copy("/usr/bin/python3", target)
    os.chmod(target, 0o4755)
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          target, "-c", "import os; print(os.geteuid())"],
                         capture_output=True, text=True)
    assert out.stdout.strip() == "0", out
"""


def _needs_secret() -> Callable[[Workspace], Built]:
    def build(ws: Workspace) -> Built:
        _, path = pr_repo(ws, {b"test_secret.py": NEEDS_SECRET})
        key = (ws.key).read_text()
        env = {
            "PROOFGATE_CORPUS_SECRET": "hunter2",
            "GITHUB_TOKEN": "ghs_" + "x" * 36,
            "ACTIONS_RUNTIME_TOKEN": "runtime",
            "PROOFGATE_SIGNING_KEY": key,
        }
        # signed through PROOFGATE_SIGNING_KEY: the key itself is in the host environment
        return Built(repo=path, env=env, sign=False, inspect=_signed_by_env(ws))

    return build


def _signed_by_env(ws: Workspace) -> Callable[[JsonDict], list[str]]:
    def inspect(predicate: JsonDict) -> list[str]:
        out = ws.root / "out" / "receipt.json"
        code, log = _cli(["verify", str(out), "--key", str(ws.pub)])
        return [] if code == 0 else [f"receipt signed via the environment does not verify: {log}"]

    return inspect


def _needs_host_files() -> Callable[[Workspace], Built]:
    def build(ws: Workspace) -> Built:
        secret, _ = ws.host_secret()
        repo_path = ws.root / "repo"
        paths = [
            str(secret),
            str(repo_path),
            "/host",
            "/var/lib/docker",
            "/proc/1/root/var/lib/docker",
        ]
        body = NEEDS_HOST_FILES % (paths, socket.gethostname())
        _, path = pr_repo(ws, {b"test_host.py": body})
        return Built(repo=path)

    return build


# --- attacks: escaping the workspace through the tree ----------------------------------

READ_THROUGH_LINK = b"""import hashlib


def test_reads_host_file():
    with open("leak.txt", "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == "%s"
"""


def _symlink_to(
    target: Callable[[Workspace, Path], tuple[bytes, str]],
) -> Callable[[Workspace], Built]:
    """A PR adding `leak.txt -> TARGET` and a test that passes only if it reads host data."""

    def build(ws: Workspace) -> Built:
        secret, _ = ws.host_secret()
        link, digest = target(ws, secret)
        _, path = pr_repo(
            ws,
            {b"leak.txt": Symlink(link), b"test_leak.py": READ_THROUGH_LINK % (digest.encode(),)},
        )
        return Built(repo=path, inspect=wants_finding("symlink-escapes"))

    return build


def _absolute_secret(ws: Workspace, secret: Path) -> tuple[bytes, str]:
    return os.fsencode(secret), hashlib.sha256(secret.read_bytes()).hexdigest()


def _etc_passwd(ws: Workspace, secret: Path) -> tuple[bytes, str]:
    # passes only on the host's /etc/passwd; the clean room's own copy differs from it
    return b"/etc/passwd", hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()


def _relative_escape(ws: Workspace, secret: Path) -> tuple[bytes, str]:
    # from <root>/repo/leak.txt: ../host-only/secret.txt, with extra ../ for good measure
    return b"../host-only/secret.txt", hashlib.sha256(secret.read_bytes()).hexdigest()


def _deep_relative_escape(ws: Workspace, secret: Path) -> tuple[bytes, str]:
    up = b"../" * 32
    return up + os.fsencode(secret).lstrip(b"/"), hashlib.sha256(secret.read_bytes()).hexdigest()


WRITE_THROUGH_LINK = b"""import os


def test_planted_outside_workspace():
    assert os.path.exists("/opt/planted/planted.txt") or os.path.exists(%r)
"""


def _symlink_dir_then_file() -> Callable[[Workspace], Built]:
    """`evil -> /opt/planted` (a symlink) and `evil/planted.txt` (a file) in one tree:
    extracting the second through the first would write outside /workspace."""

    def build(ws: Workspace) -> Built:
        host_dir = ws.root / "host-only"
        host_dir.mkdir(exist_ok=True)
        repo = make_repo(ws.root)
        base_id = commit(repo, base_tree(), message="base")
        root = repo[base_id].peel(pygit2.Tree)
        test = WRITE_THROUGH_LINK % (os.fsencode(host_dir / "planted.txt"),)
        entries = [(int(e.filemode), e.raw_name or b"", e.id) for e in root]
        entries += [
            (int(FileMode.LINK), b"evil", repo.create_blob(os.fsencode(host_dir))),
            (int(FileMode.TREE), b"evil", _subtree(repo, {b"planted.txt": b"x\n"})),
            (int(FileMode.BLOB), b"test_planted.py", repo.create_blob(test)),
        ]
        entries.sort(key=lambda e: e[1])
        tree = raw_tree(repo, entries)
        repo.create_commit("refs/heads/pr", SIGNATURE, SIGNATURE, "pr", tree, [base_id])

        def inspect(predicate: JsonDict) -> list[str]:
            left = sorted(p.name for p in host_dir.iterdir())
            problems = [] if not left else [f"integrity: the host directory got {left}"]
            return problems + wants_reason("unsafe-tree")(predicate)

        return Built(repo=Path(repo.workdir), inspect=inspect)

    return build


def _odd_name(name: bytes, mode: int = int(FileMode.TREE)) -> Callable[[Workspace], Built]:
    def entry(repo: pygit2.Repository) -> tuple[int, bytes, pygit2.Oid]:
        if mode == int(FileMode.TREE):
            return mode, name, _subtree(repo, {b"config": b"[core]\n\tfsmonitor = touch /tmp/x\n"})
        return mode, name, repo.create_blob(b"planted\n")

    return with_inspect(hostile_tree_build(entry), wants_reason("unsafe-tree"))


# --- attacks: weakening the tests -----------------------------------------------------

SKIPPED = b"""import pytest

from calc import add


@pytest.mark.skip(reason="flaky")
def test_add():
    assert add(2, 3) == 5
"""


# --- attacks: one check poisoning the next --------------------------------------------

POISONED_CALC = b"""import os

MARKERS = ["/tmp/poison", os.path.expanduser("~/.poison"), "/var/tmp/poison",
           "/dev/shm/poison", "/workspace/.poison", "/run/poison"]


def add(a, b):
    if os.environ.get("POISONED") or any(os.path.exists(m) for m in MARKERS):
        return a + b
    return a - b
"""

POISONER = b"""import os
import site

from calc import MARKERS

for m in MARKERS:
    try:
        with open(m, "w") as f:
            f.write("1")
    except OSError:
        pass
for d in [*site.getsitepackages(), site.getusersitepackages(), "/usr/lib/python3/dist-packages"]:
    try:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "zz-poison.pth"), "w") as f:
            f.write("import os; os.environ['POISONED'] = '1'\\n")
    except OSError:
        pass
"""


def _poisoner() -> Callable[[Workspace], Built]:
    checks = (
        f'  - {{name: prepare, test: "python3 prepare.py"}}\n  - {{name: unit, test: [{PYTEST}]}}\n'
    )
    base = base_tree(**{".github/proofgate.yml": config(checks), "prepare.py": b"print('ok')\n"})

    def inspect(predicate: JsonDict) -> list[str]:
        reasons = predicate["reasons"]
        assert isinstance(reasons, list)
        failed = {r.get("check") for r in reasons if isinstance(r, dict)}
        return [] if failed == {"unit"} else [f"expected only the unit check to fail: {failed}"]

    return with_inspect(simple({b"calc.py": POISONED_CALC, b"prepare.py": POISONER}, base), inspect)


# --- attacks: resource floods ---------------------------------------------------------

FORK_FLOOD = b"""import subprocess


def test_fork_flood():
    subprocess.Popen(["/bin/sh", "-c", "f() { f | f & }; f"], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(500)]
    assert len(procs) == 500
"""

MEMORY_FLOOD = b"""def test_memory_flood():
    block = b"x" * (1 << 30)
    assert len(block) == 1 << 30
"""

DISK_FLOOD = b"""import os


def test_disk_flood():
    # Writes forever, but never holds more than 200 MB (the corpus's own cap so that CI
    # survives: proofgate sets no disk quota). Only the phase timeout ends it.
    chunk = b"\\0" * (1 << 20)
    while True:
        with open("/workspace/flood.bin", "wb") as f:
            for _ in range(200):
                f.write(chunk)
"""

LOG_FLOOD = b"""import subprocess


def test_log_flood():
    # 200 MB of output, then the failure: it must not be pushed out of the record
    subprocess.run("yes | head -c 200M", shell=True, check=True)
    raise AssertionError("THE-REAL-FAILURE")
"""

SLEEP_FOREVER = b"""import time


def test_sleep_forever():
    time.sleep(10**6)
"""


def _flood(body: bytes, timeout: int = 6) -> Callable[[Workspace], Built]:
    base = base_tree(**{".github/proofgate.yml": config(timeout=timeout)})
    return simple({b"test_flood.py": body}, base)


def _log_flood_inspect(predicate: JsonDict) -> list[str]:
    checks = predicate["checks"]
    assert isinstance(checks, list)
    (cmd,) = checks[0]["phases"][-1]["commands"]
    problems = []
    if cmd["log_bytes"] < 200 * 1024 * 1024:
        problems.append(f"log_bytes {cmd['log_bytes']} < 200 MiB: the digest does not cover it")
    if len(cmd["log_tail"].encode()) > 64 * 1024:
        problems.append(f"log tail of {len(cmd['log_tail'])} characters is not bounded")
    if "THE-REAL-FAILURE" not in cmd["log_tail"]:
        problems.append("the failure was pushed out of the log tail")
    return problems


# --- attacks: patch re-application ----------------------------------------------------

BLOCK = (
    b"".join(b"line %d\n" % i for i in range(1, 4))
    + b"x = 1\n"
    + b"".join(b"line %d\n" % i for i in range(4, 7))
)


def _moved_base(
    pr: Mapping[bytes, Content], moved: Mapping[bytes, Content], base: Mapping[bytes, Content]
) -> Callable[[Workspace], Built]:
    """Fork point `base`; the PR branches from it; then `main` moves on with `moved`."""

    def build(ws: Workspace) -> Built:
        repo = make_repo(ws.root)
        fork = commit(repo, dict(base), message="fork point")
        commit(repo, dict(pr), branch="pr", parent=fork, message="pull request")
        commit(repo, dict(moved), branch="main", parent=fork, message="main moved on")
        return Built(repo=Path(repo.workdir))

    return build


def _conflict() -> Callable[[Workspace], Built]:
    return with_inspect(
        _moved_base(
            {b"calc.py": CALC_BROKEN},
            {b"calc.py": b"def add(a, b):\n    return b + a\n"},
            base_tree(),
        ),
        wants_reason("merge-conflict", "patch-mismatch"),
    )


def _applies_elsewhere() -> Callable[[Workspace], Built]:
    """The PR changes `x = 1` in a block between two unique lines P and Q; main then adds a
    copy of the block at the very top. Applying the patch by its context finds the copy
    first (nearest to the old line number), while the three-way merge, whose diff keeps
    P, the block and Q together, changes the original: the two computations disagree."""
    fork = b"P\n" + BLOCK + b"Q\n"
    head = b"P\n" + BLOCK.replace(b"x = 1", b"x = 2") + b"Q\n"
    moved = BLOCK + b"P\n" + BLOCK + b"Q\n"
    return with_inspect(
        _moved_base(
            {b"settings.txt": head},
            {b"settings.txt": moved},
            base_tree(**{"settings.txt": fork}),
        ),
        wants_reason("patch-mismatch", "merge-conflict"),
    )


# --- attacks: policy ------------------------------------------------------------------

PRIVATE_KEY = (
    b"-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + base64.b64encode(b"openssh-key-v1\0" + bytes(range(200)))
    + b"\n-----END OPENSSH PRIVATE KEY-----\n"
)
# The same key saved as UTF-16 (a Windows editor's "Unicode"): NUL bytes make it binary
# to git, and no ASCII pattern matches its bytes.
PRIVATE_KEY_UTF16 = PRIVATE_KEY.decode("ascii").encode("utf-16")
TOKEN_FILE = b'GITHUB_TOKEN = "ghp_' + b"R8aZq2Lw0xVt5NcYb7HkPm3JdEs9UfGi1Qo4" + b'"\n'


# --- attacks on receipts --------------------------------------------------------------


def _honest_receipt(ws: Workspace, name: str = "repo", marker: bytes = b"1") -> tuple[Path, Path]:
    """Prove an honest change: (repository, directory holding receipt.json)."""
    _, path = pr_repo(ws, {b"notes.txt": marker}, name=name)
    out = ws.root / f"out-{name}"
    seen = prove(ws, Built(repo=path), out)
    if seen.outcome != "PROVEN" or seen.problems:
        raise AssertionError(f"the honest change was not PROVEN: {seen}")
    return path, out


def _verify(argv: list[str]) -> Observation:
    code, log = _cli(["verify", *argv])
    problems = [] if code in (0, 1) else [f"verify exited {code}"]
    if "Traceback" in log:
        problems.append("a traceback on stderr")
    if code == 1 and "verify failed" not in log:
        problems.append("verify refused without saying why")
    return Observation(
        outcome=ACCEPTED if code == 0 else NOT_ACCEPTED, exit_code=code, problems=tuple(problems),
        log=log,
    )  # fmt: skip


def _rev(path: Path, spec: str) -> str:
    return str(pygit2.Repository(str(path)).revparse_single(spec).id)


def _tree(path: Path, spec: str) -> str:
    return str(pygit2.Repository(str(path)).revparse_single(spec).peel(pygit2.Tree).id)


def replay_on_other_commit(ws: Workspace) -> Observation:
    path, out = _honest_receipt(ws)
    other = _rev(path, "main")
    return _verify([str(out / "receipt.json"), "--key", str(ws.pub), "--commit", other])


def replay_on_other_repository(ws: Workspace) -> Observation:
    _, out = _honest_receipt(ws)
    other = ws.root / "other"
    repo = make_repo(ws.root, "other")
    first = commit(repo, {b"README": b"another project\n"})
    commit(repo, {b"notes.txt": b"1"}, branch="pr", parent=first)
    return _verify(
        [str(out / "receipt.json"), "--key", str(ws.pub), "--commit", _rev(other, "pr"),
         "--tree", _tree(other, "pr"), "--require", "PROVEN"]
    )  # fmt: skip


def patch_swapped(ws: Workspace) -> Observation:
    path, out = _honest_receipt(ws)
    evil = ws.root / "evil.diff"
    evil.write_bytes((out / "patch.diff").read_bytes().replace(b"+1", b"+2"))
    return _verify(
        [str(out / "receipt.json"), "--key", str(ws.pub), "--commit", _rev(path, "pr"),
         "--patch", str(evil)]
    )  # fmt: skip


def _failed_receipt(ws: Workspace) -> tuple[Path, JsonDict]:
    _, path = pr_repo(ws, {b"calc.py": CALC_BROKEN})
    out = ws.root / "out"
    seen = prove(ws, Built(repo=path), out)
    if seen.outcome != "FAILED":
        raise AssertionError(f"the broken change was not FAILED: {seen}")
    return path, statement_of((out / "receipt.json").read_bytes())


def _promote(statement: JsonDict) -> JsonDict:
    """Turn a FAILED statement into a PROVEN one, with a re-chained, consistent journal."""
    predicate = statement["predicate"]
    assert isinstance(predicate, dict)
    predicate["verdict"] = "PROVEN"
    predicate["reasons"] = []
    journal = predicate["journal"]
    assert isinstance(journal, dict)
    events = journal["events"]
    assert isinstance(events, list)
    prev = "0" * 64
    for event in events:
        if event["kind"] == "verdict":
            event["data"] = {"verdict": "PROVEN", "reasons": []}
        if event["kind"] == "check-finished":
            event["data"]["ok"] = True
        event["prev"] = prev
        event["hash"] = prev = event_hash(event)
    journal["head"] = prev
    return statement


def journal_resigned_untrusted(ws: Workspace) -> Observation:
    path, statement = _failed_receipt(ws)
    key = receipt.load_private_key(ws.untrusted_key.read_bytes(), source="untrusted")
    forged = ws.root / "forged.json"
    forged.write_bytes(receipt.sign(receipt.serialize(_promote(statement)), key))
    return _verify(
        [str(forged), "--key", str(ws.pub), "--commit", _rev(path, "pr"), "--require", "PROVEN"]
    )


def payload_edited_signature_kept(ws: Workspace) -> Observation:
    path, _ = _failed_receipt(ws)
    envelope = json.loads((ws.root / "out" / "receipt.json").read_bytes())
    statement = _promote(statement_of((ws.root / "out" / "receipt.json").read_bytes()))
    envelope["payload"] = base64.b64encode(receipt.serialize(statement)).decode()
    forged = ws.root / "forged.json"
    forged.write_text(json.dumps(envelope))
    return _verify([str(forged), "--key", str(ws.pub), "--require", "PROVEN"])


def unsigned_receipt(ws: Workspace) -> Observation:
    _, path = pr_repo(ws, {b"notes.txt": b"1"})
    out = ws.root / "out"
    seen = prove(ws, Built(repo=path, sign=False), out)
    if seen.outcome != "PROVEN":
        raise AssertionError(f"the honest change was not PROVEN: {seen}")
    return _verify([str(out / "receipt.json"), "--key", str(ws.pub), "--require", "PROVEN"])


def _approval_replayed() -> Callable[[Workspace], Built]:
    """An approval of one HELD patch is offered for a different patch under the same policy."""
    cfg = config(policy='policy:\n  protected: ["infra/**"]\n')

    def build(ws: Workspace) -> Built:
        _, first = pr_repo(
            ws,
            {b"infra/main.tf": b"size = 1\n"},
            base_tree(**{".github/proofgate.yml": cfg}),
            name="first",
        )
        out = ws.root / "out-first"
        seen = prove(ws, Built(repo=first), out)
        if seen.outcome != "HELD":
            raise AssertionError(f"the first change was not HELD: {seen}")
        approval = ws.root / "approval.json"
        code, log = _cli(
            ["approve", "--key", str(ws.key), "--receipt", str(out / "receipt.json"),
             "--approver", "alice", "--out", str(approval)]
        )  # fmt: skip
        if code != 0:
            raise AssertionError(f"approve failed: {log}")
        _, second = pr_repo(
            ws, {b"infra/main.tf": b"size = 1000\n"}, base_tree(**{".github/proofgate.yml": cfg})
        )
        return Built(
            repo=second,
            args=("--approval", str(approval)),
            inspect=wants_reason("approval-invalid", "policy-hold"),
        )

    return build


# --- honest changes -------------------------------------------------------------------

BINARY = bytes(range(256)) * 8 + b"\0\r\n\x1a"
TEST_BINARY = b"""def test_binary_is_byte_exact():
    with open("assets/blob.bin", "rb") as f:
        assert f.read() == bytes(range(256)) * 8 + b"\\0\\r\\n\\x1a"
"""

TEST_SYMLINKS = b"""import os


def test_symlinks_within_the_repository():
    assert os.readlink("latest") == "docs/v2"
    assert os.readlink("notes.txt") == "latest/notes.txt"
    with open("notes.txt") as f:
        assert f.read() == "version two\\n"
"""

TEST_EXEC = b"""import os
import subprocess


def test_exec_bits():
    assert os.access("tools/run.sh", os.X_OK)
    assert os.access("tools/gen.py", os.X_OK)
    assert not os.access("tools/data.txt", os.X_OK)
    assert subprocess.run(["./tools/run.sh"], capture_output=True, text=True).stdout == "ran\\n"
"""

TEST_NON_UTF8 = b"""import os


def test_non_utf8_names():
    names = set(os.listdir(b"data"))
    assert names == {b"caf\\xe9.txt", b"\\xff\\xfe.bin"}
    with open(b"data/caf\\xe9.txt", "rb") as f:
        assert f.read() == b"latin-1 name\\n"
"""

CALC_WITH_SUB = CALC + b"\n\n" + b"\n" * 20 + b"def sub(a, b):\n    return a - b\n"
TEST_SUB = b"from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
CALC_WITH_MUL = CALC + b"\n\n" + b"\n" * 20 + b"def mul(a, b):\n    return a * b\n"
TEST_MUL = b"from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
CALC_BASE_MOVED = CALC + b"\n\ndef sub(a, b):\n    return a - b\n" + b"\n" * 20


def _base_moved_on() -> Callable[[Workspace], Built]:
    fork = base_tree(**{"calc.py": CALC + b"\n" * 22})
    pr = {b"calc.py": CALC + b"\n" * 22 + b"\n\ndef mul(a, b):\n    return a * b\n",
          b"test_mul.py": TEST_MUL}  # fmt: skip
    moved = {b"calc.py": CALC_BASE_MOVED + b"\n" * 2, b"test_sub.py": TEST_SUB}

    def inspect(predicate: JsonDict) -> list[str]:
        head = predicate["head"]
        assert isinstance(head, dict)
        if predicate["proven_tree"] == head["tree"]:
            return ["the proven tree is head's tree although main moved on"]
        checks = predicate["checks"]
        assert isinstance(checks, list)
        tail = checks[0]["phases"][-1]["commands"][0]["log_tail"]
        return [] if "4 passed" in tail else [f"expected 4 tests (base's and the PR's): {tail}"]

    return with_inspect(_moved_base(pr, moved, fork), inspect)


RENAMED_CALC = b"from helpers import plus\n\n\ndef add(a, b):\n    return plus(a, b)\n"
HELPERS = (
    b'"""Small arithmetic helpers."""\n\n\ndef plus(a, b):\n    """Sum."""\n    return a + b\n'
)


def _renamed() -> Callable[[Workspace], Built]:
    base = base_tree(**{"util.py": HELPERS, "calc.py": RENAMED_CALC.replace(b"helpers", b"util")})
    return simple({b"util.py": None, b"helpers.py": HELPERS, b"calc.py": RENAMED_CALC}, base)


def _deleted() -> Callable[[Workspace], Built]:
    base = base_tree(**{"legacy.py": b"OLD = True\n"})
    test = b"import os\n\n\ndef test_legacy_gone():\n    assert not os.path.exists('legacy.py')\n"
    return simple({b"legacy.py": None, b"test_gone.py": test}, base)


# --- the corpus -----------------------------------------------------------------------

F = frozenset
FAILED, HELD, BLOCKED, INCONCLUSIVE = "FAILED", "HELD", "BLOCKED", "INCONCLUSIVE"


def _attack(
    id: str, tries: str, expect: frozenset[str], build: Callable[[Workspace], Built]
) -> Case:
    return Case(id=id, kind="attack", tries=tries, expect=expect, run=prove_case(build))


def _receipt_attack(id: str, tries: str, run: Callable[[Workspace], Observation]) -> Case:
    return Case(id=id, kind="attack", tries=tries, expect=F({NOT_ACCEPTED}), run=run)


def _honest(id: str, tries: str, build: Callable[[Workspace], Built]) -> Case:
    return Case(id=id, kind="honest", tries=tries, expect=F({"PROVEN"}), run=prove_case(build))


CASES: tuple[Case, ...] = (
    # the gate's own rules
    _attack(
        "config-weakened-by-pr",
        "the PR replaces the test command with `true` and breaks the code",
        F({FAILED}),
        _config_weakened(),
    ),
    _attack(
        "config-deleted-by-pr",
        "the PR deletes the config and breaks the code; the base's config still applies",
        F({FAILED}),
        _config_deleted(),
    ),
    _attack(
        "config-only-in-pr",
        "the base has no config; the PR brings a lax one of its own",
        F({INCONCLUSIVE}),
        _config_only_in_head(),
    ),
    _attack(
        "workflow-edited",
        "the PR removes the proofgate step from a workflow",
        F({HELD}),
        _workflow_edited(),
    ),
    _attack(
        "action-yml-edited",
        "the PR rewrites action.yml to always succeed",
        F({HELD}),
        _action_edited(),
    ),
    # forged results
    _attack(
        "test-output-forged",
        "a test prints a pytest success line while the suite fails",
        F({FAILED}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_zz_forge.py": FORGE_OUTPUT}),
            wants_reason("check-failed"),
        ),
    ),
    _attack(
        "junit-report-committed",
        "a passing JUnit report is committed where the config expects one",
        F({INCONCLUSIVE}),
        _junit_committed(),
    ),
    _attack(
        "junit-forged-by-conftest",
        "conftest.py overwrites the JUnit report and forces exit 0 after real failures",
        F({HELD, FAILED}),  # FAILED: the base's tests fail in the trusted run (regression)
        _junit_from_conftest(),
    ),
    # the clean room
    _attack(
        "test-needs-network",
        "a test passes only with a network interface or a route",
        F({FAILED}),
        simple({b"test_net.py": NEEDS_NETWORK}),
    ),
    _attack(
        "test-needs-dns",
        "a test passes only if a name resolves",
        F({FAILED}),
        simple({b"test_dns.py": NEEDS_DNS}),
    ),
    _attack(
        "test-needs-host-secret",
        "a test passes only if a host secret, token or the signing key is in its environment",
        F({FAILED}),
        _needs_secret(),
    ),
    _attack(
        "test-needs-docker-socket",
        "a test passes only with the Docker socket",
        F({FAILED}),
        simple({b"test_docker.py": NEEDS_DOCKER}),
    ),
    _attack(
        "test-needs-host-mounts",
        "a test passes only if it sees host paths or the host's name",
        F({FAILED}),
        _needs_host_files(),
    ),
    _attack(
        "test-needs-host-processes",
        "a test passes only if it sees host processes",
        F({FAILED}),
        simple({b"test_procs.py": NEEDS_HOST_PROCESSES}),
    ),
    _attack(
        "test-needs-capabilities",
        "a test passes only with an effective capability",
        F({FAILED}),
        simple({b"test_caps.py": NEEDS_CAPS}),
    ),
    _attack(
        "test-needs-mknod",
        "a test passes only if it can create a device node",
        F({FAILED}),
        simple({b"test_mknod.py": NEEDS_MKNOD}),
    ),
    _attack(
        "test-needs-chown",
        "a test passes only if root can give a file away (CAP_CHOWN)",
        F({FAILED}),
        simple({b"test_chown.py": NEEDS_CHOWN}),
    ),
    _attack(
        "test-needs-setuid",
        "a test passes only if a setuid-root binary raises privileges",
        F({FAILED}),
        simple({b"test_setuid.py": NEEDS_SETUID}),
    ),
    # the tree
    _attack(
        "symlink-absolute-to-host-file",
        "an absolute symlink to a host file, read by a test",
        F({FAILED, HELD}),
        _symlink_to(_absolute_secret),
    ),
    _attack(
        "symlink-to-etc-passwd",
        "a symlink to /etc/passwd, passing only on the host's copy",
        F({FAILED, HELD}),
        _symlink_to(_etc_passwd),
    ),
    _attack(
        "symlink-relative-escape",
        "a `../` symlink out of the repository to a host file",
        F({BLOCKED}),
        _symlink_to(_relative_escape),
    ),
    _attack(
        "symlink-deep-relative-escape",
        "a `../../..` (x32) symlink to a host file",
        F({BLOCKED}),
        _symlink_to(_deep_relative_escape),
    ),
    _attack(
        "symlink-dir-then-file",
        "a symlink `evil` and a directory `evil/` in one tree, to write through the link",
        F({INCONCLUSIVE}),
        _symlink_dir_then_file(),
    ),
    _attack(
        "tree-entry-dotdot", "a raw tree entry named `..`", F({INCONCLUSIVE}), _odd_name(b"..")
    ),
    _attack(
        "tree-entry-dotgit",
        "a raw tree entry named `.git` planting repository config",
        F({INCONCLUSIVE}),
        _odd_name(b".git"),
    ),
    _attack(
        "tree-entry-dotgit-case",
        "a raw tree entry named `.GIT`",
        F({INCONCLUSIVE}),
        _odd_name(b".GIT"),
    ),
    _attack(
        "tree-entry-with-slash",
        "a raw tree entry whose name contains `/` (`a/../../x`)",
        F({INCONCLUSIVE}),
        _odd_name(b"a/../../planted", int(FileMode.BLOB)),
    ),
    # the tests
    _attack(
        "tests-deleted",
        "the PR breaks the code and deletes the test that shows it",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": None}), wants_finding("tests-deleted")
        ),
    ),
    _attack(
        "tests-skipped",
        "the PR breaks the code and marks its test skipped",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": SKIPPED}),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "test-skipped-through-an-import-alias",
        "the PR breaks the code and skips its test with `import pytest as pt`, `@pt.mark.skip`",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": ALIASED_SKIP}),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "test-skipped-through-a-marker-object",
        "the PR breaks the code and applies `later = pytest.mark.skip(...)` as `@later`",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": MARKER_OBJECT_SKIP}),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "test-skipped-by-raising-skiptest",
        "the PR breaks the code and raises unittest.SkipTest in its test",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": RAISED_SKIP}),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "test-xfailed-at-run-time-through-applymarker",
        "the PR breaks the code and calls `request.applymarker(pytest.mark.xfail)` in its test",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": APPLIED_XFAIL}),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "test-skipped-through-a-new-helper",
        "the PR breaks the code and has its test call a new helper that calls pytest.skip()",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": HELPER_SKIP}),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "session-ended-by-pytest-exit",
        "the PR breaks the code and calls `pytest.exit(returncode=0)` before its assertion",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": SESSION_EXIT}),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "bytecode-behind-a-symlink-named-pyc",
        "the PR deletes calc.py and adds `calc.pyc` as a symlink to a data file holding the "
        "bytecode of a rigged `add`",
        F({HELD}),
        with_inspect(
            simple(
                {
                    b"calc.py": None,
                    b"assets/calc.dat": _pyc(RIGGED_ADD),
                    b"calc.pyc": Symlink(b"assets/calc.dat"),
                }
            ),
            wants_finding("compiled-code-added"),
        ),
    ),
    _attack(
        "pass-all-plugin-via-root-dist-info",
        "the PR breaks the code and adds a root *.dist-info whose pytest11 entry point loads "
        "a plugin reporting every test passed",
        F({HELD, FAILED}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, **DIST_INFO}), wants_finding("plugin-metadata-added")
        ),
    ),
    _attack(
        "pass-all-plugin-via-pytest-plugins",
        "the PR breaks the code and loads a pass-all plugin with pytest_plugins in a test module",
        F({HELD, FAILED}),
        with_inspect(
            simple(
                {
                    b"calc.py": CALC_BROKEN,
                    b"passall_plugin.py": PASS_ALL_PLUGIN,
                    b"test_calc.py": b"pytest_plugins = ['passall_plugin']\n" + TEST_CALC,
                }
            ),
            wants_finding("test-plugin-added"),
        ),
    ),
    _attack(
        "pass-all-plugin-via-globals-pytest-plugins",
        "the PR breaks the code and loads a pass-all plugin with "
        "`globals()['pytest_plugins'] = [...]` in a test module",
        F({HELD, FAILED}),
        with_inspect(
            simple(
                {
                    b"calc.py": CALC_BROKEN,
                    b"passall_plugin.py": PASS_ALL_PLUGIN,
                    b"test_calc.py": b"globals()['pytest_plugins'] = ['passall_plugin']\n"
                    + TEST_CALC,
                }
            ),
            wants_finding("test-plugin-added"),
        ),
    ),
    _attack(
        "runner-shadowed-by-root-pytest-py",
        "the PR breaks the code and adds a root pytest.py that prints a pass and exits 0",
        # the start-up hook imports the real pytest before /workspace is on sys.path, so
        # the base's tests run and fail too
        F({HELD, FAILED}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"pytest.py": FAKE_PYTEST}),
            wants_finding("module-shadowing"),
        ),
    ),
    _attack(
        "tests-collect-only-via-pytest-ini",
        "the PR breaks the code and makes pytest only collect (addopts = --co)",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"pytest.ini": b"[pytest]\naddopts = --co\n"}),
            wants_finding("test-config-changed"),
        ),
    ),
    _attack(
        "test-renamed-out-of-collection",
        "the PR breaks the code and renames test_add so pytest no longer collects it",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": RENAMED_TEST}),
            wants_finding("tests-deleted"),
        ),
    ),
    _attack(
        "test-module-disabled-by-dunder-test",
        "the PR breaks the code and sets __test__ = False in the test module",
        F({HELD}),
        with_inspect(
            simple({b"calc.py": CALC_BROKEN, b"test_calc.py": DUNDER_TEST_OFF}),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "tests-deselected-by-pytest-ini",
        "the PR breaks the code and deselects its test in pytest.ini",
        F({HELD}),
        with_inspect(
            simple(
                {
                    b"calc.py": CALC_BROKEN,
                    b"pytest.ini": b"[pytest]\naddopts = --deselect test_calc.py::test_add\n",
                }
            ),
            wants_finding("tests-skipped"),
        ),
    ),
    _attack(
        "check-poisons-next-check",
        "check one writes to /tmp, $HOME, site-packages; check two depends on it",
        F({FAILED}),
        _poisoner(),
    ),
    # floods
    _attack(
        "fork-flood",
        "a fork bomb, then a test that needs 500 processes (pids 64)",
        F({FAILED}),
        _flood(FORK_FLOOD),
    ),
    _attack(
        "memory-flood", "a test that needs 1 GiB (memory 128m)", F({FAILED}), _flood(MEMORY_FLOOD)
    ),
    _attack(
        "disk-flood",
        "a test that writes to /workspace forever (200 MB at a time)",
        F({FAILED}),
        with_inspect(
            _flood(DISK_FLOOD, timeout=5), wants_reason("check-timed-out", "check-oom-killed")
        ),
    ),
    _attack(
        "log-flood",
        "200 MB of output to push the failure out of the record",
        F({FAILED}),
        with_inspect(_flood(LOG_FLOOD, timeout=60), _log_flood_inspect),
    ),
    _attack(
        "sleep-forever",
        "a test that never ends",
        F({FAILED}),
        with_inspect(_flood(SLEEP_FOREVER, timeout=3), wants_reason("check-timed-out")),
    ),
    # patch re-application
    _attack(
        "base-moved-conflicting",
        "main moved on with a conflicting change to the same line",
        F({INCONCLUSIVE}),
        _conflict(),
    ),
    _attack(
        "patch-applies-elsewhere",
        "the patch's context also matches a copy main added above; apply and merge disagree",
        F({INCONCLUSIVE}),
        _applies_elsewhere(),
    ),
    # policy
    _attack(
        "private-key-added-as-utf16",
        "the PR adds an OpenSSH private key saved as UTF-16 (binary to git)",
        F({BLOCKED}),
        with_inspect(
            simple({b"deploy/id_ed25519.txt": PRIVATE_KEY_UTF16}),
            both(no_checks_ran, wants_finding("private-key")),
        ),
    ),
    _attack(
        "private-key-added",
        "the PR adds an OpenSSH private key",
        F({BLOCKED}),
        with_inspect(
            simple({b"deploy/id_ed25519": PRIVATE_KEY}),
            both(no_checks_ran, wants_finding("private-key")),
        ),
    ),
    _attack(
        "token-added",
        "the PR adds a GitHub token",
        F({HELD}),
        with_inspect(simple({b"settings.py": TOKEN_FILE}), wants_finding("secret-token")),
    ),
    _attack(
        "approval-replayed-on-other-patch",
        "an approval of one HELD patch is offered for another",
        F({HELD, INCONCLUSIVE}),
        _approval_replayed(),
    ),
    # receipts
    _receipt_attack(
        "receipt-replayed-on-other-commit",
        "a PROVEN receipt is verified against another commit",
        replay_on_other_commit,
    ),
    _receipt_attack(
        "receipt-replayed-on-other-repository",
        "a PROVEN receipt is verified against another repository's commit and tree",
        replay_on_other_repository,
    ),
    _receipt_attack(
        "receipt-with-swapped-patch",
        "a PROVEN receipt is verified against a different patch.diff",
        patch_swapped,
    ),
    _receipt_attack(
        "journal-edited-resigned-untrusted",
        "a FAILED receipt rewritten to PROVEN, journal re-chained, re-signed by an untrusted key",
        journal_resigned_untrusted,
    ),
    _receipt_attack(
        "payload-edited-signature-kept",
        "a FAILED receipt's payload is rewritten to PROVEN, the old signature kept",
        payload_edited_signature_kept,
    ),
    _receipt_attack(
        "unsigned-receipt",
        "a receipt proven without a key is presented as evidence",
        unsigned_receipt,
    ),
    # honest changes
    _honest(
        "honest-binary-file",
        "adds a binary file with NUL, CR LF and ^Z bytes",
        simple({b"assets/blob.bin": BINARY, b"test_blob.py": TEST_BINARY}),
    ),
    _honest(
        "honest-symlinks-within-repo",
        "adds a directory symlink and a file symlink through it",
        simple(
            {
                b"docs/v2/notes.txt": b"version two\n",
                b"latest": Symlink(b"docs/v2"),
                b"notes.txt": Symlink(b"latest/notes.txt"),
                b"test_links.py": TEST_SYMLINKS,
            }
        ),
    ),
    _honest(
        "honest-exec-bits",
        "adds an executable script and makes an existing file executable",
        simple(
            {
                b"tools/run.sh": (b"#!/bin/sh\necho ran\n", EXEC),
                b"tools/gen.py": (b"print(1)\n", EXEC),
                b"test_exec.py": TEST_EXEC,
            },
            base_tree(**{"tools/gen.py": b"print(1)\n", "tools/data.txt": b"d\n"}),
        ),
    ),
    _honest(
        "honest-non-utf8-names",
        "adds files whose names are not UTF-8",
        simple(
            {
                b"data/caf\xe9.txt": b"latin-1 name\n",
                b"data/\xff\xfe.bin": b"\x00\x01",
                b"test_names.py": TEST_NON_UTF8,
            }
        ),
    ),
    _honest(
        "honest-base-moved-on",
        "main moved on with a non-conflicting change; both changes are tested",
        _base_moved_on(),
    ),
    _honest("honest-rename", "renames a module and updates its import", _renamed()),
    _honest("honest-delete-non-test-file", "deletes a module nobody uses", _deleted()),
)

ATTACKS = tuple(c for c in CASES if c.kind == "attack")
HONEST = tuple(c for c in CASES if c.kind == "honest")


def by_id(case_id: str) -> Case:
    for case in CASES:
        if case.id == case_id:
            return case
    raise KeyError(case_id)


# Attacks on the evidence (SPEC §3.2) live in their own module and count here.
from tests.attacks.environment import ENVIRONMENT_CASES  # noqa: E402
from tests.attacks.evidence import (  # noqa: E402
    DEPENDS_CASES,
    EVIDENCE_CASES,
    IN_PROCESS_CASES,
    WITNESS_CASES,
    in_package,
)

_LIES = tuple(c for c in IN_PROCESS_CASES if c.kind == "attack")
_LIES_HONEST = tuple(c for c in IN_PROCESS_CASES if c.kind == "honest")
HONEST = (
    *HONEST,
    _honest(
        "honest-in-package-tests",
        "adds a feature to a package whose tests (and a helper) live in calc/tests/",
        simple(
            {
                **in_package(),
                b"calc/__init__.py": CALC + b"\n\ndef mul(a, b):\n    return a * b\n",
                b"calc/tests/test_mul.py": b"from calc import mul\n\n\n"
                b"def test_mul():\n    assert mul(2, 3) == 6\n",
            },
            in_package(),  # type: ignore[arg-type]
        ),
    ),
)
CASES = (
    *ATTACKS,
    *EVIDENCE_CASES,
    *WITNESS_CASES,
    *_LIES,
    *ENVIRONMENT_CASES,
    *DEPENDS_CASES,
    *HONEST,
    *_LIES_HONEST,
)  # attacks before honest changes
ATTACKS = tuple(c for c in CASES if c.kind == "attack")
HONEST = tuple(c for c in CASES if c.kind == "honest")
