"""`proofgate demo`: prove a bundled example end to end in the local clean room.

Builds a small Python package with real pytest tests and a pull-request branch in a fresh
repository under DIR, proves it (PROVEN expected), signs and verifies the receipt, then
replays the false-PASS fixture from the post-mortem that started this project (check one
`rm broken.flag`, check two `test ! -e broken.flag`): with a fresh copy per check it is
FAILED, as it must be. Last, an agent-style pull request that breaks `add` and "fixes"
the failing test by weakening it: the differential runs the base's test against the
change, and the verdict is HELD (`expectation-changed`).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import pygit2

from gate import receipt
from gate.git.repo import GitRepository
from gate.model import Verdict
from gate.proof.prove import ProofRun, ProveRequest, prove
from gate.sandbox.docker import DockerSandbox

log = logging.getLogger("gate")

_SIGNATURE = pygit2.Signature("proofgate demo", "demo@proofgate.invalid", 1_700_000_000, 0)

_CALC = b'''"""A tiny calculator."""


def add(a: int, b: int) -> int:
    return a + b
'''

_CALC_PR = (
    _CALC
    + b"""

def mul(a: int, b: int) -> int:
    return a * b
"""
)

_TESTS = b"""from calc import add


def test_add() -> None:
    assert add(2, 3) == 5
"""

_TESTS_PR = b"""from calc import add, mul


def test_add() -> None:
    assert add(2, 3) == 5


def test_mul() -> None:
    assert mul(4, 5) == 20
"""


def _config(image: str) -> bytes:
    return f"""version: 1
image: {image}
defaults:
  timeout: 120
  memory: 512m
  pids: 128
checks:
  - name: unit
    build: ["python3 -m compileall -q src"]
    test:
      - ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=reports/junit.xml"]
    junit: reports/junit.xml
    env: {{PYTHONPATH: src, PYTHONDONTWRITEBYTECODE: "1"}}
policy:
  deny: ["**/*.pem"]
  budgets: {{files: 50, lines: 2000}}
""".encode()


def _false_pass_config(image: str) -> bytes:
    return f"""version: 1
image: {image}
checks:
  - name: remove-flag
    test: "rm broken.flag"
  - name: flag-absent
    test: "test ! -e broken.flag"
""".encode()


def _commit(
    repo: pygit2.Repository, ref: str, files: dict[str, bytes], parents: list[pygit2.Oid], msg: str
) -> pygit2.Oid:
    index = pygit2.Index()
    for path, data in sorted(files.items()):
        blob = repo.create_blob(data)
        index.add(pygit2.IndexEntry(path, blob, pygit2.enums.FileMode.BLOB))
    tree = index.write_tree(repo)
    return repo.create_commit(ref, _SIGNATURE, _SIGNATURE, msg, tree, parents)


def _make_repo(path: Path, image: str) -> pygit2.Repository:
    repo = pygit2.init_repository(str(path), bare=False, initial_head="main")
    base_files = {
        ".github/proofgate.yml": _config(image),
        "src/calc.py": _CALC,
        "tests/test_calc.py": _TESTS,
        "README.md": b"# calc\n",
    }
    base = _commit(repo, "refs/heads/main", base_files, [], "calc: add()")
    pr_files = dict(base_files, **{"src/calc.py": _CALC_PR, "tests/test_calc.py": _TESTS_PR})
    _commit(repo, "refs/heads/feature", pr_files, [base], "calc: mul()")
    # an agent "fixes" the test its change broke by weakening it (SPEC §3.1)
    weakened = {
        "src/calc.py": _CALC.replace(b"a + b", b"a - b"),
        "tests/test_calc.py": _TESTS.replace(b"== 5", b"is not None"),
    }
    _commit(repo, "refs/heads/agent-fix", dict(base_files, **weakened), [base], "fix test_add")
    return repo


def _make_false_pass_repo(path: Path) -> None:
    repo = pygit2.init_repository(str(path), bare=False, initial_head="main")
    base = _commit(repo, "refs/heads/main", {"empty.txt": b""}, [], "empty")
    _commit(
        repo,
        "refs/heads/agent",
        {"empty.txt": b"", "broken.flag": b"the agent left this behind\n"},
        [base],
        "agent result",
    )


def _prove(repo: Path, base: str, head: str, key: bytes, config: Path | None) -> ProofRun:
    with GitRepository(repo) as evidence:
        return prove(
            ProveRequest(base=base, head=head, config_file=config, signing_key_pem=key),
            evidence=evidence,
            sandbox=lambda proof: DockerSandbox(proof=proof),
            clock=time.time,
        )


def run_demo(*, out: Path, image: str) -> int:
    """Run the demo under `out`; 0 when every step gave the expected verdict."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    priv, pub = receipt.generate_keypair()
    (out / "demo.pub").write_bytes(pub)
    public_key = receipt.load_public_key(pub, source="demo key")

    log.info("1/3  a pull request that adds mul() with a test, proven in the clean room")
    repo_dir = out / "calc"
    _make_repo(repo_dir, image)
    run = _prove(repo_dir, "main", "feature", priv, None)
    receipt.write_receipt_files(out, envelope=run.envelope, markdown=run.markdown, patch=run.patch)
    head = str(run.predicate["head"]["commit"])  # type: ignore[index]
    ok = run.verdict is Verdict.PROVEN
    try:
        receipt.verify_statement(
            run.envelope, [public_key], commit=head, patch=run.patch, require=Verdict.PROVEN
        )
        log.info("     verdict %s; receipt verified against %s", run.verdict.value, head[:12])
    except receipt.ReceiptError as e:
        ok = False
        log.error("     receipt did not verify: %s", e)
    for reason in run.reasons:
        log.info("     reason %s: %s", reason.code.value, reason.message)

    log.info("2/3  the false-PASS fixture: check one deletes broken.flag, check two tests for it")
    fp_dir = out / "false-pass"
    _make_false_pass_repo(fp_dir)
    fp_config = out / "false-pass.yml"
    fp_config.write_bytes(_false_pass_config(image))
    fp = _prove(fp_dir, "main", "agent", priv, fp_config)
    (out / "false-pass-receipt.md").write_text(fp.markdown, encoding="utf-8")
    caught = fp.verdict is Verdict.FAILED
    log.info(
        "     verdict %s (%s)",
        fp.verdict.value,
        "caught: each check saw a fresh copy" if caught else "NOT caught",
    )
    log.info("3/3  an agent's pull request that makes a failing test pass by weakening it")
    weak = _prove(repo_dir, "main", "agent-fix", priv, None)
    (out / "weakened-test-receipt.md").write_text(weak.markdown, encoding="utf-8")
    judged = weak.verdict in (Verdict.HELD, Verdict.FAILED)
    log.info(
        "     verdict %s (%s)",
        weak.verdict.value,
        "caught: the base's tests judge the change" if judged else "NOT caught",
    )
    for reason in weak.reasons:
        log.info("     reason %s: %s", reason.code.value, reason.message)
    print(run.markdown)  # noqa: T201 - the demo shows its receipt
    log.info(
        "receipt: %s  (verify: proofgate verify %s --key %s --commit %s --require PROVEN)",
        out / "receipt.json",
        out / "receipt.json",
        out / "demo.pub",
        head,
    )
    return 0 if ok and caught and judged else 1
