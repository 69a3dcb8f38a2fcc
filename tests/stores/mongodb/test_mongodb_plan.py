"""The MongoDB store's pure layout and plans: which message is held aside, what a write sends, what a reply means."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatmemory import AiMessage, ChatMessage, CorruptedMemoryError, StoreError, SystemMessage, UserMessage
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.mongodb.layout import (
    WRITES_KEPT,
    HeadTrim,
    MemoryState,
    MongoLayout,
    decode_document,
    encode_record,
    materialize,
    plan_head_trim,
    plan_layout,
    raw_records,
    read_filter,
)
from chatmemory.stores.mongodb.outcomes import (
    DUPLICATE_KEY,
    Conflict,
    Resend,
    Verify,
    WriteOutcome,
    WritePlan,
    WriteReply,
    Written,
    outcome_of,
    verified_outcome,
)
from chatmemory.stores.mongodb.plan import MAX_AGE, MongoPlanner, ServerClock, expired
from support.mongo_pipeline import EPOCH, apply_update, evaluate, matches
from support.mongo_plans import plan_save


def plan_replace(memory_id: str, messages: list[Any], ttl: float | None) -> WritePlan:
    return MongoPlanner(ttl).replace(memory_id, messages)


def plan_raw_write(memory_id: str, records: list[bytes], ttl: float | None) -> WritePlan:
    return MongoPlanner(ttl).raw_write(memory_id, records)


def _users(*numbers: int) -> list[UserMessage]:
    return [UserMessage(str(number)) for number in numbers]


def test_the_first_system_message_is_held_aside_with_its_position() -> None:
    system = SystemMessage("be brief")
    layout = plan_layout([UserMessage("0"), system, UserMessage("1"), SystemMessage("second")])
    assert layout.system == system
    assert layout.system_at == 1
    assert layout.array == (UserMessage("0"), UserMessage("1"), SystemMessage("second"))
    assert layout.messages() == [UserMessage("0"), system, UserMessage("1"), SystemMessage("second")]


def test_without_a_system_message_everything_is_in_the_array() -> None:
    layout = plan_layout(_users(1, 2))
    assert layout == MongoLayout(tuple(_users(1, 2)))
    assert layout.messages() == _users(1, 2)
    assert plan_layout([]).messages() == []


def test_evicting_right_after_a_system_message_kept_first_is_a_head_trim() -> None:
    system = SystemMessage("s")
    old = plan_layout([system, *_users(1, 2, 3, 4)])
    new = plan_layout([system, *_users(3, 4, 5)])
    plan = plan_head_trim(old, new)
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.array_length, plan.system_changed) == (2, tuple(_users(5)), 3, False)


def test_a_system_message_in_place_moving_towards_the_head_is_a_head_trim() -> None:
    # Without always_keep_system_message_first the system message sits where it was added, and each
    # eviction before it moves it one position towards the head.
    system = SystemMessage("s")
    old = plan_layout([*_users(1, 2), system, *_users(3)])
    new = plan_layout([*_users(2), system, *_users(3, 4)])
    plan = plan_head_trim(old, new)
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.system_changed) == (1, tuple(_users(4)), False)
    assert new.system_at == 1


def test_a_new_system_message_is_a_field_change_not_a_rewrite() -> None:
    old = plan_layout([SystemMessage("old"), *_users(1, 2)])
    new = plan_layout([*_users(1, 2), SystemMessage("new")])
    plan = plan_head_trim(old, new)
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.system_changed) == (0, (), True)
    assert (new.system, new.system_at) == (SystemMessage("new"), 2)


def test_dropping_the_system_message_is_a_field_change() -> None:
    plan = plan_head_trim(plan_layout([SystemMessage("s"), *_users(1)]), plan_layout(_users(1, 2)))
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.system_changed) == (0, tuple(_users(2)), True)


def test_evicting_a_tool_call_and_its_result_from_the_head_is_a_head_trim() -> None:
    call = AiMessage("calling")
    old = plan_layout([UserMessage("q"), call, UserMessage("r")])
    plan = plan_head_trim(old, plan_layout([UserMessage("r"), UserMessage("next")]))
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.array_length) == (2, (UserMessage("next"),), 2)


def test_deleting_from_the_middle_needs_a_full_write() -> None:
    assert plan_head_trim(plan_layout(_users(1, 2, 3)), plan_layout(_users(1, 3, 4))) is None


def test_nothing_kept_is_still_a_head_trim_of_everything() -> None:
    plan = plan_head_trim(plan_layout(_users(1, 2)), plan_layout(_users(7)))
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.array_length) == (2, tuple(_users(7)), 1)


def test_an_unchanged_list_writes_no_messages() -> None:
    plan = plan_head_trim(plan_layout(_users(1, 2)), plan_layout(_users(1, 2)))
    assert plan is not None
    assert (plan.head_trim, plan.appended, plan.system_changed) == (0, (), False)


def _apply(old: MongoLayout, plan: HeadTrim, new: MongoLayout) -> list[ChatMessage]:
    """What the server does with the update: $push $each, then $slice to the last n; $set the system."""
    array = [*old.array, *plan.appended]
    if plan.head_trim:
        array = array[-plan.array_length :] if plan.array_length else []
    return MongoLayout(tuple(array), new.system, new.system_at).messages()


_message = st.one_of(
    st.integers(0, 6).map(lambda n: UserMessage(str(n))),
    st.sampled_from([SystemMessage("a"), SystemMessage("b")]),
)


@given(st.lists(_message, max_size=8), st.lists(_message, max_size=8))
def test_an_in_place_plan_applied_as_the_server_would_gives_the_new_list(
    old_messages: list[ChatMessage], new_messages: list[ChatMessage]
) -> None:
    old, new = plan_layout(old_messages), plan_layout(new_messages)
    assert new.messages() == new_messages
    plan = plan_head_trim(old, new)
    if plan is not None:
        assert _apply(old, plan, new) == new_messages


@given(
    st.lists(st.integers(0, 50), max_size=10),
    st.integers(0, 10),
    st.lists(st.integers(51, 99), max_size=4),
    st.booleans(),
)
def test_every_window_turn_is_in_place(window: list[int], evicted: int, added: list[int], system_first: bool) -> None:
    head = [SystemMessage("s")] if system_first else []
    old = [*head, *_users(*window)]
    new = [*head, *_users(*window[evicted:]), *_users(*added)]
    plan = plan_head_trim(plan_layout(old), plan_layout(new))
    assert plan is not None
    assert plan.head_trim == min(evicted, len(window))
    assert _apply(plan_layout(old), plan, plan_layout(new)) == new


# ------------------------------------------------------------------------- write plans, without a server


class Server:
    """One document on a simulated server: applies a plan's pipeline as MongoDB would, at a set time."""

    def __init__(self) -> None:
        self.document: dict[str, Any] | None = None
        self.now = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)

    def send(self, plan: WritePlan) -> WriteReply:
        self.now += datetime.timedelta(milliseconds=1)
        matched = self.document is not None and matches(self.document, plan.filter, self.now)
        if not plan.returns_document:  # update_one: the reply is the matched count
            if matched:
                self.document = apply_update(self.document, plan.filter, plan.update, self.now)
            return WriteReply(matched=int(matched))
        if not matched and not plan.upsert:
            return WriteReply(None)
        if not matched and self.document is not None:
            return WriteReply(error_code=DUPLICATE_KEY)  # the upsert's insert meets the existing _id
        self.document = apply_update(self.document, plan.filter, plan.update, self.now)
        return WriteReply(self._project(plan.projection))

    def _project(self, projection: dict[str, Any]) -> dict[str, Any]:
        assert self.document is not None
        return {name: self.document[name] for name, keep in projection.items() if keep and name in self.document}

    def verify(self, plan: WritePlan) -> dict[str, Any] | None:
        return None if self.document is None else self._project(plan.verify_projection)

    def load(self, previous: MemoryState | None = None) -> MemoryState | None:
        if self.document is None:
            return None
        if evaluate(read_filter("m")["$expr"], self.document, self.now) is not True:
            return None
        return decode_document("m", self.document, previous)


