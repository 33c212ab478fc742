"""Receipt predicate -> Markdown and JSON text (`proofgate show`, the check run, the job summary).

Its size (~700 lines) is honest: one page, many sections, every one of them total over
hostile input; split by section it would scatter the escaping rules it shares.

Total over its input: a malformed or partial predicate renders what it has and shows
"unknown" for the rest, never raises. Everything taken from the predicate is text an
attacker may have written (log tails, paths, messages, command lines), so:

- inline text is escaped for Markdown and HTML, and kept on one line;
- code spans and fences are sized from the longest backtick run they contain, so nothing
  can close them early; inside a fence nothing is interpreted, so log text is shown as is
  (an HTML entity there would be shown literally, not decoded);
- control characters (ANSI colour codes, carriage returns, NUL) are shown as visible
  escapes and never reach the reader's terminal or the page;
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Final

UNSIGNED_BANNER: Final = (
    "> **UNSIGNED receipt.** It carries no signature: anyone could have written it, and "
    "`proofgate verify` never accepts it. Sign with `--key` or `PROOFGATE_SIGNING_KEY`.\n"
)
UNVERIFIED_BANNER: Final = (
    "> **UNVERIFIED: nothing on this page was checked.** It was rendered without a key: "
    "no signature, journal or subject was verified, and anyone can write a receipt that "
    "reads like this one. Check it with `proofgate show RECEIPT --key PUB` or "
    "`proofgate verify RECEIPT --key PUB`.\n"
)
REPROOF_NOTE: Final = (
    "> **Re-proof of a commit.** This run proved one commit again (`trigger.kind: commit`): "
    "it shows that the commit's tree passes the checks, not that a policy judged the change "
    "that put it there. Release verification counts it only with `--accept-reproof`.\n"
)
TRUNCATION_NOTE: Final = (
    "\n\n---\n**This receipt was truncated to fit.** The full receipt is the signed "
    "envelope (`receipt.json`); render it with `proofgate show receipt.json`.\n"
)

_HEADLINES: Final = {
    "PROVEN": "the patch was proven: every configured check passed in a clean room",
    "FAILED": "a configured check failed",
    "HELD": "policy holds this change for a person's approval",
    "BLOCKED": "policy denies this change; no untrusted code was run",
    "INCONCLUSIVE": "the evidence is incomplete; nothing is proven",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


# --- total accessors ---------------------------------------------------------------------


def _get(obj: object, *path: str) -> object:
    for p in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(p)
    return obj


def _list(obj: object) -> list[object]:
    return list(obj) if isinstance(obj, list | tuple) else []


def _num(obj: object) -> float | None:
    if isinstance(obj, bool) or not isinstance(obj, int | float):
        return None
    f = float(obj)
    return f if f == f and abs(f) != float("inf") else None


def _plain(obj: object) -> str:
    """Any JSON value as one line of raw (unescaped) text."""
    if obj is None:
        return ""
    if isinstance(obj, str):
        text = obj
    elif isinstance(obj, bool):
        text = "yes" if obj else "no"
    elif isinstance(obj, int | float):
        text = str(obj)
    else:
        text = json.dumps(obj, ensure_ascii=False, default=str)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text.replace("\r", " ").replace("\n", " ").replace("\t", " ")


# --- escaping ----------------------------------------------------------------------------


def _text(obj: object, default: str = "unknown") -> str:
    """Inline Markdown text, escaped: cannot open HTML, links, code or table cells."""
    raw = _plain(obj)
    if not raw:
        return f"*{default}*"
    raw = raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", raw)


def _code(obj: object, default: str = "unknown") -> str:
    """An inline code span that its content cannot close; `|` escaped for tables."""
    raw = _plain(obj)
    if not raw:
        return f"*{default}*"
    runs = [len(r) for r in re.findall(r"`+", raw)]
    ticks = "`" * (max(runs, default=0) + 1)
    pad = " " if raw.startswith("`") or raw.endswith("`") or raw.startswith(" ") else ""
    return f"{ticks}{pad}{raw.replace('|', chr(92) + '|')}{pad}{ticks}"


def _short(obj: object, n: int = 12) -> str:
    raw = _plain(obj)
    return _code(raw[:n] if len(raw) > n + 1 else raw)


def _fence(body: str, info: str = "text") -> str:
    """A fenced code block its body cannot close: longer than any backtick run in it."""
    body = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", body.replace("\r\n", "\n"))
    body = body.replace("\r", "\n")
    runs = [len(r) for r in re.findall(r"`+", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    if not body.endswith("\n"):
        body += "\n"
    return f"{fence}{info}\n{body}{fence}\n"


def _summary_html(obj: object) -> str:
    raw = _plain(obj)
    return (
        raw.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("`", "&#96;")
    )


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _argv(command: object) -> str:
    argv = [a if isinstance(a, str) else _plain(a) for a in _list(_get(command, "argv"))]
    if len(argv) == 3 and argv[:2] == ["/bin/sh", "-c"]:
        return argv[2]
    return " ".join(a if a and not re.search(r"\s|['\"]", a) else json.dumps(a) for a in argv)


def _seconds(obj: object) -> str:
    n = _num(obj)
    return "unknown" if n is None else f"{n:.2f} s"


# --- sections ----------------------------------------------------------------------------


def _headline(p: Mapping[str, object]) -> str:
    verdict = _get(p, "verdict")
    name = verdict if isinstance(verdict, str) and verdict in _HEADLINES else None
    if name is None:
        return f"# proofgate: {_text(verdict)}\n\nThis receipt has no recognised verdict.\n"
    return f"# proofgate: {name}\n\n{_HEADLINES[name].capitalize()}.\n"


def _reasons(p: Mapping[str, object]) -> str:
    reasons = _list(_get(p, "reasons"))
    if not reasons:
        return ""
    lines = ["## Reasons", ""]
    for r in reasons:
        check = _get(r, "check")
        where = f" (check {_code(check)})" if check is not None else ""
        lines.append(f"- **{_text(_get(r, 'code'))}**{where}: {_text(_get(r, 'message'), '')}")
    return "\n".join(lines) + "\n"


def _trigger(p: Mapping[str, object]) -> str:
    ref = _get(p, "trigger", "base_ref")
    text = _text(_get(p, "trigger", "kind")) + (
        f" onto {_code(ref)}" if ref is not None else " (no branch)"
    )
    pr = _get(p, "trigger", "pull_request")
    return text + (f", pull request #{_text(pr)}" if pr is not None else "")


def _config_row(p: Mapping[str, object]) -> str:
    blob, digest = _get(p, "config", "blob"), _get(p, "config", "sha256")
    where = f"{_text(_get(p, 'config', 'source'))} {_code(_get(p, 'config', 'path'))}"
    if isinstance(blob, str) and isinstance(digest, str) and blob == f"sha256:{digest}":
        return f"{where} (sha256 {_code(digest)})"  # a file: its blob is its digest
    return f"{where} blob {_code(blob)} (sha256 {_code(digest, 'unknown')})"


def _proven(p: Mapping[str, object]) -> str:
    rows = [
        ["Repository", _text(_get(p, "repository"))],
        ["Base", f"{_code(_get(p, 'base', 'commit'))} (tree {_code(_get(p, 'base', 'tree'))})"],
        ["Merge base", _code(_get(p, "merge_base"))],
        ["Head", f"{_code(_get(p, 'head', 'commit'))} (tree {_code(_get(p, 'head', 'tree'))})"],
        ["Proven tree", _code(_get(p, "proven_tree"), "none")],
        ["Patch SHA-256", _code(_get(p, "patch", "sha256"))],
        [
            "Patch size",
            f"{_text(_get(p, 'patch', 'bytes'))} bytes, {_text(_get(p, 'patch', 'files'))} files",
        ],
        ["Trigger", _trigger(p)],
        ["Config", _config_row(p)],
        ["Started / finished", f"{_text(_get(p, 'started_at'))} / {_text(_get(p, 'finished_at'))}"],
    ]
    if _get(p, "builder") is not None:
        workflow = _code(_get(p, "builder", "workflow"))
        rows.append(["Workflow", f"{workflow} run {_text(_get(p, 'builder', 'run_id'))}"])
    return "## What was proven\n\n" + _table(["Field", "Value"], rows)


def _coverage(p: Mapping[str, object]) -> str:
    complete = _get(p, "coverage", "complete")
    notes = _list(_get(p, "coverage", "notes"))
    if complete is True and not notes:
        return "## Coverage\n\nComplete: the evidence covers the whole change.\n"
    state = (
        "complete" if complete is True else "**incomplete**" if complete is False else "*unknown*"
    )
    lines = ["## Coverage", "", f"Coverage is {state}.", ""]
    lines += [f"- {_text(n)}" for n in notes]
    return "\n".join(lines) + "\n"


def _policy(p: Mapping[str, object]) -> str:
    lines = [
        "## Policy",
        "",
        f"Decision: **{_text(_get(p, 'policy', 'decision'))}** "
        f"(policy fingerprint {_short(_get(p, 'policy', 'fingerprint'))})",
        "",
    ]
    findings = _list(_get(p, "policy", "findings"))
    if findings:
        rows = [
            [
                _text(_get(group[0], "decision")),
                _code(_get(group[0], "rule")),
                _grouped_paths(group),
                _text(_get(group[0], "line"), "-") if len(group) == 1 else "-",
                _text(_get(group[0], "message"), ""),
            ]
            for group in _group_findings(findings)
        ]
        lines.append(_table(["Decision", "Rule", "Path", "Line", "Message"], rows))
    else:
        lines.append("No findings.\n")
    return "\n".join(lines)


def _approval(p: Mapping[str, object]) -> str:
    a = _get(p, "approval")
    if not isinstance(a, Mapping):
        return ""
    return (
        "## Approval\n\n"
        f"Approved by {_text(_get(a, 'approver'))} ({_text(_get(a, 'method'))}) at "
        f"{_text(_get(a, 'approved_at'))}, bound to patch {_short(_get(a, 'patch_sha256'))} "
        f"and policy {_short(_get(a, 'policy_fingerprint'))}.\n"
    )


def _commands(p: Mapping[str, object]) -> list[tuple[object, object, object]]:
    """(check, phase, command) for every command, in order."""
    out: list[tuple[object, object, object]] = []
    for c in _list(_get(p, "checks")):
        for ph in _list(_get(c, "phases")):
            out += [(c, ph, cmd) for cmd in _list(_get(ph, "commands"))]
    return out


def _checks(p: Mapping[str, object]) -> str:
    checks = _list(_get(p, "checks"))
    if not checks:
        return "## Checks\n\nNo check ran.\n"
    lines = ["## Checks", ""]
    for c in checks:
        started = _get(c, "started")
        state = "" if started is not False else " — **container did not start**"
        lines.append(
            f"- {_code(_get(c, 'name'))}: image {_code(_get(c, 'image'))} "
            f"{_code(_get(c, 'image_digest'))}{state}"
        )
        if _get(c, "error") is not None:
            lines.append(f"  - error: {_text(_get(c, 'error'))}")
    lines.append("")
    rows = []
    for c, ph, cmd in _commands(p):
        exit_code = _get(cmd, "exit_code")
        rows.append(
            [
                _code(_get(c, "name")),
                _text(_get(ph, "phase")),
                _code(_argv(cmd)),
                _text(exit_code, "none") if exit_code is not None else "*none*",
                _seconds(_get(cmd, "duration_s")),
                "**yes**" if _get(cmd, "timed_out") is True else "no",
                "**yes**" if _get(cmd, "oom_killed") is True else "no",
            ]
        )
    if rows:
        header = ["Check", "Phase", "Command", "Exit", "Duration", "Timed out", "OOM"]
        lines.append(_table(header, rows))
    return "\n".join(lines)


def _egress(p: Mapping[str, object]) -> str:
    """SPEC §2 `egress`: every connection attempt of each check's setup phase."""
    lines: list[str] = []
    for c in _list(_get(p, "checks")):
        summary = _get(c, "egress_summary")
        if summary is None:
            continue
        attempts = _list(_get(c, "egress"))
        total = _num(_get(summary, "attempts"))
        refused = _num(_get(summary, "refused"))
        lines += [
            "",
            f"{_code(_get(c, 'name'))}: {int(total or 0)} attempt(s), {int(refused or 0)} refused; "
            f"digest of the full list {_short(_get(summary, 'sha256'))}"
            + ("" if _get(summary, "complete") is True else " — **log incomplete**")
            + (f" (first {len(attempts)} shown)" if _get(summary, "truncated") is True else ""),
        ]
        rows = [
            [
                _text(_get(a, "kind")),
                _code(f"{_plain(_get(a, 'host'))}:{_plain(_get(a, 'port'))}"),
                "allowed"
                if _get(a, "allowed") is True
                else f"**refused** ({_text(_get(a, 'reason'))})",
                _text(_get(a, "bytes_up"), "0"),
                _text(_get(a, "bytes_down"), "0"),
                _seconds(_get(a, "duration_s")),
            ]
            for a in attempts
        ]
        if rows:
            lines += ["", _table(["Kind", "Host:port", "Decision", "Up", "Down", "Duration"], rows)]
    if not lines:
        return ""
    return (
        "## Egress\n\nEvery connection attempt of the setup phase through the egress broker.\n"
        + "\n".join(lines)
        + "\n"
    )


