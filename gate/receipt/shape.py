"""The receipt predicate's documented shape (SPEC §4, docs/receipt-format.md), checked in one
place: `verify` calls `check_predicate_shape` once the signature held and the statement is
ours, before anything reads a field.

A statement a trusted key signed with `checks` a string, `reasons` an object or `verdict` a
number (a signer's bug, a misused key) is refused, never shown or trusted. The documented
fields must be there with their types; a field the shape does not name is left alone (the
predicate has *at least* these), and the parts other modules define in detail
(`shard.checks`, the blast radius, the egress record) are checked as objects. Fails closed:
a shape that cannot be told to be right is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gate.model import TriggerKind, Verdict
from gate.receipt.errors import ReceiptError

__all__ = ["check_predicate_shape"]


class _Shape:
    """A JSON value's expected shape; `what` says it in words, for the refusal."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def fits(self, value: object) -> bool:
        """Whether the value itself (not what it holds) is of this shape's kind."""
        raise NotImplementedError

    def check_inside(self, value: object, field: str) -> None:
        """Check what a fitting value holds (items, fields); nothing for a scalar."""

    def check(self, value: object, field: str) -> None:
        """Raises: ReceiptError naming `field` (or one inside it), what was expected and
        what it is."""
        if not self.fits(value):
            raise ReceiptError(
                f"predicate field {field} is {_described(value)}; expected {self.what}"
            )
        self.check_inside(value, field)


def _described(value: object) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return f"a boolean ({'true' if value else 'false'})"
        case int() | float():
            return f"a number ({value!r})"
        case str():
            return f"a string ({value[:40]!r}{'...' if len(value) > 40 else ''})"
        case list():
            return f"a list of {len(value)} item(s)" if value else "an empty list"
        case _:
            return "an object"


class _Scalar(_Shape):
    __slots__ = ("_types",)

    def __init__(self, what: str, *types: type) -> None:
        super().__init__(what)
        self._types = types

    def fits(self, value: object) -> bool:
        # JSON true/false are no numbers, though Python's bool is an int
        return isinstance(value, self._types) and isinstance(value, bool) == (bool in self._types)


class _OrNull(_Shape):
    __slots__ = ("_shape",)

    def __init__(self, shape: _Shape) -> None:
        super().__init__(f"{shape.what} or null")
        self._shape = shape

    def fits(self, value: object) -> bool:
        return value is None or self._shape.fits(value)

    def check_inside(self, value: object, field: str) -> None:
        if value is not None:
            self._shape.check_inside(value, field)


class _OneOf(_Shape):
    __slots__ = ("_values",)

    def __init__(self, values: Iterable[str]) -> None:
        self._values = tuple(values)
        super().__init__(f"one of {', '.join(self._values)}")

    def fits(self, value: object) -> bool:
        return isinstance(value, str) and value in self._values


class _List(_Shape):
    __slots__ = ("_item",)

    def __init__(self, item: _Shape, items: str | None = None) -> None:
        super().__init__(f"a list of {items or item.what}")
        self._item = item

    def fits(self, value: object) -> bool:
        return isinstance(value, list)

    def check_inside(self, value: object, field: str) -> None:
        assert isinstance(value, list)  # noqa: S101 - fits() said so
        for i, item in enumerate(value):
            self._item.check(item, f"{field}[{i}]")


class _Map(_Shape):
    """An object whose keys are names (tests, runs, checks) and whose values are alike."""

    __slots__ = ("_value",)

    def __init__(self, value: _Shape) -> None:
        super().__init__(f"an object whose values are each {value.what}")
        self._value = value

    def fits(self, value: object) -> bool:
        return isinstance(value, dict)

    def check_inside(self, value: object, field: str) -> None:
        assert isinstance(value, dict)  # noqa: S101 - fits() said so
        for key, item in value.items():
            self._value.check(item, f"{field}[{key!r}]")