def _written(server: Server, plan: WritePlan) -> Written:
    outcome = outcome_of(plan, server.send(plan))
    assert isinstance(outcome, Written), outcome
    return outcome


@given(
    st.lists(_message, max_size=8),
    st.lists(_message, max_size=8),
    st.booleans(),
    st.one_of(st.none(), st.floats(0.5, 1e6)),
    st.booleans(),
)
def test_a_save_planned_against_the_stored_version_writes_the_new_list_once(
    old_messages: list[ChatMessage],
    new_messages: list[ChatMessage],
    cached: bool,
    ttl: float | None,
    operators: bool,
) -> None:
    server = Server()
    first = _written(server, plan_save("m", old_messages, 0, None, ttl))
    assert first.server_time == server.now
    state = server.load()
    assert state is not None
    assert state.layout.messages() == old_messages
    assert state.version == first.version
    clock = server.now + datetime.timedelta(milliseconds=1) if operators else None
    plan = plan_save("m", new_messages, state.version, state if cached else None, ttl, server_now=clock)
    written = _written(server, plan)
    assert written.version > first.version
    assert written.state is not None
    after = server.load()
    assert after is not None
    assert after.layout.messages() == new_messages
    assert (after.version, after.incarnation) == (written.state.version, written.state.incarnation)
    assert after.records == written.state.records  # what the store caches is what the document holds
    assert ("expires_at" in server.document) == (ttl is not None)  # type: ignore[operator]
    if ttl is not None:  # by the server's clock, whichever form the write took
        expected = server.now + datetime.timedelta(seconds=ttl)
        assert abs(server.document["expires_at"] - expected) <= datetime.timedelta(milliseconds=1)  # type: ignore[index]
    assert server.document["written_at"] == server.now  # type: ignore[index]
    # A resend after a lost reply finds its write id: the same outcome, nothing written again.
    before = dict(server.document)  # type: ignore[arg-type]
    outcome = outcome_of(plan, server.send(plan), resent=True)
    if isinstance(outcome, Verify):
        outcome = verified_outcome(plan, server.verify(plan))
    assert isinstance(outcome, Written)
    assert outcome.version == written.version
    assert server.document == before


