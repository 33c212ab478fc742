"""Benchmark: a proof split over 3 shards against the one-job proof, on real commits.

    python -m benchmarks.shards --clone DIR [--commits 3] [--shards 3] [--image IMAGE]
        [--test CMD] [--record FILE]

DIR is a local clone (more-itertools: it needs only pytest, which the clean-room image
has). Per commit (base = its first parent, head = the commit) it proves once as one job
and once as N shards (`ProveRequest.shard`, what `prove --shard I/N` runs), each with an
empty base-run cache (so every base run really runs), then aggregates the shard receipts
in-process. It prints, per commit:

- cold (no recorded durations: by path hash) and balanced (by the durations the cold
  aggregate records, what `--balance-from` gives a later proof);
- the one-job proof's test time: the test phase's duration summed over every run of the
  differential (head, base, trusted, proving), from the journal's `command-finished`
  events; and each shard's, as a share of it (goal: each <= 40 %);
- the aggregate's own time (goal <= 1 s);
- whether the aggregate's verdict and per-test counts equal the one-job proof's;
- a held-out check of the refusals: the set without its last shard, and with one shard
  given twice, must be INCONCLUSIVE `shards-incomplete`.

Timing is wall time on a shared machine; ratios, not absolute numbers, are the result.

    python -m benchmarks.shards --clone DIR --processes [--commits 1] [--shards 3]
        [--image IMAGE] [--test CMD] [--env K=V ...]

measures whole processes instead (issue 38): per commit, `proofgate prove` as one job, then
each `proofgate prove --shard I/N --balance-from` the one-job receipt (which records the
head run's durations), one process after another, each with an empty base-run cache, and
`proofgate aggregate`. It prints each process's wall time, the slowest shard's as a share
of the one-job proof's (goal: <= 45 % for 3 shards), and whether the aggregate's verdict,
reason codes and exit status equal the one-job proof's.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gate import receipt
from gate.git.repo import GitRepository
from gate.proof.aggregate import AggregateRun, aggregate
from gate.proof.prove import ProofRun, ProveRequest, prove
from gate.proof.shard import ShardSpec, recorded_durations
from gate.sandbox.docker import DockerSandbox

DEFAULT_IMAGE = "proofgate/cleanroom:latest"
DEFAULT_TEST = (
    "python3 -m pytest -q -p no:cacheprovider --junitxml=out/junit.xml "
    "--doctest-modules more_itertools tests"
)


def _config(image: str, test: str, env: dict[str, str] | None = None) -> str:
    return (
        f"version: 1\nimage: {json.dumps(image)}\n"
        f"defaults: {{timeout: 1800, memory: 2g, env: {json.dumps(env or {})}}}\n"
        f"checks:\n  - name: tests\n    test: [{json.dumps(test)}]\n"
        "    junit: out/junit.xml\n    tests: ['tests/**']\n"
    )


def _cli(args: list[str], cache: Path) -> tuple[int, float]:
    """`python -m gate ARGS` as a process of its own, with an empty base-run cache: its
    exit status and wall seconds."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "gate", *args], env=env, capture_output=True, check=False
    )
    return done.returncode, time.monotonic() - started


def _verdict(out: Path) -> tuple[str, list[str]]:
    envelope = json.loads((out / "receipt.json").read_bytes())
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    return str(predicate["verdict"]), sorted({str(r["code"]) for r in predicate["reasons"]})


