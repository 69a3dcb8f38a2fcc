"""The SQL store's plans, without a database: reads, diffed writes, locked writes, write ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatmemory import ConcurrentUpdateError, CorruptedMemoryError, UserMessage
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.native import dumps_message, loads_message
from chatmemory.stores.base import RetryPolicy
from chatmemory.stores.sql import outcomes, plan
from chatmemory.stores.sql.outcomes import CachedSnapshot, LockedHead
from chatmemory.stores.sql.plan import JOINED_PAYLOAD_LIMIT, RUN, WriteRequest


def head_row(version: int, incarnation: int, next_seq: int, live: int = 1, window_start: int = 0) -> tuple[None, bytes]:
    """The window read's head row: ``seq`` NULL, the head's fields packed in ``payload``."""
    return (None, outcomes.ReadHead(version, incarnation, next_seq, live, window_start).pack())


def texts(*words: str) -> tuple[ChatMessage, ...]:
    return tuple(UserMessage(word) for word in words)


def snapshot_of(messages: tuple[ChatMessage, ...], version: int = 7, first_seq: int = 3) -> CachedSnapshot:
    seqs = tuple(range(first_seq, first_seq + len(messages)))
    return CachedSnapshot(version, 42, first_seq + len(messages), seqs, messages, first_seq)


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


# ------------------------------------------------------------------------------------------ reads


def test_a_read_without_a_head_row_asks_for_the_stray_read() -> None:
    assert isinstance(outcomes.decode_read("m", [], None), outcomes.Headless)
    assert isinstance(outcomes.raw_records([]), outcomes.Headless)


def test_an_absent_memory_reads_empty_at_version_0() -> None:
    result = outcomes.absent_read([])
    assert isinstance(result, outcomes.ReadResult)
    assert result.snapshot.messages == [] and result.snapshot.version == 0 and result.state is None


def test_message_rows_without_a_head_are_corrupted_not_empty() -> None:
    result = outcomes.absent_read([(0, b"{}"), (1, b"{}")])
    assert isinstance(result, outcomes.Corrupted)
    assert "2 message rows" in result.detail
    assert isinstance(result.error("m"), CorruptedMemoryError)
    assert outcomes.stray_records([(1, b"b"), (0, b"a")]) == [b"a", b"b"]  # an operator inspects them in order


def test_an_expired_head_reads_empty() -> None:
    result = outcomes.decode_read("m", [head_row(5, 1, 2, live=0)], None)
    assert isinstance(result, outcomes.ReadResult) and result.snapshot.version == 0
    assert outcomes.raw_records([head_row(5, 1, 2, live=0)]) == []


def test_a_live_head_without_messages_reads_empty_at_its_version() -> None:
    result = outcomes.decode_read("m", [head_row(4, 1, 2, window_start=2)], None)
    assert isinstance(result, outcomes.ReadResult) and result.snapshot.version == 4
    assert result.state == CachedSnapshot(4, 1, 2, (), (), 2)


@pytest.mark.parametrize("packed", [b"8 42 7 1 3", "8 42 7 1 3", memoryview(b"8 42 7 1 3")])
def test_the_packed_head_reads_from_any_driver_type(packed: object) -> None:
    assert outcomes.ReadHead.unpack(packed) == outcomes.ReadHead(8, 42, 7, 1, 3)  # type: ignore[arg-type]
    assert outcomes.ReadHead(8, 42, 7, 1, 3).pack() == b"8 42 7 1 3"


def test_rows_the_cache_holds_are_reused_and_new_ones_decoded() -> None:
    cached = snapshot_of(texts("a", "b", "c"))
    new = UserMessage("d")
    rows = [head_row(8, 42, 7, window_start=4), (4, None), (5, None), (6, dumps_message(new))]
    result = outcomes.decode_read("m", rows, cached)
    assert isinstance(result, outcomes.ReadResult)
    assert result.snapshot.messages == [UserMessage("b"), UserMessage("c"), new]
    assert result.snapshot.messages[0] is cached.messages[1]
    assert result.state == CachedSnapshot(8, 42, 7, (4, 5, 6), (*cached.messages[1:], new), 4)


def test_an_unchanged_window_reads_as_the_cached_snapshot_in_any_row_order() -> None:
    cached = snapshot_of(texts("a", "b", "c"))
    head = head_row(cached.version, cached.incarnation, cached.next_seq, window_start=cached.window_start)
    rows = [head, *((seq, None) for seq in cached.seqs)]
    result = outcomes.decode_read("m", rows, cached)
    assert isinstance(result, outcomes.ReadResult) and result.state is cached
    assert result.snapshot.messages == list(cached.messages) and result.snapshot.version == cached.version
    assert all(got is held for got, held in zip(result.snapshot.messages, cached.messages, strict=True))
    shuffled = outcomes.decode_read("m", [rows[2], rows[3], head, rows[1]], cached)
    assert isinstance(shuffled, outcomes.ReadResult) and shuffled.state is cached
    assert shuffled.snapshot.messages == list(cached.messages)


def test_a_window_at_the_cached_version_with_other_rows_is_read_from_its_rows() -> None:
    cached = snapshot_of(texts("a", "b", "c"))
    head = head_row(cached.version, cached.incarnation, cached.next_seq, window_start=cached.window_start)
    first, second, third = cached.seqs
    fewer = outcomes.decode_read("m", [head, (first, None), (third, None)], cached)
    assert isinstance(fewer, outcomes.ReadResult) and fewer.state is not None
    assert fewer.snapshot.messages == [cached.messages[0], cached.messages[2]] and fewer.state.seqs == (first, third)
    changed = (second, dumps_message(UserMessage("B")))
    sent = outcomes.decode_read("m", [head, (first, None), changed, (third, None)], cached)
    assert isinstance(sent, outcomes.ReadResult)
    assert sent.snapshot.messages == [cached.messages[0], UserMessage("B"), cached.messages[2]]


def test_a_row_the_cache_does_not_hold_asks_for_an_uncached_read() -> None:
    # A row deleted and put back by hand under another sequence number: no KeyError, a fresh read.
    cached = snapshot_of(texts("a", "b"))
    rows = [head_row(7, 42, 5), (3, None), (2, None)]
    assert isinstance(outcomes.decode_read("m", rows, cached), outcomes.StaleCache)


def test_a_row_appended_by_hand_past_next_seq_moves_next_seq() -> None:
    rows = [head_row(7, 42, 5), *((seq, dumps_message(UserMessage(str(seq)))) for seq in (3, 4, 5))]
    result = outcomes.decode_read("m", rows, None)
    assert isinstance(result, outcomes.ReadResult) and result.state is not None
    assert result.state.next_seq == 6


@st.composite
def _window_reads(draw: st.DrawFn) -> tuple[list[tuple[int | None, bytes | None]], CachedSnapshot | None, list[int]]:
    """A window read's rows in a random order: pinned rows below a gap, the open run, a cached prefix."""
    pinned = draw(st.lists(st.integers(0, 5), max_size=3, unique=True))
    start = draw(st.integers(6, 20))
    seqs = sorted(pinned) + list(range(start, start + draw(st.integers(0, 12))))
    next_seq = (seqs[-1] + 1) if seqs else start
    known = draw(st.integers(0, len(seqs)))  # how many rows (a prefix) the cache holds
    cached = None
    if known:
        held = seqs[:known]
        cached = CachedSnapshot(3, 9, held[-1] + 1, tuple(held), tuple(UserMessage(f"m{seq}") for seq in held), start)
    known_next = cached.next_seq if cached is not None else 0
    rows: list[tuple[int | None, bytes | None]] = [
        (seq, None if seq < known_next else dumps_message(UserMessage(f"m{seq}"))) for seq in seqs
    ]
    rows.append(head_row(4, 9, next_seq, window_start=start))
    return draw(st.permutations(rows)), cached, seqs