@given(st.lists(_message, max_size=6), st.lists(_message, max_size=6), st.booleans())
def test_a_save_planned_against_another_version_changes_nothing(
    old_messages: list[ChatMessage], new_messages: list[ChatMessage], cached: bool
) -> None:
    server = Server()
    _written(server, plan_save("m", old_messages, 0, None, None))
    state = server.load()
    assert state is not None
    _written(server, plan_replace("m", old_messages, None))  # another writer moves the version on
    before = dict(server.document)  # type: ignore[arg-type]
    plan = plan_save("m", new_messages, state.version, state if cached else None, None)
    assert outcome_of(plan, server.send(plan)) == Conflict()
    assert server.document == before
    create = plan_save("m", new_messages, 0, None, None)
    assert outcome_of(create, server.send(create)) == Conflict()
    assert server.document == before


def test_versions_come_from_the_server_clock_and_keep_growing() -> None:
    server = Server()
    first = _written(server, plan_save("m", _users(1), 0, None, None))
    assert first.version == (server.now - EPOCH) // datetime.timedelta(microseconds=1)
    server.now -= datetime.timedelta(hours=1)  # the server's clock steps back: versions still grow
    second = _written(server, plan_replace("m", _users(2), None))
    assert second.version == first.version + 1


def test_an_expired_memory_is_replaced_by_a_create_and_not_by_a_diff() -> None:
    server = Server()
    _written(server, plan_save("m", _users(1, 2), 0, None, 10))
    state = server.load()
    assert state is not None
    server.now += datetime.timedelta(seconds=11)
    assert server.load() is None
    diff = plan_save("m", _users(2, 3), state.version, state, 10)
    assert outcome_of(diff, server.send(diff)) == Conflict()
    created = _written(server, plan_save("m", _users(3), 0, None, 10))
    assert created.version > state.version
    loaded = server.load()
    assert loaded is not None
    assert loaded.layout.messages() == _users(3)
    assert server.document["expires_at"] == server.now + datetime.timedelta(seconds=10)  # type: ignore[index]


def test_a_create_finding_a_live_memory_is_a_conflict() -> None:
    server = Server()
    _written(server, plan_save("m", _users(1), 0, None, None))
    plan = plan_save("m", _users(2), 0, None, None)
    assert outcome_of(plan, server.send(plan)) == Conflict()


