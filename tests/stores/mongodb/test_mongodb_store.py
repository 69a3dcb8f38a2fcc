"""What the MongoDB store sends and stores, beyond the shared contract: the write shape, TTL, ids, errors."""

from __future__ import annotations

import datetime
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient, monitoring
from pymongo.errors import PyMongoError

from chatmemory import (
    ChatMessage,
    ConcurrentUpdateError,
    CorruptedMemoryError,
    CustomMessage,
    MessageWindowChatMemory,
    MissingDependencyError,
    StoreError,
    SystemMessage,
    UserMessage,
    open_store,
)
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.mongodb import EXPIRY_INDEX, MongoChatMemoryStore
from support.backends.mongodb import DATABASE, mongodb_url
from support.mongo7_guard import Mongo7Guard, violations_of

pytestmark = pytest.mark.mongodb


class Recorder(monitoring.CommandListener):
    """Keeps the commands a client sends to the memories collections (not the handshakes)."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in {"find", "findAndModify", "update", "delete", "insert", "createIndexes"}:
            with self._lock:
                self.commands.append((event.command_name, dict(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            taken, self.commands = self.commands, []
        return taken


@pytest.fixture(scope="module")
def url() -> str:
    return mongodb_url()


@pytest.fixture(scope="module")
def guard() -> Mongo7Guard:
    return Mongo7Guard()


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def client(url: str, guard: Mongo7Guard, recorder: Recorder) -> Iterator[MongoClient[Any]]:
    made: MongoClient[Any] = MongoClient(url, event_listeners=[guard, recorder], serverSelectionTimeoutMS=10_000)
    yield made
    made.close()


@pytest.fixture
def collection_name(client: MongoClient[Any], guard: Mongo7Guard) -> Iterator[str]:
    name = f"memories_{uuid.uuid4().hex}"
    yield name
    client[DATABASE].drop_collection(name)
    guard.check()


@pytest.fixture
def make_store(client: MongoClient[Any], collection_name: str, recorder: Recorder) -> Iterator[Any]:
    def make(**options: Any) -> MongoChatMemoryStore:
        return MongoChatMemoryStore(client, database=DATABASE, collection=collection_name, **options)

    yield make
    recorder.take()


@pytest.fixture
def store(make_store: Any, recorder: Recorder) -> MongoChatMemoryStore:
    made: MongoChatMemoryStore = make_store()
    recorder.take()
    return made


def _users(*numbers: int) -> list[UserMessage]:
    return [UserMessage(str(number)) for number in numbers]


def _record(message: Any) -> str:
    return dumps_message(message).decode()


# ------------------------------------------------------------------------------------------ write shape


def _set_fields(command: dict[str, Any]) -> dict[str, Any]:
    """The fields a write's pipeline sets under its condition: name -> new value."""
    pipeline = command["update"]
    assert isinstance(pipeline, list)
    fields = {}
    for stage in pipeline:
        for name, value in stage.get("$set", {}).items():
            if isinstance(value, dict) and "$cond" in value and value["$cond"][2] == f"${name}":
                fields[name] = value["$cond"][1]  # a write guarded in the pipeline
            else:
                fields[name] = value
    return fields


def test_a_steady_state_turn_is_one_find_one_and_one_update_one(
    store: MongoChatMemoryStore, recorder: Recorder
) -> None:
    memory = MessageWindowChatMemory("chat", store=store, max_messages=3)
    memory.add(*_users(1, 2, 3))
    recorder.take()
    memory.add(UserMessage("4"))
    commands = recorder.take()
    assert [name for name, _ in commands] == ["find", "update"]
    find, update = commands[0][1], commands[1][1]
    assert find["filter"] == {"_id": "chat"}  # expiry judged by the server's clock as learned from a reply
    assert find.get("limit") in (1, -1)
    (statement,) = update["updates"]
    assert statement["q"]["_id"] == "chat"
    assert "version" in statement["q"]
    assert "incarnation" in statement["q"]
    assert not statement.get("upsert", False)
    # Update operators (the server's clock is known from the previous reply): only the new message
    # travels, and the evicted head is dropped by the $slice bound.
    operators = statement["u"]
    assert operators["$push"]["messages"] == {"$each": [_record(UserMessage("4"))], "$slice": -3}
    assert operators["$inc"] == {"version": 1}
    assert "messages" not in operators.get("$set", {})
    assert store.get_messages("chat") == _users(2, 3, 4)


