"""The hash-chained journal: any removal, reordering or edit breaks the chain (SPEC §4)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.util.journal import GENESIS, Journal, verify_chain

kinds = st.sampled_from(["evidence-captured", "policy-decided", "container-started", "verdict"])
# Keys avoid "kind": Journal.append(kind, **data) cannot take it as a data key.
data = st.dictionaries(
    st.text(min_size=1, max_size=8).map(lambda k: "k_" + k),
    st.integers() | st.text(max_size=10),
    max_size=3,
)
event_lists = st.lists(st.tuples(kinds, data), min_size=1, max_size=12)


def build(events: list[tuple[str, dict[str, object]]]) -> Journal:
    ticks = iter(range(1000))
    j = Journal(clock=lambda: float(next(ticks)))
    for kind, d in events:
        j.append(kind, **d)
    return j


@given(event_lists)
def test_journal_chain_verifies(events: list[tuple[str, dict[str, object]]]) -> None:
    j = build(events)
    assert verify_chain(j.events(), j.head) is None


def test_empty_journal_head_is_genesis() -> None:
    assert verify_chain([], GENESIS) is None
    assert verify_chain([], "0" * 63 + "1") is not None


@given(event_lists, st.data())
def test_journal_event_removed_breaks_chain(
    events: list[tuple[str, dict[str, object]]], draw: st.DataObject
) -> None:
    j = build(events)
    ev = j.events()
    del ev[draw.draw(st.integers(0, len(ev) - 1))]
    assert verify_chain(ev, j.head) is not None


@given(event_lists.filter(lambda e: len(e) >= 2), st.data())
def test_journal_events_reordered_break_chain(
    events: list[tuple[str, dict[str, object]]], draw: st.DataObject
) -> None:
    j = build(events)
    ev = j.events()
    i = draw.draw(st.integers(0, len(ev) - 2))
    k = draw.draw(st.integers(i + 1, len(ev) - 1))
    ev[i], ev[k] = ev[k], ev[i]
    assert verify_chain(ev, j.head) is not None


@pytest.mark.parametrize("field", ["kind", "t", "data", "seq", "prev", "hash"])
def test_journal_event_edited_breaks_chain(field: str) -> None:
    j = build([("a", {"x": 1}), ("b", {"y": 2}), ("c", {})])
    ev = copy.deepcopy(j.events())
    replacement: object = {"seq": 5, "t": 99.0, "data": {"x": 2}}.get(field, "f" * 64)
    ev[1][field] = replacement
    assert verify_chain(ev, j.head) is not None


def test_journal_rebuilt_after_edit_has_another_head() -> None:
    """Fixing the hashes after an edit moves the head, which the signature covers."""
    a = build([("a", {"x": 1}), ("b", {})])
    b = build([("a", {"x": 2}), ("b", {})])
    assert verify_chain(b.events(), b.head) is None
    assert a.head != b.head
    assert verify_chain(b.events(), a.head) == "journal head does not match the last event"