def test_write_ids_are_remembered_up_to_a_bound() -> None:
    server = Server()
    plans = [plan_replace("m", _users(n), None) for n in range(WRITES_KEPT + 3)]
    for plan in plans:
        _written(server, plan)
    writes = server.document["writes"]  # type: ignore[index]
    assert [entry["w"] for entry in writes] == [plan.write_id for plan in plans[-WRITES_KEPT:]]
    # A write found among later ones is reported, but not cached: the document moved on since.
    outcome = outcome_of(plans[-2], WriteReply({"version": writes[-1]["v"], "writes": writes}))
    assert outcome == Written(writes[-2]["v"], None)


_SAVE, _CREATE, _REPLACE = "save", "create", "replace"


def _plans() -> dict[str, WritePlan]:
    return {
        _SAVE: plan_save("m", _users(1), 3, None, None),  # guarded by the filter
        _CREATE: plan_save("m", _users(1), 0, None, None),  # guarded in the pipeline
        _REPLACE: plan_replace("m", _users(1), None),  # unconditional
    }


@pytest.mark.parametrize(
    ("reply", "resent", "outcomes"),
    [
        (WriteReply(lost=True), False, {_SAVE: Resend(), _CREATE: Resend(), _REPLACE: Resend()}),
        (WriteReply(error_code=DUPLICATE_KEY), False, {_SAVE: Resend(), _CREATE: Resend(), _REPLACE: Resend()}),
        (WriteReply(None), False, {_SAVE: Conflict(), _CREATE: Resend(), _REPLACE: Resend()}),
        (WriteReply(None), True, {_SAVE: Verify(), _CREATE: Resend(), _REPLACE: Resend()}),
        (WriteReply({"version": 7, "writes": "damaged"}), False, {_CREATE: Conflict(), _REPLACE: Resend()}),
        (WriteReply({"version": 7, "writes": [{"w": 1, "v": 7}]}), False, {_CREATE: Conflict(), _REPLACE: Resend()}),
        (WriteReply({"version": 7}), False, {_SAVE: Written(7, None)}),
    ],
)
def test_what_a_reply_means(reply: WriteReply, resent: bool, outcomes: dict[str, WriteOutcome]) -> None:
    plans = _plans()
    for name, expected in outcomes.items():
        outcome = outcome_of(plans[name], reply, resent=resent)
        if isinstance(expected, Written):
            assert isinstance(outcome, Written)
            assert outcome.version == expected.version
        else:
            assert outcome == expected, name


def test_a_verify_read_finds_the_write_or_reports_a_conflict() -> None:
    plan = plan_save("m", _users(1), 3, None, None)
    assert verified_outcome(plan, None) == Conflict()
    assert verified_outcome(plan, {"version": 9, "writes": [{"w": plan.write_id + 1, "v": 9}]}) == Conflict()
    landed = verified_outcome(plan, {"version": 9, "writes": [{"w": plan.write_id, "v": 8}, {"w": 5, "v": 9}]})
    assert landed == Written(8, None)


def _document(version: int, records: list[Any]) -> dict[str, Any]:
    # Each record a new object, as a driver hands a document over: found by content, not by identity.
    return {"_id": "m", "version": version, "incarnation": 9, "messages": [bytes(r).decode() for r in records]}


def test_a_read_decodes_only_the_records_the_previous_state_does_not_hold() -> None:
    old = _users(1, 2, 3)
    previous = decode_document("m", _document(5, [encode_record(m).encode() for m in old]), None)
    new = UserMessage("4")
    state = decode_document("m", _document(6, [encode_record(m).encode() for m in (*old[1:], new)]), previous)
    assert state.layout.array == (*old[1:], new) and state.version == 6
    assert state.layout.array[0] is previous.layout.array[1] and state.layout.array[1] is previous.layout.array[2]
    assert decode_document("m", _document(6, []), previous).layout.array == ()


