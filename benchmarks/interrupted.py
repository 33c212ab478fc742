"""Interrupted proofs leave nothing behind (docs/cleanup.md).

    python -m benchmarks.interrupted [--proofs 20] [--seed 1]

Runs `python -m gate prove` N times on a small repository whose check has a setup, a
build, two test commands and a JUnit report (a holder, two volumes, a temporary image,
several containers), sends SIGINT or SIGTERM at a random point of each (0 to 6 s in),
and after each counts the Docker objects that carry the run's own `PROOFGATE_LABELS`
value and, at the end, those labeled `proofgate=1` with the proof ids the runs used.
Exits 1 if anything is left.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import pygit2

CONFIG = b"""version: 1
image: proofgate/cleanroom:latest
defaults: {timeout: 60, memory: 256m, pids: 64}
checks:
  - name: slow
    setup: 'sleep 1'
    build: 'touch /tmp/built'
    test: ['sleep 2', 'mkdir -p r && cp j.xml r/j.xml']
    junit: r/j.xml
    differential: 'off'
"""
REPORT = b'<testsuite><testcase classname="t" name="a"/></testsuite>\n'


def _repo(root: Path) -> Path:
    """main: the configuration and a report to copy; pr: one more file."""
    repo = pygit2.init_repository(str(root / "repo"), initial_head="main")
    sig = pygit2.Signature("bench", "bench@invalid", 0, 0)
    gh = repo.TreeBuilder()
    gh.insert("proofgate.yml", repo.create_blob(CONFIG), pygit2.GIT_FILEMODE_BLOB)
    top = repo.TreeBuilder()
    top.insert(".github", gh.write(), pygit2.GIT_FILEMODE_TREE)
    top.insert("j.xml", repo.create_blob(REPORT), pygit2.GIT_FILEMODE_BLOB)
    base = repo.create_commit("refs/heads/main", sig, sig, "base", top.write(), [])
    head = repo.TreeBuilder(repo[base].tree)
    head.insert("a", repo.create_blob(b"1\n"), pygit2.GIT_FILEMODE_BLOB)
    repo.create_commit("refs/heads/pr", sig, sig, "pr", head.write(), [base])
    return Path(repo.workdir)


def _labeled(client: docker.DockerClient, label: str) -> list[str]:
    f = {"label": [label]}
    found = [f"container {c['Id'][:12]}" for c in client.api.containers(all=True, filters=f)]
    found += [f"volume {v['Name'][:12]}" for v in client.api.volumes(filters=f)["Volumes"] or []]
    found += [f"network {n['Id'][:12]}" for n in client.api.networks(filters=f)]
    found += [f"image {i['Id'][7:19]}" for i in client.api.images(filters=f)]
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proofs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)  # noqa: S311 - when to interrupt, not a secret
    client = docker.from_env()
    value = f"interrupted-{os.getpid()}"
    env = {**os.environ, "PROOFGATE_LABELS": f"bench.run={value}"}
    left_total = 0
    codes: dict[int, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = _repo(Path(tmp))
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        for n in range(args.proofs):
            delay = rng.uniform(0.0, 6.0)
            sig = rng.choice([signal.SIGINT, signal.SIGTERM])
            out = Path(tmp) / f"out{n}"
            proc = subprocess.Popen(  # noqa: S603 - our own CLI
                [sys.executable, "-m", "gate", "prove", "--repo", str(path), "--base", "main",
                 "--head", "pr", "--out", str(out)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            time.sleep(delay)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=300)
            codes[proc.returncode] = codes.get(proc.returncode, 0) + 1
            left = _labeled(client, f"bench.run={value}")
            left_total += len(left)
            traceback = "Traceback" in err.decode("utf-8", "replace")
            print(
                json.dumps(
                    {
                        "proof": n,
                        "signal": sig.name,
                        "after_s": round(delay, 2),
                        "exit": proc.returncode,
                        "left": left,
                        "traceback": traceback,
                    }
                ),  # fmt: skip
                flush=True,
            )
    print(json.dumps({"proofs": args.proofs, "exit_codes": codes, "objects_left": left_total}))
    return 1 if left_total else 0


if __name__ == "__main__":
    sys.exit(main())
