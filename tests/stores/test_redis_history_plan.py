"""The Redis history plans without a server: what a write tells the script to record, which keys each
script is sent, how history replies and trim cutoffs are read, and how the steps make every write with
history conditional on the window it was diffed against."""

from __future__ import annotations

import datetime
from collections.abc import Generator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatmemory import ConcurrentUpdateError, StoreError, UserMessage
from chatmemory.core.history import HistoryPage, history_appends, history_query
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.base import SnapshotCache
from chatmemory.stores.redis.commands import ScriptCall
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.operations import Operations
from chatmemory.stores.redis.outcomes import CachedMemory, HistoryRecord
from chatmemory.stores.redis.plan import Planner, WriteKind
from chatmemory.stores.redis.scripts import HISTORY, READ, TRIM, WRITE

ALPHABET = [UserMessage(f"m{index}") for index in range(6)]
windows = st.lists(st.sampled_from(ALPHABET), max_size=12)
UTC = datetime.timezone.utc


def _planner(history: bool = True, history_ttl: float | None = None, refresh: bool = False) -> Planner:
    return Planner(KeySpace("p:"), 60.0, refresh, history, history_ttl)


def _cached(planner: Planner, messages: list[ChatMessage], version: int = 7) -> CachedMemory:
    return CachedMemory(version, b"inc", tuple(messages), planner.key_space.keys_of("m"), b"%d" % version)


def _recorded_records(call: ScriptCall) -> list[bytes]:
    """What write.lua appends to the history for ``call`` (the model of its history arguments)."""
    if len(call.names) == 2:
        return []
    count = int(call.args[5])
    return list(call.args[len(call.args) - count :]) if count else []


# ----------------------------------------------------------------------------------- writes


@given(old=windows, new=windows)
def test_a_write_with_history_records_exactly_what_the_diff_appends(
    old: list[ChatMessage], new: list[ChatMessage]
) -> None:
    planner = _planner()
    plan = planner.recorded("m", tuple(new), 7, _cached(planner, old))
    assert plan.call.names == planner.key_space.keys_of("m").with_history
    assert plan.call.args[0] == b"7" and plan.call.args[4] == b""
    assert _recorded_records(plan.call) == [dumps_message(m) for m in history_appends(old, new)]


@given(new=windows)
def test_a_write_over_an_unknown_window_records_every_message_and_is_conditional(new: list[ChatMessage]) -> None:
    planner = _planner(history_ttl=120)
    for expected in (0, 9):
        plan = planner.recorded("m", tuple(new), expected, None)
        assert plan.kind is WriteKind.FULL and plan.expected_version == expected
        assert plan.call.args[0] == b"%d" % expected and plan.call.args[4] == b"120000"
        assert _recorded_records(plan.call) == [dumps_message(m) for m in new]
        assert plan.call.args[6:] == tuple(dumps_message(m) for m in new)


def test_raw_records_are_never_recorded_but_the_history_key_is_sent() -> None:
    plan = _planner().raw("m", [b"garbage"])
    assert len(plan.call.names) == 3 and plan.call.args[5] == b"0" and plan.call.args[6:] == (b"garbage",)


@given(old=windows, new=windows)
def test_without_history_a_write_sends_two_keys_and_no_history_arguments(
    old: list[ChatMessage], new: list[ChatMessage]
) -> None:
    planner = _planner(history=False)
    plan = planner.save("m", tuple(new), 7, _cached(planner, old))
    assert plan.call.names == planner.key_space.keys_of("m").window
    if plan.kind is WriteKind.DIFF:
        assert plan.call.args[3:5] == (b"d", b"inc")
    else:
        assert plan.call.args[3] == b"f" and plan.call.args[4:] == tuple(dumps_message(m) for m in new)


@pytest.mark.parametrize(
    ("history", "history_ttl", "refresh", "sent"),
    [(False, None, True, 2), (True, None, False, 2), (True, None, True, 3), (True, 120.0, True, 2)],
)
def test_a_read_sends_the_history_key_only_when_the_history_slides_with_the_window(
    history: bool, history_ttl: float | None, refresh: bool, sent: int
) -> None:
    plan = _planner(history, history_ttl, refresh).read("m", None)
    assert plan.call.script is READ and len(plan.call.names) == sent


# ------------------------------------------------------------------------------------ reads


@pytest.mark.parametrize(
    ("after", "limit", "reverse", "args"),
    [
        (None, 10, False, (b"", b"11", b"0")),
        (5, 1, True, (b"5", b"2", b"1")),
        (10**30, 100, False, (b"%d" % 2**53, b"101", b"0")),
    ],
)
def test_a_history_read_asks_one_entry_more_than_the_page(
    after: int | None, limit: int, reverse: bool, args: tuple[bytes, ...]
) -> None:
    planner = _planner()
    call = planner.history_read("m", history_query(after, limit, reverse))
    assert call.script is HISTORY and call.names == (planner.key_space.keys_of("m").history,) and call.args == args


def test_history_entries_parse_and_foreign_ones_are_refused() -> None:
    call = _planner().history_read("m", history_query(None, 10, False))
    record = dumps_message(UserMessage("a:b"))
    assert Planner.history_records(call, [b"3:1700000000123:" + record]) == [HistoryRecord(3, 1700000000123, record)]
    for reply in ([b"x:1:{}"], [b"1:{}"], [7], b"1", None):
        with pytest.raises(StoreError):
            Planner.history_records(call, reply)


