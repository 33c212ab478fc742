"""The recorded tag -> commit pairs the replay answers pin look-ups from (issue 29).

`benchmarks/replay.py` verifies pin bumps as the Action does, but without the network:
the GitHub API's answers ("tag v4.3.0 of actions/checkout is commit 08eba0...") come from
`benchmarks/fixtures/pin-tags.json`, which this builds from fetched repositories only:

- a repository that is itself fetched (`owner+name/repo`): its own tags, peeled to
  their commits (`git for-each-ref refs/tags`) — the upstream's own word;
- a third-party action or hook repository (no local copy): the pairs the projects'
  update bots wrote into their history — `uses: owner/repo@<sha> # vX.Y.Z` and
  `rev: <sha>  # frozen: vX.Y.Z` (tag and commit), `uses: owner/repo@vX.Y.Z` and
  `rev: vX.Y.Z` (the tag exists, its commit unrecorded) — over every commit of every
  fetched repository. A tag seen with two different commits is dropped (a moved tag or
  a fork's commit: the replay then holds it, as the Action would if GitHub disagreed).
  Each pair records how many commits and projects wrote it.

    python -m benchmarks.pintags REPO... [-o benchmarks/fixtures/pin-tags.json]

`FixturePins` is the `TagOracle` over that file; a tag it does not hold is a failed
look-up (held), never "no such tag".
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from gate.errors import TagLookupError
from gate.policy import TagAnswer

__all__ = ["FixturePins", "build", "main"]

_USES = re.compile(
    r"""^[+ -]?\s*(?:-\s*)?uses:\s*["']?([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:/[^@\s"']*)?@"""
    r"""(?:([0-9a-f]{40})["']?\s*#\s*(v?\d[\w.-]*)|(v?\d[\w.-]*)["']?)\s*(?:#.*)?$"""
)
_REPO = re.compile(
    r"""^[+ -]?\s*(?:-\s*)?repo:\s*["']?https://github\.com/([^\s"'#]+?)(?:\.git)?/?["']?\s*$"""
)
_REV = re.compile(
    r"""^[+ -]?\s*(?:-\s*)?rev:\s*["']?([^\s"'#]+)["']?\s*"""
    r"""(?:#\s*(?:frozen:\s*)?(v?\d[\w.-]*))?\s*$"""
)
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_FILES = (".github/workflows", ".github/actions", "action.yml", "action.yaml",
          ".pre-commit-config.yaml")  # fmt: skip


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return out.stdout.decode("utf-8", "replace")


def _name(repo: Path) -> str:
    p = repo.resolve()
    return (p.parent if p.name == "repo" else p).name.replace("+", "/", 1)


def build(repos: list[Path]) -> dict[str, object]:
    own: dict[str, dict[str, str]] = {}
    seen: dict[tuple[str, str], dict[str | None, set[str]]] = defaultdict(lambda: defaultdict(set))
    commits: dict[tuple[str, str], set[str]] = defaultdict(set)
    for repo in repos:
        project = _name(repo)
        tags = _git(repo, "for-each-ref", "--format=%(refname:short) %(*objectname) %(objectname)",
                    "refs/tags")  # fmt: skip
        own[project.lower()] = {
            t: (peeled or obj) for t, peeled, obj in (ln.split(" ") for ln in tags.splitlines())
        }
        log = _git(repo, "log", "--all", "-p", "--format=@@commit %H", "--", *_FILES)
        commit = ""
        hook_repo: str | None = None
        for line in log.splitlines():
            if line.startswith("@@commit "):
                commit, hook_repo = line.split()[1], None
                continue
            if line.startswith("@@ "):
                hook_repo = None
            m = _USES.match(line)
            if m:
                tag = m.group(3) or m.group(4)
                key = (m.group(1).lower(), tag)
                seen[key][m.group(2)].add(project)  # None: a tag ref, its commit unrecorded
                commits[key].add(commit)
                continue
            r = _REPO.match(line)
            if r:
                hook_repo = r.group(1).lower()
                continue
            v = _REV.match(line)
            if v and hook_repo is not None:
                ref, note = v.group(1), v.group(2)
                if _HEX40.match(ref) and note:
                    key, sha = (hook_repo, note), ref
                elif not _HEX40.match(ref):
                    key, sha = (hook_repo, ref), None
                else:
                    continue
                seen[key][sha].add(project)
                commits[key].add(commit)
    pairs: dict[str, dict[str, object]] = defaultdict(dict)
    dropped: list[str] = []
    for (upstream, tag), by_sha in sorted(seen.items()):
        if upstream in own:
            continue  # the upstream's own tags decide
        shas = {s for s in by_sha if s is not None}
        if len(shas) > 1:
            dropped.append(f"{upstream} {tag}: {', '.join(sorted(s[:12] for s in shas))}")
            continue
        projects = set().union(*by_sha.values())
        pairs[upstream][tag] = {
            "commit": next(iter(shas), None),
            "commits": len(commits[(upstream, tag)]),
            "projects": len(projects),
        }
    return {
        "source": (
            "fetched repositories' own tags (own); third-party pairs as the projects' update "
            "bots wrote them into history (observed); conflicting pairs dropped"
        ),
        "own": {k: dict(sorted(v.items())) for k, v in sorted(own.items())},
        "observed": {k: dict(sorted(v.items())) for k, v in sorted(pairs.items())},
        "dropped": dropped,
    }


class FixturePins:
    """The TagOracle of a recorded fixture (no network)."""

    def __init__(self, data: dict[str, object]) -> None:
        own = data.get("own", {})
        observed = data.get("observed", {})
        assert isinstance(own, dict)
        assert isinstance(observed, dict)
        self._own: dict[str, dict[str, str]] = own
        self._observed: dict[str, dict[str, dict[str, object]]] = observed

    @classmethod
    def load(cls, path: Path) -> FixturePins:
        data = json.loads(path.read_text())
        assert isinstance(data, dict)
        return cls(data)

    def tag(self, repository: str, tag: str) -> TagAnswer:
        key = repository.lower()
        if key in self._own:
            sha = self._own[key].get(tag)
            return TagAnswer(exists=sha is not None, commit=sha)
        entry = self._observed.get(key, {}).get(tag)
        if entry is None:
            raise TagLookupError(f"{repository} {tag} is not in the recorded fixture")
        commit = entry.get("commit")
        return TagAnswer(exists=True, commit=commit if isinstance(commit, str) else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repos", type=Path, nargs="+")
    ap.add_argument("-o", type=Path, default=Path("benchmarks/fixtures/pin-tags.json"))
    args = ap.parse_args(argv)
    data = build(args.repos)
    args.o.parent.mkdir(parents=True, exist_ok=True)
    args.o.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    observed = data["observed"]
    assert isinstance(observed, dict)
    n = sum(len(v) for v in observed.values())
    print(f"{n} observed tags of {len(observed)} upstreams; {len(data['dropped'])} dropped")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
