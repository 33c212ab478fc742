"""The few exception types that end a run without a verdict (SPEC §3: exit 2).

Evidence problems are never exceptions that escape: they become a `Reason` inside a
non-PROVEN outcome. Only usage and configuration errors are `GateError`s.
"""

from __future__ import annotations


class GateError(Exception):
    """A usage or configuration error: the run ends with no verdict and exit 2."""

    exit_code: int = 2


class UsageError(GateError):
    """The command line or the environment asked for something that cannot be done."""


class ConfigError(GateError):
    """A configuration file is malformed: names the file, the key path, expected and got."""

    def __init__(self, file: str, key_path: str, *, expected: str, got: str) -> None:
        self.file = file
        self.key_path = key_path
        self.expected = expected
        self.got = got
        where = f"{file}: {key_path}" if key_path else file
        super().__init__(f"{where}: expected {expected}, got {got}")


class RepoError(GateError):
    """The repository or a revision cannot be read (unknown revision, shallow clone, ...)."""


class SigningKeyError(GateError):
    """A signing or verification key cannot be loaded."""


class ApprovalRejected(Exception):
    """An approval was offered but is not valid for this patch and policy."""


class TagLookupError(Exception):
    """A tag look-up could not be made (no answer, not "no such tag"); the message says why."""