class _Obj(_Shape):
    """An object with these fields (others may be there too: SPEC §4 says "at least")."""

    __slots__ = ("_optional", "_required")

    def __init__(
        self,
        what: str,
        required: Mapping[str, _Shape],
        optional: Mapping[str, _Shape] | None = None,
    ) -> None:
        super().__init__(what)
        self._required = dict(required)
        self._optional = dict(optional or {})

    def fits(self, value: object) -> bool:
        return isinstance(value, dict)

    def check_inside(self, value: object, field: str) -> None:
        assert isinstance(value, dict)  # noqa: S101 - fits() said so
        for key, shape in self._required.items():
            where = f"{field}.{key}" if field else key
            if key not in value:
                raise ReceiptError(f"predicate field {where} is missing; expected {shape.what}")
            shape.check(value[key], where)
        for key, shape in self._optional.items():
            if key in value:
                shape.check(value[key], f"{field}.{key}" if field else key)


_STR = _Scalar("a string", str)
_INT = _Scalar("an integer", int)
_NUM = _Scalar("a number", int, float)
_BOOL = _Scalar("true or false", bool)
_OBJECT = _Obj("an object", {})
_STRS = _List(_STR, "strings")
_VERDICT = _OneOf(v.value for v in Verdict)
_REVISION = _Obj("an object {commit, tree}", {"commit": _STR, "tree": _STR})
_REASON = _Obj("a reason {code, message, check?}", {"code": _STR, "message": _STR}, {"check": _STR})
_FINDING = _Obj(
    "a finding {rule, decision, path?, line?, message}",
    {"rule": _STR, "decision": _STR, "message": _STR},
    {"path": _STR, "path_b64": _STR, "line": _INT},
)
_INVENTORY_ENTRY = _Obj(
    "an inventory entry {path, status, old_mode, new_mode, binary, size, ...}",
    {
        "path": _STR,
        "status": _STR,
        "old_mode": _OrNull(_STR),
        "new_mode": _OrNull(_STR),
        "binary": _BOOL,
        "size": _OrNull(_INT),
        "lines_added": _INT,
        "lines_deleted": _INT,
    },
    {
        "path_b64": _STR,
        "old_path": _STR,
        "old_path_b64": _STR,
        "symlink_target": _STR,
        "symlink_target_b64": _STR,
        "symlink_absolute": _BOOL,
        "symlink_escapes": _BOOL,
        "symlink_loop": _STRS,
        "gitlink": _BOOL,
    },
)
_COMMAND = _Obj(
    "a command {argv, exit_code, duration_s, timed_out, oom_killed, log_sha256, log_tail}",
    {
        "argv": _STRS,
        "exit_code": _OrNull(_INT),
        "duration_s": _NUM,
        "timed_out": _BOOL,
        "oom_killed": _BOOL,
        "log_sha256": _STR,
        "log_tail": _STR,
    },
    {"log_bytes": _INT, "started_offset_s": _NUM},
)
_PHASE = _Obj(
    "a phase {phase, commands[]}",
    {"phase": _STR, "commands": _List(_COMMAND, "commands")},
    {"shard": _INT},
)
_TESTS = _Obj(
    "the check's tests {differential, ran, runs?, ...}",
    {"differential": _STR, "ran": _BOOL},
    {
        "note": _STR,
        "runs": _Map(_Map(_INT)),
        "run_notes": _Map(_STR),
        "reused": _Map(_STR),
        "proving_basis": _STR,
        **dict.fromkeys(
            (
                "regressions",
                "expectation_changed",
                "lost",
                "proving",
                "survived",
                "pre_existing",
                "tampered",
                "plugins_loaded",
                "test_inputs_changed",
                "test_inputs_failed",
            ),
            _STRS,
        ),
        "lists": _Map(_Obj("an object {count, sha256}", {"count": _INT, "sha256": _STR})),
        "findings": _List(_OBJECT, "objects"),
        "environment_changed": _List(
            _Obj("an object {path, kind, why, ...}", {"path": _STR, "kind": _STR, "why": _STR}),
            "changed paths {path, kind, why, ...}",
        ),
    },
)
_CHECK = _Obj(
    "a check {name, image, image_digest, phases[], tests?, ...}",
    {
        "name": _STR,
        "image": _STR,
        "image_digest": _OrNull(_STR),
        "phases": _List(_PHASE, "phases {phase, commands[]}"),
    },
    {
        "image_id": _OrNull(_STR),
        "started": _BOOL,
        "error": _STR,
        "junit": _Map(_INT),
        "tests": _TESTS,
        "durations": _Map(_NUM),
        "egress": _List(_OBJECT, "objects"),
        "egress_summary": _OBJECT,
        "environment": _OBJECT,
        "empty_shares": _List(_INT, "integers"),
        "shards": _List(_INT, "integers"),
    },
)
_PREDICATE = _Obj(
    "a receipt predicate",
    {
        "verdict": _VERDICT,
        "reasons": _List(_REASON, "reasons {code, message, check?}"),
        "repository": _STR,
        "base": _REVISION,
        "merge_base": _STR,
        "head": _REVISION,
        "proven_tree": _OrNull(_STR),
        "patch": _Obj(
            "an object {sha256, bytes, files}", {"sha256": _STR, "bytes": _INT, "files": _INT}
        ),
        "inventory": _List(_INVENTORY_ENTRY, "inventory entries"),
        "coverage": _Obj("an object {complete, notes[]}", {"complete": _BOOL, "notes": _STRS}),
        "config": _Obj(
            "an object {source, path?, blob?, sha256?}",
            {"source": _STR},
            dict.fromkeys(("path", "blob", "sha256"), _OrNull(_STR)),
        ),
        "policy": _Obj(
            "an object {fingerprint, decision, findings[]}",
            {"fingerprint": _STR, "decision": _STR, "findings": _List(_FINDING, "findings")},
            {"blast_radius": _OBJECT, "ci": _OBJECT},
        ),
        "checks": _List(_CHECK, "checks {name, image, image_digest, phases[], ...}"),
        "journal": _Obj(
            "the journal {events[], head}", {"events": _List(_OBJECT, "objects"), "head": _STR}
        ),
        "tool": _Obj("an object {name, version}", {"name": _STR, "version": _STR}),
        "started_at": _STR,
        "finished_at": _STR,
    },
    {
        "trigger": _OrNull(
            _Obj(
                "an object {kind, base_ref, pull_request?}",
                {"kind": _OneOf(k.value for k in TriggerKind), "base_ref": _OrNull(_STR)},
                {"pull_request": _INT},
            )
        ),
        "approval": _Obj(
            "an approval {approver, method, approved_at, patch_sha256, policy_fingerprint}",
            dict.fromkeys(
                ("approver", "method", "approved_at", "patch_sha256", "policy_fingerprint"), _STR
            ),
            {"keyid": _STR},
        ),
        "builder": _Obj(
            "an object {workflow, run_id, ref, sha}",
            dict.fromkeys(("workflow", "run_id", "ref", "sha"), _STR),
        ),
        "image": _STR,
        "check_limits": _Map(_OBJECT),
        "worktree": _Obj("an object {untracked[]}", {"untracked": _List(_OBJECT, "paths")}),
        "docker": _Obj(
            "an object {engine_id?, engine_ids?}",
            {},
            {
                "engine_id": _OrNull(_STR),
                "engine_ids": _STRS,
            },
        ),
        "shard": _Obj(
            "an object {index, count, split_sha256, verdict, ...}",
            {"index": _INT, "count": _INT, "split_sha256": _STR, "verdict": _VERDICT},
            {"split": _OBJECT, "image_digest": _OrNull(_STR), "checks": _Map(_OBJECT)},
        ),
        "aggregate": _Obj(
            "an object {count, split_sha256, shards[]}",
            {
                "count": _INT,
                "split_sha256": _STR,
                "shards": _List(
                    _Obj(
                        "an object {index, sha256, keyid, verdict}",
                        {"index": _INT, "sha256": _STR, "keyid": _STR, "verdict": _VERDICT},
                    ),
                    "shards {index, sha256, keyid, verdict}",
                ),
            },
        ),
    },
)


def check_predicate_shape(predicate: object) -> None:
    """The predicate has SPEC §4's documented shape (see `_PREDICATE`).

    Raises:
        ReceiptError: the first field that is missing or of another type, named with what
            was expected and what it is ("predicate field checks is a string ('x');
            expected a list of checks ...").
    """
    _PREDICATE.check(predicate, "")