def bench_processes(clone: Path, commit: str, config: Path, shards: int) -> dict[str, object]:
    """Whole processes: one job, N balanced shards one after another, the aggregate."""
    with tempfile.TemporaryDirectory(prefix="pg-bench-proc-") as tmp_dir:
        tmp = Path(tmp_dir)
        code, _ = _cli(["keygen", "--out", str(tmp / "keys")], tmp / "c0")
        assert code == 0  # noqa: S101 - a benchmark's own precondition
        key, pub = tmp / "keys" / "proofgate.key", tmp / "keys" / "proofgate.pub"
        prove = ["prove", "--repo", str(clone), "--base", f"{commit}^", "--head", commit]
        prove += ["--config", str(config), "--key", str(key)]
        one_code, one_s = _cli([*prove, "--out", str(tmp / "one")], tmp / "c1")
        balance = ["--balance-from", str(tmp / "one" / "receipt.json"), "--balance-key", str(pub)]
        rows = []
        for i in range(1, shards + 1):
            out = tmp / f"shard{i}"
            code, wall = _cli([*prove, "--shard", f"{i}/{shards}", *balance, "--out", str(out)],
                              tmp / f"s{i}")  # fmt: skip
            rows.append({"index": i, "exit": code, "wall_s": round(wall, 2),
                         "share": round(wall / one_s, 3)})  # fmt: skip
        receipts = [str(tmp / f"shard{i}" / "receipt.json") for i in range(1, shards + 1)]
        agg_code, agg_s = _cli(
            ["aggregate", *receipts, "--key", str(pub), "--signing-key", str(key),
             "--out", str(tmp / "agg")], tmp / "ca",
        )  # fmt: skip
        return {
            "commit": commit,
            "one_job": {"exit": one_code, "wall_s": round(one_s, 2)},
            "shards": rows,
            "slowest_shard_share": max(r["share"] for r in rows),
            "aggregate": {"exit": agg_code, "wall_s": round(agg_s, 2)},
            "equal": agg_code == one_code and _verdict(tmp / "agg") == _verdict(tmp / "one"),
            "verdict": _verdict(tmp / "one"),
        }


def _test_seconds(run: ProofRun) -> float:
    """The test phase's duration over every run of the proof (head and differential)."""
    events = run.predicate["journal"]["events"]  # type: ignore[index]
    total = 0.0
    for e in events:  # type: ignore[attr-defined]
        data = e.get("data") or {}
        if e.get("kind") == "command-finished" and data.get("phase") == "test":
            total += float(data.get("duration_s") or 0.0)
    return total


def _counts(predicate: dict[str, object]) -> object:
    return [(c.get("name"), (c.get("tests") or {}).get("runs")) for c in predicate["checks"]]  # type: ignore[attr-defined]


def _prove(
    clone: Path,
    base: str,
    head: str,
    config: Path,
    key: bytes,
    shard: ShardSpec | None,
    balance: dict[str, dict[str, float]] | None = None,
) -> tuple[ProofRun, float]:
    with tempfile.TemporaryDirectory(prefix="pg-bench-cache-") as cache:
        os.environ["XDG_CACHE_HOME"] = cache  # no base run reused from an earlier proof
        started = time.monotonic()
        with GitRepository(clone) as evidence:
            run = prove(
                ProveRequest(
                    base=base,
                    head=head,
                    config_file=config,
                    signing_key_pem=key,
                    shard=shard,
                    balance=balance,
                ),
                evidence=evidence,
                sandbox=DockerSandbox,
            )
        return run, time.monotonic() - started


