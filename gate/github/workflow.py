"""Talking to the runner: workflow-command escaping, `$GITHUB_OUTPUT`, the step summary and
the check run's annotations."""

from __future__ import annotations

from collections.abc import Mapping

from gate.github.interface import Annotation

__all__ = [
    "SUMMARY_LIMIT_BYTES",
    "annotations_from",
    "append_file",
    "escape_data",
    "escape_property",
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