@given(_window_reads())
def test_rows_in_any_order_read_as_the_window_in_seq_order(
    read: tuple[list[tuple[int | None, bytes | None]], CachedSnapshot | None, list[int]],
) -> None:
    rows, cached, seqs = read
    result = outcomes.decode_read("m", rows, cached)
    assert isinstance(result, outcomes.ReadResult) and result.state is not None
    assert result.snapshot.messages == [UserMessage(f"m{seq}") for seq in seqs]
    assert result.snapshot.version == 4 and result.state.seqs == tuple(seqs)
    if cached is not None:  # the cached prefix is reused, not decoded again
        assert all(message is held for message, held in zip(result.state.messages, cached.messages, strict=False))
    sent = sorted((seq, payload) for seq, payload in rows if seq is not None and payload is not None)
    assert outcomes.raw_records(rows) == [payload for _, payload in sent]


def test_read_parameters_send_every_payload_without_a_cache() -> None:
    assert plan.read_parameters("m", None) == {"p_id": "m", "p_known_incarnation": -1, "p_known_next": 0}
    cached = snapshot_of(texts("a"))
    assert plan.read_parameters("m", cached)["p_known_next"] == cached.next_seq


# ----------------------------------------------------------------------------------------- writes


def test_requests_take_any_iterable_once_and_refuse_non_messages() -> None:
    request = WriteRequest.of_messages("m", (message for message in texts("a", "b")), 0, None)
    assert request.messages == texts("a", "b")
    with pytest.raises(TypeError, match="got str"):
        WriteRequest.of_messages("m", [*texts("a"), "not a message"], 0, None)  # type: ignore[list-item]
    assert WriteRequest.of_messages("m", [], None, None).write_id != request.write_id


