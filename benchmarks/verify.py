"""Wall time of `proofgate verify`, including interpreter start, against a bare interpreter.

    python benchmarks/verify.py [-n 21]

Runs `python -m gate verify RECEIPT --key PUB --require PROVEN` on the committed test
receipt and `python -c pass`, alternating, N times each, and prints the medians and the
difference. Goal: at most 100 ms above the bare interpreter. If the CLI cannot verify
(exit code other than 0), falls back to timing an in-process `gate.receipt.verify` run in a
fresh interpreter and says so.

Bytecode is cached (in a temporary PYTHONPYCACHEPREFIX, so the tree stays clean) as it is
for an installed package, even when the environment sets PYTHONDONTWRITEBYTECODE;
`--no-bytecode-cache` measures compiling every module from source on each run instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECEIPT = ROOT / "tests" / "assets" / "receipts" / "proven.json"
PUB = ROOT / "tests" / "assets" / "keys" / "trusted.pub"
GOAL_MS = 100.0

FALLBACK = (
    "import sys; from pathlib import Path; from gate import receipt; "
    "from gate.model import Verdict; "
    "k = receipt.load_public_key(Path(sys.argv[2]).read_bytes(), source=sys.argv[2]); "
    "receipt.verify_statement(Path(sys.argv[1]).read_bytes(), [k], require=Verdict.PROVEN)"
)


ENV = dict(os.environ)


def run(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, env=ENV)
    return (time.perf_counter() - t) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=21, help="runs of each command (default 21)")
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="compile every module on each run"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        if not args.no_bytecode_cache:
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = cache
        return measure(args.n)


def measure(n: int) -> int:

    python = sys.executable
    bare = [python, "-c", "pass"]
    cli = [python, "-m", "gate", "verify", str(RECEIPT), "--key", str(PUB), "--require", "PROVEN"]
    label = "python -m gate verify"
    if subprocess.run(cli, cwd=ROOT, capture_output=True, check=False, env=ENV).returncode != 0:
        cli = [python, "-c", FALLBACK, str(RECEIPT), str(PUB)]
        label = "gate.receipt.verify (fallback: the CLI did not verify)"
    run(cli)  # warm the bytecode caches
    run(bare)

    bare_ms: list[float] = []
    cli_ms: list[float] = []
    for _ in range(n):
        bare_ms.append(run(bare))
        cli_ms.append(run(cli))
    b, c = statistics.median(bare_ms), statistics.median(cli_ms)
    print(f"bare interpreter     median {b:7.1f} ms  (n={n})")
    print(f"{label:<20} median {c:7.1f} ms  (n={n})")
    verdict = "within" if c - b <= GOAL_MS else "OVER"
    print(f"difference           {c - b:7.1f} ms  ({verdict} the {GOAL_MS:.0f} ms goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