def _timeline(p: Mapping[str, object]) -> str:
    """Per check, one line: each phase's span in seconds since the check's container
    started, and the check's total. Text, so it reads the same in a terminal and a page."""
    lines: list[str] = []
    for c in _list(_get(p, "checks")):
        spans: list[str] = []
        total = 0.0
        for ph in _list(_get(c, "phases")):
            got = [
                (start, start + max(dur, 0.0))
                for cmd in _list(_get(ph, "commands"))
                if (start := _num(_get(cmd, "started_offset_s"))) is not None
                and (dur := _num(_get(cmd, "duration_s"))) is not None
            ]
            if not got:
                continue
            begin, end = min(b for b, _ in got), max(e for _, e in got)
            total = max(total, end)
            spans.append(f"{_text(_get(ph, 'phase'))} {begin:.1f}–{end:.1f} s")
        if spans:
            lines.append(f"- {_code(_get(c, 'name'))}: " + " → ".join(spans) + f" ({total:.1f} s)")
    if not lines:
        return ""
    return (
        "## Timeline\n\nSeconds since each check's container started.\n\n" + "\n".join(lines) + "\n"
    )


def _log_blocks(p: Mapping[str, object], *, failing_only: bool = False) -> list[tuple[str, str]]:
    """(header, tail) per command with a log tail; the header ends inside <details>."""
    out: list[tuple[str, str]] = []
    for c, ph, cmd in _commands(p):
        tail = _get(cmd, "log_tail")
        if not isinstance(tail, str) or not tail or (failing_only and not _failed(cmd)):
            continue
        exit_code = _get(cmd, "exit_code")
        title = (
            f"{_plain(_get(c, 'name'))} / {_plain(_get(ph, 'phase'))} / {_argv(cmd)}"
            f" (exit {_plain(exit_code) or 'none'}, log {_plain(_get(cmd, 'log_bytes'))} bytes,"
            f" sha256 {_plain(_get(cmd, 'log_sha256'))[:12]})"
        )
        out.append((f"<details><summary>{_summary_html(title)}</summary>\n\n", tail))
    return out


