"""Rule catalog of the policy: one hit and one near miss per rule (issue 6)."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gate.model import Budgets, ChangeStatus, Decision, InventoryEntry, PolicySpec
from gate.policy import (
    RULES,
    AuditFinding,
    CiAudit,
    CiFiles,
    PinTags,
    TagAnswer,
    Thresholds,
    evaluate,
)
from gate.policy.testing import shadowed_module

_STATUS = {
    "A": ChangeStatus.ADDED,
    "M": ChangeStatus.MODIFIED,
    "D": ChangeStatus.DELETED,
    "R": ChangeStatus.RENAMED,
}


@dataclass(frozen=True)
class Change:
    entry: InventoryEntry
    patch: bytes


def _b(s: str | bytes) -> bytes:
    return s if isinstance(s, bytes) else s.encode()


def chg(
    path: str | bytes,
    status: str = "M",
    *,
    added: Sequence[str | bytes] = (),
    deleted: Sequence[str | bytes] = (),
    context: Sequence[str | bytes] = (),
    old_path: str | bytes | None = None,
    old_mode: int | None = 0o100644,
    new_mode: int | None = 0o100644,
    start: int = 1,
    **entry: object,
) -> Change:
    """One changed file: its inventory entry and its git-format diff (one hunk)."""
    p = _b(path)
    old = _b(old_path) if old_path is not None else p
    lines = [b"diff --git a/" + old + b" b/" + p]
    if status == "A":
        old_mode = None
        lines += [b"new file mode %o" % (new_mode or 0o100644), b"--- /dev/null", b"+++ b/" + p]
    elif status == "D":
        new_mode = None
        lines += [b"deleted file mode %o" % (old_mode or 0), b"--- a/" + old, b"+++ /dev/null"]
    else:
        if old != p:
            lines += [b"rename from " + old, b"rename to " + p]
        if old_mode != new_mode:
            lines += [b"old mode %o" % (old_mode or 0), b"new mode %o" % (new_mode or 0)]
        lines += [b"--- a/" + old, b"+++ b/" + p]
    ctx = [_b(c) for c in context]
    dels = [_b(d) for d in deleted]
    adds = [_b(a) for a in added]
    if ctx or dels or adds:
        o, n = len(ctx) + len(dels), len(ctx) + len(adds)
        lines.append(b"@@ -%d,%d +%d,%d @@" % (start if o else 0, o, start if n else 0, n))
        lines += [b" " + c for c in ctx] + [b"-" + d for d in dels] + [b"+" + a for a in adds]
    e = InventoryEntry(
        path=p if status != "D" else old,
        status=_STATUS[status],
        old_path=old if status == "R" else None,
        old_mode=old_mode,
        new_mode=new_mode,
        lines_added=len(adds),
        lines_deleted=len(dels),
        **entry,  # type: ignore[arg-type]
    )
    return Change(e, b"\n".join(lines) + b"\n")


def judge(
    changes: Sequence[Change],
    spec: PolicySpec | None = None,
    *,
    tree_files: Mapping[bytes, bytes] | None = None,
    thresholds: Thresholds | None = None,
    pin_tags: PinTags | None = None,
    ci: CiFiles | None = None,
) -> tuple[Decision, set[str], tuple[str, ...]]:
    r = evaluate(
        [c.entry for c in changes],
        b"".join(c.patch for c in changes),
        spec or PolicySpec(),
        tree_files=tree_files,
        thresholds=thresholds,
        pin_tags=pin_tags,
        ci=ci,
    )
    return r.decision, {f.rule for f in r.findings}, tuple(f.message for f in r.findings)


PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
GHP = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
PYPROJECT_HEAD = ["[project]", 'name = "demo"']


@dataclass(frozen=True)
class Case:
    changes: tuple[Change, ...]
    rule: str
    hit: bool
    decision: Decision
    spec: PolicySpec = field(default_factory=PolicySpec)
    tree_files: Mapping[bytes, bytes] | None = None
    thresholds: Thresholds | None = None
    pin_tags: PinTags | None = None
    ci: CiFiles | None = None


A, H, D = Decision.ALLOW, Decision.HOLD, Decision.DENY
_WF = b".github/workflows/ci.yml"
_WORKFLOW = (
    "on: push\npermissions: {{contents: {perm}}}\njobs:\n  t:\n    runs-on: ubuntu-latest\n"
    "    steps:\n      - uses: {uses}\n      - run: {run}\n"
)


def _wf(perm: str = "read", uses: str = "actions/setup-python@v5", run: str = "make") -> bytes:
    return _WORKFLOW.format(perm=perm, uses=uses, run=run).encode()


def _ci_case(
    old: bytes, new: bytes, rule: str, hit: bool, decision: Decision, audit: CiAudit | None = None
) -> Case:
    """A one-workflow change with both sides' files (SPEC §2.1)."""
    gone = [ln for ln in old.decode().split("\n") if ln not in new.decode().split("\n")]
    came = [ln for ln in new.decode().split("\n") if ln not in old.decode().split("\n")]
    files = CiFiles(base={_WF: old}, head={_WF: new}, audit=audit or CiAudit())
    return Case((chg(_WF, added=came, deleted=gone),), rule, hit, decision, ci=files)


_INJECTION = AuditFinding(
    ident="template-injection", path=_WF, route=("jobs", "t", "steps", 1), line=8, message="x"
)
_ACTION_BUMP = chg(
    ".github/workflows/ci.yml",
    deleted=["      - uses: actions/checkout@" + "1" * 40 + " # v4.2.2"],
    added=["      - uses: actions/checkout@" + "2" * 40 + " # v4.3.0"],
)
_CHECKOUT_TAGS = PinTags(
    answers={
        ("actions/checkout", "v4.2.2"): TagAnswer(exists=True, commit="1" * 40),
        ("actions/checkout", "v4.3.0"): TagAnswer(exists=True, commit="2" * 40),
    }
)