def test_requests_take_subclasses_of_the_message_types() -> None:
    class Tagged(UserMessage):
        pass

    tagged = Tagged("a")
    assert WriteRequest.of_messages("m", [tagged], None, None).messages == (tagged,)


def test_a_steady_state_turn_is_a_diff_encoding_only_the_new_message() -> None:
    cached = snapshot_of(texts("a", "b", "c"))
    request = WriteRequest.of_messages("m", (*cached.messages[1:], UserMessage("d")), 7, 60.0)
    diff = plan.plan_diff(request, cached)
    assert diff is not None
    assert diff.deleted_seqs == (3,) and diff.new_seqs == (6,)
    assert [loads_message(payload) for payload in diff.payloads] == [UserMessage("d")]
    assert diff.state == CachedSnapshot(8, 42, 7, (4, 5, 6), request.messages, 4)
    parameters = diff.head_parameters()
    assert parameters["p_expected"] == 7 and parameters["p_ttl"] == 60.0
    assert plan.find_write(parameters["p_entry"], request.write_id) == 8
    assert plan.diff_outcome(diff, True) == outcomes.Written(8, diff.state)
    assert plan.diff_outcome(diff, False) == outcomes.Conflict()


def test_a_turn_joins_into_one_mysql_query_only_when_its_payloads_fit() -> None:
    cached = snapshot_of(texts("a", "b", "c"))
    small = plan.plan_diff(WriteRequest.of_messages("m", (*cached.messages, UserMessage("d")), None, None), cached)
    assert small is not None
    assert small.joinable(None) and small.joinable(70_000)
    assert not small.joinable(65_536)  # room for the SQL too
    big = UserMessage("x" * JOINED_PAYLOAD_LIMIT)
    large = plan.plan_diff(WriteRequest.of_messages("m", (*cached.messages, big), None, None), cached)
    assert large is not None
    assert not large.joinable(None) and not large.joinable(1 << 30)
    parameters = small.joined_parameters()
    assert parameters["p_s0"] == 6 and loads_message(parameters["p_b0"]) == UserMessage("d")
    assert "p_d0" not in parameters and parameters["p_expected"] == 7


