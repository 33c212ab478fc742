"""Replay the policy over real first-parent history, as `proofgate prove` judges it (issues 6, 29).

Each commit of each repository's first-parent history (merges included, judged against
their first parent, as their pull requests were) is judged through the product's own
path: `GitRepository.capture` (patch, inventory, re-application in a private object
store) and `gate.proof.policy_run.judge_policy` (the proven tree's files, bounded as in a
proof), with the policy `prove` applies: the base's `.github/proofgate.yml` policy when
it has one, else the default policy of a trivial config (`TRIVIAL_CONFIG`: SPEC §2's
example check, `pip install -e .[test]` then `python -m pytest -q`).

Pin bumps are verified as the Action verifies them, but the tag look-ups are answered
from a recorded fixture of real tag -> commit pairs (`benchmarks/fixtures/pin-tags.json`,
`--pins`), so nothing reaches the network. Prints the HOLD/DENY rate per project and per
rule and, with `--record`, writes the figures (and each commit's decision) as JSON.

    python -m benchmarks.replay REPO... [-n 200] [--record benchmarks/results/replay.json]
    python -m benchmarks.replay --table benchmarks/results/replay-*.json

The repositories are only read; the private object stores are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.pintags import FixturePins
from gate.config import DEFAULT_CONFIG_PATH, load_config
from gate.git.repo import GitRepository
from gate.model import Decision, PolicySpec
from gate.proof.policy_run import TagOracle, judge_policy

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PINS = ROOT / "benchmarks" / "fixtures" / "pin-tags.json"


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def project_name(repo: Path) -> str:
    """`owner/name` for a mirror directory `owner+name/repo`, else the directory name."""
    parent = repo.resolve()
    if parent.name == "repo":
        parent = parent.parent
    return parent.name.replace("+", "/", 1)


# A project without a config of its own is judged as an adopter would first configure it:
# the default policy with SPEC §2's example check (install the project with its test
# extra, run pytest). Which files a check reads decides some rules (requirements files,
# tox.ini, Makefile), so the replay says which commands it assumed.
TRIVIAL_CONFIG = (
    b"version: 1\nimage: python:3.12-slim\nchecks:\n"
    b'  - {name: unit, setup: "pip install -e .[test]", test: "python -m pytest -q"}\n'
)


def _spec_at(evidence: GitRepository, commit: str) -> PolicySpec:
    """The policy `prove` judges with: the base's config, else TRIVIAL_CONFIG's."""
    found = evidence.read_blob_at(commit, DEFAULT_CONFIG_PATH)
    data = found[1] if found is not None else TRIVIAL_CONFIG
    return load_config(data, source=DEFAULT_CONFIG_PATH).policy


def replay_project(
    repo: Path, n: int, rev: str, pins: TagOracle | None, examples: int
) -> dict[str, Any]:
    commits = git(repo, "rev-list", "--first-parent", f"-n{n}", rev).decode().split()
    evidence = GitRepository(repo)
    runs: list[dict[str, Any]] = []
    t_policy = 0.0
    try:
        for c in commits:
            parents = git(repo, "rev-list", "--parents", "-n1", c).decode().split()[1:]
            if not parents:
                continue
            ev = evidence.capture(parents[0], c)
            spec = _spec_at(evidence, parents[0])
            t1 = time.perf_counter()
            result = judge_policy(evidence, ev, spec, config_path=DEFAULT_CONFIG_PATH, tags=pins)
            t_policy += time.perf_counter() - t1
            holding = sorted({f.rule for f in result.findings if f.decision is not Decision.ALLOW})
            allowed = sorted({f.rule for f in result.findings if f.decision is Decision.ALLOW})
            run: dict[str, Any] = {
                "commit": c,
                "merge": len(parents) > 1,
                "decision": result.decision.value,
                "holding": holding,
                "recorded": allowed,
            }
            if examples and holding:
                run["messages"] = [
                    f"{f.rule}: {(f.path or b'').decode('utf-8', 'replace')}: {f.message}"[:220]
                    for f in result.findings
                    if f.decision is not Decision.ALLOW
                ]
            runs.append(run)
    finally:
        evidence.close()
    head = git(repo, "rev-parse", rev).decode().strip()
    return {
        "project": project_name(repo),
        "head": head,
        "commits": len(runs),
        "policy_ms_per_commit": round(1000 * t_policy / max(1, len(runs)), 1),
        "runs": runs,
    }


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Decisions per project, commits held per rule per project, and totals."""
    out: dict[str, Any] = {"projects": {}, "rules": {}}
    total: Counter[str] = Counter()
    rules: dict[str, Counter[str]] = {}
    for rec in records:
        d: Counter[str] = Counter(r["decision"] for r in rec["runs"])
        out["projects"][rec["project"]] = {"commits": rec["commits"], **dict(d)}
        total.update(d)
        total["commits"] += rec["commits"]
        for r in rec["runs"]:
            for rule in r["holding"]:
                rules.setdefault(rule, Counter())[rec["project"]] += 1
    out["total"] = dict(total)
    out["rules"] = {rule: dict(c) for rule, c in sorted(rules.items())}
    return out


def _pct(n: int, of: int) -> str:
    return f"{100 * n / of:.1f}%" if of else "-"