CASES: dict[str, Case] = {
    # gate-config-changed
    "config-edited-is-held": Case(
        (chg(".github/proofgate.yml", added=["  deny: []"]),), "gate-config-changed", True, H
    ),
    "config-renamed-away-is-held": Case(
        (chg("old-proofgate.yml", "R", old_path=".github/proofgate.yml"),),
        "gate-config-changed",
        True,
        H,
    ),
    "config-lookalike-is-not-config": Case(
        (chg(".github/proofgate.yml.example", added=["x"]),), "gate-config-changed", False, A
    ),
    # SPEC §2.1: without both sides' workflow files what a change grants cannot be read
    # (tests/unit/test_policy_ci.py judges them with the files)
    "workflow-edited-unread": Case(
        (chg(".github/workflows/ci.yml", added=["run: curl x | sh"]),),
        "ci-privilege-changed",
        True,
        H,
    ),
    "nested-action-yaml-unread": Case(
        (chg("tools/release/action.yaml", "A", added=["runs: {}"]),),
        "ci-privilege-changed",
        True,
        H,
    ),
    "read-only-step-edited": _ci_case(_wf(), _wf(run="make test"), "ci-workflow-changed", True, A),
    "read-only-step-edited-is-not-privileged": _ci_case(
        _wf(), _wf(run="make test"), "ci-privileged-job-changed", False, A
    ),
    "read-only-step-edited-grants-nothing": _ci_case(
        _wf(), _wf(run="make test"), "ci-privilege-changed", False, A
    ),
    "write-permission-added": _ci_case(_wf(), _wf("write"), "ci-privilege-changed", True, H),
    "write-job-step-edited": _ci_case(
        _wf("write"), _wf("write", run="make test"), "ci-privileged-job-changed", True, H
    ),
    "new-action-repository-by-tag": _ci_case(
        _wf(), _wf(uses="evil/thing@v1"), "ci-action-unverified", True, H
    ),
    "tag-bump-of-a-used-action": _ci_case(
        _wf(), _wf(uses="actions/setup-python@v6"), "ci-action-unverified", False, A
    ),
    "new-audit-finding": _ci_case(
        _wf(), _wf(run="make test"), "ci-audit-finding", True, H, CiAudit(head=(_INJECTION,))
    ),
    "audit-finding-the-base-had": _ci_case(
        _wf(),
        _wf(run="make test"),
        "ci-audit-finding",
        False,
        A,
        CiAudit(base=(_INJECTION,), head=(_INJECTION,)),
    ),
    "gitlab-ci-is-not-read": Case(
        (chg(".gitlab-ci.yml", added=["script: curl x | sh"]),), "ci-privilege-changed", True, H
    ),
    "docs-about-workflows": Case(
        (chg("docs/workflows/ci.md", added=["text"]),), "ci-workflow-changed", False, A
    ),
    # ci-matrix-changed: which Pythons and hosted runners CI tests on
    "matrix-entry-removed": Case(
        (chg(".github/workflows/tests.yaml", deleted=["          - {python: '3.9'}"]),),
        "ci-matrix-changed",
        True,
        A,
    ),
    "matrix-on-a-self-hosted-runner": Case(
        (chg(".github/workflows/tests.yaml", added=["          - {python: '3.9', os: mine}"]),),
        "ci-matrix-changed",
        False,
        H,
    ),
    # pin-bump-verified: the upstream's tags, looked up, name exactly these commits
    "action-bump-verified": Case(
        (_ACTION_BUMP,), "pin-bump-verified", True, A, pin_tags=_CHECKOUT_TAGS
    ),
    "action-bump-unverified-locally": Case((_ACTION_BUMP,), "pin-bump-verified", False, H),
    # build-hook-changed
    "setup-py": Case((chg("setup.py", added=["import os"]),), "build-hook-changed", True, H),
    "nested-conftest": Case(
        (chg("pkg/tests/conftest.py", added=["import os"]),), "build-hook-changed", True, H
    ),
    "dockerfile-variant": Case(
        (chg("docker/Dockerfile.dev", added=["RUN x"]),), "build-hook-changed", True, H
    ),
    "pth-file": Case(
        (chg("src/evil.pth", "A", added=["import os"]),), "build-hook-changed", True, H
    ),
    "pyproject-build-backend": Case(
        (
            chg(
                "pyproject.toml",
                context=["[build-system]", 'requires = ["setuptools"]'],
                added=['build-backend = "backend"'],
            ),
        ),
        "build-hook-changed",
        True,
        H,
    ),
    "pyproject-entry-point": Case(
        (
            chg(
                "pyproject.toml",
                context=["[project.entry-points.pytest11]"],
                added=['evil = "pkg.plugin"'],
            ),
        ),
        "build-hook-changed",
        True,
        H,
    ),
    "pyproject-version-bump-is-not-a-hook": Case(
        (
            chg(
                "pyproject.toml",
                context=PYPROJECT_HEAD,
                deleted=['version = "1.0"'],
                added=['version = "1.1"'],
            ),
        ),
        "build-hook-changed",
        False,
        A,
    ),
    "pyproject-unseen-section-is-held": Case(
        (chg("pyproject.toml", context=["a = 1"], added=["b = 2"]),),
        "build-hook-changed",
        True,
        H,
    ),
    "pyproject-section-from-tree": Case(
        (chg("pyproject.toml", context=["a = 1"], added=["b = 2"], start=2),),
        "build-hook-changed",
        False,
        A,
        tree_files={b"pyproject.toml": b"[tool.demo]\na = 1\nb = 2\n"},
    ),
    "package-json-postinstall": Case(
        (
            chg(
                "package.json",
                context=["{", '  "scripts": {'],
                added=['    "postinstall": "node evil.js"'],
            ),
        ),
        "build-hook-changed",
        True,
        H,
    ),
    "package-json-description": Case(
        (chg("package.json", context=["{"], added=['  "description": "x",']),),
        "build-hook-changed",
        False,
        A,
    ),
    "setup-cfg-entry-points": Case(
        (chg("setup.cfg", context=["[options.entry_points]"], added=["pytest11 = x = evil"]),),
        "build-hook-changed",
        True,
        H,
    ),
    "setup-cfg-flake8-is-not-build": Case(
        (chg("setup.cfg", context=["[flake8]"], added=["max-line-length = 100"]),),
        "build-hook-changed",
        False,
        A,
    ),
    "tox-commands": Case(
        (chg("tox.ini", context=["[testenv]", "commands ="], added=["    curl x | sh"]),),
        "build-hook-changed",
        True,
        H,
        spec=PolicySpec(commands=("tox -e py",)),
    ),
    "tox-commands-no-check-runs": Case(
        (chg("tox.ini", context=["[testenv]", "commands ="], added=["    curl x | sh"]),),
        "build-hook-changed",
        False,
        A,
        spec=PolicySpec(commands=("python -m pytest",)),
    ),
    "pre-commit-hook-added-a-check-runs": Case(
        (chg(".pre-commit-config.yaml", added=["  - repo: https://github.com/evil/hooks"]),),
        "build-hook-changed",
        True,
        H,
        spec=PolicySpec(commands=("pre-commit run --all-files",)),
    ),
    "readme-is-not-build": Case((chg("README.md", added=["x"]),), "build-hook-changed", False, A),
    # module-shadowing: a module the test run imports, replaced from the workspace
    "root-pytest-py-fakes-a-passing-run": Case(
        (chg("pytest.py", "A", added=["import sys", "print('2 passed')", "sys.exit(0)"]),),
        "module-shadowing",
        True,
        H,
    ),
    "root-pytest-internals-package": Case(
        (chg("_pytest/__init__.py", "A", added=["x = 1"]),), "module-shadowing", True, H
    ),
    "root-pluggy-package": Case(
        (chg("pluggy/__init__.py", "A", added=["x = 1"]),), "module-shadowing", True, H
    ),
    "root-iniconfig-module": Case(
        (chg("iniconfig.py", "A", added=["x = 1"]),), "module-shadowing", True, H
    ),
    "root-packaging-package": Case(
        (chg("packaging/__init__.py", "A", added=["x = 1"]),), "module-shadowing", True, H
    ),
    "root-stdlib-json": Case((chg("json.py", "A", added=["x = 1"]),), "module-shadowing", True, H),
    "root-stdlib-unittest-package": Case(
        (chg("unittest/__init__.py", "A", added=["x = 1"]),), "module-shadowing", True, H
    ),
    "plugin-named-module": Case(
        (chg("pytest_cov.py", "A", added=["x = 1"]),), "module-shadowing", True, H
    ),
    "sourceless-pyc-shadow": Case(
        (chg("pytest.pyc", "A", binary=True),), "module-shadowing", True, H
    ),
    "extension-module-shadow": Case(
        (chg("json.cpython-311-x86_64-linux-gnu.so", "A", binary=True),),
        "module-shadowing",
        True,
        H,
    ),
    "module-renamed-to-stdlib-name": Case(
        (chg("json.py", "R", old_path="myjson.py"),), "module-shadowing", True, H
    ),
    "symlink-named-like-a-package": Case(
        (chg("pytest", "A", new_mode=0o120000, symlink_target=b"vendor/fake"),),
        "module-shadowing",
        True,
        H,
    ),
    "tests-dir-json-shadows-in-prepend-mode": Case(
        (chg("tests/json.py", "A", added=["x = 1"]),),
        "module-shadowing",
        True,
        H,
        tree_files={b"tests/test_a.py": b"", b"tests/json.py": b"x = 1\n"},
    ),
    "shadow-in-package-dir-without-tree-is-held": Case(
        (chg("src/mypkg/json.py", "A", added=["x = 1"]),), "module-shadowing", True, H
    ),
    "package-marker-removed-exposes-shadow": Case(
        (chg("qa/__init__.py", "D", deleted=[""]),),
        "module-shadowing",
        True,
        H,
        tree_files={b"qa/test_a.py": b"", b"qa/typing.py": b""},
    ),
    "json-inside-a-package-is-not-shadowing": Case(
        (chg("src/mypkg/json.py", "A", added=["x = 1"]),),
        "module-shadowing",
        False,
        A,
        tree_files={b"src/mypkg/__init__.py": b"", b"src/mypkg/json.py": b"x = 1\n"},
    ),
    "json-in-a-package-the-patch-adds": Case(
        (
            chg("mypkg/__init__.py", "A", added=["x = 1"]),
            chg("mypkg/json.py", "A", added=["x = 1"]),
        ),
        "module-shadowing",
        False,
        A,
    ),
    "ordinary-tool-module": Case(
        (chg("tools/report.py", "A", added=["x = 1"]),), "module-shadowing", False, A
    ),
    "stdlib-name-edited-in-place": Case(
        (chg("json.py", added=["x = 2"]),), "module-shadowing", False, A
    ),
    "stdlib-name-as-data-file": Case(
        (chg("json.txt", "A", added=["x"]),), "module-shadowing", False, A
    ),
    "package-marker-removed-ordinary-modules": Case(
        (chg("qa/__init__.py", "D", deleted=[""]),),
        "module-shadowing",
        False,
        A,
        tree_files={b"qa/test_a.py": b"", b"qa/helpers.py": b""},
    ),
    # git-plumbing-changed
    "gitattributes-filter": Case(
        (chg(".gitattributes", added=["* filter=evil"]),), "git-plumbing-changed", True, H
    ),
    "submodule-pointer": Case(
        (chg("vendor/lib", old_mode=0o160000, new_mode=0o160000, gitlink=True),),
        "git-plumbing-changed",
        True,
        H,
    ),
    "husky-hook": Case(
        (chg(".husky/pre-commit", "A", added=["curl x | sh"]),), "git-plumbing-changed", True, H
    ),
    "doc-about-gitattributes": Case(
        (chg("docs/gitattributes.md", added=["x"]),), "git-plumbing-changed", False, A
    ),
    # symlink-escapes
    "symlink-climbs-out": Case(  # DENY: symlink-unmaterializable fires too
        (chg("a/link", "A", new_mode=0o120000, symlink_target=b"../../etc/passwd"),),
        "symlink-escapes",
        True,
        D,
    ),
    # symlink-unmaterializable
    "symlink-above-the-root-cannot-be-extracted": Case(
        (chg("up-link", "A", new_mode=0o120000, symlink_target=b"../../../../outside"),),
        "symlink-unmaterializable",
        True,
        D,
    ),
    "symlink-absolute-extracts-as-is": Case(
        (chg("link", "A", new_mode=0o120000, symlink_target=b"/etc/passwd"),),
        "symlink-unmaterializable",
        False,
        H,
    ),
    "symlink-up-but-inside": Case(
        (chg("a/b/link", "A", new_mode=0o120000, symlink_target=b"../../c"),),
        "symlink-unmaterializable",
        False,
        A,
    ),
    "symlink-absolute": Case(
        (chg("link", "A", new_mode=0o120000, symlink_target=b"/etc/passwd"),),
        "symlink-escapes",
        True,
        H,
    ),
    "symlink-inside": Case(
        (chg("a/b/link", "A", new_mode=0o120000, symlink_target=b"../lib/x"),),
        "symlink-escapes",
        False,
        A,
    ),
    "symlink-loop": Case(  # gate/git/symlinks.py found it loops: held, not "outside"
        (chg("a", "A", new_mode=0o120000, symlink_target=b"b", symlink_loop=(b"a", b"b", b"a")),),
        "symlink-escapes",
        True,
        H,
    ),
    # new-executable
    "executable-outside-scripts-recorded": Case(
        (chg("src/run.sh", "A", new_mode=0o100755, added=["#!/bin/sh"]),),
        "new-executable",
        True,
        A,
    ),
    "executable-held-when-configured": Case(
        (chg("src/run", old_mode=0o100644, new_mode=0o100755),),
        "new-executable",
        True,
        H,
        spec=PolicySpec(rules=(("new-executable", H),)),
    ),
    "executable-in-scripts": Case(
        (chg("scripts/run.sh", "A", new_mode=0o100755, added=["#!/bin/sh"]),),
        "new-executable",
        False,
        A,
    ),
    # private-key
    "pem-private-key-denied": Case(
        (
            chg(
                "deploy/key.txt",
                "A",
                added=[
                    "-----BEGIN RSA PRIVATE KEY-----",
                    PEM_BODY,
                    "-----END RSA PRIVATE KEY-----",
                ],
            ),
        ),
        "private-key",
        True,
        D,
    ),
    "openssh-key-in-one-string": Case(
        (chg("t.py", added=[f'K = "-----BEGIN OPENSSH PRIVATE KEY-----\\n{PEM_BODY}"']),),
        "private-key",
        True,
        D,
    ),
    "pem-parser-constant-is-not-a-key": Case(
        (chg("pem.py", added=['MARKER = b"-----BEGIN PRIVATE KEY-----"', "def parse(x):"]),),
        "private-key",
        False,
        A,
    ),
    # secret-token
    "github-token": Case((chg("cfg.py", added=[f'T = "{GHP}"']),), "secret-token", True, H),
    "aws-key-id": Case(
        (chg("env.sh", added=["export AWS_ACCESS_KEY_ID=AKIAQ3EGUWSXB2EXAMPL"]),),
        "secret-token",
        True,
        H,
    ),
    "high-entropy-assignment": Case(
        (chg("settings.py", added=['API_TOKEN = "q8Zr3LmT0vXy7WcN2bKd5PsF"']),),
        "secret-token",
        True,
        H,
    ),
    "token-from-environment": Case(
        (chg("settings.py", added=['API_TOKEN = os.environ["API_TOKEN_FROM_ENV"]']),),
        "secret-token",
        False,
        A,
    ),
    "low-entropy-password": Case(
        (chg("t.py", added=['PASSWORD = "aaaaaaaaaaaaaaaaaaaaaaaaaaaa"']),),
        "secret-token",
        False,
        A,
    ),
    # tests-deleted
    "test-renamed-to-a-name-pytest-does-not-collect": Case(
        (chg("tests/testing_checks_disabled.py", "R", old_path="tests/test_testing.py"),),
        "tests-deleted",
        True,
        H,
    ),
    "test-renamed-to-a-collected-name": Case(
        (chg("tests/test_testing_more.py", "R", old_path="tests/test_testing.py"),),
        "tests-deleted",
        False,
        A,
    ),
    "tests-moved-into-a-file-pytest-does-not-collect": Case(
        (
            chg("tests/test_auth.py", "D", deleted=["def test_login():", "    pass"]),
            chg("tests/auth_disabled.py", "A", added=["def test_login():", "    pass"]),
        ),
        "tests-deleted",
        True,
        H,
    ),
    "test-file-deleted": Case(
        (chg("tests/test_auth.py", "D", deleted=["def test_login():", "    assert ok"]),),
        "tests-deleted",
        True,
        H,
    ),
    "test-renamed-out-of-collection": Case(
        (chg("tests/auth_checks.txt", "R", old_path="tests/test_auth.py"),),
        "tests-deleted",
        True,
        H,
    ),
    "tests-moved-to-another-file": Case(
        (
            chg("tests/test_auth.py", "D", deleted=["def test_login():", "    pass"]),
            chg("tests/auth/test_login.py", "A", added=["def test_login():", "    pass"]),
        ),
        "tests-deleted",
        False,
        A,
    ),
    "test-function-removed-from-kept-file": Case(
        (
            chg(
                "tests/test_auth.py",
                context=["import pytest"],
                deleted=["def test_login():", "    assert login()"],
            ),
        ),
        "tests-deleted",
        True,
        H,
    ),
    "test-renamed-in-place": Case(
        (
            chg(
                "tests/test_auth.py",
                deleted=["def test_login():"],
                added=["def test_login_later():"],
                context=["    assert login()"],
            ),
        ),
        "tests-deleted",
        True,
        H,
    ),
    "async-test-and-test-class-removed": Case(
        (
            chg(
                "tests/test_auth.py",
                context=["import pytest"],
                deleted=["async def test_a():", "    pass", "class TestB:", "    pass"],
            ),
        ),
        "tests-deleted",
        True,
        H,
    ),
    "test-added-is-not-deleted": Case(
        (chg("tests/test_auth.py", context=["import x"], added=["def test_new():", "    pass"]),),
        "tests-deleted",
        False,
        A,
    ),
    "test-moved-between-kept-files": Case(
        (
            chg("tests/test_a.py", context=["import x"], deleted=["def test_x():", "    pass"]),
            chg("tests/test_b.py", context=["import x"], added=["def test_x():", "    pass"]),
        ),
        "tests-deleted",
        False,
        A,
    ),
    "test-signature-reformatted": Case(
        (
            chg(
                "tests/test_a.py",
                deleted=["def test_x(a, b):"],
                added=["def test_x(", "    a, b", "):"],
            ),
        ),
        "tests-deleted",
        False,
        A,
    ),
    "source-file-deleted": Case(
        (chg("src/auth.py", "D", deleted=["x = 1"]),), "tests-deleted", False, A
    ),
    # tests-skipped
    "existing-test-skipped": Case(
        (
            chg(
                "tests/test_a.py",
                context=["import pytest"],
                added=["@pytest.mark.skip(reason='later')"],
            ),
        ),
        "tests-skipped",
        True,
        H,
    ),
    "existing-test-skipped-above-def": Case(
        (
            chg(
                "tests/test_a.py",
                added=["@pytest.mark.xfail"],
                context=["def test_a():", "    assert f()"],
            ),
        ),
        "tests-skipped",
        True,
        H,
    ),
    "go-test-skipped": Case(
        (chg("pkg/a_test.go", context=["func TestA(t *testing.T) {"], added=['\tt.Skip("x")']),),
        "tests-skipped",
        True,
        H,
    ),
    "pytest-deselect-in-config": Case(
        (chg("pytest.ini", context=["[pytest]"], added=["addopts = --deselect tests/test_a.py"]),),
        "tests-skipped",
        True,
        H,
    ),
    "skip-removed-is-not-a-skip": Case(
        (
            chg(
                "tests/test_a.py",
                deleted=["@pytest.mark.skip(reason='flaky')"],
                context=["def test_a():"],
            ),
        ),
        "tests-skipped",
        False,
        A,
    ),
    "new-test-with-skip": Case(
        (
            chg(
                "tests/test_a.py",
                context=["import pytest"],
                added=["@pytest.mark.skipif(WIN, reason='posix')", "def test_new():", "    pass"],
            ),
        ),
        "tests-skipped",
        False,
        A,
    ),
    "skipif-condition-rewritten": Case(
        (
            chg(
                "tests/test_a.py",
                deleted=["@pytest.mark.skipif(sys.platform == 'win32', reason='x')"],
                added=["@pytest.mark.skipif(WIN, reason='x')"],
            ),
        ),
        "tests-skipped",
        False,
        A,
    ),
    "module-test-flag-disables-collection": Case(
        (chg("tests/test_a.py", context=["import pytest"], added=["__test__ = False"]),),
        "tests-skipped",
        True,
        H,
    ),
    "class-test-flag-on-existing-class": Case(
        (chg("tests/test_a.py", context=["class TestA:"], added=["    __test__ = False"]),),
        "tests-skipped",
        True,
        H,
    ),
    "collect-ignore-in-conftest": Case(
        (
            chg(
                "tests/conftest.py",
                context=["import pytest"],
                added=['collect_ignore = ["test_calc.py"]'],
            ),
        ),
        "tests-skipped",
        True,
        H,
    ),
    "collect-ignore-glob-appended": Case(
        (chg("tests/conftest.py", added=['collect_ignore_glob.append("test_*.py")']),),
        "tests-skipped",
        True,
        H,
    ),
    "module-pytestmark-skip": Case(
        (
            chg(
                "tests/test_a.py",
                context=["import pytest"],
                added=["pytestmark = pytest.mark.skip(reason='x')"],
            ),
        ),
        "tests-skipped",
        True,
        H,
    ),
    "new-test-file-disables-another": Case(
        (
            chg(
                "tests/test_z.py",
                "A",
                added=["from tests import test_a", "test_a.TestA.__test__ = False"],
            ),
        ),
        "tests-skipped",
        True,
        H,
    ),
    "helper-class-in-new-class-not-collected": Case(
        (
            chg(
                "tests/test_a.py",
                context=["import pytest"],
                added=["class TestClient:", "    __test__ = False", "    x = 1"],
            ),
        ),
        "tests-skipped",
        False,
        A,
    ),
    "test-flag-true-is-not-a-skip": Case(
        (chg("tests/test_a.py", context=["class Checks:"], added=["    __test__ = True"]),),
        "tests-skipped",
        False,
        A,
    ),
    # test-config-changed
    "pytest-ini-edited": Case(
        (chg("pytest.ini", context=["[pytest]"], added=["addopts = -p no:warnings"]),),
        "test-config-changed",
        True,
        H,
    ),
    "pytest-ini-comment-is-still-config": Case(
        (chg("pytest.ini", context=["[pytest]"], added=["# a comment"]),),
        "test-config-changed",
        True,
        H,
    ),
    "empty-pytest-ini-added": Case((chg("sub/pytest.ini", "A"),), "test-config-changed", True, H),
    "dot-pytest-ini-added": Case(
        (chg(".pytest.ini", "A", added=["[pytest]", "testpaths = docs"]),),
        "test-config-changed",
        True,
        H,
    ),
    "pyproject-pytest-options": Case(
        (
            chg(
                "pyproject.toml",
                context=["[tool.pytest.ini_options]"],
                added=['python_files = ["check_*.py"]'],
            ),
        ),
        "test-config-changed",
        True,
        H,
    ),
    "pyproject-pytest-option-removed-seen-from-tree": Case(
        (chg("pyproject.toml", context=["a = 1"], deleted=['testpaths = ["tests"]'], start=2),),
        "test-config-changed",
        True,
        H,
        tree_files={b"pyproject.toml": b"[tool.pytest.ini_options]\na = 1\n"},
    ),
    "setup-cfg-tool-pytest": Case(
        (chg("setup.cfg", context=["[tool:pytest]"], added=["norecursedirs = tests"]),),
        "test-config-changed",
        True,
        H,
    ),
    "tox-ini-pytest-section": Case(
        (chg("tox.ini", context=["[pytest]"], added=["python_functions = nothing_*"]),),
        "test-config-changed",
        True,
        H,
    ),
    "pyproject-ruff-is-not-test-config": Case(
        (chg("pyproject.toml", context=["[tool.ruff]"], added=["line-length = 100"]),),
        "test-config-changed",
        False,
        A,
    ),
    "setup-cfg-flake8-is-not-test-config": Case(
        (chg("setup.cfg", context=["[flake8]"], added=["max-line-length = 100"]),),
        "test-config-changed",
        False,
        A,
    ),
    "pytest-ini-lookalike": Case(
        (chg("docs/pytest.ini.md", "A", added=["x"]),), "test-config-changed", False, A
    ),
    # harness-tampering (more in test_policy_harness.py)
    "package-patches-unittest": Case(
        (chg("calc/__init__.py", "A", added=["import unittest", "unittest.TestCase.run = id"]),),
        "harness-tampering",
        True,
        H,
        tree_files={b"calc/__init__.py": b"import unittest\nunittest.TestCase.run = id\n"},
    ),
    "package-uses-unittest-mock": Case(
        (chg("calc/clock.py", "A", added=["from unittest import mock", "now = mock.Mock()"]),),
        "harness-tampering",
        False,
        A,
        tree_files={b"calc/clock.py": b"from unittest import mock\nnow = mock.Mock()\n"},
    ),
    # assertions-removed
    "assertions-removed-in-bulk": Case(
        (chg("tests/test_a.py", context=["def test_a():"], deleted=["    assert x"] * 6),),
        "assertions-removed",
        True,
        H,
    ),
    "one-assertion-removed": Case(
        (chg("tests/test_a.py", context=["def test_a():"], deleted=["    assert x == 1"]),),
        "assertions-removed",
        True,
        H,
    ),
    "an-assertion-rewritten": Case(
        (
            chg(
                "tests/test_a.py",
                context=["def test_a():"],
                deleted=["    assert x == 1"],
                added=["    assert x == 2"],
            ),
        ),
        "assertions-removed",
        False,
        A,
    ),
    "assertions-moved-between-files": Case(
        (
            chg("tests/test_a.py", context=["def test_a():"], deleted=["    assert x"] * 6),
            chg("tests/test_b.py", context=["def test_b():"], added=["    assert x"] * 6),
        ),
        "assertions-removed",
        False,
        A,
    ),
    # budgets
    "too-many-files": Case(
        tuple(chg(f"f{i}.txt", added=["x"]) for i in range(3)),
        "budget-files",
        True,
        H,
        spec=PolicySpec(budgets=Budgets(files=2)),
    ),
    "files-at-budget": Case(
        tuple(chg(f"f{i}.txt", added=["x"]) for i in range(2)),
        "budget-files",
        False,
        A,
        spec=PolicySpec(budgets=Budgets(files=2)),
    ),
    "too-many-lines": Case(
        (chg("f.txt", added=["x"] * 3, deleted=["y"] * 3),),
        "budget-lines",
        True,
        H,
        spec=PolicySpec(budgets=Budgets(lines=5)),
    ),
    "lines-at-budget": Case(
        (chg("f.txt", added=["x"] * 3, deleted=["y"] * 2),),
        "budget-lines",
        False,
        A,
        spec=PolicySpec(budgets=Budgets(lines=5)),
    ),
    # binaries
    "binary-added-recorded": Case(
        (chg("img/logo.png", "A", binary=True, size=10),), "binary-added", True, A
    ),
    "binary-added-held-when-configured": Case(
        (chg("img/logo.png", "A", binary=True, size=10),),
        "binary-added",
        True,
        H,
        spec=PolicySpec(rules=(("binary-added", H),)),
    ),
    "binary-changed-recorded": Case(
        (chg("img/logo.png", binary=True, size=10),), "binary-changed", True, A
    ),
    "binary-deleted-is-not-changed": Case(
        (chg("img/logo.png", "D", binary=True),), "binary-changed", False, A
    ),
    "text-file-is-not-binary": Case(
        (chg("img/logo.svg", "A", added=["<svg/>"]),), "binary-added", False, A
    ),
    "pytest-marker-registered-is-not-held": Case(
        (
            chg(
                "pyproject.toml",
                context=["[tool.pytest.ini_options]", "markers = ["],
                added=['    "slow: a slow test",'],
            ),
        ),
        "test-config-changed",
        False,
        A,
    ),
    "pytest-addopts-after-markers-is-held": Case(
        (
            chg(
                "pyproject.toml",
                context=["[tool.pytest.ini_options]", "markers = [", '    "slow: x",', "]"],
                added=['addopts = "-p evil"'],
            ),
        ),
        "test-config-changed",
        True,
        H,
    ),
    # compiled-code-added (issue 13): its own rule, not binary-added
    "pyc-added-is-held": Case(
        (chg("pkg/__pycache__/mod.cpython-312.pyc", "A", binary=True, size=9),),
        "compiled-code-added",
        True,
        H,
    ),
    "extension-added-is-held": Case(
        (chg("pkg/_speed.cpython-312-x86_64-linux-gnu.so", "A", binary=True, size=9),),
        "compiled-code-added",
        True,
        H,
    ),
    "pyc-is-not-binary-added": Case(
        (chg("pkg/mod.pyc", "A", binary=True, size=9),), "binary-added", False, H
    ),
    "symlink-named-pyc-is-held": Case(
        (chg("calc.pyc", "A", new_mode=0o120000, added=["assets/calc.dat"]),),
        "compiled-code-added",
        True,
        H,
    ),
    "compiled-code-deleted-is-fine": Case(
        (chg("pkg/mod.pyc", "D", binary=True),), "compiled-code-added", False, A
    ),
    "source-is-not-compiled": Case(
        (chg("pkg/so.py", "A", added=["x = 1"]),), "compiled-code-added", False, A
    ),
    # plugin-metadata-added (issue 14)
    "dist-info-at-root-is-held": Case(
        (chg("evil-1.0.dist-info/entry_points.txt", "A", added=["[pytest11]", "e = evil"]),),
        "plugin-metadata-added",
        True,
        H,
    ),
    "dist-info-in-another-case-is-held": Case(
        (chg("Evil-1.0.Dist-Info/entry_points.txt", "A", added=["[pytest11]", "e = evil"]),),
        "plugin-metadata-added",
        True,
        H,
    ),
    "egg-info-in-src-is-held": Case(
        (chg("src/evil.egg-info/entry_points.txt", "A", added=["[pytest11]"]),),
        "plugin-metadata-added",
        True,
        H,
    ),
    "pth-in-top-level-dir-is-held": Case(
        (chg("tests/zz.pth", "A", added=["import evil"]),), "plugin-metadata-added", True, H
    ),
    "dist-info-deep-in-fixtures-is-not-on-path": Case(
        (chg("tests/data/site/x-1.0.dist-info/METADATA", "A", added=["Name: x"]),),
        "plugin-metadata-added",
        False,
        A,
    ),
    # test-plugin-added (issue 14)
    "pytest-plugins-in-test-module-is-held": Case(
        (chg("tests/test_x.py", added=["pytest_plugins = ['evil']"]),),
        "test-plugin-added",
        True,
        H,
    ),
    "p-option-in-addopts-is-held": Case(
        (chg("pytest.ini", added=["addopts = -p evil.plugin"]),), "test-plugin-added", True, H
    ),
    "pytest-plugins-env-in-tox-is-held": Case(
        (chg("tox.ini", added=["setenv = PYTEST_PLUGINS=evil"]),), "test-plugin-added", True, H
    ),
    "p-no-switches-off-is-not-a-plugin": Case(
        (chg("pytest.ini", added=["addopts = -p no:cacheprovider"]),),
        "test-plugin-added",
        False,
        H,  # test-config-changed holds it
    ),
    "pytest-plugins-in-conftest-is-build-hook-only": Case(
        (chg("conftest.py", added=["pytest_plugins = ['evil']"]),), "test-plugin-added", False, H
    ),
    # dependency-changed
    "requirements-changed": Case(
        (chg("requirements-dev.txt", added=["evil==1.0"]),), "dependency-changed", True, H
    ),
    "pyproject-dependency-added": Case(
        (
            chg(
                "pyproject.toml",
                context=[*PYPROJECT_HEAD, "dependencies = ["],
                added=['    "evil>=1",'],
            ),
        ),
        "dependency-changed",
        True,
        H,
    ),
    "pyproject-description-changed": Case(
        (chg("pyproject.toml", context=PYPROJECT_HEAD, added=['description = "x"']),),
        "dependency-changed",
        False,
        A,
    ),
    "package-json-dependency": Case(
        (
            chg(
                "web/package.json",
                context=["{", '  "dependencies": {'],
                added=['    "left-pad": "^1.0.0",'],
            ),
        ),
        "dependency-changed",
        True,
        H,
    ),
    # lockfile-drift
    "lockfile-without-manifest": Case(
        (chg("uv.lock", added=['version = "2"']),),
        "lockfile-drift",
        True,
        H,
        spec=PolicySpec(commands=("uv run --locked pytest",)),
    ),
    "lockfile-no-check-installs-from": Case(
        (chg("uv.lock", added=['version = "2"']),),
        "lockfile-drift",
        False,
        A,
        spec=PolicySpec(commands=("pip install -e .", "python -m pytest")),
    ),
    "lockfile-with-manifest": Case(
        (
            chg("uv.lock", added=['version = "2"']),
            chg("pyproject.toml", context=[*PYPROJECT_HEAD, "dependencies = ["], added=['  "a",']),
        ),
        "lockfile-drift",
        False,
        H,
    ),
    "manifest-without-known-lockfile": Case(
        (chg("pyproject.toml", context=[*PYPROJECT_HEAD, "dependencies = ["], added=['  "a",']),),
        "lockfile-drift",
        True,
        H,
        tree_files={b"uv.lock": b"", b"pyproject.toml": b""},
        spec=PolicySpec(commands=("uv sync",)),
    ),
    "manifest-without-any-lockfile": Case(
        (chg("pyproject.toml", context=[*PYPROJECT_HEAD, "dependencies = ["], added=['  "a",']),),
        "lockfile-drift",
        False,
        H,
        tree_files={b"pyproject.toml": b""},
    ),
    # user globs
    "protected-glob": Case(
        (chg("deploy/prod/values.yaml", added=["x"]),),
        "protected-path",
        True,
        H,
        spec=PolicySpec(protected=("deploy/**",)),
    ),
    "protected-glob-near-miss": Case(
        (chg("docs/deploy/values.yaml", added=["x"]),),
        "protected-path",
        False,
        A,
        spec=PolicySpec(protected=("/deploy/**",)),
    ),
    "denied-glob-blocks": Case(
        (chg("certs/server.pem", "A", added=["x"]),),
        "denied-path",
        True,
        D,
        spec=PolicySpec(deny=("**/*.pem",)),
    ),
    "denied-glob-on-rename-source": Case(
        (chg("certs/server.txt", "R", old_path="certs/server.pem"),),
        "denied-path",
        True,
        D,
        spec=PolicySpec(deny=("*.pem",)),
    ),
    "denied-glob-near-miss": Case(
        (chg("certs/server.pem.md", "A", added=["x"]),),
        "denied-path",
        False,
        A,
        spec=PolicySpec(deny=("**/*.pem",)),
    ),
    # blast radius thresholds
    "blast-over-threshold": Case(
        (chg("a.txt", added=["x"]),),
        "blast-radius-immediate",
        True,
        H,
        thresholds=Thresholds(immediate=1),
    ),
    "future-blast-over-threshold": Case(
        (chg("pkg/__init__.py", added=["import os"]),),
        "blast-radius-future",
        True,
        H,
        thresholds=Thresholds(future=4),
    ),
    "future-blast-under-threshold": Case(
        (chg("pkg/__init__.py", added=["import os"]),),
        "blast-radius-future",
        False,
        A,
        thresholds=Thresholds(future=5),
    ),
    "blast-without-threshold": Case(
        (chg("a.txt", added=["x"]),), "blast-radius-immediate", False, A
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_rule_case(case: Case) -> None:
    decision, rules, messages = judge(
        case.changes,
        case.spec,
        tree_files=case.tree_files,
        thresholds=case.thresholds,
        pin_tags=case.pin_tags,
        ci=case.ci,
    )
    assert (case.rule in rules) is case.hit, messages
    assert decision is case.decision, messages


def test_every_rule_has_a_hit_and_a_near_miss() -> None:
    hits = {c.rule for c in CASES.values() if c.hit}
    misses = {c.rule for c in CASES.values() if not c.hit}
    assert set(RULES) <= hits & misses, set(RULES) - (hits & misses)


def test_pr_editing_config_is_held_with_a_finding_naming_the_file() -> None:
    r = evaluate(
        [chg(".github/proofgate.yml", deleted=["  deny: ['**/*.pem']"]).entry],
        chg(".github/proofgate.yml", deleted=["  deny: ['**/*.pem']"]).patch,
        PolicySpec(deny=("**/*.pem",)),
    )
    assert r.decision is Decision.HOLD
    (f,) = [f for f in r.findings if f.rule == "gate-config-changed"]
    assert f.path == b".github/proofgate.yml"
    assert "base" in f.message


def test_custom_config_path_is_the_one_watched() -> None:
    c = chg("ci/gate.yml", added=["x"])
    r = evaluate([c.entry], c.patch, PolicySpec(), config_path="ci/gate.yml")
    assert "gate-config-changed" in {f.rule for f in r.findings}


def test_rule_ids_are_kebab_case_with_a_rationale() -> None:
    for rid, rule in RULES.items():
        assert rid == rule.id
        assert rid.replace("-", "").isalnum()
        assert rid == rid.lower()
        assert rule.rationale
        assert "\n" not in rule.rationale


def test_unknown_rule_override_is_refused() -> None:
    with pytest.raises(ValueError, match="no-such-rule"):
        evaluate([], b"", PolicySpec(rules=(("no-such-rule", Decision.ALLOW),)))


def test_override_can_lower_a_default() -> None:
    c = chg("setup.py", added=["x"])
    r = evaluate([c.entry], c.patch, PolicySpec(rules=(("build-hook-changed", Decision.ALLOW),)))
    assert r.decision is Decision.ALLOW
    assert [f.decision for f in r.findings] == [Decision.ALLOW]


def test_findings_are_sorted_and_deduplicated() -> None:
    changes = [chg("setup.py", added=["x"]), chg(".github/workflows/a.yml", added=["x"])]
    r1 = evaluate([c.entry for c in changes], b"".join(c.patch for c in changes), PolicySpec())
    r2 = evaluate(
        [c.entry for c in reversed(changes)],
        b"".join(c.patch for c in reversed(changes)),
        PolicySpec(),
    )
    assert r1.findings == r2.findings
    assert len(set(r1.findings)) == len(r1.findings)


def test_file_in_patch_but_missing_from_inventory_is_still_judged() -> None:
    c = chg(".github/workflows/ci.yml", added=["x"])
    r = evaluate([], c.patch, PolicySpec())
    assert r.decision is Decision.HOLD


def test_shadowing_list_covers_this_interpreters_stdlib() -> None:
    # The list is frozen for determinism; a newer interpreter in CI shows what to add.
    missing = sorted(n for n in sys.stdlib_module_names if shadowed_module(n.encode()) is None)
    assert not missing


@pytest.mark.parametrize(
    "path",
    [b"__init__.py", b"/__init__.py", b"\xff.py", b"a//json.py", b".py", b"json.", b"x/.so"],
)
def test_module_shadowing_is_total_on_odd_paths(path: bytes) -> None:
    c = chg(path, "A", added=["x = 1"])
    r = evaluate([c.entry], c.patch, PolicySpec(), tree_files={path: b"x = 1\n"})
    assert r.decision in (Decision.ALLOW, Decision.HOLD)


def test_root_pytest_py_finding_names_the_module_and_root() -> None:
    c = chg("pytest.py", "A", added=["import sys", "print('2 passed')", "sys.exit(0)"])
    r = evaluate([c.entry], c.patch, PolicySpec())
    (f,) = [f for f in r.findings if f.rule == "module-shadowing"]
    assert f.path == b"pytest.py"
    assert "'pytest'" in f.message
    assert "repository root" in f.message
    assert f.decision is Decision.HOLD


def test_sitecustomize_and_pth_are_held_by_one_rule() -> None:
    for path in ("sitecustomize.py", "deep/usercustomize.py", "any/where/x.pth"):
        c = chg(path, "A", added=["import os"])
        r = evaluate([c.entry], c.patch, PolicySpec())
        assert {f.rule for f in r.findings} == {"build-hook-changed"}, path


def test_docs_policy_md_lists_every_rule_with_its_default() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "policy.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (ALLOW|HOLD|DENY) \|", doc, re.M))
    assert rows == {rid: r.default.value for rid, r in RULES.items()}