def test_consecutive_removed_rows_are_named_as_one_range_and_scattered_ones_one_by_one() -> None:
    cached = snapshot_of(texts(*"abcdefgh"))  # seqs 3..10
    run = plan.plan_diff(WriteRequest.of_messages("m", (*cached.messages[3:], UserMessage("x")), None, None), cached)
    assert run is not None and run.removal == RUN
    assert run.removal_parameters() == {"p_id": "m", "p_first": 3, "p_last": 5}
    joined = run.joined_parameters()
    assert (joined["p_first"], joined["p_last"]) == (3, 5) and "p_d0" not in joined
    kept = tuple(message for index, message in enumerate(cached.messages) if index not in (0, 2))
    scattered = plan.plan_diff(WriteRequest.of_messages("m", kept, None, None), cached)
    assert scattered is not None and scattered.removal == 2
    assert scattered.removal_parameters() == {"p_id": "m", "p_d0": 3, "p_d1": 5}
    one = plan.plan_diff(WriteRequest.of_messages("m", cached.messages[1:], None, None), cached)
    assert one is not None and one.removal == 1 and one.removal_parameters() == {"p_id": "m", "p_d0": 3}
    none = plan.plan_diff(WriteRequest.of_messages("m", cached.messages, None, None), cached)
    assert none is not None and none.removal == 0


def test_postgresql_parameters_are_scalars_for_small_turns_and_arrays_beyond() -> None:
    cached = snapshot_of(texts(*"abcdefghijkl"))
    small = plan.plan_diff(WriteRequest.of_messages("m", (*cached.messages[2:], UserMessage("x")), 7, None), cached)
    assert small is not None
    parameters = small.postgresql_parameters()
    assert parameters["p_id"] == b"m" and {"p_d0", "p_d1", "p_s0", "p_b0"} <= set(parameters)
    large = plan.plan_diff(WriteRequest.of_messages("m", cached.messages[10:], 7, None), cached)
    assert large is not None and large.shape == (10, 0)
    assert large.postgresql_parameters()["p_deleted"] == list(range(3, 13))


def test_no_diff_without_a_matching_snapshot_or_for_a_rewrite() -> None:
    cached = snapshot_of(texts("a", "b"))
    assert plan.plan_diff(WriteRequest.of_messages("m", texts("a", "b", "c"), 6, None), cached) is None
    assert plan.plan_diff(WriteRequest.of_messages("m", texts("x"), 7, None), cached) is None
    assert plan.plan_diff(WriteRequest.of_records("m", [b"x"], None), cached) is None
    assert plan.plan_diff(WriteRequest.of_messages("m", texts("a"), 7, None), None) is None
    # An unconditional write diffs against whatever is cached (the statement checks that version).
    unconditional = plan.plan_diff(WriteRequest.of_messages("m", texts("b", "c"), None, None), cached)
    assert unconditional is not None and unconditional.cached.version == 7


def test_a_locked_write_that_already_landed_reports_its_version() -> None:
    request = WriteRequest.of_messages("m", texts("a"), 3, None)
    recent = plan.write_entry("0" * 16, 6) + plan.write_entry(request.write_id, 5)
    assert plan.plan_locked(request, None, head(recent_writes=recent)) == outcomes.Written(5, None)


def test_a_conditional_locked_write_at_another_version_conflicts() -> None:
    request = WriteRequest.of_messages("m", texts("a"), 3, None)
    assert plan.plan_locked(request, None, head()) == outcomes.Conflict()
    assert plan.plan_locked(request, None, head(present=False, version=0)) == outcomes.Conflict()
    with pytest.raises(ConcurrentUpdateError):
        outcomes.WriteLoop(request, RetryPolicy()).settle(outcomes.Conflict())