def table(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    """The Markdown tables docs/policy.md shows: held per project, then per rule."""
    projects = [r["project"] for r in after["records"]]
    sb = summarize(before["records"]) if before else None
    sa = summarize(after["records"])

    def held(s: dict[str, Any], p: str | None) -> tuple[int, int, int]:
        row = s["total"] if p is None else s["projects"].get(p, {})
        return row.get("commits", 0), row.get("HOLD", 0), row.get("DENY", 0)

    lines = [
        "| project | commits | HOLD before | HOLD after | DENY after |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for p in [*projects, None]:
        n, h, dn = held(sa, p)
        hb = "-"
        if sb is not None:
            nb, h0, _ = held(sb, p)
            hb = f"{h0} ({_pct(h0, nb)})"
        name = f"`{p}`" if p else "**all**"
        lines.append(f"| {name} | {n} | {hb} | {h} ({_pct(h, n)}) | {dn} |")
    lines += [
        "",
        "| rule | commits held before | after | "
        + " | ".join(f"`{p.split('/')[-1]}`" for p in projects)
        + " |",
    ]
    lines.append("| --- | ---: | ---: | " + " | ".join("---:" for _ in projects) + " |")
    names = sorted(set(sa["rules"]) | set(sb["rules"] if sb else ()))
    n_all = sa["total"].get("commits", 0)

    def count(s: dict[str, Any] | None, rule: str) -> int:
        return sum(s["rules"].get(rule, {}).values()) if s else 0

    names.sort(key=lambda r: (-count(sb, r), -count(sa, r), r))
    for rule in names:
        b = count(sb, rule)
        a = count(sa, rule)
        per = " | ".join(str(sa["rules"].get(rule, {}).get(p, 0)) for p in projects)
        nb = sb["total"].get("commits", 0) if sb else 0
        bs = f"{b} ({_pct(b, nb)})" if sb else "-"
        lines.append(f"| `{rule}` | {bs} | {a} ({_pct(a, n_all)}) | {per} |")
    return "\n".join(lines)


def dump(record: dict[str, Any]) -> str:
    """The record as JSON text, one commit per line (readable diffs, small files)."""
    out = ["{"]
    head = {k: v for k, v in sorted(record.items()) if k != "records"}
    out += [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    out.append(' "records": [')
    for i, rec in enumerate(record["records"]):
        meta = {k: v for k, v in sorted(rec.items()) if k != "runs"}
        out.append("  {" + json.dumps(meta)[1:-1] + ', "runs": [')
        runs = [json.dumps(r, sort_keys=True) for r in rec["runs"]]
        out += [f"   {r}," for r in runs[:-1]] + [f"   {r}" for r in runs[-1:]]
        out.append("  ]}" + ("," if i < len(record["records"]) - 1 else ""))
    out += [" ]", "}"]
    return "\n".join(out) + "\n"


def _print(record: dict[str, Any], examples: int) -> None:
    s = summarize(record["records"])
    print(f"{'project':32} {'commits':>7} {'HOLD':>12} {'DENY':>6}")
    for rec in record["records"]:
        p = s["projects"][rec["project"]]
        n = p["commits"]
        h, dn = p.get("HOLD", 0), p.get("DENY", 0)
        print(f"{rec['project']:32} {n:7} {h:5} {_pct(h, n):>6} {dn:6}")
    t = s["total"]
    n = t.get("commits", 0)
    print(
        f"{'all':32} {n:7} {t.get('HOLD', 0):5} {_pct(t.get('HOLD', 0), n):>6} {t.get('DENY', 0):6}"
    )
    print("rules by commits held (all projects):")
    for rule, per in sorted(s["rules"].items(), key=lambda kv: -sum(kv[1].values())):
        k = sum(per.values())
        detail = ", ".join(f"{p.split('/')[-1]} {c}" for p, c in sorted(per.items()))
        print(f"  {rule:26} {k:5} {_pct(k, n):>6}   ({detail})")
        if examples:
            shown = 0
            for rec in record["records"]:
                for r in rec["runs"]:
                    if rule in r["holding"] and shown < examples:
                        msg = next((m for m in r.get("messages", []) if m.startswith(rule)), "")
                        print(f"      {rec['project'].split('/')[-1]} {r['commit'][:12]} {msg}")
                        shown += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repos", type=Path, nargs="*")
    ap.add_argument("-n", type=int, default=200, help="first-parent commits per repository")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--pins", type=Path, default=DEFAULT_PINS, help="recorded tag -> commit pairs")
    ap.add_argument("--no-pins", action="store_true", help="judge without tag look-ups")
    ap.add_argument("--label", default="after")
    ap.add_argument("--record", type=Path, default=None, help="write the figures as JSON")
    ap.add_argument("--examples", type=int, default=0, help="show N commits per holding rule")
    ap.add_argument(
        "--table",
        nargs="+",
        type=Path,
        default=None,
        help="render docs/policy.md's tables from records (before first)",
    )
    args = ap.parse_args(argv)
    if args.table:
        recs = [json.loads(p.read_text()) for p in args.table]
        print(table(recs[0] if len(recs) > 1 else None, recs[-1]))
        return 0
    if not args.repos:
        ap.error("name at least one repository")
    pins: TagOracle | None = None
    if not args.no_pins:
        pins = FixturePins.load(args.pins)
    t0 = time.perf_counter()
    records = [replay_project(r, args.n, args.rev, pins, args.examples) for r in args.repos]
    record: dict[str, Any] = {
        "benchmark": "replay",
        "label": args.label,
        "per_project": args.n,
        "pins_verified": pins is not None,
        "trivial_config": TRIVIAL_CONFIG.decode(),
        "records": records,
    }
    _print(record, args.examples)
    print(f"time: {time.perf_counter() - t0:.1f}s wall")
    if args.record:
        for rec in records:
            for r in rec["runs"]:
                r.pop("messages", None)
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(dump(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
