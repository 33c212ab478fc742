"""RFC 3339 timestamps in UTC, second precision (`2026-01-02T03:04:05Z`): the one format
receipts, approvals and check runs use."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(ts: float | datetime) -> str:
    """`ts` (seconds since the epoch, or a datetime; a naive one is taken as UTC) as
    `YYYY-MM-DDTHH:MM:SSZ`."""
    when = ts if isinstance(ts, datetime) else datetime.fromtimestamp(ts, tz=UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
