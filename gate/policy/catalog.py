"""The built-in rule catalog: ids, defaults, rationales and checks (issue 6). Pure.

Each rule reads every effect (every inventory entry and every added/deleted line of the
patch) and yields raw findings; `gate.policy.evaluate` applies the rule's effective
decision and merges them, worst wins. A rule reads what the change does (paths, modes,
lines), never how it is described (commit messages, PR titles). The checks live by
subject: `paths`, `manifests`, `secrets`, `testing`.
"""

from __future__ import annotations

from collections.abc import Iterator

from gate.model import Decision
from gate.policy.ci import (
    check_action_unverified,
    check_audit_finding,
    check_ci_workflow,
    check_privilege,
    check_privileged_job,
)
from gate.policy.context import Check, Context, RawFinding, Rule
from gate.policy.harness import check_harness_tampering
from gate.policy.manifests import check_build_hook, check_dependency, check_lockfile_drift
from gate.policy.paths import (
    check_binary_added,
    check_binary_changed,
    check_ci_matrix,
    check_compiled_code,
    check_gate_config,
    check_git_plumbing,
    check_new_executable,
    check_pin_bump_verified,
    check_plugin_metadata,
    check_symlink,
    check_symlink_unmaterializable,
    glob_rule,
)
from gate.policy.secrets import check_private_key, check_secret_token
from gate.policy.testing import (
    ASSERTIONS_REMOVED_MIN,
    check_assertions_removed,
    check_module_shadowing,
    check_test_config,
    check_test_plugin,
    check_tests_deleted,
    check_tests_skipped,
)

__all__ = ["CATALOG"]


def _budget_files(ctx: Context) -> Iterator[RawFinding]:
    limit = ctx.spec.budgets.files
    n = len(ctx.inventory)
    if limit is not None and n > limit:
        yield RawFinding(None, f"{n} files changed; budget is {limit}")


def _budget_lines(ctx: Context) -> Iterator[RawFinding]:
    limit = ctx.spec.budgets.lines
    n = sum(e.lines_added + e.lines_deleted for e in ctx.inventory)
    if limit is not None and n > limit:
        yield RawFinding(None, f"{n} lines added+deleted; budget is {limit}")


def _threshold_rule(name: str) -> Check:
    def check(ctx: Context) -> Iterator[RawFinding]:
        limit = ctx.thresholds.get(name)
        score = ctx.blast_scores.get(name, 0)
        missing = ctx.incomplete.get(name)
        if limit is not None and missing is not None:
            # a score computed without an analysis it counts is not below any threshold
            # (issue 46): a large tree must not pass where a small one would be held
            yield RawFinding(None, f"{name} blast radius {score} is incomplete: {missing}")
        elif limit is not None and score > limit:
            yield RawFinding(None, f"{name} blast radius {score} is over the threshold {limit}")

    return check


def _rule(rid: str, default: Decision, rationale: str, check: Check) -> tuple[Rule, Check]:
    return Rule(id=rid, default=default, rationale=rationale), check


A, H, D = Decision.ALLOW, Decision.HOLD, Decision.DENY

