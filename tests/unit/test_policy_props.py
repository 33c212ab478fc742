"""Invariants of the policy: worst wins, secrets never echoed, stable fingerprint, blast."""

from __future__ import annotations

import json
from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from gate.model import Budgets, Decision, Finding, PolicySpec, worst_decision
from gate.policy import RULES, Thresholds, evaluate, fingerprint
from gate.receipt import canonical_json
from tests.unit.test_policy import PEM_BODY, Change, chg

# --- worst wins --------------------------------------------------------------------

decisions = st.sampled_from(list(Decision))
findings = st.builds(
    Finding,
    rule=st.sampled_from(sorted(RULES)),
    decision=decisions,
    path=st.none() | st.binary(max_size=8),
    message=st.text(max_size=8),
    line=st.none() | st.integers(1, 99),
)


@given(st.lists(findings), st.lists(findings))
def test_adding_findings_never_improves_the_decision(a: list[Finding], b: list[Finding]) -> None:
    before = worst_decision([f.decision for f in a])
    after = worst_decision([f.decision for f in a + b])
    assert after.severity >= before.severity


# Effects judged by path, mode and added content only. (Rules that net deletions
# against additions — moved tests, rewritten skips, moved assertions — are excluded by
# design: a move is not a weakening.)
POOL: list[Change] = [
    chg("README.md", added=["x"]),
    chg("src/app.py", added=["x = 1"]),
    chg("setup.py", added=["x"]),
    chg(".github/workflows/ci.yml", added=["x"]),
    chg(".github/proofgate.yml", added=["x"]),
    chg(".gitmodules", added=["x"]),
    chg("img.png", "A", binary=True),
    chg("bin/tool", "A", new_mode=0o100755),
    chg("src/tool", "A", new_mode=0o100755),
    chg("k.txt", "A", added=["-----BEGIN PRIVATE KEY-----", PEM_BODY]),
    chg("requirements.txt", added=["evil"]),
    chg("certs/a.pem", "A", added=["x"]),
    chg("deploy/prod.yaml", added=["x"]),
    chg("tests/test_a.py", "D", deleted=["def test_a():", "    assert 1"]),
    chg("l", "A", new_mode=0o120000, symlink_target=b"/etc"),
]
SPECS = [
    PolicySpec(),
    PolicySpec(protected=("deploy/**",), deny=("*.pem",), budgets=Budgets(files=3, lines=4)),
    PolicySpec(rules=(("new-executable", Decision.HOLD), ("binary-added", Decision.DENY))),
    PolicySpec(rules=(("private-key", Decision.ALLOW),)),
]


def _decide(changes: list[Change], spec: PolicySpec) -> Decision:
    r = evaluate([c.entry for c in changes], b"".join(c.patch for c in changes), spec)
    assert r.decision is worst_decision([f.decision for f in r.findings])
    return r.decision


@given(
    st.lists(st.sampled_from(range(len(POOL))), unique=True),
    st.lists(st.sampled_from(range(len(POOL))), unique=True),
    st.sampled_from(SPECS),
)
def test_adding_effects_never_improves_the_decision(
    a: list[int], b: list[int], spec: PolicySpec
) -> None:
    base = [POOL[i] for i in a]
    more = base + [POOL[i] for i in b if i not in a]
    assert _decide(more, spec).severity >= _decide(base, spec).severity


def test_nothing_stops_early_every_rule_reports() -> None:
    changes = [POOL[9], POOL[3], POOL[2], POOL[13]]
    r = evaluate([c.entry for c in changes], b"".join(c.patch for c in changes), PolicySpec())
    assert r.decision is Decision.DENY
    assert {"private-key", "ci-workflow-changed", "build-hook-changed", "tests-deleted"} <= {
        f.rule for f in r.findings
    }


# --- secrets -----------------------------------------------------------------------

SECRETS = {
    "github": "ghp_" + "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe8Dc7",
    "aws": "AKIA" + "ZQ3EGUWSXB2RT5HY",
    "slack": "xoxb-" + "2468013579-AbCdEfGhIjKlMnOp",
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "generic": "Q9w8E7r6T5y4U3i2O1p0Zx",
}


def test_secrets_never_appear_in_findings_or_receipt_data() -> None:
    pem_line = PEM_BODY
    c = chg(
        "config/settings.py",
        "A",
        added=[
            f'GITHUB = "{SECRETS["github"]}"',
            f"aws_access_key_id = {SECRETS['aws']}",
            f"SLACK_HOOK = '{SECRETS['slack']}'",
            f'stripe.api_key = "{SECRETS["stripe"]}"',
            f'DEPLOY_TOKEN = "{SECRETS["generic"]}"',
            "-----BEGIN EC PRIVATE KEY-----",
            pem_line,
            "-----END EC PRIVATE KEY-----",
        ],
    )
    r = evaluate([c.entry], c.patch, PolicySpec())
    assert r.decision is Decision.DENY
    rules = [f.rule for f in r.findings]
    assert rules.count("secret-token") >= 5
    assert "private-key" in rules
    outputs = [
        repr(r),
        str(r),
        json.dumps(r.to_dict()),
        canonical_json(r.to_dict()).decode(),
        *(f.message for f in r.findings),
    ]
    for name, secret in [*SECRETS.items(), ("pem", pem_line)]:
        for out in outputs:
            assert secret not in out, name
            assert secret[-12:] not in out, name  # not even a tail


