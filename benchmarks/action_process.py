"""The Action's whole process, as GitHub's runner runs it, against the naive peer.

    python -m benchmarks.action_process --clone DIR [--rev HEAD] [--runs 5] [--image TAG]
        [--record FILE]

The Action is a container action: the runner does `docker run` of its image (entry point
`python -m gate.faces.action`, action.yml) with the Docker socket, the workspace, the event and
the file-command files mounted. This does the same, with the harness of
tests/integration/test_action_e2e.py: the GitHub stand-in (tests/github_standin/) answers
the API on 127.0.0.1, and a local bare "origin" holds the base branch and the pull
request's head like GitHub does. The origin is made from a real project's clone (DIR):
`main` is REV^ plus one commit adding `.github/proofgate.yml` (one check whose only
command is `true`, in the clean-room image), and pull request 1's head is REV, so the
Action proves REV^..REV on main. Each repetition times one `docker run` of the Action for
a `pull_request` event (it fetches the pull request's objects, proves, signs and posts the
check run) and, interleaved, the peer: `git worktree add` of REV, `docker run --rm
--network none -v WORKTREE:/workspace` of `true` in the same clean-room image, `git
worktree remove`. Medians of `--runs`; read the ratio, the machine is shared.

The Action's image is built from this checkout (scripts/build-action-image, no registry)
unless `--image` names one.
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
from pathlib import Path

from tests.github_standin.fixtures import REPO, running_standin
from tests.github_standin.server import GitHubStandIn
from tests.integration.test_action_e2e import (
    GIT_ENV,
    Origin,
    add_pull,
    git,
    pr_event,
    run_action,
)

ROOT = Path(__file__).resolve().parent.parent
CLEANROOM = "proofgate/cleanroom:latest"
CONFIG = (
    f"version: 1\nimage: {CLEANROOM}\ndefaults: {{timeout: 120, memory: 512m}}\n"
    'checks:\n  - name: unit\n    test: [["true"]]\n'
)


def build_origin(clone: Path, rev: str, tmp: Path) -> Origin:
    head = git(clone, "rev-parse", rev)
    base = git(clone, "rev-parse", f"{head}^")
    work = tmp / "work"
    subprocess.run(
        ["git", "clone", "-q", "--shared", "--no-checkout", str(clone), str(work)],
        check=True,
        env=GIT_ENV,
    )
    git(work, "checkout", "-q", "-B", "bench-base", base)
    (work / ".github").mkdir(exist_ok=True)
    (work / ".github" / "proofgate.yml").write_text(CONFIG)
    git(work, "add", ".github/proofgate.yml")
    git(work, "commit", "-q", "-m", "proofgate configuration")
    main = git(work, "rev-parse", "HEAD")
    bare = tmp / "origin.git"
    git(tmp, "init", "-q", "--bare", str(bare))
    git(work, "push", "-q", str(bare), "bench-base:refs/heads/main", f"{head}:refs/pull/1/head")
    return Origin(bare, base, main, {1: head}, "", "")


def peer(scratch: Path, commit: str, tmp: Path) -> tuple[float, int]:
    work = Path(tempfile.mkdtemp(prefix="peer-", dir=tmp)) / "wt"
    t0 = time.perf_counter()
    git(scratch, "worktree", "add", "-q", "--detach", str(work), commit)
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-v", f"{work}:/workspace"]
        + ["-w", "/workspace", CLEANROOM, "sh", "-c", "true"],
        capture_output=True,
        check=False,
        timeout=600,
    )
    git(scratch, "worktree", "remove", "--force", str(work))
    elapsed = time.perf_counter() - t0
    shutil.rmtree(work.parent, ignore_errors=True)
    return elapsed, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clone", type=Path, required=True)
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", help="the Action's image (default: built from here)")
    parser.add_argument("--name", help="the project's name in the record")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args(argv)
    image = args.image
    if image is None:
        tag = "proofgate-bench/action:" + hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
        done = subprocess.run(
            [str(ROOT / "scripts" / "build-action-image"), tag],
            capture_output=True,
            text=True,
            check=True,
            timeout=1800,
        )
        image = done.stdout.strip().splitlines()[-1]
    clone = args.clone.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="bench-action-"))
    ours: list[float] = []
    theirs: list[float] = []
    verdicts: list[str] = []
    try:
        origin = build_origin(clone, args.rev, tmp)
        scratch = tmp / "scratch"
        git(tmp, "clone", "-q", "--shared", "--no-checkout", str(clone), str(scratch))
        for server in running_standin():
            for sha in (origin.main, origin.pulls[1]):
                server.set_commit_tree(REPO, sha, git(origin.path, "rev-parse", f"{sha}^{{tree}}"))
            add_pull(server, origin, 1)
            event = pr_event(origin, 1)

            def action(
                i: int, server: GitHubStandIn = server, event: dict[str, object] = event
            ) -> tuple[float, str]:
                t0 = time.perf_counter()
                got = run_action(image, server, origin, tmp / f"run{i}", "pull_request", event)
                elapsed = time.perf_counter() - t0
                verdict = got.outputs.get("verdict") or f"exit {got.code}: {got.stderr[-300:]}"
                return elapsed, verdict

            action(-1)  # warm: the page cache, the daemon's image layers
            peer(scratch, origin.pulls[1], tmp)
            for i in range(args.runs):
                if i % 2 == 0:
                    a_s, verdict = action(i)
                    p_s, _ = peer(scratch, origin.pulls[1], tmp)
                else:
                    p_s, _ = peer(scratch, origin.pulls[1], tmp)
                    a_s, verdict = action(i)
                ours.append(a_s)
                theirs.append(p_s)
                verdicts.append(verdict)
                print(
                    f"  action [{i + 1}/{args.runs}] {a_s:6.2f} s {verdict:<8} peer {p_s:6.2f} s "
                    f"ratio {a_s / p_s:.2f}",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratios = [a / p for a, p in zip(ours, theirs, strict=True)]
    record = {
        "name": args.name or clone.name,
        "scenario": "action-true",
        "runs": args.runs,
        "action_median_s": round(statistics.median(ours), 3),
        "peer_median_s": round(statistics.median(theirs), 3),
        "ratio_median": round(statistics.median(ratios), 3),
        "over_peer_median_s": round(
            statistics.median(a - p for a, p in zip(ours, theirs, strict=True)), 3
        ),
        "verdicts": sorted(set(verdicts)),
        "action_s": [round(x, 3) for x in ours],
        "peer_s": [round(x, 3) for x in theirs],
    }
    print(json.dumps({k: v for k, v in record.items() if not k.endswith("_s")}))
    print(
        f"action: {record['action_median_s']} s, peer {record['peer_median_s']} s, "
        f"ratio {record['ratio_median']}x, difference {record['over_peer_median_s']} s"
    )
    if args.record is not None:
        args.record.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