def test_a_locked_write_diffs_against_a_snapshot_of_the_locked_version() -> None:
    cached = snapshot_of(texts("a", "b", "c"))
    request = WriteRequest.of_messages("m", (*cached.messages[1:], UserMessage("d")), None, None)
    decision = plan.plan_locked(request, cached, head(next_seq=6, max_seq=5))
    assert isinstance(decision, plan.LockedWrite)
    assert not decision.insert_head and not decision.delete_all and decision.deleted_seqs == (3,)
    assert [row["seq"] for row in decision.rows] == [6]
    assert decision.version == 8 and decision.head["p_fresh"] == 0
    assert decision.state is not None and decision.state.seqs == (4, 5, 6)


def test_a_locked_write_takes_seqs_past_rows_appended_by_hand() -> None:
    request = WriteRequest.of_messages("m", texts("x"), None, None)
    decision = plan.plan_locked(request, None, head(next_seq=6, max_seq=9))
    assert isinstance(decision, plan.LockedWrite)
    assert decision.delete_all and [row["seq"] for row in decision.rows] == [10]


def test_creating_a_memory_starts_at_the_server_clock_with_a_new_incarnation() -> None:
    request = WriteRequest.of_messages("m", texts("a", "b"), 0, 5.0)
    decision = plan.plan_locked(request, None, outcomes.locked_head(None, 5_000_000))
    assert isinstance(decision, plan.LockedWrite)
    assert decision.insert_head and decision.version == 5_000_000
    assert decision.head["p_ttl"] == 5.0 and decision.head["p_recent"].startswith(request.write_id)
    assert outcomes.stray_rows(decision, 0) is None
    assert isinstance(outcomes.stray_rows(decision, 2), outcomes.Corrupted)
    unconditional = plan.plan_locked(WriteRequest.of_records("m", [b"r"], None), None, outcomes.locked_head(None, 1))
    assert isinstance(unconditional, plan.LockedWrite) and outcomes.stray_rows(unconditional, 2) is None


def test_an_expired_memory_is_written_as_a_new_incarnation_above_its_old_versions() -> None:
    request = WriteRequest.of_messages("m", texts("a"), 0, None)
    # The server clock is behind the old version: versions still grow.
    decision = plan.plan_locked(request, None, head(live=False, version=9_000_000, clock=1_000_000))
    assert isinstance(decision, plan.LockedWrite)
    assert decision.version == 9_000_001 and decision.delete_all and decision.head["p_fresh"] == 1
    assert decision.state is not None and decision.state.incarnation != 42


@given(st.lists(st.text(alphabet="0123456789abcdef", min_size=16, max_size=16), min_size=1, max_size=20))
def test_recent_writes_keep_the_last_eight(write_ids: list[str]) -> None:
    recent: str | None = None
    for version, write_id in enumerate(write_ids, start=1):
        request = WriteRequest("m", texts("a"), None, None, None, write_id)
        decision = plan.plan_locked(request, None, head(version=version - 1 or 1, recent_writes=recent))
        if isinstance(decision, outcomes.Written):
            continue  # the same id drawn twice: the second is a resend
        assert isinstance(decision, plan.LockedWrite)
        recent = decision.head["p_recent"]
        assert recent is not None and len(recent) <= 32 * plan.RECENT_WRITES
    assert recent is not None
    assert plan.find_write(recent, write_ids[-1]) is not None
    assert plan.find_write(recent, "x" * 16) is None


@given(
    st.lists(st.integers(0, 9), max_size=12),
    st.integers(0, 12),
    st.integers(0, 4),
)
def test_a_diff_plan_describes_the_new_list(words: list[int], evicted: int, appended: int) -> None:
    old = tuple(UserMessage(f"old {index} {word}") for index, word in enumerate(words))
    cached = snapshot_of(old)
    new = (*old[evicted:], *(UserMessage(f"new {index}") for index in range(appended)))
    diff = plan.plan_diff(WriteRequest.of_messages("m", new, cached.version, None), cached)
    if diff is None:
        assert old and not old[evicted:]  # only a whole rewrite takes the locked path
        return
    kept = [seq for seq in cached.seqs if seq not in diff.deleted_seqs]
    assert diff.state.seqs == (*kept, *diff.new_seqs)
    assert [loads_message(payload) for payload in diff.payloads] == list(new[len(kept) :])
    assert diff.state.messages == new