def test_secret_findings_carry_a_redacted_fingerprint() -> None:
    c = chg("a.py", added=[f'T = "{SECRETS["github"]}"'])
    (f,) = evaluate([c.entry], c.patch, PolicySpec()).findings
    assert f.line == 1
    assert "sha256 " in f.message
    assert f"{len(SECRETS['github'])} chars" in f.message


# --- fingerprint -------------------------------------------------------------------


def test_fingerprint_is_stable_for_the_same_policy() -> None:
    a = PolicySpec(protected=("a/**",), rules=(("binary-added", Decision.HOLD),))
    b = PolicySpec(protected=("a/**",), rules=(("binary-added", Decision.HOLD),))
    assert fingerprint(a, config_path="x.yml") == fingerprint(b, config_path="x.yml")
    assert len(fingerprint(a, config_path="x.yml")) == 64


def test_any_policy_change_changes_the_fingerprint() -> None:
    variants: list[tuple[PolicySpec, str, Thresholds | None]] = [
        (PolicySpec(), ".github/proofgate.yml", None),
        (PolicySpec(), "other.yml", None),
        (PolicySpec(protected=("a",)), ".github/proofgate.yml", None),
        (PolicySpec(deny=("a",)), ".github/proofgate.yml", None),
        (PolicySpec(budgets=Budgets(files=1)), ".github/proofgate.yml", None),
        (PolicySpec(budgets=Budgets(lines=1)), ".github/proofgate.yml", None),
        (PolicySpec(rules=(("binary-added", Decision.HOLD),)), ".github/proofgate.yml", None),
        (PolicySpec(rules=(("binary-added", Decision.DENY),)), ".github/proofgate.yml", None),
        (PolicySpec(), ".github/proofgate.yml", Thresholds(immediate=5)),
        (PolicySpec(), ".github/proofgate.yml", Thresholds(future=5)),
    ]
    prints = {fingerprint(s, config_path=p, thresholds=t) for s, p, t in variants}
    assert len(prints) == len(variants)


def test_result_carries_the_fingerprint() -> None:
    spec = PolicySpec(deny=("x",))
    assert evaluate([], b"", spec).fingerprint == fingerprint(
        spec, config_path=".github/proofgate.yml"
    )


# --- blast radius ------------------------------------------------------------------

TREE: Mapping[bytes, bytes] = {
    b"src/pkg/__init__.py": b"from .core import run\n",
    b"src/pkg/core.py": b"import os\n",
    b"src/pkg/cli.py": b"from . import core\n",
    b"src/app.py": b"import pkg.cli\n",
    b"tests/test_core.py": b"from pkg.core import run\n",
    b"tests/unrelated.py": b"import json\n",
    b"broken.py": b"def (:\n",
}


def _recompute(section: Mapping[str, object]) -> int:
    weights = section["weights"]
    inputs = section["inputs"]
    assert isinstance(weights, dict)
    assert isinstance(inputs, dict)
    return sum(int(w) * int(inputs[k]) for k, w in weights.items())


def test_blast_radius_is_recomputable_from_its_inputs() -> None:
    changes = [
        chg("src/pkg/core.py", added=["x = 1"] * 9),
        chg("setup.py", added=["x"]),
        chg(".github/workflows/ci.yml", added=["x"]),
        chg("bin/run", "A", new_mode=0o100755),
    ]
    r = evaluate(
        [c.entry for c in changes],
        b"".join(c.patch for c in changes),
        PolicySpec(),
        tree_files=TREE,
    )
    blast = r.blast_radius
    imm, fut = blast["immediate"], blast["future"]
    assert isinstance(imm, dict)
    assert isinstance(fut, dict)
    assert imm["score"] == _recompute(imm)
    assert fut["score"] == _recompute(fut)
    assert imm["inputs"] == {
        "files": 4,
        "lines": 11,
        "lines_bits": 4,
        "executables": 1,
        "build_time": 2,
        "sensitive": 1,
    }
    graph = fut["analyzers"][0]
    assert graph["changed_modules"] == ["pkg.core", "setup"]
    assert graph["direct_importers"] == ["pkg", "pkg.cli", "test_core"]
    assert graph["transitive_importers_count"] == 4  # + app, through pkg.cli
    assert graph["unparsed"] == ["broken.py"]
    json.dumps(r.to_dict())  # plain JSON


def test_blast_radius_without_the_tree_says_the_analyzer_did_not_run() -> None:
    c = chg("src/pkg/core.py", added=["x"])
    r = evaluate([c.entry], c.patch, PolicySpec())
    fut = r.blast_radius["future"]
    assert isinstance(fut, dict)
    assert fut["analyzers"][0] == {
        "name": "import-graph",
        "ran": False,
        "why": "the proven tree was not supplied",
    }


def test_blast_radius_does_not_change_the_decision_without_thresholds() -> None:
    changes = [chg(f"src/m{i}.py", added=["x"] * 50) for i in range(40)]
    r = evaluate([c.entry for c in changes], b"".join(c.patch for c in changes), PolicySpec())
    imm = r.blast_radius["immediate"]
    assert isinstance(imm, dict)
    assert int(str(imm["score"])) > 40
    assert r.decision is Decision.ALLOW
