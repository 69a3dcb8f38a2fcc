"""History on the MongoDB store, on the server: long conversations, conflicts, crashes, expiry, trims, cost."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import bson
import pytest
from pymongo import MongoClient, monitoring

from chatmemory import (
    ConcurrentUpdateError,
    HistoryNotEnabledError,
    MessageWindowChatMemory,
    SupportsHistory,
    SystemMessage,
    UserMessage,
    open_store,
)
from chatmemory.core.history import HistoryEntry
from chatmemory.stores.mongodb import MongoChatMemoryStore
from chatmemory.stores.mongodb.layout import COPY_AT_GROUPS
from chatmemory.stores.mongodb.plan import MongoPlanner
from support.backends.mongodb import DATABASE, mongodb_url
from support.mongo7_guard import Mongo7Guard

pytestmark = pytest.mark.mongodb


class Commands(monitoring.CommandListener):
    """Counts the commands sent to the test collections."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in {"find", "findAndModify", "update", "delete", "insert"}:
            self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture(scope="module")
def guard() -> Mongo7Guard:
    return Mongo7Guard()


@pytest.fixture(scope="module")
def commands() -> Commands:
    return Commands()


@pytest.fixture(scope="module")
def client(guard: Mongo7Guard, commands: Commands) -> Iterator[MongoClient[Any]]:
    made: MongoClient[Any] = MongoClient(
        mongodb_url(), event_listeners=[guard, commands], serverSelectionTimeoutMS=10_000, retryWrites=False
    )
    yield made
    made.close()


@pytest.fixture
def make(client: MongoClient[Any], guard: Mongo7Guard) -> Iterator[Any]:
    made: list[MongoChatMemoryStore] = []
    collection = f"history_{uuid.uuid4().hex[:12]}"

    def build(**options: Any) -> MongoChatMemoryStore:
        options.setdefault("history", True)
        made.append(MongoChatMemoryStore(client, database=DATABASE, collection=collection, **options))
        return made[-1]

    yield build
    for store in made:
        store.close()
    client[DATABASE].drop_collection(collection)
    client[DATABASE].drop_collection(f"{collection}_history")
    guard.check()  # no transactions, nothing MongoDB 7 would refuse


def _all(store: MongoChatMemoryStore, memory_id: str, page: int = 100) -> list[HistoryEntry]:
    entries: list[HistoryEntry] = []
    after = None
    while True:
        got = store.history(memory_id, after=after, limit=page)
        entries += got.entries
        if got.next_after is None:
            return entries
        after = got.next_after


LONG_AGO = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


def _flush(store: MongoChatMemoryStore) -> None:
    """Copy every staged group into the history collection (a trim copies them first; this one removes nothing)."""
    assert store.trim_history(older_than=LONG_AGO) == 0


def _texts(entries: list[HistoryEntry]) -> list[str]:
    return [entry.message.text for entry in entries]  # type: ignore[attr-defined]


def test_a_thousand_turns_keep_every_message_while_the_window_stays_bounded(make: Any, client: Any) -> None:
    store = make()
    assert isinstance(store, SupportsHistory) and store.keeps_history
    memory = MessageWindowChatMemory("long", store=store, max_messages=10, always_keep_system_message_first=True)
    memory.add(SystemMessage("be brief"))
    for turn in range(1000):
        memory.add(UserMessage(f"m{turn}"))
    assert len(store.get_messages("long")) == 10
    entries = _all(store, "long", page=137)
    assert _texts(entries) == ["be brief", *(f"m{turn}" for turn in range(1000))]
    sequences = [entry.sequence for entry in entries]
    assert sequences == sorted(set(sequences))
    newest = store.history("long", reverse=True, limit=3)
    assert _texts(newest.entries) == ["m999", "m998", "m997"] and newest.next_after == sequences[-3]
    # The window document does not grow with the history.
    document = store.collection.find_one({"_id": "long"})
    assert len(bson.encode(document)) < 4096


def test_entries_of_one_write_share_its_server_time(make: Any) -> None:
    store = make()
    before = datetime.datetime.now(datetime.timezone.utc)
    store.update_messages("m", [UserMessage("a"), UserMessage("b")])
    entries = store.history("m").entries
    assert entries[0].written_at == entries[1].written_at
    assert entries[0].written_at.tzinfo is not None
    assert abs(entries[0].written_at - before) < datetime.timedelta(seconds=5)
    assert store.memory_times("m").last_write == entries[0].written_at  # type: ignore[union-attr]


