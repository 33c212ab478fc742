"""How the cost of `proofgate policy` grows with the work (issue 46).

    python -m benchmarks.cost_growth [--points 1000x100,10000x10000,50000x100] [--repeats 3]
                                     [--binary-mb 100]

Each point is a generated repository: a tree of N small Python files in packages that
import each other, and a patch that changes C of them (a line or two each). For every point
a whole `proofgate policy --json` process runs on a cold per-user cache, interleaved with
the baseline in the same run: `git diff --numstat` on the same two commits followed by a
Python process that parses every changed file once (`ast.parse`) — the least a
reviewer of the change's Python could do. Each row shows tree files, tree bytes, changed
files, changed lines, the medians, the ratio proofgate / baseline, proofgate's peak
memory (`ru_maxrss` of the `proofgate policy` process, a fresh one per run) and that of
the git processes it starts (their largest).

With `--binary-mb` a last row measures a patch that adds a binary file of that size.

Ratios, not seconds, are the result: the machine these figures come from is noisy.
Docker is not needed (the policy runs nothing).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

SIG = pygit2.Signature("bench", "bench@example.invalid", 1_700_000_000, 0)
CONFIG = "version: 1\nimage: proofgate/cleanroom:latest\nchecks:\n  - {name: t, test: 'true'}\n"


@dataclass(frozen=True)
class Point:
    files: int
    changed: int
    binary_mb: int = 0


def _module(rng: random.Random, i: int, per_pkg: int) -> bytes:
    pkg = i // per_pkg
    other = rng.randrange(max(1, i)) if i else 0
    body = [
        b'"""Module %d."""\n' % i,
        b"import os\n",
        b"from pkg%d import m%d\n" % (other // per_pkg, other) if i else b"",
        b"\n\nclass C%d:\n    def f(self, x: int) -> int:\n        return x + %d\n" % (i, pkg),
    ]
    body += [
        b"\n\ndef g%d(a, b):\n    return os.path.join(a, b, %r)\n" % (n, str(n)) for n in range(6)
    ]
    return b"".join(body)


def generate(path: Path, point: Point, seed: int = 46) -> tuple[int, int]:
    """The repository of `point` at `path` (branches main and pr); returns tree bytes
    and changed lines."""
    rng = random.Random(seed)  # noqa: S311 (test data, not secrets)
    repo = pygit2.init_repository(str(path), initial_head="main")
    index = pygit2.Index()
    per_pkg = 100
    bodies: dict[int, bytes] = {}
    total = 0
    for i in range(point.files):
        if i % per_pkg == 0:
            init = b'"""Package %d."""\n' % (i // per_pkg)
            index.add(
                pygit2.IndexEntry(
                    f"pkg{i // per_pkg}/__init__.py", repo.create_blob(init), FileMode.BLOB
                )
            )
            total += len(init)
        bodies[i] = _module(rng, i, per_pkg)
        total += len(bodies[i])
        index.add(
            pygit2.IndexEntry(
                f"pkg{i // per_pkg}/m{i}.py", repo.create_blob(bodies[i]), FileMode.BLOB
            )
        )
    base_tree = index.write_tree(repo)
    base = repo.create_commit("refs/heads/main", SIG, SIG, "base", base_tree, [])
    lines = 0
    step = max(1, point.files // max(1, point.changed))
    for n in range(point.changed):
        i = (n * step + step // 2) % point.files  # spread over the tree, not its root first
        body = bodies[i] + b"\n\ndef added%d(x):\n    return x * %d\n" % (n, n)
        lines += 4
        index.add(
            pygit2.IndexEntry(f"pkg{i // per_pkg}/m{i}.py", repo.create_blob(body), FileMode.BLOB)
        )
    if point.binary_mb:
        blob = repo.create_blob(rng.randbytes(point.binary_mb * 2**20))
        index.add(pygit2.IndexEntry("assets/blob.bin", blob, FileMode.BLOB))
    head_tree = index.write_tree(repo)
    repo.create_commit("refs/heads/pr", SIG, SIG, "head", head_tree, [base])
    subprocess.run(["git", "repack", "-adq"], cwd=path, check=True)
    subprocess.run(["git", "prune-packed"], cwd=path, check=True)
    return total, lines


_GENERATE = """
import sys
from pathlib import Path
from benchmarks.cost_growth import Point, generate
print(*generate(Path(sys.argv[1]), Point(*map(int, sys.argv[2:]))))
"""

_PEAK = (
    "import resource; print(*(resource.getrusage(w).ru_maxrss // 1024 for w in"
    " (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))"
)

_POLICY = (
    "import sys\nfrom gate.faces import cli\n"
    "code = cli.main(['policy', '--repo', sys.argv[1], '--base', 'main', '--head', 'pr',"
    " '--config', sys.argv[2], '--json'])\n"
    "assert code in (0, 11, 12, 13), code\n" + _PEAK + ", file=sys.stderr)\n"
)

_BASELINE = """
import ast, subprocess, sys
repo = sys.argv[1]
out = subprocess.run(["git", "-C", repo, "diff", "--numstat", "-M", "main", "pr"],
                     check=True, capture_output=True, text=True).stdout