def test_update_messages_with_a_cached_snapshot_sends_only_the_new_message(
    store: MongoChatMemoryStore, recorder: Recorder
) -> None:
    store.update_messages("chat", _users(1, 2, 3))
    recorder.take()
    store.update_messages("chat", _users(2, 3, 4))
    ((name, command),) = recorder.take()
    assert name == "update"
    (statement,) = command["updates"]
    assert "version" in statement["q"] and "incarnation" in statement["q"]
    assert statement["u"]["$push"]["messages"] == {"$each": [_record(UserMessage("4"))], "$slice": -3}
    assert store.get_messages("chat") == _users(2, 3, 4)


def test_update_messages_after_another_writer_replaces_the_window_whole(
    store: MongoChatMemoryStore, make_store: Any, recorder: Recorder
) -> None:
    store.update_messages("chat", _users(1, 2, 3))
    make_store().update_messages("chat", _users(7, 8))  # the cached snapshot is stale now
    recorder.take()
    store.update_messages("chat", _users(2, 3, 4))
    assert [name for name, _ in recorder.take()] == ["update", "findAndModify"]  # the diff conflicts
    assert store.get_messages("chat") == _users(2, 3, 4)
    assert make_store().get_messages("chat") == _users(2, 3, 4)


def test_evicting_behind_a_system_message_kept_first_is_one_small_update(
    store: MongoChatMemoryStore, recorder: Recorder
) -> None:
    memory = MessageWindowChatMemory("chat", store=store, max_messages=4, always_keep_system_message_first=True)
    memory.add(SystemMessage("be brief"), *_users(1, 2, 3))
    recorder.take()
    memory.add(UserMessage("4"))
    (_, update) = recorder.take()[1]
    operators = update["updates"][0]["u"]
    assert operators["$push"]["messages"] == {"$each": [_record(UserMessage("4"))], "$slice": -3}
    assert "system" not in operators["$set"]  # unchanged: not sent again
    assert operators["$set"]["system_at"] == 0
    assert memory.messages() == [SystemMessage("be brief"), *_users(2, 3, 4)]
    document = store.collection.find_one({"_id": "chat"})
    assert document is not None
    assert document["system"] == _record(SystemMessage("be brief"))
    assert document["messages"] == [_record(message) for message in _users(2, 3, 4)]


def test_a_change_that_is_not_a_head_trim_is_one_whole_write(store: MongoChatMemoryStore, recorder: Recorder) -> None:
    version = store.save("chat", _users(1, 2, 3), 0)
    snapshot = store.load("chat")
    recorder.take()
    new_version = store.save("chat", _users(1, 3, 4), snapshot.version)
    assert new_version > version
    ((name, update),) = recorder.take()
    assert name == "findAndModify"
    fields = _set_fields(update)
    assert fields["messages"] == {"$literal": [_record(message) for message in _users(1, 3, 4)]}
    assert "incarnation" in fields  # a whole write starts a new incarnation
    assert store.get_messages("chat") == _users(1, 3, 4)