@pytest.mark.parametrize("damage", [{"text": "a document"}, ["an", "array"], 42, None])
def test_a_record_of_another_bson_type_among_known_ones_is_named(damage: Any) -> None:
    old = _users(1, 2, 3)
    previous = decode_document("m", _document(5, [encode_record(m).encode() for m in old]), None)
    document = _document(6, [encode_record(m).encode() for m in old])
    document["messages"].insert(2, damage)
    with pytest.raises(CorruptedMemoryError, match=r"messages\[2\] is a BSON .*, not a message record"):
        decode_document("m", document, previous)


def test_a_generator_is_consumed_once() -> None:
    messages = iter(_users(1, 2))
    assert materialize(messages) == tuple(_users(1, 2))
    with pytest.raises(TypeError, match="chat message"):
        materialize(iter([UserMessage("a"), "not a message"]))  # type: ignore[list-item]


def test_a_document_past_16_mib_is_refused_before_sending() -> None:
    big = [UserMessage("x" * (1 << 20)) for _ in range(17)]
    with pytest.raises(StoreError, match="16 MiB"):
        plan_replace("m", big, None)
    plan_replace("m", big[:15], None)


def test_raw_records_are_stored_as_text_when_they_are_utf8() -> None:
    server = Server()
    _written(server, plan_raw_write("m", [b'{"a": 1}', b"\xff"], None))
    assert server.document["messages"] == ['{"a": 1}', b"\xff"]  # type: ignore[index]
    assert raw_records("m", server.document) == [b'{"a": 1}', b"\xff"]  # type: ignore[arg-type]


def test_the_plan_modules_import_without_any_driver() -> None:
    hide = (
        "import sys\n"
        "for name in ('pymongo', 'bson', 'redis', 'sqlalchemy', 'psycopg', 'pymysql', 'motor'):\n"
        "    sys.modules[name] = None\n"
        "import chatmemory.stores.mongodb.plan, chatmemory.stores.mongodb.layout, chatmemory.stores.mongodb.history\n"
        "import chatmemory.stores.mongodb.outcomes, chatmemory.stores.mongodb.commands\n"
        "import chatmemory.stores.mongodb.operations\n"
        "assert 'pymongo' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    subprocess.run([sys.executable, "-c", hide], check=True)


def test_an_update_resent_after_a_lost_reply_does_not_undo_a_later_write() -> None:
    server = Server()
    lost = plan_replace("m", _users(1), None)
    first = _written(server, lost)  # applied; say its reply never arrived
    later = _written(server, plan_replace("m", _users(2), None))
    assert outcome_of(lost, server.send(lost)) == Written(first.version, None)
    state = server.load()
    assert state is not None
    assert (state.layout.messages(), state.version) == (_users(2), later.version)


def test_a_turn_with_the_servers_clock_known_is_sent_as_update_operators() -> None:
    server = Server()
    _written(server, plan_save("m", _users(1, 2, 3), 0, None, 60))
    state = server.load()
    assert state is not None
    plan = plan_save("m", _users(2, 3, 4), state.version, state, 60, server_now=server.now)
    assert isinstance(plan.update, dict)
    assert not plan.returns_document  # an update_one: the filter pins the version it writes
    assert plan.update["$push"]["messages"] == {"$each": [dumps_message(UserMessage("4")).decode()], "$slice": -3}
    assert plan.update["$inc"] == {"version": 1}
    written = _written(server, plan)
    assert written.version == state.version + 1
    assert isinstance(plan_save("m", _users(3, 4, 5), written.version, state, 60).update, list)  # clock unknown


def test_the_server_clock_is_learned_from_a_reply() -> None:
    clock = ServerClock()
    assert clock.now() is None
    local = ServerClock.local()
    clock.observe(local, local + datetime.timedelta(milliseconds=10), local + datetime.timedelta(seconds=60))
    estimate = clock.now()
    assert estimate is not None
    assert abs(estimate - (ServerClock.local() + datetime.timedelta(seconds=60))) < datetime.timedelta(seconds=1)
    assert expired({"expires_at": estimate}, estimate)
    assert not expired({"expires_at": "not a date"}, estimate)
    assert not expired({}, estimate)


def test_an_old_estimate_of_the_server_clock_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ServerClock()
    local = ServerClock.local()
    clock.observe(local, local, local)
    assert clock.now() is not None
    later = time.monotonic() + MAX_AGE + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert clock.now() is None
