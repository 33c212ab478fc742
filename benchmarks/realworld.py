"""Replay real commits through `proofgate prove` and through the naive peer, same image.

    python -m benchmarks.realworld --clone DIR [--commits 40] [--wheels DIR | --image IMAGE]
        [--build CMD] [--test CMD] [--name NAME] [--record FILE]
    python -m benchmarks.realworld --table FILE...     # the docs table from records

The peer is what a user would write instead of proofgate: `git worktree add` of the
commit into a fresh directory, then `docker run --rm --network none -v WT:/workspace
-w /workspace IMAGE sh -c CMD`, then `git worktree remove`. proofgate proves the same
commit (base = its first parent, head = the commit) with a `--config` that runs the same
command in the same image. Nothing is fetched at run time: DIR is a local clone (for
example of pallets/click; see docs/performance.md for how to get one), and the image is
either present on the Docker host (`--image`) or built here, without a registry, from the
local clean-room image plus a wheelhouse directory prepared beforehand (`--wheels DIR`,
e.g. `pip download -d DIR "flit_core<4" pytest` for click). The configured build command
(default: an editable install of the project, which click's suite needs for its package
metadata) and test command run in the same image on both paths: the peer runs them in one
`sh -c`, proofgate as its build and test phases. The peer works in a scratch
`git clone --shared`, so the clone named by DIR gets no worktree entry.

Per commit it prints both wall times and their ratio, the time proofgate spent outside
the configured commands (wall time minus the commands' own durations from the receipt),
and the peer's fixed cost (`docker run --rm IMAGE true` on a worktree of the same commit).
A commit counts as a false failure when the peer's commands exit 0 and proofgate's
verdict is FAILED or INCONCLUSIVE; HELD (a policy wants a person) is counted apart.
The summary gives medians and p90s; `--record` writes it as JSON,
from which `--table` renders the rows of docs/performance.md (tests/unit/
test_performance_table.py checks that the page shows the recorded figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gate.git.repo import GitRepository
from gate.proof.prove import ProveRequest, prove
from gate.sandbox.docker import DockerSandbox

DEFAULT_IMAGE = "proofgate/cleanroom:latest"
DEFAULT_BUILD = "pip install -q --no-deps --no-build-isolation --break-system-packages -e ."
DEFAULT_TEST = "python3 -m pytest -q -p no:cacheprovider tests"
BENCH_LABEL = "proofgate.benchmark=realworld"


@dataclass(frozen=True, slots=True)
class CommitRun:
    commit: str
    native_s: float
    native_exit: int
    native_fixed_s: float
    proofgate_s: float
    proofgate_commands_s: float
    verdict: str

    @property
    def ratio(self) -> float:
        return self.proofgate_s / self.native_s

    @property
    def outside_s(self) -> float:
        return self.proofgate_s - self.proofgate_commands_s


def _config(image: str, build: str, test: str, timeout: int) -> str:
    phases = f"    build: [{json.dumps(build)}]\n" if build else ""
    return (
        f"version: 1\nimage: {json.dumps(image)}\n"
        f"defaults: {{timeout: {timeout}, memory: 2g}}\n"
        f"checks:\n  - name: tests\n{phases}    test: [{json.dumps(test)}]\n"
    )


def build_image(wheels: Path, base: str) -> str:
    """An offline image: the clean-room image plus every wheel in `wheels`. Never pulls."""
    names = sorted(p.name for p in wheels.glob("*.whl"))
    if not names:
        raise SystemExit(f"--wheels {wheels}: no *.whl files in it")
    digest = hashlib.sha256("\n".join([base, *names]).encode()).hexdigest()[:16]
    tag = f"proofgate-bench/realworld:{digest}"
    found = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False)
    if found.returncode == 0:
        return tag
    context = Path(tempfile.mkdtemp(prefix="bench-image-"))
    try:
        shutil.copytree(wheels, context / "wheels")
        (context / "Dockerfile").write_text(
            f"FROM {base}\nCOPY wheels /wheels\n"
            "RUN pip install -q --no-index --break-system-packages --find-links /wheels "
            "/wheels/*.whl && rm -rf /wheels\n"
        )
        subprocess.run(
            ["docker", "build", "-q", "--label", BENCH_LABEL, "-t", tag, str(context)],
            check=True,
            timeout=1800,
        )
    finally:
        shutil.rmtree(context, ignore_errors=True)
    return tag


def _git(*argv: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", *argv], cwd=cwd, check=True, capture_output=True, text=True, timeout=600
    )
    return done.stdout


def _docker_run(worktree: Path, image: str, command: str) -> int:
    done = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{worktree}:/workspace",
            "-w",
            "/workspace",
            image,
            "sh",
            "-c",
            command,
        ],
        capture_output=True,
        timeout=3600,
        check=False,
    )
    return done.returncode


def native(scratch: Path, commit: str, image: str, command: str) -> tuple[float, int]:
    """The peer: worktree add, docker run -v, worktree remove. (wall seconds, exit code)"""
    work = Path(tempfile.mkdtemp(prefix="bench-native-")) / "wt"
    t0 = time.perf_counter()
    _git("-C", str(scratch), "worktree", "add", "-q", "--detach", str(work), commit)
    rc = _docker_run(work, image, command)
    _git("-C", str(scratch), "worktree", "remove", "--force", str(work))
    elapsed = time.perf_counter() - t0
    shutil.rmtree(work.parent, ignore_errors=True)
    return elapsed, rc


def proofgate(clone: Path, config: Path, commit: str) -> tuple[float, float, str]:
    """`prove` of the commit against its first parent. (wall s, commands' s, verdict)"""
    t0 = time.perf_counter()
    with GitRepository(clone) as evidence:
        run = prove(
            ProveRequest(base=f"{commit}^", head=commit, config_file=config),
            evidence=evidence,
            sandbox=lambda proof: DockerSandbox(proof=proof),
        )
    elapsed = time.perf_counter() - t0
    commands = 0.0
    for check in run.predicate.get("checks", []):  # type: ignore[union-attr]
        for phase in check.get("phases", []):
            for cmd in phase.get("commands", []):
                commands += float(cmd.get("duration_s") or 0.0)
    return elapsed, commands, run.verdict.value


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def summarize(name: str, runs: list[CommitRun]) -> dict[str, object]:
    ratios = [r.ratio for r in runs]
    outside = [r.outside_s for r in runs]
    fixed = [r.native_fixed_s for r in runs]
    false_failures = [
        r.commit for r in runs if r.native_exit == 0 and r.verdict in ("FAILED", "INCONCLUSIVE")
    ]
    return {
        "name": name,
        "commits": len(runs),
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_p90": round(_p90(ratios), 3),
        "native_median_s": round(statistics.median(r.native_s for r in runs), 3),
        "proofgate_median_s": round(statistics.median(r.proofgate_s for r in runs), 3),
        "outside_median_s": round(statistics.median(outside), 3),
        "outside_p90_s": round(_p90(outside), 3),
        "native_fixed_median_s": round(statistics.median(fixed), 3),
        "false_failures": false_failures,
        "held": [r.commit for r in runs if r.verdict == "HELD"],
        "native_failures": [r.commit for r in runs if r.native_exit != 0],
        "runs": [asdict(r) for r in runs],
    }


def _row(r: dict[str, object]) -> str:
    failures, held = r["false_failures"], r.get("held", [])
    assert isinstance(failures, list)  # noqa: S101 - our own record
    assert isinstance(held, list)  # noqa: S101 - our own record
    return (
        f"| {r['name']} | {r['commits']} | {r['ratio_median']:.2f}x | {r['ratio_p90']:.2f}x "
        f"| {r['outside_median_s']:.2f} s ({r['outside_p90_s']:.2f} s) "
        f"| {r['native_fixed_median_s']:.2f} s | {len(failures)} | {len(held)} |"
    )


def table(records: list[dict[str, object]]) -> str:
    """The rows docs/performance.md shows, between its realworld markers."""
    lines = [
        "| project | commits | proofgate / peer, median | p90 | outside the commands, "
        "median (p90) | peer's fixed cost, median | false failures | held by policy |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines.extend(_row(r) for r in records)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clone", type=Path, help="a local clone of a real project")
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--rev", default="HEAD", help="the newest commit to replay")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="image to use as it is")
    parser.add_argument("--wheels", type=Path, help="build the image from these wheels")
    parser.add_argument("--build", default=DEFAULT_BUILD, help="build command ('' for none)")
    parser.add_argument("--test", default=DEFAULT_TEST)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--name", help="the project's name in the record (default: DIR's)")
    parser.add_argument("--record", type=Path, help="write the summary as JSON here")
    parser.add_argument("--table", type=Path, nargs="+", help="render records as the table")
    args = parser.parse_args(argv)
    if args.table:
        records = [json.loads(p.read_text()) for p in args.table]
        print(table(records))
        return 0
    if args.clone is None:
        parser.error("--clone DIR is required (or --table FILE...)")
    clone = args.clone.resolve()
    image = build_image(args.wheels, DEFAULT_IMAGE) if args.wheels else args.image
    peer_command = f"{args.build} && {args.test}" if args.build else args.test
    name = args.name or clone.name
    commits = _git(
        "-C", str(clone), "rev-list", "--first-parent", f"--max-count={args.commits}", args.rev
    ).split()
    commits.reverse()
    tmp = Path(tempfile.mkdtemp(prefix="bench-realworld-"))
    runs: list[CommitRun] = []
    try:
        scratch = tmp / "scratch"
        _git("clone", "-q", "--shared", "--no-checkout", str(clone), str(scratch))
        config = tmp / "proofgate.yml"
        config.write_text(_config(image, args.build, args.test, args.timeout))
        for i, commit in enumerate(commits, 1):
            # alternate the order so neither path always runs with a warm page cache
            if i % 2:
                n_s, n_rc = native(scratch, commit, image, peer_command)
                p_s, p_cmd, verdict = proofgate(clone, config, commit)
            else:
                p_s, p_cmd, verdict = proofgate(clone, config, commit)
                n_s, n_rc = native(scratch, commit, image, peer_command)
            fixed, _ = native(scratch, commit, image, "true")
            run = CommitRun(commit, n_s, n_rc, fixed, p_s, p_cmd, verdict)
            runs.append(run)
            print(
                f"[{i}/{len(commits)}] {commit[:12]} peer {n_s:6.2f} s (exit {n_rc}) "
                f"proofgate {p_s:6.2f} s {verdict:<12} ratio {run.ratio:.3f} "
                f"outside {run.outside_s:.2f} s peer-fixed {fixed:.2f} s",
                flush=True,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = summarize(name, runs)
    print(
        f"{name}: {len(runs)} commits; proofgate/peer median {summary['ratio_median']}x, "
        f"p90 {summary['ratio_p90']}x; outside the commands median "
        f"{summary['outside_median_s']} s (p90 {summary['outside_p90_s']} s) vs the peer's "
        f"fixed cost {summary['native_fixed_median_s']} s; false failures "
        f"{len(summary['false_failures'])}"  # type: ignore[arg-type]
    )
    if args.record is not None:
        args.record.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