def test_the_document_layout(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(ttl=60)
    before = datetime.datetime.now(datetime.timezone.utc)
    store.update_messages("chat", [UserMessage("0"), SystemMessage("s"), UserMessage("1")])
    document = store.collection.find_one({"_id": "chat"})
    assert document is not None
    assert set(document) == {
        "_id", "version", "incarnation", "messages", "system", "system_at", "expires_at", "writes", "written_at"
    }  # fmt: skip
    assert document["messages"] == [_record(UserMessage("0")), _record(UserMessage("1"))]
    assert (document["system"], document["system_at"]) == (_record(SystemMessage("s")), 1)
    assert isinstance(document["incarnation"], int)
    assert document["version"] == store.load("chat").version
    expires_at = document["expires_at"]
    assert before + datetime.timedelta(seconds=59) <= expires_at <= before + datetime.timedelta(seconds=62)


# --------------------------------------------------------------------------------------------- TTL


def _expire_now(store: MongoChatMemoryStore, memory_id: str) -> None:
    # Stands in for time passing: the TTL monitor (about once a minute) is never waited for.
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
    store.collection.update_one({"_id": memory_id}, {"$set": {"expires_at": past}})


def test_the_ttl_index_is_created_once_and_idempotently(make_store: Any) -> None:
    first: MongoChatMemoryStore = make_store(ttl=30)
    first.update_messages("a", _users(1))
    second: MongoChatMemoryStore = make_store(ttl=datetime.timedelta(minutes=5))
    second.update_messages("b", _users(2))
    indexes = {index["name"]: index for index in first.collection.list_indexes()}
    assert indexes[EXPIRY_INDEX]["expireAfterSeconds"] == 0
    assert dict(indexes[EXPIRY_INDEX]["key"]) == {"expires_at": 1}
    assert second.ttl == 300.0


def test_a_conflicting_index_is_a_store_error_that_says_what_to_do(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(ttl=30)
    store.collection.create_index("expires_at", name=EXPIRY_INDEX, expireAfterSeconds=3600)
    with pytest.raises(StoreError, match="dropIndex") as raised:
        store.update_messages("a", _users(1))
    assert isinstance(raised.value.__cause__, PyMongoError)


def test_an_expired_memory_reads_as_empty_before_the_server_removes_it(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(ttl=60)
    version = store.save("chat", _users(1, 2), 0)
    store.save("other", _users(9), 0)
    _expire_now(store, "chat")
    assert store.collection.find_one({"_id": "chat"}) is not None  # still there
    assert store.get_messages("chat") == []
    assert store.load("chat").version == 0
    assert sorted(store.memory_ids()) == ["other"]
    with pytest.raises(ConcurrentUpdateError):
        store.save("chat", _users(3), version)
    # Version 0 takes the expired document's place, above every version it had.
    assert store.save("chat", _users(3), 0) > version
    assert store.get_messages("chat") == _users(3)


def test_a_window_memory_starts_afresh_on_an_expired_memory(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(ttl=60)
    memory = MessageWindowChatMemory("chat", store=store, max_messages=3)
    memory.add(*_users(1, 2, 3))
    _expire_now(store, "chat")
    memory.add(UserMessage("4"))
    assert memory.messages() == _users(4)


def test_every_write_slides_the_expiry(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(ttl=60)
    memory = MessageWindowChatMemory("chat", store=store, max_messages=2)
    memory.add(UserMessage("1"))
    # Pull the expiry close, as if most of the ttl had passed; the next add must push it back.
    soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=5)
    store.collection.update_one({"_id": "chat"}, {"$set": {"expires_at": soon}})
    memory.add(UserMessage("2"))
    memory.add(UserMessage("3"))
    document = store.collection.find_one({"_id": "chat"})
    assert document is not None
    assert document["expires_at"] > soon + datetime.timedelta(seconds=50)


def test_a_store_without_ttl_writes_memories_that_never_expire(make_store: Any) -> None:
    with_ttl: MongoChatMemoryStore = make_store(ttl=60)
    without: MongoChatMemoryStore = make_store()
    with_ttl.update_messages("chat", _users(1))
    without.save("chat", _users(1, 2), without.load("chat").version)
    document = without.collection.find_one({"_id": "chat"})
    assert document is not None
    assert "expires_at" not in document
    assert without.ttl is None


@pytest.mark.parametrize("ttl", [0, -1, datetime.timedelta(0)])
def test_ttl_must_be_positive(client: MongoClient[Any], ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl"):
        MongoChatMemoryStore(client, ttl=ttl)


# ------------------------------------------------------------------------------- ids and attributes


@pytest.mark.parametrize("memory_id", ["$where", "$ne", "{$ne: 1}", "{'$gt': ''}", "a.b", "$$ROOT", "$version"])
def test_operator_looking_ids_are_literal_names(store: MongoChatMemoryStore, memory_id: str) -> None:
    store.update_messages("someone else", _users(1))
    assert store.get_messages(memory_id) == []
    store.update_messages(memory_id, _users(2))
    version = store.load(memory_id).version
    store.save(memory_id, _users(2, 3), version)
    assert store.get_messages(memory_id) == _users(2, 3)
    assert store.get_messages("someone else") == _users(1)
    assert store.collection.find_one({"_id": memory_id}) is not None
    store.delete_messages(memory_id)
    assert store.get_messages("someone else") == _users(1)
    assert sorted(store.memory_ids()) == ["someone else"]


@pytest.mark.parametrize("memory_id", [{"$ne": 1}, {"$gt": ""}, ["a"], None, b"a"])
def test_non_string_ids_never_reach_the_server(store: MongoChatMemoryStore, recorder: Recorder, memory_id: Any) -> None:
    store.update_messages("someone else", _users(1))
    recorder.take()
    for operation in (store.get_messages, store.delete_messages, lambda i: store.update_messages(i, [])):
        with pytest.raises(TypeError):
            operation(memory_id)
    assert recorder.take() == []
    assert store.get_messages("someone else") == _users(1)


def test_attribute_keys_that_bson_field_names_cannot_hold(store: MongoChatMemoryStore) -> None:
    attributes = {"$where": "sleep(1000)", "a.b": {"$set": 1}, "nul\x00key": [1, {"$gt": ""}], "": "empty"}
    messages: list[ChatMessage] = [CustomMessage(attributes), UserMessage("hi", attributes={"$inc": 1, "x.y.z": None})]
    store.update_messages("chat", messages)
    assert store.get_messages("chat") == messages
    store.save("chat", [*messages, CustomMessage({"$push": "no"})], store.load("chat").version)
    assert store.get_messages("chat") == [*messages, CustomMessage({"$push": "no"})]


# ------------------------------------------------------------------------------------- concurrency


def test_creating_a_memory_another_writer_created_is_a_conflict(make_store: Any) -> None:
    one: MongoChatMemoryStore = make_store()
    two: MongoChatMemoryStore = make_store()
    assert one.load("chat").version == two.load("chat").version == 0
    one.save("chat", _users(1), 0)
    with pytest.raises(ConcurrentUpdateError):
        two.save("chat", _users(2), 0)
    assert two.get_messages("chat") == _users(1)


def test_a_cached_snapshot_of_an_earlier_incarnation_never_diffs(make_store: Any) -> None:
    writer: MongoChatMemoryStore = make_store()
    other: MongoChatMemoryStore = make_store()
    version = writer.save("chat", _users(1, 2, 3), 0)
    writer.load("chat")
    # Another process deletes and recreates the memory, and it happens to reach the same version.
    other.delete_messages("chat")
    other.update_messages("chat", _users(7, 8, 9))
    other.collection.update_one({"_id": "chat"}, {"$set": {"version": version}})
    with pytest.raises(ConcurrentUpdateError):
        writer.save("chat", _users(2, 3, 4), version)  # would be a $push of [4] against the old array
    assert other.get_messages("chat") == _users(7, 8, 9)


def test_update_messages_moves_the_version_on_past_a_damaged_one(store: MongoChatMemoryStore) -> None:
    store.collection.insert_one({"_id": "chat", "version": "not a number", "messages": [b"\xff"]})
    store.update_messages("chat", _users(1))
    snapshot = store.load("chat")
    assert snapshot.messages == _users(1)
    store.update_messages("chat", _users(2))
    assert store.load("chat").version > snapshot.version


def test_versions_keep_rising_across_delete_and_recreate(store: MongoChatMemoryStore) -> None:
    seen = [store.save("chat", _users(1), 0)]
    for _ in range(3):
        store.delete_messages("chat")
        seen.append(store.save("chat", _users(1), 0))
        store.update_messages("chat", _users(2))
        seen.append(store.load("chat").version)
    assert seen == sorted(seen)
    assert len(set(seen)) == len(seen)


# ------------------------------------------------------------------------------------------ corruption


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"messages": []}, "version"),
        ({"version": 5, "messages": "nope"}, "not an array"),
        ({"version": 5}, "no 'messages' field"),
        ({"version": 5, "messages": [1]}, "not a message record"),
        ({"version": 5, "messages": [], "system": _record(SystemMessage("s")), "system_at": 3}, "system_at"),
        ({"version": 5, "messages": [], "system": _record(SystemMessage("s"))}, "system_at"),
        ({"version": 5, "messages": [], "system": {"text": "s"}, "system_at": 0}, "not a message record"),
    ],
)
def test_a_malformed_document_is_corrupted_naming_the_id(
    store: MongoChatMemoryStore, document: dict[str, Any], reason: str
) -> None:
    store.collection.insert_one({"_id": "broken", **document})
    with pytest.raises(CorruptedMemoryError, match=reason) as raised:
        store.get_messages("broken")
    assert raised.value.memory_id == "broken"
    store.update_messages("broken", _users(1))
    assert store.get_messages("broken") == _users(1)


# -------------------------------------------------------------------------------- clients and errors


def test_a_url_store_owns_its_client(url: str) -> None:
    name = f"memories_{uuid.uuid4().hex}"
    store = open_store(url, database=DATABASE, collection=name)
    assert isinstance(store, MongoChatMemoryStore)
    with store:
        store.update_messages("chat", _users(1))
        assert store.get_messages("chat") == _users(1)
        store.collection.drop()
    assert store.closed
    with pytest.raises(StoreError, match="closed"):
        store.get_messages("chat")


def test_a_callers_client_stays_open(client: MongoClient[Any], store: MongoChatMemoryStore) -> None:
    store.update_messages("chat", _users(1))
    with MongoChatMemoryStore(client, database=DATABASE, collection=store.collection.name):
        pass
    assert client[DATABASE][store.collection.name].find_one({"_id": "chat"}) is not None
    assert store.get_messages("chat") == _users(1)


def test_from_url_rejects_other_schemes() -> None:
    with pytest.raises(ValueError, match="mongodb://"):
        MongoChatMemoryStore.from_url("redis://localhost/0")


def test_driver_errors_are_store_errors_from_the_driver() -> None:
    # A closed loopback port: server selection fails fast.
    store = MongoChatMemoryStore("mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=200&connectTimeoutMS=200")
    with store:
        for operation in (
            lambda: store.get_messages("chat"),
            lambda: store.update_messages("chat", _users(1)),
            lambda: store.save("chat", _users(1), 0),
            lambda: store.delete_messages("chat"),
            lambda: list(store.memory_ids()),
        ):
            with pytest.raises(StoreError) as raised:
                operation()
            assert isinstance(raised.value.__cause__, PyMongoError)


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymongo", None)
    for module in (
        "chatmemory.stores.mongodb.store",
        "chatmemory.stores.mongodb.base",
        "chatmemory.stores.mongodb.executor",
    ):
        monkeypatch.delitem(sys.modules, module)
    with pytest.raises(MissingDependencyError, match=r"pip install '[\w-]+\[mongodb\]'") as raised:
        from chatmemory.stores.mongodb import MongoChatMemoryStore  # noqa: F401
    assert "MongoChatMemoryStore" in str(raised.value)


# ------------------------------------------------------------------------------------ MongoDB 7 guard


def test_the_store_sends_nothing_mongodb_7_rejects(make_store: Any, guard: Mongo7Guard) -> None:
    store: MongoChatMemoryStore = make_store(ttl=60)
    before = guard.commands_seen
    memory = MessageWindowChatMemory("chat", store=store, max_messages=3, always_keep_system_message_first=True)
    memory.add(SystemMessage("s"), *_users(1, 2, 3))
    memory.set(_users(5, 6))
    store.delete_messages("chat")
    list(store.memory_ids())
    assert guard.commands_seen > before
    assert guard.take() == []


def test_the_guard_catches_what_mongodb_7_rejects(
    client: MongoClient[Any], collection_name: str, guard: Mongo7Guard
) -> None:
    collection = client[DATABASE][collection_name]
    collection.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 2}])
    guard.take()
    # The test server accepts these (it reports a newer version); MongoDB 7.0 does not.
    collection.update_one({}, {"$set": {"n": 0}}, sort={"n": -1})
    collection.replace_one({}, {"n": 0}, sort={"n": 1})
    try:
        collection.update_one({"_id": 1}, [{"$set": {"u": {"$toUUID": "123e4567-e89b-12d3-a456-426614174000"}}}])
    except PyMongoError:
        pass  # whether the server knows the operator does not matter: the command was sent
    # What the backend does when a test's store closes: the test fails, listing each violation.
    with pytest.raises(AssertionError, match=r"MongoDB 7\.0") as raised:
        guard.check()
    found = str(raised.value).splitlines()[1:]
    assert len(found) == 3
    assert sum("'sort'" in item for item in found) == 2
    assert any("$toUUID" in item for item in found)
    guard.check()  # reported once, then forgotten


