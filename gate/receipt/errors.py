"""The receipt package's error types."""

from __future__ import annotations


class ReceiptError(Exception):
    """A receipt (or approval) failed verification; `str(e)` is one clear reason line."""


class VerificationError(ReceiptError):
    """A verified receipt does not say what the caller expects (SPEC §5).

    `field` names the predicate or subject field, `want` and `got` are both values as
    text, so a refusal always says what was required and what the receipt holds."""

    def __init__(self, field: str, want: object, got: object, message: str | None = None) -> None:
        self.field = field
        self.want = want
        self.got = got
        super().__init__(message or f"{field} is {got!r}; {want!r} is required")