# The catalog. Order is presentation only; ids are the contract (policy.rules keys).
CATALOG: tuple[tuple[Rule, Check], ...] = (
    _rule("gate-config-changed", H,
          "the gate's own config changed; it takes effect only after merge", check_gate_config),
    # SPEC §2.1: a change to CI is judged by what it can reach
    _rule("ci-privilege-changed", H,
          "a workflow grants a job more (a write scope, a secret, an environment, a "
          "self-hosted runner, a privileged trigger), drops a `permissions` block, or cannot "
          "be read", check_privilege),
    _rule("ci-privileged-job-changed", H,
          "what a privileged job runs changed: its steps, conditions, environment, or a "
          "repository file it runs", check_privileged_job),
    _rule("ci-action-unverified", H,
          "an action or image a privileged job uses is not a verified release SHA, or a "
          "`uses:` moved off a SHA or to an action the base never used", check_action_unverified),
    _rule("ci-audit-finding", H,
          "the workflow auditor (zizmor) finds a weakness the base did not have",
          check_audit_finding),
    _rule("ci-workflow-changed", A,
          "CI workflows or actions changed, reaching nothing new: the jobs touched are "
          "recorded", check_ci_workflow),
    _rule("pin-bump-verified", A,
          "only pins moved, each to a newer released tag of the same upstream (the tags "
          "looked up on GitHub)", check_pin_bump_verified),
    _rule("ci-matrix-changed", A,
          "only a workflow's test matrix changed (plain versions, hosted runners)",
          check_ci_matrix),
    _rule("build-hook-changed", H,
          "code that runs at install/build/test time changed", check_build_hook),
    _rule("module-shadowing", H,
          "a module added where the test run imports from shadows a stdlib or tooling module",
          check_module_shadowing),
    _rule("compiled-code-added", H,
          "compiled code (bytecode, native extensions) added: it runs but cannot be reviewed",
          check_compiled_code),
    _rule("plugin-metadata-added", H,
          "package metadata at a sys.path root can register plugins every test run loads",
          check_plugin_metadata),
    _rule("test-plugin-added", H,
          "a pytest plugin is loaded outside conftest.py (pytest_plugins, -p, PYTEST_PLUGINS)",
          check_test_plugin),
    _rule("git-plumbing-changed", H,
          "attributes, submodules and hooks change what a checkout means", check_git_plumbing),
    _rule("symlink-escapes", H,
          "a symlink points outside the repository, to an absolute path or into a loop",
          check_symlink),
    # DENY: decided before any container; an approval could not make the tree extractable
    _rule("symlink-unmaterializable", D,
          "a symlink climbs above the tree's root: the clean room cannot materialize it",
          check_symlink_unmaterializable),
    _rule("new-executable", A,
          "a file became executable outside scripts/, bin/, tools/", check_new_executable),
    _rule("private-key", D, "a private key was added to the repository", check_private_key),
    _rule("secret-token", H,
          "a credential-like token or high-entropy secret was added", check_secret_token),
    _rule("tests-deleted", H,
          "test files or tests were deleted, or renamed away, and not added back",
          check_tests_deleted),
    _rule("tests-skipped", H,
          "tests were newly skipped, xfail'ed, deselected or excluded from collection",
          check_tests_skipped),
    _rule("test-config-changed", H,
          "pytest's configuration changed: it decides which tests run and how", check_test_config),
    _rule("harness-tampering", H,
          "non-test code introspects or patches its test harness (pytest, unittest, tracing, "
          "import hooks)", check_harness_tampering),
    _rule("assertions-removed", H,
          f"at least {ASSERTIONS_REMOVED_MIN} assertion(s) fewer in the tests (net, whole patch)",
          check_assertions_removed),
    _rule("budget-files", H, "more files changed than policy.budgets.files", _budget_files),
    _rule("budget-lines", H,
          "more lines added+deleted than policy.budgets.lines", _budget_lines),
    _rule("binary-added", A, "a binary file was added (inventoried)", check_binary_added),
    _rule("binary-changed", A, "a binary file was changed (inventoried)", check_binary_changed),
    _rule("dependency-changed", H,
          "dependency manifests or lockfiles changed what gets installed", check_dependency),
    _rule("lockfile-drift", H,
          "a lockfile changed without its manifest, or dependencies without the lockfile",
          check_lockfile_drift),
    _rule("protected-path", H, "a path matching policy.protected was touched",
          glob_rule(lambda s: s.protected, "protected")),
    _rule("denied-path", D, "a path matching policy.deny was touched",
          glob_rule(lambda s: s.deny, "denied")),
    _rule("blast-radius-immediate", H,
          "the immediate blast radius is over policy.thresholds.immediate",
          _threshold_rule("immediate")),
    _rule("blast-radius-future", H,
          "the future blast radius is over policy.thresholds.future",
          _threshold_rule("future")),
)  # fmt: skip
