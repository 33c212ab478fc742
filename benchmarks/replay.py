"""Replay the policy over the consecutive commits of a real git repository (issue 6).

Each commit is judged against its first parent exactly as `proofgate prove` judges a
pull request, through the product's own path: `GitRepository.capture` (patch, inventory,
re-application in a private object store) and `gate.policy_run.judge_policy` (the proven
tree's files and binary additions, bounded as in a proof). Prints the distribution of
decisions and the rules by hold count, so false holds on ordinary work are measured, not
guessed.

    python -m benchmarks.replay REPO [-n 500] [--merges] [--examples 3]

The repository is only read; the private object store is deleted at the end.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from gate.config import DEFAULT_CONFIG_PATH
from gate.git.repo import GitRepository
from gate.model import Budgets, Decision, PolicySpec
from gate.policy_run import judge_policy

PINS_ONLY = "; nothing else changed"


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", type=Path)
    ap.add_argument("-n", type=int, default=500, help="commits to replay (newest first)")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--merges", action="store_true", help="include merge commits")
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
    evidence = GitRepository(repo)
    decisions: Counter[str] = Counter()
    holds_by_rule: Counter[str] = Counter()  # commits where the rule held/denied
    sole_by_rule: Counter[str] = Counter()  # ... and was the only rule doing so
    allow_findings: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    judged = 0
    dep_pair_only = 0
    pins_only = 0  # held only by pin / requirement bumps that change nothing else
    t_policy = 0.0
    t0 = time.perf_counter()
    try:
        for c in commits:
            parents = git(repo, "rev-list", "--parents", "-n1", c).decode().split()[1:]
            if not parents:
                continue
            ev = evidence.capture(parents[0], c)
            t1 = time.perf_counter()
            result = judge_policy(evidence, ev, spec, config_path=DEFAULT_CONFIG_PATH)
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
            held = [f for f in result.findings if f.decision is not Decision.ALLOW]
            if held and all(f.message.endswith(PINS_ONLY) for f in held):
                pins_only += 1
            if len(holding) == 1:
                sole_by_rule[next(iter(holding))] += 1
            elif holding == {"dependency-changed", "lockfile-drift"}:
                dep_pair_only += 1
            for f in result.findings:
                if f.decision is Decision.ALLOW:
                    allow_findings[f.rule] += 1
    finally:
        evidence.close()
    wall = time.perf_counter() - t0
    if not judged:
        print("no commits judged", file=sys.stderr)
        return 1
    head = git(repo, "rev-parse", args.rev).decode().strip()
    merges = "with" if args.merges else "without"
    print(f"repository: {repo.name} @ {head[:12]}, {judged} commits judged ")
    print(f"  ({merges} merges, through capture + judge_policy as in a proof)")
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
    print(
        f"held only for pin bumps (actions, pre-commit hooks, requirements) that change "
        f"nothing else: {pins_only} "
        f"({100 * pins_only / judged:.2f}%)"
    )
    print("rules by hold count (commits; 'alone' = the only rule holding that commit):")
    for rule, n in holds_by_rule.most_common():
        print(f"  {rule:24} {n:5}  {100 * n / judged:6.2f}%   alone {sole_by_rule[rule]:4}")
        for ex in examples.get(rule, []):
            print(f"      {ex[:150]}")
    if allow_findings:
        recorded = ", ".join(f"{r} {n}" for r, n in allow_findings.most_common())
        print(f"ALLOW findings recorded: {recorded}")
    print(
        f"time: {wall:.1f}s wall, policy (with tree reads) {1000 * t_policy / judged:.1f} ms/commit"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
