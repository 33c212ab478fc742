"""Replay the policy over the consecutive commits of a real git repository (issue 6).

Each commit is judged against its first parent exactly as a pull request would be: the
patch is `git diff --binary --full-index -M`, the inventory comes from `--raw` and
`--numstat`, and the proven tree's Python files and manifests are handed to the policy
(`tree_files`). Prints the distribution of decisions and the rules by hold count, so
false holds on ordinary work are measured, not guessed.

    python -m benchmarks.replay REPO [-n 500] [--merges] [--no-tree] [--examples 3]

The repository is only read (`git diff`, `git ls-tree`, `git cat-file`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path

from gate.model import Budgets, ChangeStatus, Decision, InventoryEntry, PolicySpec
from gate.policy import evaluate, wants_tree_file

_STATUS = {
    "A": ChangeStatus.ADDED,
    "M": ChangeStatus.MODIFIED,
    "D": ChangeStatus.DELETED,
    "R": ChangeStatus.RENAMED,
    "C": ChangeStatus.ADDED,
    "T": ChangeStatus.TYPE_CHANGED,
}


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


class Blobs:
    """A persistent `git cat-file --batch` with a cache by blob id."""

    def __init__(self, repo: Path) -> None:
        self._p = subprocess.Popen(
            ["git", "-C", str(repo), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._cache: dict[bytes, bytes] = {}

    def get(self, oid: bytes) -> bytes:
        if oid in self._cache:
            return self._cache[oid]
        assert self._p.stdin is not None
        assert self._p.stdout is not None
        self._p.stdin.write(oid + b"\n")
        self._p.stdin.flush()
        header = self._p.stdout.readline().split()
        if len(header) < 3:
            return b""
        data = self._p.stdout.read(int(header[2]) + 1)[:-1]
        self._cache[oid] = data
        return data

    def close(self) -> None:
        assert self._p.stdin is not None
        self._p.stdin.close()
        self._p.wait()


def inventory(repo: Path, parent: str, commit: str, blobs: Blobs) -> list[InventoryEntry]:
    raw = git(repo, "diff", "--raw", "-z", "-M", "--no-abbrev", parent, commit).split(b"\0")
    num = git(repo, "diff", "--numstat", "-z", "-M", parent, commit).split(b"\0")
    counts: dict[bytes, tuple[int, int, bool]] = {}
    i = 0
    while i < len(num) and num[i]:
        a, d, path = num[i].split(b"\t", 2)
        if not path:  # rename: old and new follow
            path = num[i + 2]
            i += 3
        else:
            i += 1
        binary = a == b"-"
        counts[path] = (0 if binary else int(a), 0 if binary else int(d), binary)
    out: list[InventoryEntry] = []
    i = 0
    while i < len(raw) and raw[i].startswith(b":"):
        old_mode, new_mode, _old_id, new_id, status = raw[i][1:].split(b" ")
        letter = status[:1].decode()
        if letter in "RC":
            old_path, path = raw[i + 1], raw[i + 2]
            i += 3
        else:
            old_path, path = None, raw[i + 1]
            i += 2
        om, nm = int(old_mode, 8), int(new_mode, 8)
        added, deleted, binary = counts.get(path, (0, 0, False))
        target = blobs.get(new_id) if nm == 0o120000 else None
        out.append(
            InventoryEntry(
                path=path,
                status=_STATUS.get(letter, ChangeStatus.MODIFIED),
                old_path=old_path if letter == "R" else None,
                old_mode=om or None,
                new_mode=nm or None,
                binary=binary,
                symlink_target=target,
                gitlink=om == 0o160000 or nm == 0o160000,
                lines_added=added,
                lines_deleted=deleted,
            )
        )
    return out


def tree_files(repo: Path, commit: str, blobs: Blobs) -> Mapping[bytes, bytes]:
    files: dict[bytes, bytes] = {}
    for rec in git(repo, "ls-tree", "-r", "-z", commit).split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, kind, oid = meta.split(b" ")
        if kind != b"blob":
            continue
        if wants_tree_file(path):
            lock = path.endswith((b".lock", b".sum", b"-lock.json", b"-lock.yaml", b".lockb"))
            files[path] = b"" if lock else blobs.get(oid)  # a lockfile: existence suffices
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", type=Path)
    ap.add_argument("-n", type=int, default=500, help="commits to replay (newest first)")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--merges", action="store_true", help="include merge commits")
    ap.add_argument("--no-tree", action="store_true", help="do not supply the proven tree")
    ap.add_argument("--examples", type=int, default=0, help="show N commits per holding rule")
    ap.add_argument("--budget-files", type=int, default=None)
    ap.add_argument("--budget-lines", type=int, default=None)
    args = ap.parse_args(argv)
    repo: Path = args.repo
    rev_args = ["rev-list", f"-n{args.n}"]
    if not args.merges:
        rev_args.append("--no-merges")
    commits = [c for c in git(repo, *rev_args, args.rev).decode().split() if c]
    spec = PolicySpec(budgets=Budgets(files=args.budget_files, lines=args.budget_lines))
    blobs = Blobs(repo)
    decisions: Counter[str] = Counter()
    holds_by_rule: Counter[str] = Counter()  # commits where the rule held/denied
    sole_by_rule: Counter[str] = Counter()  # ... and was the only rule doing so
    allow_findings: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    judged = 0
    dep_pair_only = 0
    t_policy = 0.0
    t0 = time.perf_counter()
    try:
        for c in commits:
            parents = git(repo, "rev-list", "--parents", "-n1", c).decode().split()[1:]
            if not parents:
                continue
            patch = git(repo, "diff", "--binary", "--full-index", "-M", parents[0], c)
            inv = inventory(repo, parents[0], c, blobs)
            tree = None if args.no_tree else tree_files(repo, c, blobs)
            t1 = time.perf_counter()
            result = evaluate(inv, patch, spec, tree_files=tree)
            t_policy += time.perf_counter() - t1
            judged += 1
            decisions[result.decision.value] += 1
            holding = {f.rule for f in result.findings if f.decision is not Decision.ALLOW}
            for rule in holding:
                holds_by_rule[rule] += 1
                if len(examples[rule]) < args.examples:
                    examples[rule].append(
                        c[:12]
                        + " "
                        + next(
                            f"{f.path!r}:{f.line} {f.message}"
                            for f in result.findings
                            if f.rule == rule
                        )
                    )
            if len(holding) == 1:
                sole_by_rule[next(iter(holding))] += 1
            elif holding == {"dependency-changed", "lockfile-drift"}:
                dep_pair_only += 1
            for f in result.findings:
                if f.decision is Decision.ALLOW:
                    allow_findings[f.rule] += 1
    finally:
        blobs.close()
    wall = time.perf_counter() - t0
    if not judged:
        print("no commits judged", file=sys.stderr)
        return 1
    head = git(repo, "rev-parse", args.rev).decode().strip()
    merges = "with" if args.merges else "without"
    supplied = "off" if args.no_tree else "on"
    print(f"repository: {repo.name} @ {head[:12]}, {judged} commits judged ")
    print(f"  ({merges} merges, proven tree supplied: {supplied})")
    print("decisions:")
    for d in ("ALLOW", "HOLD", "DENY"):
        print(f"  {d:6} {decisions[d]:5}  {100 * decisions[d] / judged:6.2f}%")
    dep_only = (
        sum(
            n
            for rule, n in sole_by_rule.items()
            if rule in ("dependency-changed", "lockfile-drift")
        )
        + dep_pair_only
    )
    held = decisions["HOLD"] + decisions["DENY"]
    print(
        f"held for dependencies only: {dep_only} ({100 * dep_only / judged:.2f}%); "
        f"held for anything else: {held - dep_only} ({100 * (held - dep_only) / judged:.2f}%)"
    )
    print("rules by hold count (commits; 'alone' = the only rule holding that commit):")
    for rule, n in holds_by_rule.most_common():
        print(f"  {rule:24} {n:5}  {100 * n / judged:6.2f}%   alone {sole_by_rule[rule]:4}")
        for ex in examples.get(rule, []):
            print(f"      {ex[:150]}")
    if allow_findings:
        recorded = ", ".join(f"{r} {n}" for r, n in allow_findings.most_common())
        print(f"ALLOW findings recorded: {recorded}")
    print(f"time: {wall:.1f}s wall, policy {1000 * t_policy / judged:.1f} ms/commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
