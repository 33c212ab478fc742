"""A hash-chained journal of every step of a run (SPEC §4 `journal`).

Each event carries the SHA-256 of the previous event; its own hash covers its sequence
number, kind, offset, data and that previous hash, over canonical JSON. The chain head
(the last event's hash) sits in the signed predicate, so removing, reordering or editing
any event breaks verification. Pure: the caller injects the clock.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence

from gate.model import JsonDict
from gate.util.canonical import canonical_json

__all__ = ["GENESIS", "Journal", "canonical_json", "event_hash", "verify_chain"]

GENESIS = "0" * 64


def event_hash(event: Mapping[str, object]) -> str:
    body = {k: event[k] for k in ("seq", "kind", "t", "data", "prev")}
    return hashlib.sha256(canonical_json(body)).hexdigest()


class Journal:
    """Append-only and thread-safe (checks run concurrently): an event's sequence number,
    offset and `prev` are taken under one lock, so the chain is the order of the appends
    and `on_event` sees the events in that order. `events()` returns JSON-ready copies."""

    def __init__(
        self,
        clock: Callable[[], float] | None = None,
        on_event: Callable[[JsonDict], None] | None = None,
    ) -> None:
        self._clock = clock
        self._t0 = clock() if clock is not None else 0.0
        self._events: list[JsonDict] = []
        self._on_event = on_event
        self._lock = threading.RLock()

    @property
    def head(self) -> str:
        return str(self._events[-1]["hash"]) if self._events else GENESIS

    def append(self, kind: str, /, **data: object) -> JsonDict:
        # Round-trip through JSON so the stored data is exactly what gets hashed.
        clean = json.loads(canonical_json(data))
        with self._lock:
            return self._append(kind, clean)

    def _append(self, kind: str, clean: object) -> JsonDict:
        t = round(self._clock() - self._t0, 3) if self._clock is not None else 0.0
        event: JsonDict = {
            "seq": len(self._events),
            "kind": kind,
            "t": t,
            "data": clean,
            "prev": self.head,
        }
        event["hash"] = event_hash(event)
        self._events.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    def events(self) -> list[JsonDict]:
        with self._lock:
            return [dict(e) for e in self._events]

    def to_dict(self) -> JsonDict:
        with self._lock:
            return {"events": self.events(), "head": self.head}


def verify_chain(events: Sequence[object], head: object) -> str | None:
    """None when the chain holds and ends at `head`; otherwise a one-line reason."""
    prev = GENESIS
    for i, raw in enumerate(events):
        if not isinstance(raw, Mapping):
            return f"journal event {i} is not an object"
        missing = [k for k in ("seq", "kind", "t", "data", "prev", "hash") if k not in raw]
        if missing:
            return f"journal event {i} lacks {', '.join(missing)}"
        if raw["seq"] != i:
            return f"journal event {i} has sequence number {raw['seq']!r}"
        if raw["prev"] != prev:
            return f"journal event {i} does not follow event {i - 1}"
        if event_hash(raw) != raw["hash"]:
            return f"journal event {i} was altered (hash mismatch)"
        prev = str(raw["hash"])
    if head != prev:
        return "journal head does not match the last event"
    return None