def _log_block(header: str, tail: str) -> str:
    return header + _fence(tail) + "\n</details>\n"


def _group_findings(findings: list[object]) -> list[list[object]]:
    """Findings with the same decision, rule and message, in first-seen order."""
    groups: dict[tuple[str, str, str], list[object]] = {}
    for f in findings:
        key = (_plain(_get(f, "decision")), _plain(_get(f, "rule")), _plain(_get(f, "message")))
        groups.setdefault(key, []).append(f)
    return list(groups.values())


def _grouped_paths(group: list[object], shown: int = 10) -> str:
    paths = [_code(_get(f, "path"), "-") for f in group[:shown]]
    more = f" (+{len(group) - shown} more)" if len(group) > shown else ""
    return ", ".join(paths) + more


def _junit_line(c: object) -> str:
    """`12 tests: 11 passed, 1 failed, 0 skipped` from the check's JUnit counts ("" if none)."""
    tests, failures = _num(_get(c, "junit", "tests")), _num(_get(c, "junit", "failures"))
    errors, skipped = _num(_get(c, "junit", "errors")), _num(_get(c, "junit", "skipped"))
    if tests is None or failures is None or errors is None or skipped is None:
        return ""
    passed = tests - failures - errors - skipped
    parts = [f"{passed:.0f} passed"]
    parts += [f"{failures:.0f} failed"] if failures else []
    parts += [f"{errors:.0f} errored"] if errors else []
    parts += [f"{skipped:.0f} skipped"] if skipped else []
    return f"{tests:.0f} test{'s' if tests != 1 else ''}: " + ", ".join(parts)