@pytest.mark.parametrize(
    ("name", "command", "needle"),
    [
        ("bulkWrite", {"bulkWrite": 1, "ops": [], "nsInfo": []}, "before MongoDB 8.0"),
        (
            "update",
            {"update": "c", "updates": [{"q": {}, "u": {}}], "startTransaction": True, "autocommit": False},
            "transaction",
        ),
        ("commitTransaction", {"commitTransaction": 1}, "transaction"),
        ("aggregate", {"aggregate": "c", "pipeline": [{"$rankFusion": {}}]}, "$rankFusion"),
    ],
)
def test_the_guard_knows_commands_and_transactions(name: str, command: dict[str, Any], needle: str) -> None:
    found = violations_of(name, command)
    assert found
    assert any(needle in item for item in found)


def test_the_guard_lets_mongodb_7_commands_pass() -> None:
    command = {
        "update": "c",
        "updates": [
            {
                "q": {"_id": "$where", "version": 3},
                "u": {"$push": {"messages": {"$each": ["x"], "$slice": -3}}},
                "upsert": False,
            }
        ],
        "txnNumber": 4,
        "lsid": {},
    }
    assert violations_of("update", command) == []
    assert violations_of("findAndModify", {"findAndModify": "c", "query": {}, "sort": {"a": 1}}) == []


