"""The SQL store's history plans, without a database: the window's ranges stay exact for every diff.

A model of the message table (rows by sequence number, with their eviction mark and whether they are
history entries) takes the plans' statements as the store runs them; its window read (rows the head's
ranges enclose, unmarked) must give back exactly the window each write made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatmemory import SystemMessage, UserMessage
from chatmemory.core.history import history_appends
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.native import loads_message
from chatmemory.stores.sql import outcomes, plan
from chatmemory.stores.sql.outcomes import CachedSnapshot, LockedHead
from chatmemory.stores.sql.plan import WindowCover, WriteRequest, cover_window

# ------------------------------------------------------------------------------------------ covers


def test_a_contiguous_window_is_one_open_range() -> None:
    assert cover_window((4, 5, 6), 3, 7) == WindowCover(4)


def test_a_system_message_kept_first_is_pinned() -> None:
    assert cover_window((0, 5, 6, 7), 0, 8) == WindowCover(5, (0, 0))
    # The next turn keeps the pin and moves the start: nothing in between is scanned.
    assert cover_window((0, 6, 7, 8), 5, 9) == WindowCover(6, (0, 0))


def test_rows_below_the_old_start_stay_the_pin() -> None:
    # 2 lies in the old pin [0, 2]; the open range must not reach down below the old start 10.
    assert cover_window((0, 2, 10, 11), 10, 12) == WindowCover(10, (0, 2))
    assert cover_window((0, 2), 10, 12) == WindowCover(12, (0, 2))


def test_a_gappy_window_splits_at_its_widest_gap() -> None:
    assert cover_window((3, 5, 20, 21, 23), 3, 24) == WindowCover(20, (3, 5))


def test_an_empty_window_covers_nothing_written() -> None:
    cover = cover_window((), 4, 9)
    assert cover == WindowCover(9) and not cover.covers(8) and cover.covers(9)


def test_cover_parameters() -> None:
    assert WindowCover(5, (0, 1)).parameters() == {"p_window_start": 5, "p_pin_start": 0, "p_pin_end": 1}
    assert WindowCover(5).parameters() == {"p_window_start": 5, "p_pin_start": None, "p_pin_end": None}


# ------------------------------------------------------------------------------------------ the model


@dataclass
class Table:
    """One memory's rows and head row, changed as the store's statements would."""

    rows: dict[int, tuple[bytes, bool, bool]] = field(default_factory=dict)  # seq -> (payload, evicted, recorded)
    cover: WindowCover = field(default_factory=lambda: WindowCover(0))
    version: int = 0
    incarnation: int = 0
    next_seq: int = 0
    ever: set[int] = field(default_factory=set)

    def window(self) -> list[ChatMessage]:
        return [
            loads_message(payload)
            for seq, (payload, evicted, _) in sorted(self.rows.items())
            if self.cover.covers(seq) and not evicted
        ]

    def history(self) -> list[ChatMessage]:
        return [loads_message(payload) for _, (payload, _, recorded) in sorted(self.rows.items()) if recorded]

    def head(self) -> LockedHead:
        max_seq = max(self.rows) if self.rows else None
        present = self.version > 0
        return LockedHead(present, self.version, self.incarnation, self.next_seq, present, None, max_seq, 10**15)

    def run(self, deleted: tuple[int, ...], flagged: tuple[int, ...], head: dict[str, Any], rows: list[Any]) -> None:
        for seq in deleted:
            self.rows.pop(seq, None)
        for seq in flagged:
            payload, _, recorded = self.rows[seq]
            self.rows[seq] = (payload, True, recorded)
        start, pin = head["p_window_start"], (head["p_pin_start"], head["p_pin_end"])
        self.cover = WindowCover(start, None if pin[0] is None else pin)
        for row in rows:
            assert row["seq"] not in self.ever, "a sequence number was reused"
            self.ever.add(row["seq"])
            self.rows[row["seq"]] = (row["payload"], False, "p_head" in row)


def write(table: Table, state: CachedSnapshot | None, new: list[ChatMessage], history: bool, locked: bool) -> Any:
    request = WriteRequest.of_messages("m", new, None, None, history=history)
    diff = None if locked else plan.plan_diff(request, state)
    if diff is not None:
        if history:
            assert not diff.deleted_seqs
        else:
            assert not diff.flagged_seqs
        table.run(diff.deleted_seqs, diff.flagged_seqs, diff.head_parameters(), diff.rows())
        table.version, table.next_seq = diff.state.version, diff.state.next_seq
        return diff.state
    decision = plan.plan_locked(request, state, table.head())
    assert isinstance(decision, plan.LockedWrite)
    if decision.delete_all:
        assert not history or not table.rows
        table.rows.clear()
    table.run(decision.deleted_seqs, decision.flagged_seqs, decision.head, decision.rows)
    table.version, table.next_seq = decision.version, decision.head["p_next_seq"]
    table.incarnation = decision.head["p_incarnation"]
    return decision.state


steps = st.lists(
    st.tuples(
        st.lists(st.booleans(), max_size=10),  # which old messages stay
        st.integers(0, 3),  # how many are appended
        st.booleans(),  # through the locked path
    ),
    max_size=25,
)


@pytest.mark.parametrize("history", [False, True], ids=["without history", "with history"])
@settings(max_examples=300, deadline=None)
@given(steps=steps)
def test_the_window_reads_back_exactly_after_every_diff(history: bool, steps: list[Any]) -> None:
    table = Table()
    window: list[ChatMessage] = []
    recorded: list[ChatMessage] = []
    state: CachedSnapshot | None = None
    counter = 0
    for keep, appended, locked in steps:
        kept = [message for message, stays in zip(window, keep + [True] * len(window), strict=False) if stays]
        fresh = [UserMessage(f"m{counter + index}") for index in range(appended)]
        counter += appended
        new = kept + fresh
        recorded += history_appends(window, new)
        state = write(table, state, new, history, locked)
        window = new
        assert table.window() == window
        assert state is not None and list(state.messages) == window
        in_window = [seq for seq in sorted(table.rows) if table.cover.covers(seq) and not table.rows[seq][1]]
        assert tuple(in_window) == state.seqs
        if history:
            assert set(table.rows) == table.ever, "a history row was deleted"
            assert table.history() == recorded
        else:
            assert set(table.rows) == set(state.seqs), "an evicted row was kept"


# ------------------------------------------------------------------------------------------ steady state


def snapshot(seqs: tuple[int, ...], messages: tuple[ChatMessage, ...], start: int) -> CachedSnapshot:
    return CachedSnapshot(7, 42, seqs[-1] + 1, seqs, messages, start)


def test_a_steady_state_turn_with_history_deletes_and_marks_nothing() -> None:
    messages = tuple(UserMessage(str(index)) for index in range(4))
    request = WriteRequest.of_messages("m", [*messages[1:], UserMessage("new")], 7, None, history=True)
    diff = plan.plan_diff(request, snapshot((10, 11, 12, 13), messages, 10))
    assert diff is not None
    assert diff.shape == (0, 1) and diff.cover == WindowCover(11)
    assert diff.head_parameters()["p_window_start"] == 11
    assert [set(row) for row in diff.rows()] == [{"memory_id", "seq", "payload", "p_head"}]


def test_a_turn_after_a_kept_system_message_with_history_marks_nothing() -> None:
    system = SystemMessage("be brief")
    messages = (system, *(UserMessage(str(index)) for index in range(3)))
    request = WriteRequest.of_messages("m", [system, *messages[2:], UserMessage("new")], 7, None, history=True)
    diff = plan.plan_diff(request, snapshot((0, 11, 12, 13), messages, 11))
    assert diff is not None
    assert diff.shape == (0, 1) and diff.cover == WindowCover(12, (0, 0))


def test_an_eviction_from_the_middle_with_history_marks_the_row() -> None:
    messages = tuple(UserMessage(str(index)) for index in range(4))
    kept = (messages[0], messages[1], messages[3])
    request = WriteRequest.of_messages("m", kept, 7, None, history=True)
    diff = plan.plan_diff(request, snapshot((10, 11, 12, 13), messages, 10))
    assert diff is not None
    assert diff.cover == WindowCover(13, (10, 11)) and diff.flagged_seqs == ()
    # Two middle rows apart: the cover splits at one gap, the other row is marked.
    messages = tuple(UserMessage(str(index)) for index in range(6))
    kept = (messages[0], messages[2], messages[4], messages[5])
    request = WriteRequest.of_messages("m", kept, 7, None, history=True)
    diff = plan.plan_diff(request, snapshot((10, 11, 12, 13, 14, 15), messages, 10))
    assert diff is not None
    assert diff.deleted_seqs == () and len(diff.flagged_seqs) == 1 and diff.shape == (1, 0)
    assert diff.removed_seqs == diff.flagged_seqs  # marked, not deleted: the removal names them
    assert diff.removal_parameters() == {"p_id": "m", "p_d0": diff.flagged_seqs[0]}


def test_without_history_the_evicted_rows_are_deleted_and_rows_are_not_stamped() -> None:
    messages = tuple(UserMessage(str(index)) for index in range(3))
    request = WriteRequest.of_messages("m", [*messages[1:], UserMessage("new")], 7, None)
    diff = plan.plan_diff(request, snapshot((10, 11, 12), messages, 10))
    assert diff is not None
    assert diff.deleted_seqs == (10,) and diff.flagged_seqs == () and diff.cover == WindowCover(11)
    assert [set(row) for row in diff.rows()] == [{"memory_id", "seq", "payload"}]


# ------------------------------------------------------------------------------------------ locked writes


def head(**fields: object) -> LockedHead:
    values: dict[str, object] = {
        "present": True,
        "version": 7,
        "incarnation": 42,
        "next_seq": 6,
        "live": True,
        "recent_writes": None,
        "max_seq": 5,
        "clock": 1_000_000,
    }
    values.update(fields)
    return LockedHead(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("history", [True, False])
def test_a_locked_write_of_messages_reads_the_window_it_does_not_know(history: bool) -> None:
    request = WriteRequest.of_messages("m", [UserMessage("a")], None, None, history=history)
    assert plan.window_needed(request, None, head())
    known = CachedSnapshot(7, 42, 6, (5,), (UserMessage("a"),), 5)
    assert not plan.window_needed(request, known, head())
    assert plan.window_needed(request, known, head(version=8))
    assert plan.window_needed(request, known, head(incarnation=43))
    assert not plan.window_needed(request, None, head(live=False))
    assert not plan.window_needed(request, None, head(present=False))
    # Records are written as they are: nothing to diff them against.
    assert not plan.window_needed(WriteRequest.of_records("m", [b"x"], None, history=history), None, head())
    # An empty window keeps no row: without history there is nothing to read it for.
    assert plan.window_needed(WriteRequest.of_messages("m", [], None, None, history=history), None, head()) is history
    # A write that conflicts, or landed already, reads nothing: it writes nothing either.
    conditional = WriteRequest.of_messages("m", [UserMessage("a")], 6, None, history=history)
    assert not plan.window_needed(conditional, None, head())
    assert plan.window_needed(WriteRequest.of_messages("m", [UserMessage("a")], 7, None, history=history), None, head())
    landed = head(recent_writes=plan.write_entry(request.write_id, 7))
    assert not plan.window_needed(request, None, landed)
    assert isinstance(plan.plan_locked(request, None, landed), outcomes.Written)


def test_a_rewrite_with_history_keeps_the_rows_and_starts_past_them() -> None:
    request = WriteRequest.of_messages("m", [UserMessage("new")], None, None, history=True)
    decision = plan.plan_locked(request, None, head())
    assert isinstance(decision, plan.LockedWrite)
    assert not decision.delete_all and decision.recorded
    assert decision.head["p_window_start"] == 6 and [row["seq"] for row in decision.rows] == [6]


def test_an_expired_window_whose_history_lives_continues_the_numbering() -> None:
    request = WriteRequest.of_messages("m", [UserMessage("new")], None, None, history=True, history_ttl=60)
    decision = plan.plan_locked(request, None, head(live=False, history_live=True))
    assert isinstance(decision, plan.LockedWrite)
    assert not decision.delete_all and decision.rows[0]["seq"] == 6 and decision.head["p_window_start"] == 6
    assert decision.head["p_history_ttl"] == 60 and decision.head["p_incarnation"] != 42
    # Its history expired too: everything goes, numbering starts again.
    decision = plan.plan_locked(request, None, head(live=False))
    assert isinstance(decision, plan.LockedWrite)
    assert decision.delete_all and decision.rows[0]["seq"] == 0


def test_a_raw_write_with_history_records_nothing() -> None:
    decision = plan.plan_locked(WriteRequest.of_records("m", [b"x"], None, history=True), None, head())
    assert isinstance(decision, plan.LockedWrite)
    assert not decision.recorded and not decision.delete_all and "p_head" not in decision.rows[0]