def bench_commit(
    clone: Path, commit: str, config: Path, key: bytes, shards: int
) -> dict[str, object]:
    base = f"{commit}^"
    one, one_wall = _prove(clone, base, commit, config, key, None)
    one_test = _test_seconds(one)
    signing = receipt.load_private_key(key, source="bench key")
    pub = [signing.public_key()]

    def sharded(
        balance: dict[str, dict[str, float]] | None,
    ) -> tuple[list[bytes], list[dict[str, object]], AggregateRun, float]:
        envelopes: list[bytes] = []
        rows: list[dict[str, object]] = []
        for i in range(1, shards + 1):
            which = ShardSpec(index=i, count=shards)
            run, wall = _prove(clone, base, commit, config, key, which, balance)
            envelopes.append(run.envelope)
            t = _test_seconds(run)
            rows.append(
                {
                    "index": i,
                    "verdict": str(run.shard_verdict),
                    "test_s": round(t, 2),
                    "share": round(t / one_test, 3) if one_test else None,
                    "wall_s": round(wall, 2),
                }
            )
        started = time.monotonic()
        agg = aggregate(envelopes, pub, signing_key=signing, clock=time.time)
        return envelopes, rows, agg, time.monotonic() - started

    # cold: no recorded durations, the split goes by path hash; then balanced by the
    # durations the cold aggregate records (what `--balance-from` gives a later proof)
    _, cold_rows, cold, _ = sharded(None)
    envelopes, shard_rows, agg, agg_s = sharded(recorded_durations(cold.predicate))
    missing = aggregate(envelopes[:-1], pub, signing_key=signing, clock=time.time)
    repeated = aggregate([*envelopes, envelopes[0]], pub, signing_key=signing, clock=time.time)
    held_out = all(
        r.verdict.value == "INCONCLUSIVE"
        and any(x.code.value == "shards-incomplete" for x in r.reasons)
        for r in (missing, repeated)
    )
    return {
        "commit": commit,
        "one_job": {
            "verdict": one.verdict.value,
            "test_s": round(one_test, 2),
            "wall_s": round(one_wall, 2),
        },
        "one_job_reasons": sorted({r.code.value for r in one.reasons}),
        "shards_cold": cold_rows,
        "shards": shard_rows,
        "aggregate": {"verdict": agg.verdict.value, "seconds": round(agg_s, 3)},
        "verdict_equal": agg.verdict is one.verdict and cold.verdict is one.verdict,
        "counts_equal": _counts(agg.predicate) == _counts(one.predicate) == _counts(cold.predicate),
        "refusals_held_out": held_out,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clone", type=Path, required=True)
    ap.add_argument("--commits", type=int, default=3)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--image", default=DEFAULT_IMAGE)
    ap.add_argument("--test", default=DEFAULT_TEST)
    ap.add_argument("--record", type=Path)
    ap.add_argument("--processes", action="store_true", help="whole CLI processes")
    ap.add_argument("--env", action="append", default=[], help="K=V for the check")
    args = ap.parse_args(argv)
    out = subprocess.run(
        ["git", "-C", str(args.clone), "rev-list", "--first-parent", "--no-merges",
         f"--max-count={args.commits}", "HEAD"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    commits = out.stdout.split()
    key, _ = receipt.generate_keypair()
    rows = []
    env = dict(e.split("=", 1) for e in args.env)
    with tempfile.TemporaryDirectory(prefix="pg-bench-") as tmp:
        config = Path(tmp) / "proofgate.yml"
        config.write_text(_config(args.image, args.test, env))
        if args.processes:
            for commit in commits:
                rows.append(bench_processes(args.clone, commit, config, args.shards))
                print(json.dumps(rows[-1]), flush=True)
            summary = {
                "commits": len(rows),
                "shards": args.shards,
                "test": args.test,
                "env": env,
                "slowest_shard_share": max(r["slowest_shard_share"] for r in rows),  # type: ignore[type-var]
                "all_equal": all(r["equal"] for r in rows),
            }
            print(json.dumps(summary), flush=True)
            if args.record is not None:
                record = {"summary": summary, "rows": rows}
                args.record.write_text(json.dumps(record, indent=2) + "\n")
            return 0
        for commit in commits:
            row = bench_commit(args.clone, commit, config, key, args.shards)
            rows.append(row)
            print(json.dumps(row), flush=True)
    worst_share = max((s["share"] or 0.0) for r in rows for s in r["shards"])  # type: ignore[attr-defined]
    worst_cold = max((s["share"] or 0.0) for r in rows for s in r["shards_cold"])  # type: ignore[attr-defined]
    summary = {
        "commits": len(rows),
        "shards": args.shards,
        "worst_shard_share": worst_share,
        "worst_shard_share_cold": worst_cold,
        "worst_aggregate_s": max(r["aggregate"]["seconds"] for r in rows),  # type: ignore[index]
        "all_equal": all(r["verdict_equal"] and r["counts_equal"] for r in rows),
        "refusals_held_out": all(r["refusals_held_out"] for r in rows),
    }
    print(json.dumps(summary), flush=True)
    if args.record is not None:
        args.record.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
