"""A file named on the command line is read up to its limit only (issue 46).

`verify /dev/zero` used to read until memory ran out, and a 2 GiB receipt cost 2 GB before
its size was looked at. Every command that reads a receipt, an approval, a patch, a key or
a configuration a user names now refuses a larger one promptly, with one line naming the
file and the limit, and the exit code of the command's contract. Each runs as its own
process under a 512 MiB address-space limit (RLIMIT_AS): reading a whole 1 GiB sparse file,
or /dev/zero, could not succeed within it, so only a bounded read passes.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gitutil import commit, make_repo, repo_dir

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "tests" / "assets"
RECEIPT = str(ASSETS / "receipts" / "proven.json")
PATCH = str(ASSETS / "receipts" / "patch.diff")
PUB = str(ASSETS / "keys" / "trusted.pub")
KEY = str(ASSETS / "keys" / "trusted.key")
MEMORY = 512 << 20
GIB = 1 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _proofgate(argv: list[str], cwd: Path) -> tuple[int, str, float]:
    """`python -m gate ARGV` under the memory limit: exit code, stderr, seconds taken."""
    t0 = time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "gate", *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=_limit_memory,  # a plain setrlimit before exec
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stderr, time.monotonic() - t0


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Sparse files just over each limit (they take no disk), and a repository to name."""
    d = tmp_path_factory.mktemp("limits")
    out: dict[str, str] = {"zero": "/dev/zero", "out": str(d / "out.json")}
    for name, size in (("receipt", 2 * GIB), ("patch", GIB + 1), ("key", 64 * 1024 + 1)):
        path = d / f"big-{name}"
        with open(path, "wb") as f:
            f.truncate(size)
        out[name] = str(path)
    repo = make_repo(d / "repo")
    base = commit(repo, {b"a.txt": b"1\n"})
    commit(repo, {b"a.txt": b"2\n"}, branch="pr", parent=base)
    out["repo"] = str(repo_dir(repo))
    return out