def test_a_document_written_by_other_means_is_rewritten_not_diffed(
    store: MongoChatMemoryStore, recorder: Recorder
) -> None:
    # No incarnation: nothing pins the array a diff would be computed against, so the first save
    # replaces the document; from then on turns are diffs again.
    store.collection.insert_one({"_id": "chat", "version": 3, "messages": [_record(m) for m in _users(1, 2)]})
    memory = MessageWindowChatMemory("chat", store=store, max_messages=2)
    recorder.take()
    memory.add(UserMessage("3"))
    assert "$literal" in _set_fields(recorder.take()[1][1])["messages"]  # the whole array
    memory.add(UserMessage("4"))
    assert "messages" in recorder.take()[1][1]["updates"][0]["u"]["$push"]  # a diff
    assert memory.messages() == _users(3, 4)


def test_a_window_past_the_16_mib_document_limit_is_a_store_error_that_changes_nothing(
    store: MongoChatMemoryStore,
) -> None:
    mebibyte = [UserMessage(f"{index}" + "x" * (1 << 20)) for index in range(17)]
    store.update_messages("chat", mebibyte[:9])
    snapshot = store.load("chat")
    with pytest.raises(StoreError, match="16 MiB"):
        store.save("chat", mebibyte, snapshot.version)  # a diff: refused by the store before sending
    with pytest.raises(StoreError, match="16 MiB"):
        store.update_messages("chat", mebibyte)
    assert store.load("chat") == snapshot


