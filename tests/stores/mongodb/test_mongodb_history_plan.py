"""History on the MongoDB store, without a server: what a write reserves and stages, how a page is merged."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from pymongo.errors import BulkWriteError

from chatmemory import CorruptedMemoryError, StoreError, SystemMessage, UserMessage
from chatmemory.core.history import history_query
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.base import Operation
from chatmemory.stores.mongodb.commands import Target, call
from chatmemory.stores.mongodb.executor import failure
from chatmemory.stores.mongodb.history import (
    entry_documents,
    head_of,
    page_of,
    read_entries_filter,
    refresh_due,
    refresh_update,
    should_copy,
    staged_filter,
    staged_operations,
    state_after,
    trim_filter,
    trim_head,
    with_history,
)
from chatmemory.stores.mongodb.layout import (
    COPY_AT_BYTES,
    COPY_AT_GROUPS,
    WRITE_PROJECTION,
    HistoryConfig,
    HistoryGroup,
    HistoryHead,
    HistoryState,
    MemoryState,
    groups_of,
    plan_layout,
)
from chatmemory.stores.mongodb.outcomes import DUPLICATE_KEY, WritePlan
from chatmemory.stores.mongodb.plan import MongoPlanner
from support.mongo_plans import plan_save

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
CONFIG = HistoryConfig(ttl=None, history_ttl=None)


def plan_raw_write(memory_id: str, records: list[bytes], ttl: float | None, history: HistoryConfig) -> WritePlan:
    return MongoPlanner(ttl, history).raw_write(memory_id, records)


def copy_landed(exc: BaseException) -> bool:
    """Whether an insert that failed with ``exc`` left every entry in place (as the store reads it)."""
    return failure(call(Operation.WRITE, "m", Target.HISTORY, "insert_many", []), exc).duplicates is not None


def _users(*numbers: int) -> list[UserMessage]:
    return [UserMessage(str(number)) for number in numbers]


def _record(message: Any) -> str:
    return dumps_message(message).decode()


def _state(messages: list[Any], version: int, history: HistoryState | None) -> MemoryState:
    layout = plan_layout(messages)
    held = () if layout.system is None else (_record(layout.system),)
    return MemoryState(version, 7, layout, (*map(_record, layout.array), *held), history)


def _set_stage(plan: Any) -> dict[str, Any]:
    """The field values a pipeline plan sets (whatever stage sets them)."""
    fields: dict[str, Any] = {}
    for stage in plan.update:
        fields.update(stage.get("$set", {}))
    return fields


# ------------------------------------------------------------------------------------------- writes


def test_a_write_that_creates_the_memory_reserves_a_sequence_per_message_and_stages_them() -> None:
    messages = [SystemMessage("be brief"), *_users(1, 2)]
    plan = plan_save("m", messages, 0, None, None, history=CONFIG)
    fields = _set_stage(plan)
    assert plan.keeps_history and plan.history_id is not None
    assert plan.projection == WRITE_PROJECTION
    last = fields["hlast"]["$cond"][1]
    assert last["r"] == {"$literal": [_record(message) for message in messages]}  # window order, system first
    assert last["t"] == "$$NOW"
    # The history goes on from the stored hseq only if the stored history is live; else it starts at 1.
    assert fields["hseq"]["$cond"][1]["$add"][1] == 3
    assert fields["hid"]["$cond"][1]["$cond"][2] == {"$literal": plan.history_id}


def test_a_turn_whose_groups_are_copied_goes_as_operators_and_reserves_after_the_known_sequence() -> None:
    old = _users(1, 2, 3)
    cached = _state(old, 10, HistoryState(hid=99, hseq=41, copied=True))
    config = HistoryConfig(ttl=60.0, history_ttl=None)
    plan = plan_save("m", [*old[1:], UserMessage("4")], 10, cached, 60.0, server_now=NOW, history=config)
    assert isinstance(plan.update, dict)
    assert plan.returns_document and plan.guarded_by_filter  # the reply tells the write's server time
    assert plan.update["$set"]["hseq"] == 42
    assert plan.update["$set"]["hlast.s"] == 42
    assert plan.update["$set"]["hlast.r"] == [_record(UserMessage("4"))]
    assert plan.update["$currentDate"] == {"written_at": True, "hlast.t": True}
    assert "hpend" in plan.update["$unset"]  # the groups it knows were copied go
    assert plan.update["$set"]["expires_at"] == NOW + datetime.timedelta(seconds=60)
    assert plan.history_id is None


def test_a_turn_that_appends_nothing_reserves_nothing() -> None:
    old = _users(1, 2, 3)
    cached = _state(old, 10, HistoryState(hid=99, hseq=41, copied=True))
    plan = plan_save("m", old[1:], 10, cached, None, server_now=NOW, history=CONFIG)
    assert isinstance(plan.update, dict)
    assert plan.update["$set"]["hseq"] == 41
    assert "hlast" in plan.update["$unset"]
    assert "hlast.t" not in plan.update["$currentDate"]


def test_a_turn_over_groups_not_known_to_be_copied_keeps_them_in_the_document() -> None:
    old = _users(1, 2, 3)
    cached = _state(old, 10, HistoryState(hid=99, hseq=41, copied=False))
    plan = plan_save("m", [*old, UserMessage("4")], 10, cached, None, server_now=NOW, history=CONFIG)
    assert isinstance(plan.update, list)  # a pipeline: it refers to the stored groups
    fields = _set_stage(plan)
    assert fields["hpend"] != "$$REMOVE" and "$concatArrays" in fields["hpend"]
    assert fields["hlast"]["s"] == 42


def test_a_rewrite_records_the_new_window_after_the_longest_kept_run() -> None:
    old = _users(1, 2, 3)
    cached = _state(old, 10, HistoryState(hid=99, hseq=3, copied=True))
    new = [SystemMessage("new rules"), *old]  # no prefix of it is kept: the whole window again
    plan = plan_save("m", new, 10, cached, None, server_now=NOW, history=CONFIG)
    assert isinstance(plan.update, dict)  # the window itself is an in-place change (the system message aside)
    assert plan.update["$set"]["hseq"] == 7
    assert plan.update["$set"]["hlast.r"] == [_record(message) for message in new]
    plan = plan_save("m", new, 10, cached, None, history=CONFIG)  # no server clock known: a pipeline
    fields = _set_stage(plan)
    assert fields["hseq"] == 7
    assert fields["hlast"]["r"] == {"$literal": [_record(message) for message in new]}


def test_a_history_write_needs_the_state_it_is_pinned_to() -> None:
    with pytest.raises(ValueError, match="state it read"):
        plan_save("m", _users(1), 3, None, None, history=CONFIG)


def test_a_write_without_history_is_unchanged() -> None:
    old = _users(1, 2, 3)
    cached = _state(old, 10, None)
    plan = plan_save("m", [*old[1:], UserMessage("4")], 10, cached, None, server_now=NOW)
    assert isinstance(plan.update, dict)
    assert not plan.returns_document and not plan.keeps_history
    assert plan.update["$currentDate"] == {"written_at": True}
    assert not any(key.startswith("h") for key in plan.update.get("$set", {}))


def test_a_raw_write_records_nothing() -> None:
    plan = plan_raw_write("m", [b'{"bad"'], None, CONFIG)
    assert not plan.keeps_history
    assert not {"hid", "hseq", "hlast", "hpend"} & set(_set_stage(plan))


def test_with_a_history_ttl_the_window_and_the_history_expire_apart() -> None:
    config = HistoryConfig(ttl=10.0, history_ttl=100.0)
    assert (config.window_field, config.history_field) == ("window_expires_at", "hexp")
    fields = config.expiry_fields()
    assert fields["window_expires_at"] == {"$add": ["$$NOW", 10_000]}
    assert fields["hexp"] == fields["expires_at"] == {"$add": ["$$NOW", 100_000]}  # the document lives longer
    assignments, removals = config.expiry_operators(NOW)
    assert assignments["window_expires_at"] == NOW + datetime.timedelta(seconds=10)
    assert assignments["expires_at"] == NOW + datetime.timedelta(seconds=100)
    assert not removals
    # No window ttl: the document is never removed, the history still expires.
    _, removals = HistoryConfig(ttl=None, history_ttl=100.0).expiry_operators(NOW)
    assert removals == {"window_expires_at": "", "expires_at": ""}


# ------------------------------------------------------------------------------------- heads, copies


def test_a_read_knows_groups_are_copied_only_at_the_version_it_cached() -> None:
    document = {"hid": 5, "hseq": 9}
    copied = _state(_users(1), 3, HistoryState(5, 9, True))
    assert with_history(_state(_users(1), 3, None), document, copied).history == HistoryState(5, 9, True)
    assert with_history(_state(_users(1), 4, None), document, copied).history == HistoryState(5, 9, False)
    other_history = _state(_users(1), 3, HistoryState(6, 9, True))
    assert with_history(_state(_users(1), 3, None), document, other_history).history == HistoryState(5, 9, False)
    assert with_history(_state(_users(1), 3, None), {}, None).history == HistoryState(None, 0, True)


def test_the_groups_of_a_reply_become_entries_keyed_by_history_and_sequence() -> None:
    reply = {
        "hid": 5,
        "hseq": 4,
        "hpend": [{"s": 1, "r": ["a", "b"], "t": NOW}],
        "hlast": {"s": 3, "r": ["c", "d"], "t": NOW},
    }
    operations = entry_documents("m", 5, groups_of("m", reply))
    assert [(entry["m"], entry["h"], entry["s"]) for entry in operations] == [("m", 5, s) for s in (1, 2, 3, 4)]
    assert operations[2] == {"m": "m", "h": 5, "s": 3, "r": "c", "t": NOW}
    assert state_after("m", reply, True) == HistoryState(5, 4, True, None, True, HistoryGroup(3, ("c", "d"), NOW))
    assert state_after("m", {"version": 3}, True) is None


@pytest.mark.parametrize(
    "group",
    [{"s": 1, "r": "a", "t": NOW}, {"s": "1", "r": ["a"], "t": NOW}, {"s": 1, "r": [1], "t": NOW}, "x"],
)
def test_a_group_the_store_did_not_write_is_reported(group: Any) -> None:
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        groups_of("m", {"hid": 1, "hlast": group})


def test_a_concurrent_copy_of_the_same_entries_counts_as_landed() -> None:
    duplicate = BulkWriteError({"writeErrors": [{"code": DUPLICATE_KEY, "index": 0}], "writeConcernErrors": []})
    other = BulkWriteError({"writeErrors": [{"code": 2, "index": 0}], "writeConcernErrors": []})
    assert copy_landed(duplicate)
    assert not copy_landed(other)
    assert not copy_landed(OSError("down"))


# ------------------------------------------------------------------------------------------- reads


def _entry(sequence: int, text: str) -> dict[str, Any]:
    return {"s": sequence, "r": _record(UserMessage(text)), "t": NOW}


def _texts(page: Any) -> list[tuple[int, str]]:
    return [(entry.sequence, entry.message.text) for entry in page.entries]


def test_a_page_merges_the_entries_read_with_the_groups_not_yet_copied() -> None:
    later = NOW + datetime.timedelta(seconds=1)
    head = HistoryHead(5, (HistoryGroup(3, (_record(UserMessage("c")), _record(UserMessage("d"))), later),))
    documents = [_entry(1, "a"), _entry(2, "b"), _entry(3, "c")]  # 3 copied already, 4 not yet
    page = page_of("m", history_query(None, 3, False), documents, head)
    assert _texts(page) == [(1, "a"), (2, "b"), (3, "c")] and page.next_after == 3
    page = page_of("m", history_query(2, 10, False), documents[2:], head)
    assert _texts(page) == [(3, "c"), (4, "d")] and page.next_after is None
    assert page.entries[1].written_at == later
    page = page_of("m", history_query(None, 1, True), [documents[2]], head)
    assert _texts(page) == [(4, "d")] and page.next_after == 4
    page = page_of("m", history_query(4, 10, True), documents[::-1], head)
    assert _texts(page) == [(3, "c"), (2, "b"), (1, "a")]


def test_an_entry_read_is_filtered_by_history_and_sorted_for_either_direction() -> None:
    assert read_entries_filter("m", 5, history_query(None, 10, False)) == ({"m": "m", "h": 5}, [("s", 1)])
    assert read_entries_filter("m", 5, history_query(7, 10, True)) == (
        {"m": "m", "h": 5, "s": {"$lt": 7}},
        [("s", -1)],
    )
    assert head_of("m", None) is None
    assert head_of("m", {"hseq": 3}) is None  # a document that never kept history


def test_a_trim_is_by_time_of_one_memory_or_all() -> None:
    assert trim_filter(NOW, None) == {"t": {"$lt": NOW}}
    assert trim_filter(NOW, "m") == {"m": "m", "t": {"$lt": NOW}}
    query, update = trim_head(NOW, "m")
    assert query["_id"] == "m" and isinstance(update, list)


def test_entry_expiry_slides_once_per_lifetime() -> None:
    config = HistoryConfig(ttl=10.0, history_ttl=None)
    state = HistoryState(5, 3, True, refreshed=NOW)
    assert refresh_due(state, config, NOW + datetime.timedelta(seconds=10)) is None
    later = NOW + datetime.timedelta(seconds=11)
    assert refresh_due(state, config, later) == later
    assert refresh_due(HistoryState(5, 3, True), config, NOW) == NOW  # not known: set it
    assert refresh_due(state, CONFIG, later) is None  # no lifetime: entries never expire
    assert refresh_due(HistoryState(None, 0, True), config, later) is None
    assert refresh_update(config, "m", 5, NOW) == (
        {"m": "m", "h": 5},
        {"$set": {"x": NOW + datetime.timedelta(seconds=20)}},
    )
    group = HistoryGroup(1, ("a",), NOW)
    assert entry_documents("m", 5, [group], 10.0)[0]["x"] == NOW + datetime.timedelta(seconds=20)
    cached = _state(_users(1), 4, state)
    plan = plan_save("m", _users(1, 2), 4, cached, 10.0, server_now=later, history=config, refreshed=later)
    assert isinstance(plan.update, dict) and plan.update["$set"]["hrefresh"] == later


def test_staged_groups_are_copied_in_batches_with_the_expiry_they_slid_to() -> None:
    small = HistoryGroup(1, ("a",), NOW)
    assert not should_copy([small] * (COPY_AT_GROUPS - 1))
    assert should_copy([small] * COPY_AT_GROUPS)
    assert should_copy([HistoryGroup(1, ("a" * COPY_AT_BYTES,), NOW)])
    later = NOW + datetime.timedelta(seconds=30)
    upsert = entry_documents("m", 5, [small], 10.0, refreshed=later)[0]
    assert upsert["x"] == later + datetime.timedelta(seconds=20) and upsert["t"] == NOW
    documents = [{"_id": "m", "hid": 5, "hlast": {"s": 1, "r": ["a"], "t": NOW}}, {"_id": "n"}]
    assert staged_operations(documents, None) == [{"m": "m", "h": 5, "s": 1, "r": "a", "t": NOW}]
    assert staged_filter("m")["_id"] == "m"


def test_a_history_write_counts_its_group_against_the_document_limit() -> None:
    big = [UserMessage("x" * (5 * 1024 * 1024)), UserMessage("y" * (5 * 1024 * 1024))]
    plan_save("m", big, 0, None, None)  # the window alone fits
    with pytest.raises(StoreError, match="16 MiB"):
        plan_save("m", big, 0, None, None, history=CONFIG)  # with its group staged beside it, not


def test_a_turn_over_groups_it_staged_itself_pushes_its_last_one_as_operators() -> None:
    old = _users(1, 2, 3)
    last = HistoryGroup(41, (_record(UserMessage("3")),), NOW)
    cached = _state(old, 10, HistoryState(hid=99, hseq=41, copied=False, last_known=True, last=last))
    plan = plan_save("m", [*old[1:], UserMessage("4")], 10, cached, None, server_now=NOW, history=CONFIG)
    assert isinstance(plan.update, dict)
    assert plan.update["$push"]["hpend"] == {"s": 41, "r": [_record(UserMessage("3"))], "t": NOW}
    assert "hpend" not in plan.update.get("$unset", {})  # the groups staged before stay
    assert plan.update["$set"]["hlast.s"] == 42