REV = ["--base", "main", "--head", "pr"]
# (argv with {placeholders}, exit code, the line on stderr)
CASES = {
    "verify-receipt-dev-zero": (
        ["verify", "{zero}", "--key", PUB],
        1,
        "proofgate: verify failed: /dev/zero is larger than 64 MiB, the limit for a receipt",
    ),
    "verify-receipt-sparse-2gib": (
        ["verify", "{receipt}", "--key", PUB],
        1,
        "proofgate: verify failed: {receipt} is larger than 64 MiB, the limit for a receipt",
    ),
    "verify-key-dev-zero": (
        ["verify", RECEIPT, "--key", "{zero}"],
        2,
        "proofgate: --key /dev/zero is larger than 64 KiB, the limit for a key",
    ),
    "verify-patch-sparse": (
        ["verify", RECEIPT, "--key", PUB, "--patch", "{patch}"],
        2,
        "proofgate: --patch {patch} is larger than 1 GiB, the limit for a patch",
    ),
    "verify-patch-dev-zero": (
        ["verify", RECEIPT, "--key", PUB, "--patch", "{zero}"],
        2,
        "proofgate: --patch /dev/zero is larger than 1 GiB, the limit for a patch",
    ),
    "show-receipt-dev-zero": (
        ["show", "{zero}"],
        1,
        "proofgate: cannot show /dev/zero: it is larger than 64 MiB, the limit for a receipt",
    ),
    "show-key-sparse": (
        ["show", RECEIPT, "--key", "{key}"],
        2,
        "proofgate: --key {key} is larger than 64 KiB, the limit for a key",
    ),
    "aggregate-receipt-sparse": (
        ["aggregate", "{receipt}", "--key", PUB],
        2,
        "proofgate: RECEIPT {receipt} is larger than 64 MiB, the limit for a receipt",
    ),
    "aggregate-signing-key-dev-zero": (
        ["aggregate", RECEIPT, "--key", PUB, "--signing-key", "{zero}"],
        2,
        "proofgate: --signing-key /dev/zero is larger than 64 KiB, the limit for a key",
    ),
    "approve-receipt-dev-zero": (
        ["approve", "--key", KEY, "--approver", "me", "--receipt", "{zero}", "--out", "{out}"],
        2,
        "proofgate: --receipt /dev/zero is larger than 64 MiB, the limit for a receipt",
    ),
    "approve-key-dev-zero": (
        ["approve", "--key", "{zero}", "--approver", "me", "--receipt", RECEIPT, "--out", "{out}"],
        2,
        "proofgate: --key /dev/zero is larger than 64 KiB, the limit for a key",
    ),
    "apply-receipt-dev-zero": (
        ["apply", "{zero}", "--key", PUB, "--patch", PATCH, "--repo", "{repo}"],
        1,
        "proofgate: apply refused: /dev/zero is larger than 64 MiB, the limit for a receipt",
    ),
    "apply-patch-sparse": (
        ["apply", RECEIPT, "--key", PUB, "--patch", "{patch}", "--repo", "{repo}"],
        1,
        "proofgate: apply refused: {patch} is larger than 1 GiB, the limit for a patch",
    ),
    "prove-key-dev-zero": (
        ["prove", "--repo", "{repo}", *REV, "--key", "{zero}"],
        2,
        "proofgate: --key /dev/zero is larger than 64 KiB, the limit for a key",
    ),
    "prove-approval-dev-zero": (
        ["prove", "--repo", "{repo}", *REV, "--key", KEY, "--approval", "{zero}"],
        2,
        "proofgate: --approval /dev/zero is larger than 64 KiB, the limit for an approval",
    ),
    "prove-balance-from-sparse": (
        ["prove", "--repo", "{repo}", *REV, "--shard", "1/2"]
        + ["--balance-from", "{receipt}", "--balance-key", PUB],
        2,
        "proofgate: --balance-from {receipt} is larger than 64 MiB, the limit for a receipt",
    ),
    "policy-config-dev-zero": (
        ["policy", "--repo", "{repo}", *REV, "--config", "{zero}"],
        2,
        "proofgate: --config /dev/zero is larger than 256 KiB, the limit for a configuration",
    ),
}


@pytest.mark.parametrize(("argv", "code", "line"), CASES.values(), ids=CASES.keys())
def test_a_file_over_its_limit_is_refused_promptly_naming_file_and_limit(
    files: dict[str, str], tmp_path: Path, argv: list[str], code: int, line: str
) -> None:
    got, err, seconds = _proofgate([a.format(**files) for a in argv], tmp_path)
    assert "Traceback" not in err, err[-3000:]
    assert (got, line.format(**files)) == (code, err.strip().splitlines()[-1]), err[-3000:]
    assert seconds < 30, f"took {seconds:.1f} s"


def test_files_within_their_limits_are_read_under_the_same_memory_limit(tmp_path: Path) -> None:
    """The control: the memory limit itself refuses nothing a command should read."""
    got, err, _ = _proofgate(["verify", RECEIPT, "--key", PUB, "--patch", PATCH], tmp_path)
    assert got == 0, err
    assert "receipt verified: verdict PROVEN" in err


def test_the_actions_aggregate_reads_shard_files_up_to_their_limits(
    files: dict[str, str],
) -> None:
    """`mode: aggregate` reads the receipts the matrix uploaded: one over the limit ends the
    aggregate (its check run says why); a patch.diff over the limit is left out."""
    from gate.faces import action
    from gate.proof.aggregate import AggregateError

    with pytest.raises(AggregateError) as e:
        action._shard_receipt(Path(files["receipt"]))
    assert str(e.value) == (
        f"shard receipt {files['receipt']} is larger than 64 MiB, the limit for a receipt"
    )
    assert action._shard_patch(Path(files["patch"])) is None
    assert action._shard_patch(Path(PATCH)) == Path(PATCH).read_bytes()