def test_the_same_ttl_index_under_another_name_is_accepted(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(ttl=30)
    store.collection.create_index("expires_at", name="made_by_an_operator", expireAfterSeconds=0)
    store.update_messages("a", _users(1))
    assert store.get_messages("a") == _users(1)
    names = {index["name"] for index in store.collection.list_indexes()}
    assert "made_by_an_operator" in names


def test_listing_streams_past_the_first_batch(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(ttl=60)
    live = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=60)
    gone = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
    store.collection.insert_many(
        [{"_id": f"m{index}", "version": 1, "messages": [], "expires_at": live} for index in range(250)]
        + [{"_id": f"x{index}", "version": 1, "messages": [], "expires_at": gone} for index in range(5)]
    )
    ids = store.memory_ids()
    first = next(ids)
    assert sorted([first, *ids]) == sorted(f"m{index}" for index in range(250))


def test_writers_with_their_own_stores_lose_nothing(make_store: Any) -> None:
    # Each store caches its own snapshots, as separate processes would: the version and incarnation
    # filters, not a shared cache, keep every diff honest.
    writers, adds = 4, 20
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        memory = MessageWindowChatMemory(
            "chat",
            store=make_store(),
            max_messages=writers * adds // 2,
            always_keep_system_message_first=True,
            max_attempts=100,
        )
        try:
            memory.add(SystemMessage("shared"))
            for index in range(adds):
                memory.add(UserMessage(f"{worker}:{index}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    messages = make_store().get_messages("chat")
    assert messages[0] == SystemMessage("shared")
    texts = [message.text for message in messages[1:] if isinstance(message, UserMessage)]
    assert len(texts) == writers * adds // 2 - 1
    # The window holds the newest messages, each writer's in its own order.
    for worker in range(writers):
        mine = [int(text.split(":")[1]) for text in texts if text.startswith(f"{worker}:")]
        assert mine == list(range(adds - len(mine), adds))  # a suffix: evicted oldest first, none lost
