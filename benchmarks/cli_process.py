"""Whole processes as a user runs them: `proofgate prove` / `proofgate policy` against the peer.

    python -m benchmarks.cli_process --clone DIR [--wheels DIR] [--runs 5] [--rev HEAD]
        [--scenarios true,policy,junit-cached,junit-uncached,junit-receipt] [--name NAME]
        [--test CMD] [--build CMD] [--record FILE]
    python -m benchmarks.cli_process --table FILE...   # the docs table from records

Every proofgate figure is a new process, `python -m gate ...`, with the per-user cache
of a user who has run proofgate before (the benchmark's own XDG_CACHE_HOME, warmed by one
untimed run of each scenario) and proofgate's bytecode cached as for an installed
package (a private PYTHONPYCACHEPREFIX, even where the environment sets
PYTHONDONTWRITEBYTECODE). The peer is what a user would write instead: `git worktree
add` of the commit, `docker run --rm --network none -v WORKTREE:/workspace` of the same
commands in the same image, `git worktree remove`. The two alternate in one run
(proofgate first on odd repetitions, the peer first on even ones), and each figure is
the median of `--runs` repetitions; read the ratios, the machine is shared.

Scenarios, all of REV's first-parent change (base REV^, head REV):

- `true`: `proofgate prove` of one check whose only command is `true` (no build), in the
  clean-room image, against the peer's `docker run ... true`: the fixed cost of a proof.
- `policy`: `proofgate policy` (the pre-flight, nothing runs) with the junit
  configuration below; against `python -c pass`, the interpreter's own start.
- `junit-cached` / `junit-uncached`: the README's recommended configuration (a test
  command writing a JUnit report, `junit` set, so the differential runs: the base's
  tests and the trusted run beside the check), build = an editable install, in an image
  of the clean-room image plus `--wheels`; the peer runs build && test once.
  `cached`: the base run's outcomes come from the base-run cache (as for every proof
  after the first on the same base); `uncached`: the base-run cache is emptied before
  each proof, so the base's tests run too (a fresh CI runner); `receipt`: the cache is
  emptied as well, and the base's outcomes come from the receipt of the base commit's
  own proof (`--base-receipt`, made once, untimed, as the merge queue would have).

The proofgate process signs its receipt (a key made once by `proofgate keygen`) and
writes it with `--out`, as a user would. A run whose verdict is not PROVEN is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.realworld import DEFAULT_BUILD, DEFAULT_IMAGE, build_image

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("true", "policy", "junit-cached", "junit-uncached", "junit-receipt")
DEFAULT_TEST = "python3 -m pytest -q -p no:cacheprovider tests"
REPORT = "reports/junit.xml"


def _config(image: str, build: str, test: str, junit: bool) -> str:
    phases = f"    build: [{json.dumps(build)}]\n" if build else ""
    report = f"    junit: {REPORT}\n" if junit else ""
    return (
        f"version: 1\nimage: {json.dumps(image)}\n"
        "defaults: {timeout: 900, memory: 2g}\n"
        f"checks:\n  - name: unit\n{phases}    test: [{json.dumps(test)}]\n{report}"
    )


def _git(*argv: str) -> str:
    done = subprocess.run(["git", *argv], check=True, capture_output=True, text=True, timeout=600)
    return done.stdout


class Bench:
    def __init__(self, clone: Path, rev: str, tmp: Path, gate: Path) -> None:
        self.clone = clone
        self.tmp = tmp
        self.head = _git("-C", str(clone), "rev-parse", rev).strip()
        self.base = _git("-C", str(clone), "rev-parse", f"{self.head}^").strip()
        self.scratch = tmp / "scratch"
        _git("clone", "-q", "--shared", "--no-checkout", str(clone), str(self.scratch))
        self.cache = tmp / "xdg-cache"
        # `python -m` puts the working directory first on sys.path: run from the checkout
        # whose proofgate is measured, or a checkout in the caller's directory would win
        self.gate = gate
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",)}
        self.env |= {
            "XDG_CACHE_HOME": str(self.cache),
            "PYTHONPYCACHEPREFIX": str(tmp / "pycache"),
            "PYTHONPATH": os.pathsep.join([str(gate), os.environ.get("PYTHONPATH", "")]),
        }
        subprocess.run(
            [sys.executable, "-m", "gate", "keygen", "--out", str(tmp / "keys")],
            env=self.env,
            cwd=gate,
            check=True,
            capture_output=True,
        )
        self.key = tmp / "keys" / "proofgate.key"

    def proofgate(
        self,
        command: str,
        config: Path,
        *extra: str,
        base: str | None = None,
        head: str | None = None,
        out: Path | None = None,
    ) -> tuple[float, float, str]:
        """(wall s, CPU s, verdict or policy decision) of one `python -m gate` process."""
        out = out or self.tmp / "out"
        shutil.rmtree(out, ignore_errors=True)
        argv = [sys.executable, "-m", "gate", command, "--repo", str(self.clone)]
        argv += ["--base", base or self.base, "--head", head or self.head]
        argv += ["--config", str(config), "--json", *extra]
        if command == "prove":
            argv += ["--key", str(self.key), "--out", str(out)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(
            argv, env=self.env, cwd=self.gate, capture_output=True, timeout=3600, check=False
        )
        elapsed = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        try:
            pred = json.loads(done.stdout)
            verdict = str(pred.get("verdict") or pred["policy"]["decision"])
        except (ValueError, KeyError, TypeError):
            verdict = f"no-output: {done.stderr.decode(errors='replace')[-300:]}"
        return elapsed, cpu, verdict

    def peer(self, image: str, command: str) -> tuple[float, int]:
        """worktree add, docker run --rm -v, worktree remove: (wall s, exit code)."""
        work = Path(tempfile.mkdtemp(prefix="bench-peer-", dir=self.tmp)) / "wt"
        t0 = time.perf_counter()
        _git("-C", str(self.scratch), "worktree", "add", "-q", "--detach", str(work), self.head)
        done = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "-v", f"{work}:/workspace"]
            + ["-w", "/workspace", image, "sh", "-c", command],
            capture_output=True,
            timeout=3600,
            check=False,
        )
        _git("-C", str(self.scratch), "worktree", "remove", "--force", str(work))
        elapsed = time.perf_counter() - t0
        shutil.rmtree(work.parent, ignore_errors=True)
        return elapsed, done.returncode

    def interpreter(self) -> tuple[float, int]:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", "pass"], env=self.env, check=False)
        return time.perf_counter() - t0, done.returncode

    def drop_base_runs(self) -> None:
        shutil.rmtree(self.cache / "proofgate" / "base-runs", ignore_errors=True)


def measure(
    bench: Bench,
    scenario: str,
    runs: int,
    *,
    image: str,
    build: str,
    test: str,
) -> dict[str, object]:
    junit = scenario.startswith("junit")
    if scenario == "true":
        image, build, test = DEFAULT_IMAGE, "", "true"
    if junit:
        test = f"{test} --junitxml={REPORT}"
    config = bench.tmp / f"{scenario}.yml"
    config.write_text(_config(image, build, test, junit))
    peer_cmd = f"{build} && {test}" if build else test
    command = "policy" if scenario == "policy" else "prove"

    extra: tuple[str, ...] = ()
    if scenario == "junit-receipt":  # the base commit's own proof, made once, untimed
        made = bench.tmp / "base-receipt"
        bench.drop_base_runs()
        bench.proofgate("prove", config, base=f"{bench.base}^", head=bench.base, out=made)
        pub = bench.tmp / "keys" / "proofgate.pub"
        extra = ("--base-receipt", str(made / "receipt.json"), "--base-key", str(pub))

    def ours() -> tuple[float, float, str]:
        if scenario in ("junit-uncached", "junit-receipt"):
            bench.drop_base_runs()  # a fresh runner: no base-run cache
        return bench.proofgate(command, config, *extra)

    def theirs() -> tuple[float, int]:
        return bench.interpreter() if scenario == "policy" else bench.peer(image, peer_cmd)

    ours()  # warm: page cache, the per-user cache, the image's bytecode listing
    theirs()
    mine: list[float] = []
    cpus: list[float] = []
    peer: list[float] = []
    verdicts: list[str] = []
    for i in range(runs):
        if i % 2 == 0:
            p_s, cpu, verdict = ours()
            n_s, n_rc = theirs()
        else:
            n_s, n_rc = theirs()
            p_s, cpu, verdict = ours()
        mine.append(p_s)
        cpus.append(cpu)
        peer.append(n_s)
        verdicts.append(verdict)
        print(
            f"  {scenario} [{i + 1}/{runs}] proofgate {p_s:6.2f} s (CPU {cpu:.2f} s) {verdict:<10} "
            f"peer {n_s:6.2f} s (exit {n_rc}) ratio {p_s / n_s:.2f}",
            flush=True,
        )
    ratios = [p / n for p, n in zip(mine, peer, strict=True)]
    return {
        "scenario": scenario,
        "runs": runs,
        "proofgate_median_s": round(statistics.median(mine), 3),
        "proofgate_cpu_median_s": round(statistics.median(cpus), 3),
        "peer_median_s": round(statistics.median(peer), 3),
        "ratio_median": round(statistics.median(ratios), 3),
        "over_peer_median_s": round(
            statistics.median(p - n for p, n in zip(mine, peer, strict=True)), 3
        ),
        "verdicts": sorted(set(verdicts)),
        "proofgate_s": [round(x, 3) for x in mine],
        "peer_s": [round(x, 3) for x in peer],
    }


def _row(name: str, s: dict[str, object]) -> str:
    what = {
        "true": "`prove`, one `true` check",
        "policy": "`policy` (vs `python -c pass`)",
        "junit-cached": "`prove` with `junit`, base run cached",
        "junit-uncached": "`prove` with `junit`, base run not cached",
        "junit-receipt": "`prove` with `junit`, no cache, base receipt",
    }[str(s["scenario"])]
    return (
        f"| {name} | {what} | {s['runs']} | {s['proofgate_median_s']:.2f} s "
        f"| {s['proofgate_cpu_median_s']:.2f} s "
        f"| {s['peer_median_s']:.2f} s | {s['ratio_median']:.2f}x "
        f"| {s['over_peer_median_s']:+.2f} s | {', '.join(map(str, s['verdicts']))} |"  # type: ignore[call-overload]
    )


def table(records: list[dict[str, object]]) -> str:
    """The rows docs/performance.md shows between its `process` markers."""
    lines = [
        "| project | process | runs | proofgate, median | its CPU | peer, median "
        "| ratio, median | difference, median | verdicts |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        scenarios = r["scenarios"]
        assert isinstance(scenarios, list)  # noqa: S101 - our own record
        lines.extend(_row(str(r["name"]), s) for s in scenarios)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clone", type=Path, help="a local clone of a real project")
    parser.add_argument("--rev", default="HEAD", help="the change REV^..REV is proven")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--wheels", type=Path, help="the image for the junit scenarios")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="or that image as it is")
    parser.add_argument("--build", default=DEFAULT_BUILD, help="build command ('' for none)")
    parser.add_argument("--test", default=DEFAULT_TEST)
    parser.add_argument("--name", help="the project's name in the record (default: DIR's)")
    parser.add_argument("--record", type=Path, help="write the summary as JSON here")
    parser.add_argument(
        "--gate", type=Path, default=ROOT, help="the checkout whose proofgate runs (default: this)"
    )
    parser.add_argument("--table", type=Path, nargs="+", help="render records as the table")
    args = parser.parse_args(argv)
    if args.table:
        print(table([json.loads(p.read_text()) for p in args.table]))
        return 0
    if args.clone is None:
        parser.error("--clone DIR is required (or --table FILE...)")
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}")
    image = build_image(args.wheels, DEFAULT_IMAGE) if args.wheels else args.image
    clone = args.clone.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="bench-process-"))
    results: list[dict[str, object]] = []
    try:
        bench = Bench(clone, args.rev, tmp, args.gate.resolve())
        for scenario in scenarios:
            results.append(
                measure(bench, scenario, args.runs, image=image, build=args.build, test=args.test)
            )
            r = results[-1]
            print(
                f"{scenario}: proofgate {r['proofgate_median_s']} s, peer "
                f"{r['peer_median_s']} s, ratio {r['ratio_median']}x, "
                f"difference {r['over_peer_median_s']} s",
                flush=True,
            )
        record = {
            "name": args.name or clone.name,
            "commit": bench.head,
            "scenarios": results,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.record is not None:
        args.record.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