for line in out.splitlines():
    path = line.split("\\t")[2]
    if path.endswith(".py"):
        ast.parse(subprocess.run(["git", "-C", repo, "cat-file", "blob", "pr:" + path],
                                 check=True, capture_output=True).stdout)
"""

_BASELINE_BATCH = """
import ast, subprocess, sys
repo = sys.argv[1]
out = subprocess.run(["git", "-C", repo, "diff", "--numstat", "-M", "main", "pr"],
                     check=True, capture_output=True, text=True).stdout
paths = [ln.split("\\t")[2] for ln in out.splitlines() if ln.split("\\t")[2].endswith(".py")]
cat = subprocess.run(["git", "-C", repo, "cat-file", "--batch"], check=True,
                     capture_output=True, input="".join(f"pr:{p}\\n" for p in paths).encode())
data, at = cat.stdout, 0
for _ in paths:
    nl = data.index(b"\\n", at)
    size = int(data[at:nl].split()[2])
    ast.parse(data[nl + 1 : nl + 1 + size])
    at = nl + 2 + size
"""


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, tuple[int, int]]:
    """Seconds of one child process, and the peak RSS (MiB) it printed of itself and of
    its own children (git), when it prints them."""
    t0 = time.perf_counter()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"{argv[:3]} exited {out.returncode}")
    tail = out.stderr.strip().splitlines()[-1:] or [""]
    parts = tail[0].split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return elapsed, (int(parts[0]), int(parts[1]))
    return elapsed, (0, 0)


def measure(point: Point, repeats: int) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory(prefix="proofgate-growth-") as tmp:
        repo = Path(tmp) / "repo"
        # generated in a child: a process started from a large parent inherits the
        # parent's peak as its own ru_maxrss (Linux counts it until exec)
        made = subprocess.run(
            [sys.executable, "-c", _GENERATE, str(repo), *map(str, dataclasses.astuple(point))],
            check=True,
            capture_output=True,
            text=True,
        )
        tree_bytes, lines = map(int, made.stdout.split())
        config = Path(tmp) / "proofgate.yml"
        config.write_text(CONFIG)
        ours: list[float] = []
        base: list[float] = []
        peak = children = 0
        for r in range(repeats):
            env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / f"cache{r}")}  # cold
            t, (m, c) = _timed([sys.executable, "-c", _POLICY, str(repo), str(config)], env)
            ours.append(t)
            peak, children = max(peak, m), max(children, c)
            script = _BASELINE_BATCH if point.changed > 200 else _BASELINE
            base.append(_timed([sys.executable, "-c", script, str(repo)], env)[0])
        mo, mb = statistics.median(ours), statistics.median(base)
        return {
            "tree_files": point.files,
            "tree_bytes": tree_bytes + point.binary_mb * 2**20,
            "changed_files": point.changed + (1 if point.binary_mb else 0),
            "changed_lines": lines,
            "policy_s": mo,
            "baseline_s": mb,
            "ratio": mo / mb,
            "peak_mib": peak,
            "children_mib": children,
        }


def table(rows: list[dict[str, float | int]]) -> str:
    head = (
        "| tree files | tree MiB | changed files | changed lines | policy (s) | baseline (s)"
        " | ratio | peak MiB | git children MiB |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    body = [
        f"| {r['tree_files']:,} | {r['tree_bytes'] / 2**20:.1f} | {r['changed_files']:,}"
        f" | {r['changed_lines']:,} | {r['policy_s']:.2f} | {r['baseline_s']:.2f}"
        f" | {r['ratio']:.2f}x | {r['peak_mib']} | {r['children_mib']} |"
        for r in rows
    ]
    return "\n".join([head, *body])


def _point(text: str) -> Point:
    files, _, changed = text.partition("x")
    return Point(int(files), int(changed or 100))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", default="1000x100,10000x100,10000x10000,50000x100")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--binary-mb", type=int, default=0)
    args = ap.parse_args()
    points = [_point(p) for p in args.points.split(",")]
    if args.binary_mb:
        points.append(Point(1000, 10, args.binary_mb))
    rows = []
    for p in points:
        rows.append(measure(p, args.repeats))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