_STATES = {"FAILED": "**failed**", "HELD": "**held**", "INCONCLUSIVE": "**inconclusive**"}


def _check_states(p: Mapping[str, object]) -> dict[str, str]:
    """Check name -> what its worst reason makes of it (failed, held, inconclusive)."""
    from gate.model import ReasonCode
    from gate.proof.verdict import verdict_for

    order = ("INCONCLUSIVE", "FAILED", "HELD")
    worst: dict[str, str] = {}
    for r in _list(_get(p, "reasons")):
        check = _get(r, "check")
        if not isinstance(check, str):
            continue
        try:
            verdict = verdict_for(ReasonCode(_plain(_get(r, "code")))).value
        except ValueError:
            verdict = "FAILED"
        if verdict not in order:
            continue
        if check not in worst or order.index(verdict) < order.index(worst[check]):
            worst[check] = verdict
    return {c: _STATES[v] for c, v in worst.items()}


def _glance(p: Mapping[str, object]) -> str:
    """One line per check, near the top: passed or failed, its tests, its time."""
    checks = _list(_get(p, "checks"))
    if not checks:
        return ""
    states = _check_states(p)
    lines = ["## Checks at a glance", ""]
    for c in checks:
        name = _plain(_get(c, "name"))
        took = sum(
            _num(_get(cmd, "duration_s")) or 0.0
            for ph in _list(_get(c, "phases"))
            for cmd in _list(_get(ph, "commands"))
        )
        state = states.get(name, "passed")
        if _get(c, "started") is False:
            state = "**did not start**"
        tests = _junit_line(c)
        lines.append(
            f"- {_code(name)}: {state}"
            + (f" · {_text(tests)}" if tests else "")
            + f" · {took:.1f} s"
        )
    return "\n".join(lines) + "\n"