def test_trim_cutoffs_are_relative_to_the_server_clock_or_absolute_in_microseconds() -> None:
    assert Planner.trim_args(datetime.timedelta(seconds=2, microseconds=5)) == (b"r", b"2000005")
    when = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    micros = int(when.timestamp()) * 1_000_000
    assert Planner.trim_args(when) == (b"a", b"%d" % micros)
    assert Planner.trim_args(datetime.datetime(1900, 1, 1, tzinfo=UTC)) == (b"a", b"0")
    call = _planner().trim("m", (b"r", b"1"))
    assert call.script is TRIM and call.names == (_planner().key_space.keys_of("m").history,)
    assert Planner.trimmed(call, 4) == 4
    for reply in (-1, True, b"4", None):
        with pytest.raises(StoreError):
            Planner.trimmed(call, reply)


@pytest.mark.parametrize(
    ("older_than", "error"),
    [
        (datetime.timedelta(seconds=-1), ValueError),
        (datetime.datetime(2024, 1, 1), ValueError),  # naive on purpose
        (30, TypeError),
        (None, TypeError),
    ],
)
def test_bad_trim_cutoffs_are_refused_before_anything_is_sent(older_than: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        Planner.trim_args(older_than)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ steps


def _steps(size: int = 8) -> Operations:
    return Operations(_planner(), SnapshotCache(size))


def _loaded(version: int, messages: list[ChatMessage]) -> list[object]:
    return [b"m", b"%d" % version, b"inc", [dumps_message(m) for m in messages]]


def _drive(step: Generator[ScriptCall, object, object], replies: list[object]) -> tuple[list[ScriptCall], object]:
    calls = [next(step)]
    for reply in replies:
        try:
            calls.append(step.send(reply))
        except StopIteration as done:  # noqa: PERF203 - the step's end is its result
            return calls, done.value
    raise AssertionError(f"the step wants more replies after {calls!r}")


def test_an_update_with_no_cached_window_reads_it_first_and_writes_conditionally() -> None:
    old, new = ALPHABET[:3], [*ALPHABET[1:3], ALPHABET[3]]
    calls, _ = _drive(_steps(0).update("m", new), [_loaded(7, old), 8])
    assert [call.script for call in calls] == [READ, WRITE]
    assert calls[1].args[0] == b"7" and _recorded_records(calls[1]) == [dumps_message(ALPHABET[3])]


def test_an_update_that_loses_a_conflict_reads_again_and_records_against_the_new_window() -> None:
    steps = _steps()
    _drive(steps.load("m"), [_loaded(7, ALPHABET[:2])])
    moved = ALPHABET[:3]  # another writer appended m2
    new = [*ALPHABET[:3], ALPHABET[4]]
    calls, _ = _drive(steps.update("m", new), [[b"x"], _loaded(9, moved), 10])
    assert [call.script for call in calls] == [WRITE, READ, WRITE]
    assert _recorded_records(calls[0]) == [dumps_message(m) for m in (ALPHABET[2], ALPHABET[4])]
    assert calls[2].args[0] == b"9" and _recorded_records(calls[2]) == [dumps_message(ALPHABET[4])]


def test_an_update_of_a_damaged_memory_replaces_it_unconditionally_recording_everything() -> None:
    calls, _ = _drive(_steps().update("m", ALPHABET[:2]), [[b"c", b"broken"], [b"w", b"3", b"i"]])
    assert [call.script for call in calls] == [READ, WRITE]
    assert calls[1].args[0] == b"" and _recorded_records(calls[1]) == [dumps_message(m) for m in ALPHABET[:2]]


def test_a_save_at_a_version_the_store_did_not_read_checks_it_before_writing() -> None:
    with pytest.raises(ConcurrentUpdateError):
        _drive(_steps(0).save("m", ALPHABET[:2], 5), [_loaded(7, ALPHABET[:1])])
    calls, version = _drive(_steps(0).save("m", ALPHABET[:2], 7), [_loaded(7, ALPHABET[:1]), 8])
    assert [call.script for call in calls] == [READ, WRITE] and version == 8
    assert _recorded_records(calls[1]) == [dumps_message(ALPHABET[1])]


def test_a_save_of_a_new_memory_needs_no_read() -> None:
    calls, _ = _drive(_steps().save("m", ALPHABET[:2], 0), [[b"w", b"3", b"i"]])
    assert [call.script for call in calls] == [WRITE] and calls[0].args[0] == b"0"


def test_a_history_read_decodes_entries_and_pages() -> None:
    records = [b"%d:%d:%b" % (n, 1_700_000_000_000 + n, dumps_message(ALPHABET[n])) for n in (1, 2, 3)]
    _, page = _drive(_steps().history("m", history_query(None, 2, False)), [records])
    assert isinstance(page, HistoryPage) and page.next_after == 2 and page.messages == ALPHABET[1:3]
    assert page.entries[0].written_at == datetime.datetime.fromtimestamp(1_700_000_000.001, UTC)