# ----------------------------------------------------------------------- rendered statements (#16)


def _dialects() -> list[object]:
    from sqlalchemy.dialects import mysql, postgresql, sqlite

    return [postgresql.psycopg.dialect(), sqlite.dialect(), mysql.pymysql.dialect()]  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("dialect", _dialects(), ids=["postgresql", "sqlite", "mysql"])
@pytest.mark.parametrize("history", [False, True])
def test_rendered_statements_bind_named_values_as_the_driver_takes_them(dialect: object, history: bool) -> None:
    from chatmemory.stores.sql.schema import build_tables
    from chatmemory.stores.sql.statements import Statements

    statements = Statements(build_tables("t_"), dialect, expires=True, history=history)  # type: ignore[arg-type]
    removal = statements.removal(2)
    assert removal is statements.removal(2)  # rendered once per count
    assert ("UPDATE" if history else "DELETE") in removal.sql
    run = statements.removal(RUN)
    assert "BETWEEN" in run.sql and set(run.names) == {"p_id", "p_first", "p_last"}
    bound = removal.bind({"p_id": "mé", "p_d0": 3, "p_d1": 4})
    expected = {"p_id": "mé".encode(), "p_d0": 3, "p_d1": 4}
    if removal.positional:
        assert [
            bytes(value) if name == "p_id" else value for name, value in zip(removal.names, bound, strict=True)
        ] == [expected[name] for name in removal.names]
    else:
        assert {name: bytes(value) if name == "p_id" else value for name, value in bound.items()} == expected
    insert = statements.fast_insert_history if history else statements.fast_insert_messages
    rows = plan.message_rows("mé", (5, 6), (b"x", b"y"), recorded=history)
    many = insert.bind_many(rows)
    assert len(many) == 2
    with pytest.raises(KeyError):
        statements.fast_bump_head.bind({"p_id": "mé"})  # a missing parameter is an error, not NULL


@pytest.mark.parametrize(
    ("url", "lean"),
    [
        ("sqlite://", True),
        ("sqlite+aiosqlite://", True),
        ("mysql+pymysql://u@h/d", True),
        ("mysql+asyncmy://u@h/d", True),
        ("postgresql+psycopg://u@h/d", False),
        ("postgresql+psycopg_async://u@h/d", False),
    ],
    ids=["sqlite3", "aiosqlite", "pymysql", "asyncmy", "psycopg", "psycopg-async"],
)
def test_rendered_statements_run_only_the_processors_that_change_what_the_driver_binds(url: str, lean: bool) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.ext.asyncio import create_async_engine

    from chatmemory.stores.sql.schema import build_tables
    from chatmemory.stores.sql.statements import Statements

    asynchronous = "aiosqlite" in url or "asyncmy" in url or "async" in url
    # The driver loaded, as a store's engine has it (nothing connects).
    dialect = create_async_engine(url).dialect if asynchronous else create_engine(url).dialect
    insert = Statements(build_tables("t_"), dialect, expires=True, history=False).fast_insert_messages
    rows = plan.message_rows("mé\udc80", (5,), (b"\x00payload",), recorded=False)
    (bound,) = insert.bind_many(rows)
    values = dict(zip(insert.names, bound, strict=True)) if insert.positional else bound
    if lean:  # sqlite3's memoryview and PyMySQL's bytes() around bytes bind as the bytes do: not run
        assert set(insert.processors) == {"memory_id"}
        assert values == {"memory_id": "mé\udc80".encode("utf-8", "surrogatepass"), "seq": 5, "payload": b"\x00payload"}
    else:  # psycopg's Binary wraps the bytes: kept, as SQLAlchemy runs it
        assert set(insert.processors) == {"memory_id", "payload"}
        assert bytes(values["payload"].obj) == b"\x00payload"
