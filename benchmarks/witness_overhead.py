"""The witness's per-check overhead: one pytest session with and without it (issue 27).

    python -m benchmarks.witness_overhead [--modules 40] [--tests 25] [--runs 9]
        [--repo PATH --rev REV --tests-path tests] [--previous REV]

In the clean-room image (proofgate/cleanroom:latest), in one container, the same pytest
command runs `--runs` times each way, interleaved: bare, under the witness this checkout
ships, and (with `--previous REV`) under the witness of another revision of proofgate.
Wall time is taken inside the container, around the pytest process only, so container
start-up is not in it. The suite is generated (`--modules` modules of `--tests` tests,
half of them plain functions, half unittest.TestCase methods, some parametrized), or a
real project's tree at `--rev` (read from its git repository, never written there; its
tests need only pytest). Prints the medians and the differences; goal: +0.1 s median.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from gate.witness.host import plugin_tar

IMAGE = "proofgate/cleanroom:latest"

DRIVER = r"""
import json, os, resource, subprocess, sys, time
runs, args = int(sys.argv[1]), sys.argv[2:]
ways = {"bare": None, "witness": "/bench/new/boot"}
if os.path.isdir("/bench/old"):
    ways["previous"] = "/bench/old"
times = {k: [] for k in ways}
cpu = {k: [] for k in ways}
for i in range(runs):
    for way, plugdir in ways.items():
        env = dict(os.environ)
        env.pop("PYTEST_ADDOPTS", None)
        path = [p for p in os.environ.get("BENCH_PYTHONPATH", "").split(":") if p]
        if plugdir:
            env["PYTEST_ADDOPTS"] = "-p proofgate_witness"
            path.insert(0, plugdir)
        env["PYTHONPATH"] = ":".join(path)
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                           cwd="/bench/project", env=env, capture_output=True)
        times[way].append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[way].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        if i == 0 and plugdir:
            lines = [l for l in p.stdout.decode(errors="replace").splitlines()
                     if l.startswith("##[proofgate-witness] {") and '"exitstatus"' in l]
            tampered = json.loads(lines[-1].split(" ", 1)[1]).get("tampered") if lines else None
            print(json.dumps({"way": way, "status": p.returncode, "tampered": tampered}),
                  file=sys.stderr)
print(json.dumps({"wall": times, "cpu": cpu}))
"""


def generated(root: Path, modules: int, tests: int) -> None:
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    for m in range(modules):
        half = tests // 2
        lines = ["import unittest", "", "import pytest", "", "from calc import add", ""]
        for t in range(half):
            if t % 5 == 0:
                lines += ["@pytest.mark.parametrize('n', [1, 2, 3])", f"def test_p{t}(n):"]
                lines += ["    assert add(n, n) == 2 * n", ""]
            else:
                lines += [f"def test_f{t}():", f"    assert add({t}, 1) == {t + 1}", ""]
        lines += ["", "class TestU(unittest.TestCase):"]
        for t in range(tests - half):
            lines += [
                f"    def test_u{t}(self):",
                f"        self.assertEqual(add({t}, 1), {t + 1})",
            ]
        (root / f"test_m{m:03d}.py").write_text("\n".join(lines) + "\n")


def from_repo(root: Path, repo: Path, rev: str) -> None:
    data = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        t.extractall(root, filter="data")


def plugin_dir(dest: Path, source: bytes | None) -> None:
    """This checkout's start-up hook and witness as the clean room lays them out (`boot/`
    goes on PYTHONPATH), or `source`: an older single-file plugin, on PYTHONPATH itself."""
    dest.mkdir(parents=True)
    if source is None:
        with tarfile.open(fileobj=io.BytesIO(plugin_tar())) as t:
            t.extractall(dest, filter="data")
        return
    (dest / "proofgate_witness.py").write_bytes(source)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", type=int, default=40)
    ap.add_argument("--tests", type=int, default=25)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--repo", type=Path, help="a real project's git repository")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--tests-path", default="", help="what pytest is given, in the project")
    ap.add_argument("--previous", help="a revision of proofgate whose witness to compare")
    ap.add_argument("--pythonpath", default="", help="e.g. /bench/project/src")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="proofgate-witness-bench-") as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        if args.repo is not None:
            from_repo(project, args.repo, args.rev)
        else:
            generated(project, args.modules, args.tests)
        plugin_dir(root / "new", None)
        if args.previous:
            old = subprocess.run(
                ["git", "show", f"{args.previous}:gate/witness/plugin.py"],
                check=True,
                capture_output=True,
            ).stdout
            plugin_dir(root / "old", old)
        (root / "driver.py").write_text(DRIVER)
        root.chmod(0o755)
        pytest_args = [args.tests_path] if args.tests_path else []
        proc = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "-v", f"{root}:/bench",
             "-e", f"BENCH_PYTHONPATH={args.pythonpath}", IMAGE,
             "python3", "/bench/driver.py", str(args.runs), *pytest_args],
            capture_output=True,
            check=False,
        )  # fmt: skip
        sys.stderr.write(proc.stderr.decode(errors="replace"))
        if proc.returncode != 0:
            return 1
        measured: dict[str, dict[str, list[float]]] = json.loads(proc.stdout)
    what = f"{args.repo}@{args.rev}" if args.repo else f"{args.modules}x{args.tests} tests"
    print(f"suite: {what}, {args.runs} runs each, medians (s):")
    for kind, times in measured.items():
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f" {kind} time of the pytest process:")
        for way, m in med.items():
            print(f"  {way:9s} {m:7.3f}   (min {min(times[way]):.3f}, max {max(times[way]):.3f})")
        print(f"  witness overhead: {med['witness'] - med['bare']:+.3f} s (goal: <= +0.100)")
        if "previous" in med:
            print(f"  previous witness: {med['previous'] - med['bare']:+.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
