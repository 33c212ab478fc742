"""Talking to the runner: workflow-command escaping, `$GITHUB_OUTPUT`, the step summary and
the check run's annotations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gate.github.interface import Annotation

__all__ = [
    "SUMMARY_LIMIT_BYTES",
    "annotations_from",
    "append_file",
    "escape_data",
    "escape_property",
    "report_to_job",
    "set_outputs",
]

SUMMARY_LIMIT_BYTES = 1024 * 1024  # GitHub's limit for one step's summary


def escape_data(value: str) -> str:
    """Workflow-command data escaping (% CR LF)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def append_file(path: str, text: str) -> None:
    """Append to a runner file command ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY); no path: none."""
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)


def set_outputs(output_file: str, values: Mapping[str, str]) -> None:
    lines = []
    for key, value in values.items():
        if "\n" in value:
            raise ValueError(f"output {key} must be one line")
        lines.append(f"{key}={value}\n")
    append_file(output_file, "".join(lines))


def annotations_from(predicate: Mapping[str, object]) -> tuple[Annotation, ...]:
    """Check-run annotations for the policy findings that name a path."""
    policy = predicate.get("policy")
    findings = policy.get("findings") if isinstance(policy, dict) else None
    out: list[Annotation] = []
    levels = {"DENY": "failure", "HOLD": "warning", "ALLOW": "notice"}
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict) or not isinstance(f.get("path"), str):
            continue
        raw_line = f.get("line")
        line = raw_line if isinstance(raw_line, int) else 1
        out.append(
            Annotation(
                path=f["path"],
                start_line=max(1, line),
                end_line=max(1, line),
                level=levels.get(str(f.get("decision")), "warning"),
                message=str(f.get("message") or f.get("rule")),
                title=f"proofgate {f.get('rule')}",
            )
        )
    return tuple(out)


def report_to_job(
    summary_file: str,
    summary: str,
    *,
    unsigned: str | None,
    warnings: Sequence[str],
    errors: Sequence[tuple[str, str]],
    cut_note: str,
) -> None:
    """The job's side of a proof: the step summary (an unsigned receipt's warning first,
    cut to GitHub's limit with `cut_note`) and `::warning`/`::error` lines in the log
    (`errors` as (reason code, message))."""
    from gate.github.checks import fit_bytes

    if unsigned is not None:
        print(f"::warning title=proofgate unsigned receipt::{escape_data(unsigned)}")
        summary = f"> **Warning:** {unsigned}\n\n" + summary
    if len(summary.encode()) > SUMMARY_LIMIT_BYTES:
        summary = fit_bytes(summary, SUMMARY_LIMIT_BYTES - 1024, note=cut_note)
    append_file(summary_file, summary + "\n")
    for warning in warnings:
        print(f"::warning title=proofgate approval::{escape_data(warning)}")
    for code, message in errors:
        print(f"::error title={escape_property('proofgate ' + code)}::{escape_data(message)}")
