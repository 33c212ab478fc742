"""Peak memory of a whole `proofgate prove` whose patch adds a large binary (issue 46).

`python -m benchmarks.prove_memory [--mb 100] [--runs 1]` builds a repository (base: a
tiny Python package with a test; head: `assets/blob.bin` of random bytes added, and one
more test) and runs `python -m gate prove --json` on it in a fresh process per run, for two
configurations: one pytest check without a report (no differential), and the same check
writing `reports/junit.xml` (a differential: base and trusted runs too). Needs Docker
and the local image `proofgate/cleanroom:latest` (never pulled).

What is measured, in MiB:

- `own`: `ru_maxrss` of proofgate's process (`RUSAGE_SELF`, printed by the process at
  exit);
- `children`: the largest resident set of any of its child processes (git), polled from
  `/proc` every 20 ms. `RUSAGE_CHILDREN` is not used for them: a child started with
  vfork carries its parent's peak into its own `ru_maxrss` (Linux accounts the parent's
  address space until exec), so it says nothing of git's. The clean room's processes
  belong to the Docker daemon and are not counted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

IMAGE = "proofgate/cleanroom:latest"
PYTEST = "python3 -m pytest -q -p no:cacheprovider tests"
CONFIGS = {  # one check's keys besides its name
    "no report": f'test: ["{PYTEST}"]',
    "junit (differential)": f'test: ["{PYTEST} --junitxml=reports/junit.xml"], '
    "junit: reports/junit.xml",
}

_RUN = (
    "import resource, sys\nfrom gate.faces import cli\n"
    "try:\n    code = cli.main(sys.argv[1:])\n"
    "finally:\n"
    "    print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,"
    " file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@invalid",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def build(repo: Path, mb: int) -> None:
    """Base `main`: a package and its test; head `pr`: a random blob and one more test."""
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_bytes(b"def add(a, b):\n    return a + b\n")
    (repo / "tests" / "test_calc.py").write_bytes(
        b"from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "pr")
    (repo / "assets").mkdir()
    with (repo / "assets" / "blob.bin").open("wb") as f:
        for _ in range(mb):
            f.write(os.urandom(1 << 20))
    # a changed test: the differential's trusted tree (the head's code, the base's tests)
    # then differs from the head's and holds the blob, so it gets its own run
    with (repo / "tests" / "test_calc.py").open("ab") as f:
        f.write(b"\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "a large binary")
    (repo / "assets" / "blob.bin").unlink()  # only the object store keeps it


def config(check: str) -> str:
    return (
        f"version: 1\nimage: {IMAGE}\n"
        "defaults: {timeout: 120, memory: 1g, cpus: 1, pids: 64}\n"
        f"checks:\n  - {{name: unit, {check}}}\n"
        "policy:\n  rules: {binary-added: allow}\n"
    )


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _descendants(root: int) -> list[int]:
    out: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        out.extend(int(k) for k in kids)
        todo.extend(int(k) for k in kids)
    return out


def _command(pid: int) -> str:
    """A child's program and subcommand (`git apply`), or ""."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return ""
    words = [Path(argv[0]).name]
    rest = iter(argv[1:])
    for arg in rest:
        if arg == "-c":  # git's `-c name=value`
            next(rest, None)
        elif arg and not arg.startswith("-"):
            words.append(arg)
            break
    return " ".join(words)


def measure(repo: Path, cfg: Path, cache: Path) -> tuple[int, int, dict[str, int], float]:
    """Exit code, own peak MiB, each child command's peak MiB, seconds of one prove."""
    argv = [sys.executable, "-c", _RUN, "prove", "--repo", str(repo), "--base", "main"]
    argv += ["--head", "pr", "--config", str(cfg), "--json"]
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    children: dict[str, int] = {}
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            for pid in _descendants(proc.pid):
                rss, name = _rss_kib(pid), _command(pid)
                children[name] = max(children.get(name, 0), rss // 1024)
            time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    _, err = proc.communicate()
    done.set()
    poller.join()
    elapsed = time.perf_counter() - t0
    peaks = [ln.split()[1] for ln in err.splitlines() if ln.startswith("peak ")]
    if not peaks:
        sys.stderr.write(err)
        raise SystemExit(f"prove exited {proc.returncode} without its peak")
    return proc.returncode, int(peaks[-1]), children, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the added binary")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="proofgate-prove-memory-") as tmp:
        repo = Path(tmp) / "repo"
        build(repo, args.mb)
        print(f"{args.mb} MB binary\n")
        print("| configuration | exit | own MiB | children MiB | largest child | seconds |")
        print("| --- | ---: | ---: | ---: | --- | ---: |")
        for r in range(args.runs):
            for name, check in CONFIGS.items():
                cfg = Path(tmp) / "proofgate.yml"
                cfg.write_text(config(check))
                code, own, kids, secs = measure(repo, cfg, Path(tmp) / f"cache-{r}-{name[:5]}")
                top = max(kids, key=kids.__getitem__, default="")
                row = f"| {name} | {code} | {own} | {kids.get(top, 0)} | {top} | {secs:.1f} |"
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