def title(predicate: Mapping[str, object], *, limit: int = 200) -> str:
    """One line for a check run's title: the verdict and the reason that sets it.

    Reasons are listed policy first, but the title names the reason of the verdict itself
    (a FAILED names the failing check and its tests, not a policy HOLD beside it)."""
    from gate.model import ReasonCode
    from gate.proof.verdict import verdict_for

    p: Mapping[str, object] = predicate if isinstance(predicate, Mapping) else {}
    verdict = _plain(_get(p, "verdict")) or "unknown"
    reasons = _list(_get(p, "reasons"))
    checks = {_plain(_get(c, "name")): c for c in _list(_get(p, "checks"))}
    if verdict == "PROVEN" or not reasons:
        counts = [t for c in checks.values() if (t := _junit_line(c))]
        n = len(checks)
        line = f"{n} check{'s' if n != 1 else ''} passed" if n else ""
        line += f" ({'; '.join(counts)})" if counts and n == 1 else ""
        return _cut_title(f"{verdict}: {line}" if line and verdict == "PROVEN" else verdict, limit)

    def sets_verdict(r: object) -> bool:
        try:
            return verdict_for(ReasonCode(_plain(_get(r, "code")))).value == verdict
        except ValueError:
            return False

    first = next((r for r in reasons if sets_verdict(r)), reasons[0])
    line = _plain(_get(first, "message"))
    check = _get(first, "check")
    short = _differential_title(_plain(_get(first, "code")), checks.get(_plain(check)))
    if isinstance(check, str) and short:
        line = f"check {check}: {short}"
    elif isinstance(check, str):
        tests = _junit_line(checks.get(check))
        line = f"check {check}: {line}" + (f" ({tests})" if tests else "")
    others = len(reasons) - 1
    if others:
        line += f" (+{others} more reason{'s' if others != 1 else ''})"
    return _cut_title(f"{verdict}: {' '.join(line.split())}", limit)


_DIFFERENTIAL_TITLES = {
    "regression": ("regressions", "{n} base test(s) fail against the change: {first}"),
    "expectation-changed": (
        "expectation_changed",
        "the change edits {n} base test(s) that now fail: {first} (a person confirms)",
    ),
    "tests-lost": ("lost", "{n} base test(s) skipped or missing in the change's run: {first}"),
}
_ENVIRONMENT_TITLE = "setup or build changed the judge's environment: {first} (a person confirms)"


def _differential_title(code: str, check: object) -> str:
    """A short title for the differential's reasons: how many tests, and the first."""
    if code == "environment-changed":
        changed = _list(_get(check, "tests", "environment_changed"))
        if not changed:
            return ""
        first = _plain(_get(changed[0], "path")) + (", …" if len(changed) > 1 else "")
        return _ENVIRONMENT_TITLE.format(first=first)
    if code not in _DIFFERENTIAL_TITLES:
        return ""
    key, text = _DIFFERENTIAL_TITLES[code]
    items = _list(_get(check, "tests", key))
    total = _num(_get(check, "tests", "lists", key, "count"))
    if not items:
        return ""
    n = int(total) if total is not None else len(items)
    first = _plain(items[0]) + (", …" if n > 1 else "")
    return text.format(n=n, first=first)