def test_a_write_that_loses_its_version_conflict_records_nothing(make: Any) -> None:
    first, second = make(), make()
    first.update_messages("m", [UserMessage("a")])
    version = second.load("m").version
    assert first.load("m").version == version
    first.save("m", [UserMessage("a"), UserMessage("won")], version)
    with pytest.raises(ConcurrentUpdateError):
        second.save("m", [UserMessage("a"), UserMessage("lost")], version)
    assert _texts(_all(second, "m")) == ["a", "won"]


def test_concurrent_writers_record_each_message_once_in_order(make: Any) -> None:
    stores = [make() for _ in range(4)]
    stores[0].update_messages("m", [UserMessage("start")])

    def write(store: MongoChatMemoryStore, writer: int) -> None:
        for turn in range(15):
            while True:
                snapshot = store.load("m")
                kept = [*snapshot.messages, UserMessage(f"{writer}-{turn}")][-5:]
                try:
                    store.save("m", kept, snapshot.version)
                    break
                except ConcurrentUpdateError:
                    continue

    threads = [threading.Thread(target=write, args=(store, index)) for index, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = _all(stores[0], "m", page=7)
    texts = _texts(entries)
    assert sorted(texts) == sorted(["start", *(f"{w}-{t}" for w in range(4) for t in range(15))])
    for writer in range(4):  # each writer's messages in the order it wrote them
        assert [text for text in texts if text.startswith(f"{writer}-")] == [f"{writer}-{t}" for t in range(15)]
    sequences = [entry.sequence for entry in entries]
    assert sequences == sorted(set(sequences))
    assert stores[0].get_messages("m") == [entry.message for entry in entries[-5:]]


def test_a_writer_that_stops_between_the_window_write_and_the_copy_loses_nothing(make: Any) -> None:
    store, other = make(), make()
    store.update_messages("m", [UserMessage("a")])
    _flush(store)
    state = store._load_state("m")  # what a writer that is about to crash planned against
    assert state is not None
    plan = MongoPlanner(None, store._history).save("m", [UserMessage("a"), UserMessage("b")], state.version, state)
    # The window write lands; the process dies before it copies anything.
    assert store.collection.find_one_and_update(plan.filter, plan.update) is not None
    entries = store.history_collection
    assert entries is not None
    assert entries.count_documents({"m": "m"}) == 1
    assert _texts(other.history("m").entries) == ["a", "b"]  # readers merge the staged group
    texts = ["a", "b"]
    for turn in range(COPY_AT_GROUPS):  # another store keeps the group it does not know, then copies it
        snapshot = other.load("m")
        other.save("m", [*snapshot.messages, UserMessage(f"c{turn}")], snapshot.version)
        texts.append(f"c{turn}")
        assert _texts(_all(store, "m")) == texts
    # The staged groups, the crashed writer's among them, were copied once COPY_AT_GROUPS were staged.
    assert entries.count_documents({"m": "m", "s": {"$lte": COPY_AT_GROUPS}}) == COPY_AT_GROUPS
    _flush(store)
    assert sorted(entry["s"] for entry in entries.find({"m": "m"})) == list(range(1, len(texts) + 1))


def test_a_turn_costs_one_command_and_one_more_every_few_turns_with_history(make: Any, commands: Commands) -> None:
    turns = 4 * COPY_AT_GROUPS
    for history in (False, True):
        store = make(history=history)
        store.update_messages("m", [UserMessage("a")])
        snapshot = store.load("m")
        store.save("m", [*snapshot.messages, UserMessage("b")], snapshot.version)  # warm: clock known
        sent: list[str] = []
        for turn in range(turns):
            snapshot = store.load("m")
            commands.names.clear()
            store.save("m", [*snapshot.messages[1:], UserMessage(f"c{turn}")], snapshot.version)
            sent += commands.names
        if not history:  # exactly as without history support: one update_one a turn
            assert sent == ["update"] * turns
        else:  # one findAndModify (its reply tells the server time), a copy every COPY_AT_GROUPS turns
            assert sent.count("findAndModify") == turns
            assert sent.count("insert") in (turns // COPY_AT_GROUPS, turns // COPY_AT_GROUPS + 1)
            assert len(sent) == sent.count("findAndModify") + sent.count("insert")
        commands.names.clear()
        store.load("m")
        assert commands.names == ["find"]


def test_delete_removes_the_window_and_the_history_and_a_new_history_starts(make: Any) -> None:
    store = make()
    store.update_messages("m", [UserMessage("a"), UserMessage("b")])
    store.update_messages("other", [UserMessage("x")])
    store.delete_messages("m")
    assert store.history("m").entries == [] and store.history("m").next_after is None
    assert store.get_messages("m") == []
    assert store.history_collection is not None
    assert store.history_collection.count_documents({"m": "m"}) == 0
    store.update_messages("m", [UserMessage("c")])
    assert _texts(store.history("m").entries) == ["c"]
    assert _texts(store.history("other").entries) == ["x"]


def test_entries_of_an_earlier_history_are_never_read_and_go_when_a_new_one_starts(make: Any) -> None:
    store = make()
    store.update_messages("m", [UserMessage("old")])
    _flush(store)
    assert store.history_collection is not None
    stale = store.history_collection.find_one({"m": "m"}, {"_id": 0})
    store.delete_messages("m")
    store.history_collection.insert_one(stale)  # a copy that landed after the delete
    assert store.history("m").entries == []
    store.update_messages("m", [UserMessage("new")])
    assert _texts(store.history("m").entries) == ["new"]
    assert store.history_collection.count_documents({"m": "m"}) == 0  # the stale entry went; "new" is staged
    _flush(store)
    assert [entry["h"] != stale["h"] for entry in store.history_collection.find({"m": "m"})] == [True]


def test_without_history_ttl_the_history_expires_with_the_window(make: Any) -> None:
    store = make(ttl=1)
    store.update_messages("m", [UserMessage("a")])
    assert _texts(store.history("m").entries) == ["a"]
    time.sleep(1.3)
    assert store.get_messages("m") == []
    assert store.history("m").entries == []
    store.update_messages("m", [UserMessage("b")])  # a new history
    assert _texts(store.history("m").entries) == ["b"]


def test_with_history_ttl_the_history_outlives_the_window_and_goes_on(make: Any) -> None:
    store = make(ttl=1, history_ttl=2.5)
    store.update_messages("m", [UserMessage("a")])
    time.sleep(1.3)
    assert store.get_messages("m") == [] and list(store.memory_ids()) == []
    assert _texts(store.history("m").entries) == ["a"]
    store.update_messages("m", [UserMessage("b")])  # a new window, the same history
    assert store.get_messages("m") == [UserMessage("b")]
    assert _texts(store.history("m").entries) == ["a", "b"]
    time.sleep(1.3)  # the window expired again, the history lives 2.5 s after the last write
    assert store.get_messages("m") == []
    assert _texts(store.history("m").entries) == ["a", "b"]
    time.sleep(1.5)
    assert store.history("m").entries == []
    times = store.memory_times("m")
    assert times is None


def test_trim_history_removes_old_entries_and_never_the_window(make: Any) -> None:
    store = make()
    store.update_messages("m", [UserMessage("a")])
    store.update_messages("other", [UserMessage("x")])
    time.sleep(0.05)
    cutoff = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(0.05)
    snapshot = store.load("m")
    store.save("m", [*snapshot.messages, UserMessage("b")], snapshot.version)
    assert store.trim_history(older_than=cutoff, memory_id="m") == 1
    assert _texts(store.history("m").entries) == ["b"]
    assert _texts(store.history("other").entries) == ["x"]
    assert store.get_messages("m") == [UserMessage("a"), UserMessage("b")]
    assert store.trim_history(older_than=datetime.timedelta(0)) == 2
    assert store.history("m").entries == [] and store.history("other").entries == []
    assert store.get_messages("other") == [UserMessage("x")]


def test_a_store_without_history_says_how_to_get_one(make: Any) -> None:
    store = make(history=False)
    assert not store.keeps_history
    with pytest.raises(HistoryNotEnabledError, match="history=True") as caught:
        store.history("m")
    assert "MongoChatMemoryStore" in str(caught.value)
    with pytest.raises(HistoryNotEnabledError):
        store.trim_history(older_than=datetime.timedelta(days=1))
    with pytest.raises(ValueError, match="limit"):  # the arguments are checked first
        store.history("m", limit=0)
    with pytest.raises(TypeError):
        store.trim_history(older_than=5)  # type: ignore[arg-type]


def test_history_options_are_checked_at_construction(client: Any) -> None:
    with pytest.raises(ValueError, match="history=True"):
        MongoChatMemoryStore(client, history_ttl=10)
    with pytest.raises(ValueError, match="at least ttl"):
        MongoChatMemoryStore(client, ttl=10, history=True, history_ttl=5)
    with pytest.raises(TypeError, match="history must be a bool"):
        MongoChatMemoryStore(client, history="yes")  # type: ignore[arg-type]


def test_open_store_passes_the_history_options() -> None:
    store = open_store(mongodb_url(), history=True, history_ttl=60)
    try:
        assert isinstance(store, MongoChatMemoryStore) and store.keeps_history
        assert "history_ttl=60" in repr(store)
    finally:
        store.close()


def test_a_raw_write_records_nothing_and_a_later_turn_goes_on(make: Any) -> None:
    store = make()
    store.update_messages("m", [UserMessage("a")])
    store.write_raw("m", [b'{"v":1,"type":"user","contents":[{"type":"text","text":"raw"}]}'])
    assert _texts(store.history("m").entries) == ["a"]
    snapshot = store.load("m")
    store.save("m", [*snapshot.messages, UserMessage("b")], snapshot.version)
    assert _texts(store.history("m").entries) == ["a", "b"]


def test_entries_expire_in_storage_after_their_history_in_steps_of_the_lifetime(make: Any) -> None:
    store = make(history_ttl=1)  # the window never expires; the history 1 s after the last write
    entries = store.history_collection
    assert entries is not None
    store.update_messages("m", [UserMessage("a")])
    _flush(store)
    indexes = {index["name"]: index for index in entries.list_indexes()}
    assert indexes["chatmemory_history_x"]["expireAfterSeconds"] == 0
    first = entries.find_one({"s": 1})
    assert first is not None and first["x"] - first["t"] == datetime.timedelta(seconds=2)
    started = store.collection.find_one({"_id": "m"})["hrefresh"]  # type: ignore[index]
    time.sleep(0.5)
    snapshot = store.load("m")
    store.save("m", [*snapshot.messages, UserMessage("b")], snapshot.version)  # within the lifetime: no refresh
    assert entries.find_one({"s": 1})["x"] == first["x"]  # type: ignore[index]
    time.sleep(0.7)
    snapshot = store.load("m")
    store.save("m", [*snapshot.messages, UserMessage("c")], snapshot.version)  # past it: every entry slides
    _flush(store)
    refreshed = store.collection.find_one({"_id": "m"})["hrefresh"]  # type: ignore[index]
    assert refreshed > started + datetime.timedelta(seconds=1)
    for entry in entries.find({"m": "m"}):
        assert entry["x"] >= refreshed + datetime.timedelta(seconds=2) - datetime.timedelta(milliseconds=1)
    assert _texts(store.history("m").entries) == ["a", "b", "c"]


def test_update_messages_repairs_a_window_it_cannot_read_and_records_the_new_one(make: Any) -> None:
    store = make()
    store.update_messages("m", [UserMessage("a")])
    store.write_raw("m", [b"not json"])
    store.update_messages("m", [SystemMessage("s"), UserMessage("b")])
    assert store.get_messages("m") == [SystemMessage("s"), UserMessage("b")]
    assert _texts(_all(store, "m")) == ["a", "s", "b"]
    sequences = [entry.sequence for entry in _all(store, "m")]
    assert sequences == [1, 2, 3]


def test_expire_at_moves_the_window_expiry_and_keeps_the_document_for_the_history(make: Any) -> None:
    store = make(ttl=60, history_ttl=600)
    store.update_messages("m", [UserMessage("a")])
    soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
    store.expire_at("m", soon)
    times = store.memory_times("m")
    assert times is not None and abs(times.expires_at - soon) < datetime.timedelta(milliseconds=2)  # type: ignore[operator]
    document = store.collection.find_one({"_id": "m"})
    assert document is not None and document["expires_at"] > soon + datetime.timedelta(seconds=500)
    time.sleep(1.2)
    assert store.get_messages("m") == [] and store.memory_times("m") is None
    assert _texts(store.history("m").entries) == ["a"]
    store.update_messages("m", [UserMessage("b")])
    store.expire_at("m", None)
    assert store.memory_times("m").expires_at is None  # type: ignore[union-attr]
    assert "expires_at" not in store.collection.find_one({"_id": "m"})  # type: ignore[operator]
    assert _texts(store.history("m").entries) == ["a", "b"]
