"""What a pin bump changes, said exactly (issue 16). Pure.

A GitHub Action bump or a pre-commit autoupdate is code that runs in CI or on
developers' machines, so the rules that see it keep their HOLD; the finding says exactly
which pins moved (`actions/checkout 11bd71...(v4.2.2) → 08eba0...(v4.3.0)`) and whether
anything else changed, so approving is one informed click.
"""

from __future__ import annotations

import re
from collections import defaultdict

from gate.model import InventoryEntry
from gate.policy.context import Context, as_text
from gate.policy.patch import FileDiff
from gate.util.lazyre import lazy

__all__ = ["describe_pins", "describe_requirements", "pins_suffix"]

_USES = lazy(r"""^\s*(?:-\s*)?uses:\s*["']?([^@\s"']+)@([^\s"'#]+)["']?\s*(?:#\s*(.*?))?\s*$""")
_REPO = lazy(r"""^\s*(?:-\s*)?repo:\s*["']?([^\s"'#]+)""")
_REV = lazy(r"""^\s*(?:-\s*)?rev:\s*["']?([^\s"'#]+)["']?\s*(?:#\s*(?:frozen:\s*)?(.*?))?\s*$""")
_HEX40 = lazy(r"^[0-9a-f]{40}$")
LIST_CAP = 10


def _pin(ref: str, note: str | None) -> str:
    shown = f"{ref[:6]}..." if _HEX40.match(ref) else ref
    return f"{shown}({note})" if note else shown


def _short_repo(url: str) -> str:
    return url.removeprefix("https://github.com/").removesuffix(".git")


def _summary(moved: dict[str, dict[str, list[str]]], pin_lines: int, diff: FileDiff) -> str | None:
    bumps: list[str] = []
    for name, sides in sorted(moved.items()):
        old = sorted(set(sides["-"]))
        new = sorted(set(sides["+"]))
        if old == new:
            continue
        bumps.append(f"{name} {', '.join(old) or '(new)'} → {', '.join(new) or '(removed)'}")
    if not bumps:
        return None
    others = sum(1 for ln in (*diff.added, *diff.deleted) if ln.text.strip()) - pin_lines
    more = f"; and {len(bumps) - LIST_CAP} more" if len(bumps) > LIST_CAP else ""
    tail = f"; and {others} other changed line(s)" if others > 0 else "; nothing else changed"
    return f"pins moved: {'; '.join(bumps[:LIST_CAP])}{more}{tail}"


def describe_pins(diff: FileDiff) -> str | None:
    """`old pin → new pin` for each action (`uses:`) or pre-commit hook repository
    (`repo:` + `rev:`) the diff re-pins, and how many other lines changed; None when
    the diff moves no pin."""
    moved: dict[str, dict[str, list[str]]] = defaultdict(lambda: {"-": [], "+": []})
    pin_lines = 0
    for hunk in diff.hunks:
        repo: str | None = None
        for ln in hunk:
            text = as_text(ln.text)
            r = _REPO.match(text)
            if r and ln.kind != "-":
                repo = _short_repo(r.group(1))
            if ln.kind == " ":
                continue
            u = _USES.match(text)
            v = _REV.match(text)
            if u:
                moved[u.group(1)][ln.kind].append(_pin(u.group(2), u.group(3)))
                pin_lines += 1
            elif v:
                moved[repo or "a hook repository"][ln.kind].append(_pin(v.group(1), v.group(2)))
                pin_lines += 1
    return _summary(moved, pin_lines, diff)


# `name[extras] <spec>` in requirements files, or as a quoted string in a TOML array
_REQUIREMENT = lazy(
    r"""^\s*["']?([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*((?:===|==|!=|<=|>=|~=|<|>)[^"';#\\]*?)?"""
    r"""\s*(;[^#]*?)?["']?\s*,?\s*\\?\s*(?:#.*)?$"""
)


def describe_requirements(diff: FileDiff) -> str | None:
    """`name old spec → new spec` for each requirement the diff changes (requirements
    files, dependency arrays of TOML manifests); None when no requirement line moved."""
    moved: dict[str, dict[str, list[str]]] = defaultdict(lambda: {"-": [], "+": []})
    pin_lines = 0
    for ln in (*diff.deleted, *diff.added):
        text = as_text(ln.text)
        m = _REQUIREMENT.match(text)
        if m is None:
            continue  # not a requirement (a TOML `key = [` line, an option, ...)
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        spec = (m.group(2) or "any").strip()
        marker = (m.group(3) or "").strip()
        quote = text.lstrip()[:1]
        if quote in ("'", '"') and marker.endswith(quote):
            marker = marker[:-1].strip()  # the TOML string's closing quote
        moved[name][ln.kind].append(f"{spec} {marker}" if marker else spec)
        pin_lines += 1
    return _summary(moved, pin_lines, diff)


def pins_suffix(ctx: Context, entry: InventoryEntry, path: bytes) -> str:
    """`: pins moved: ...` for a finding on `path` (the entry's new side), or ""."""
    d = ctx.diff_of(entry)
    pins = describe_pins(d) if d is not None and path == entry.path else None
    return f": {pins}" if pins else ""