def inline_code(obj: object) -> str:
    """A code span for text a pull request may have written (paths, names): escaped, one
    line, unclosable by its content."""
    return _code(obj)


def _cut_title(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _footer(p: Mapping[str, object]) -> str:
    return (
        "---\n"
        f"Journal head {_code(_get(p, 'journal', 'head'))} "
        f"({len(_list(_get(p, 'journal', 'events')))} events) · "
        f"{_text(_get(p, 'tool', 'name'), 'proofgate')} {_text(_get(p, 'tool', 'version'))}\n"
    )


# --- public ------------------------------------------------------------------------------


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8"))


def _cut_utf8(s: str, limit: int, *, keep_end: bool = False) -> str:
    """At most `limit` UTF-8 bytes of `s`, cut on a character boundary."""
    data = s.encode("utf-8")
    if len(data) <= limit:
        return s
    if limit <= 0:
        return ""
    part = data[-limit:] if keep_end else data[:limit]
    return part.decode("utf-8", "ignore")


_LISTS = (
    ("regressions", "Regressions (pass on the base, not against the change with the base's tests)"),
    ("expectation_changed", "Changed expectations (a person confirms the old one is wrong)"),
    ("lost", "Lost tests (pass on the base, skipped or missing in the change's run)"),
    (
        "test_inputs_changed",
        "Files the base's tests may read, edited by the change (the trusted run used the "
        "base's copies)",
    ),
    (
        "test_inputs_failed",
        "Base tests failing with the base's copies of those files (a person confirms)",
    ),
    (
        "plugins_loaded",
        "Plugins or modules the trusted run loaded before the tests, the base's did not "
        "(a person confirms)",
    ),
    ("proving", "Proving tests"),
    ("survived", "Moved or renamed"),
    ("pre_existing", "Failing on the base already (not held against the change)"),
)


def _tests(p: Mapping[str, object]) -> str:
    """SPEC §3.1: counts per run and the differential's lists, ahead of the logs."""
    lines: list[str] = []
    for c in _list(_get(p, "checks")):
        t = _get(c, "tests")
        if not isinstance(t, Mapping):
            continue
        name = _code(_get(c, "name"))
        if _get(t, "ran") is not True:
            lines.append(f"- {name}: **no differential ran**: {_text(_get(t, 'note'), '')}")
            continue
        runs = _get(t, "runs")
        count = _get(runs, "base", "pass"), _get(runs, "trusted", "pass")
        proving = len(_list(_get(t, "proving")))
        if _get(t, "proving_basis") == "fail-to-pass":
            proves = f"{proving} test(s) fail without the change and pass with it"
        else:
            proves = f"{proving} new test(s) pass"
        lines.append(
            f"- {name}: {_text(count[0], '0')} passed on the base; "
            f"{_text(count[1], '0')} of the base's tests pass against the change; {proves}."
        )
        if _get(t, "note") is not None:  # e.g. the base gave no outcomes (SPEC §3.1)
            lines.append(f"- {name}: {_text(_get(t, 'note'))}")
        rows = [
            [_text(run)]
            + [_text(_get(runs, run, o), "0") for o in ("pass", "fail", "error", "skip")]
            for run in ("head", "base", "trusted", "proving")
            if isinstance(_get(runs, run), Mapping)
        ]
        lines.append("")
        lines.append(_table(["Run", "pass", "fail", "error", "skip"], rows))
        notes = _get(t, "run_notes")
        if isinstance(notes, Mapping):
            lines += [f"- the {_text(r)} run: {_text(n)}" for r, n in sorted(notes.items())]
        for key, title in _LISTS:
            items = _list(_get(t, key))
            total = _get(t, "lists", key, "count")
            if not items:
                continue
            more = f" (first {len(items)} of {_text(total)})" if total != len(items) else ""
            lines.append(f"\n**{title}**{more}:\n")
            lines += [f"- {_code(i)}" for i in items]
        env = _list(_get(t, "environment_changed"))
        if env:
            lines.append(
                "\n**Environment changed** (what setup or build left, in the image or in "
                "/workspace, that the base's did not leave with the same bytes):\n"
            )
            lines += [
                f"- {_code(_get(e, 'path'))} {_text(_get(e, 'kind'))} "
                f"({_text(_get(e, 'why'))}) {_code(_get(e, 'sha256'))}"
                for e in env
            ]
        lines.append("")
    return "## Tests: the base's tests judge the change\n\n" + "\n".join(lines) if lines else ""


def to_markdown(
    predicate: Mapping[str, object],
    *,
    max_bytes: int | None = None,
    truncation_note: str = TRUNCATION_NOTE,
    signed: bool = True,
    verified: bool = True,
) -> str:
    """The receipt for people: verdict first, then why, what, how, and the evidence.

    `signed=False` puts a banner under the headline: an unsigned receipt is evidence of
    nothing (anyone can write one) and `verify` never accepts it. `verified=False` (shown
    without a key) puts a banner first: nothing on the page was checked.

    With `max_bytes`, the result is at most that many UTF-8 bytes (GitHub check-run output
    takes 65535): sections are kept in order while they fit, a log tail that does not fit
    keeps its last lines, and `truncation_note` says where the full receipt is.
    """
    p: Mapping[str, object] = predicate if isinstance(predicate, Mapping) else {}
    parts: list[str | tuple[str, str]] = []
    sections: list[Callable[[Mapping[str, object]], str]] = [
        _headline,
        _reasons,
        _glance,
        _tests,
        _proven,
        _coverage,
        _policy,
        _approval,
        _checks,
        _egress,
        _timeline,
    ]
    parts += [s for s in (f(p) for f in sections) if s]
    if not signed:
        parts.insert(1, UNSIGNED_BANNER)
    if _get(p, "trigger", "kind") == "commit":
        parts.insert(1, REPROOF_NOTE)
    if not verified:
        parts.insert(0, UNVERIFIED_BANNER)
    logs = _log_blocks(p)
    if logs:
        parts.append(
            "## Logs\n\nThe last lines of each command's log; the digest covers the whole log.\n"
        )
        parts += logs
    footer = _footer(p)

    rendered = [x if isinstance(x, str) else _log_block(*x) for x in parts]
    full = "\n".join([*rendered, footer])
    if max_bytes is None or _utf8_len(full) <= max_bytes:
        return full

    # Too long: what decides comes first (verdict, reasons, the checks at a glance, the
    # failing commands' log tails), then the rest while it fits; long tables go first.
    failing = _log_blocks(p, failing_only=True)
    ranked: list[str | tuple[str, str]] = [
        x for x in parts if isinstance(x, str) and x.startswith(_KEEP_WHEN_CUT)
    ]
    if failing:
        ranked.append("## Failing commands' logs\n\nThe last lines of each failing command.\n")
        ranked += failing
    ranked += [
        x
        for x in parts
        if not (isinstance(x, str) and x.startswith(_KEEP_WHEN_CUT)) and x not in failing
    ]
    budget = max_bytes - _utf8_len(truncation_note)
    out: list[str] = []
    used = 0
    for part in ranked:
        text = part if isinstance(part, str) else _log_block(*part)
        cost = _utf8_len(text) + 1
        if used + cost <= budget:
            out.append(text)
            used += cost
            continue
        if isinstance(part, tuple):  # keep the end of the log: that is where failures are
            header, tail = part
            shell = _utf8_len(_log_block(header, "…\n")) + 1 + 8  # room for a longer fence
            room = budget - used - shell
            if room > 0:
                kept = "…" + _cut_utf8(tail, room, keep_end=True)
                block = _log_block(header, kept)
                if used + _utf8_len(block) + 1 <= budget:
                    out.append(block)
                    used += _utf8_len(block) + 1
    result = "\n".join(out) + truncation_note
    return _cut_utf8(result, max_bytes)


_KEEP_WHEN_CUT: Final = ("# proofgate", UNSIGNED_BANNER, "## Reasons", "## Checks at a glance")


def _failed(cmd: object) -> bool:
    return (
        _get(cmd, "exit_code") != 0
        or _get(cmd, "timed_out") is True
        or _get(cmd, "oom_killed") is True
    )


def to_json(predicate: Mapping[str, object]) -> str:
    """The predicate as pretty JSON text (stable key order as given)."""
    return json.dumps(predicate, indent=2, ensure_ascii=False, default=str)
