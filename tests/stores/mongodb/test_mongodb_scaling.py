"""The MongoDB store past one server: every command on one memory is targeted by its shard key, and write_concern.

There is no sharded cluster here, so what sharding needs is checked on the commands themselves (pymongo's
command monitoring): each one the store sends for an operation on one memory filters by equality on
the memory's ``_id`` (the memories and lock collections, sharded ``{_id: "hashed"}``) or on its ``m``
(the history collection, sharded ``{m: 1}``), and each document it inserts carries it; a ``mongos``
sends such a command to one shard. Listing and batch reads are found untargeted: they span shards.

``write_concern="majority"`` (or a number of members, or a pymongo ``WriteConcern``) is carried by every
write; the test server is a single-node replica set, where a majority is that node.
"""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient, MongoClient, monitoring
from pymongo.write_concern import WriteConcern

from chatmemory import AiMessage, MessageWindowChatMemory, SystemMessage, UserMessage, aio
from chatmemory.aio.stores.mongodb import MongoChatMemoryStore as AsyncMongoChatMemoryStore
from chatmemory.core.errors import StoreError
from chatmemory.stores.mongodb import MongoChatMemoryStore
from support.backends.mongodb import DATABASE, mongodb_url

pytestmark = pytest.mark.mongodb

_WRITES = {"insert", "update", "delete", "findAndModify"}
_FILTERS = {"find": "filter", "findAndModify": "query", "count": "query", "distinct": "query"}
_SETUP = {"createIndexes", "listIndexes", "create", "drop", "dropIndexes"}


class Commands(monitoring.CommandListener):
    """Every command started while ``recording`` (the database's name and the command document)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.recording = False
        self._lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.recording:
            with self._lock:
                self.seen.append((event.command_name, dict(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            taken, self.seen = self.seen, []
        return taken


def _equals(value: Any, expected: str) -> bool:
    return value == expected or (isinstance(value, dict) and set(value) == {"$eq"} and value["$eq"] == expected)


def targeting_faults(name: str, command: dict[str, Any], collection: str, memory_id: str) -> list[str]:
    """Why ``command`` would not go to one shard: the memory's shard key missing from a filter or document.

    ``collection`` is the store's memories collection; ``<collection>_locks`` is keyed by ``_id`` too and
    ``<collection>_history`` by ``m``. Commands on other collections (``admin``'s ``hello``) touch no
    memory and pass; setup commands (indexes) are sent once per store, never per operation, and fail.
    """
    target = command.get(name)
    keys = {collection: "_id", f"{collection}_locks": "_id", f"{collection}_history": "m"}
    if not isinstance(target, str) or target not in keys:
        return []
    key = keys[target]
    where = f"{name} on {target}"
    if name in _SETUP:
        return [f"{where}: a setup command in an operation on one memory"]
    if name in _FILTERS:
        found = command.get(_FILTERS[name]) or {}
        return [] if _equals(found.get(key), memory_id) else [f"{where}: filter {found!r} has no {key} = the id"]
    if name in ("update", "delete"):
        statements = command.get("updates" if name == "update" else "deletes") or []
        return [
            f"{where}: q {each.get('q')!r} has no {key} = the id"
            for each in statements
            if not _equals((each.get("q") or {}).get(key), memory_id)
        ] or ([] if statements else [f"{where}: no statements"])
    if name == "insert":
        return [
            f"{where}: a document without {key} = the id"
            for document in command.get("documents") or []
            if document.get(key) != memory_id
        ]
    if name == "aggregate":
        pipeline = command.get("pipeline") or [{}]
        first = pipeline[0].get("$match") or {}
        return [] if _equals(first.get(key), memory_id) else [f"{where}: the pipeline does not start matching {key}"]
    return [f"{where}: a command this check does not know"]


@pytest.fixture(scope="module")
def url() -> str:
    return mongodb_url()


@pytest.fixture
def commands() -> Commands:
    return Commands()


@pytest.fixture
def client(url: str, commands: Commands) -> Iterator[MongoClient[Any]]:
    made: MongoClient[Any] = MongoClient(url, event_listeners=[commands], serverSelectionTimeoutMS=10_000)
    yield made
    made.close()


def _drop(client: MongoClient[Any], collection: str) -> None:
    for name in (collection, f"{collection}_history", f"{collection}_locks"):
        client[DATABASE].drop_collection(name)


def _turn(index: int) -> list[Any]:
    return [UserMessage(f"question {index}"), AiMessage(f"answer {index}")]


# ---------------------------------------------------------------------------------------------- option


@pytest.mark.parametrize("value", [True, 1.5, ["majority"], {"w": "majority"}])
def test_a_write_concern_of_another_type_is_refused(url: str, value: Any) -> None:
    with pytest.raises(TypeError, match="write_concern must be 'majority'"):
        MongoChatMemoryStore(url, write_concern=value)
    with pytest.raises(TypeError, match="write_concern must be 'majority'"):
        AsyncMongoChatMemoryStore(url, write_concern=value)


@pytest.mark.parametrize("value", ["", 0, -1, WriteConcern(w=0)], ids=["empty", "zero", "negative", "w0"])
def test_an_unacknowledged_or_empty_write_concern_is_refused(url: str, value: Any) -> None:
    with pytest.raises(ValueError, match="write_concern must"):
        MongoChatMemoryStore(url, write_concern=value)
    with pytest.raises(ValueError, match="write_concern must"):
        AsyncMongoChatMemoryStore(url, write_concern=value)


def test_the_store_names_its_write_concern(url: str) -> None:
    with MongoChatMemoryStore(url, write_concern="majority") as store:
        assert store.write_concern == WriteConcern(w="majority")
        assert "write_concern={'w': 'majority'}" in repr(store)
    concern = WriteConcern(w=1, j=True, wtimeout=5000)
    with MongoChatMemoryStore(url, write_concern=concern) as store:
        assert store.write_concern == concern
    with MongoChatMemoryStore(url) as store:
        assert store.write_concern == WriteConcern()  # the client's default
        assert "write_concern" not in repr(store)
    separator = "&" if "?" in url else "?"
    with MongoChatMemoryStore(f"{url}{separator}w=majority") as store:
        assert store.write_concern == WriteConcern(w="majority")  # the URL's, kept


@pytest.mark.parametrize("history", [False, True], ids=["plain", "history"])
def test_every_write_carries_majority_and_lands(client: MongoClient[Any], commands: Commands, history: bool) -> None:
    collection = f"scale_{uuid.uuid4().hex}"
    store = MongoChatMemoryStore(
        client, database=DATABASE, collection=collection, history=history, ttl=3600, write_concern="majority"
    )
    try:
        memory = MessageWindowChatMemory("m", store=store, max_messages=4, always_keep_system_message_first=True)
        commands.recording = True
        memory.add(SystemMessage("s"))
        for index in range(5):
            memory.add(*_turn(index))
        store.modify("m", lambda messages: [*messages, *_turn(9)])
        if history:
            store.trim_history(older_than=datetime.timedelta(days=1), memory_id="m")
        store.expire_at("m", None)
        store.delete_messages("m")
        writes = [(name, command) for name, command in commands.take() if name in _WRITES]
        assert {name for name, _ in writes} >= {"findAndModify", "update", "delete"}
        assert [name for name, command in writes if command.get("writeConcern") != {"w": "majority"}] == []
        assert store.load("m").messages == []
    finally:
        store.close()
        _drop(client, collection)


def test_without_the_option_writes_carry_the_clients_concern(client: MongoClient[Any], commands: Commands) -> None:
    collection = f"scale_{uuid.uuid4().hex}"
    store = MongoChatMemoryStore(client, database=DATABASE, collection=collection)
    try:
        commands.recording = True
        store.update_messages("m", _turn(0))
        store.delete_messages("m")
        writes = [command for name, command in commands.take() if name in _WRITES]
        assert writes
        assert [command["writeConcern"] for command in writes if "writeConcern" in command] == []
    finally:
        store.close()
        _drop(client, collection)


async def test_the_asyncio_store_writes_with_majority(url: str) -> None:
    commands = Commands()
    client: AsyncMongoClient[Any] = AsyncMongoClient(url, event_listeners=[commands])
    collection = f"scale_{uuid.uuid4().hex}"
    store = AsyncMongoChatMemoryStore(
        client, database=DATABASE, collection=collection, history=True, write_concern="majority"
    )
    try:
        assert store.write_concern == WriteConcern(w="majority")
        memory = aio.MessageWindowChatMemory("m", store=store, max_messages=3)
        commands.recording = True
        for index in range(4):
            await memory.add(*_turn(index))
        await store.modify("m", lambda messages: messages[-1:])
        await store.delete_messages("m")
        writes = [(name, command) for name, command in commands.take() if name in _WRITES]
        assert {name for name, _ in writes} >= {"findAndModify", "update", "delete"}
        assert [name for name, command in writes if command.get("writeConcern") != {"w": "majority"}] == []
    finally:
        await store.aclose()
        for name in (collection, f"{collection}_history", f"{collection}_locks"):
            await client[DATABASE].drop_collection(name)
        await client.close()


def test_writers_with_majority_keep_every_add(url: str) -> None:
    """4 threads x 10 adds, each thread its own store from the URL with write_concern='majority'."""
    collection = f"scale_{uuid.uuid4().hex}"
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        try:
            with MongoChatMemoryStore(url, database=DATABASE, collection=collection, write_concern="majority") as store:
                memory = MessageWindowChatMemory("shared", store=store, max_messages=1000)
                for index in range(10):
                    memory.add(UserMessage(f"{number}:{index}"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    with MongoClient(url) as client:
        try:
            assert errors == []
            with MongoChatMemoryStore(client, database=DATABASE, collection=collection) as store:
                texts = sorted(message.text for message in store.get_messages("shared"))  # type: ignore[union-attr]
            assert texts == sorted(f"{number}:{index}" for number in range(4) for index in range(10))
        finally:
            _drop(client, collection)


# ------------------------------------------------------------------------------------------ targeting


@pytest.mark.parametrize("history", [False, True], ids=["plain", "history"])
def test_every_command_on_one_memory_is_targeted_by_its_shard_key(
    client: MongoClient[Any], commands: Commands, history: bool
) -> None:
    collection = f"scale_{uuid.uuid4().hex}"
    store = MongoChatMemoryStore(client, database=DATABASE, collection=collection, history=history, ttl=3600)
    other = MongoChatMemoryStore(client, database=DATABASE, collection=collection, history=history, ttl=3600)
    memory_id = f"targeted 'ü' {uuid.uuid4().hex[:6]}"
    try:
        store.update_messages("warm", _turn(0))  # the indexes, created once per store, before recording
        other.update_messages("warm", _turn(1))
        store.modify("warm", lambda messages: messages)
        store.expire_at("warm", datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
        commands.recording = True
        steps: list[tuple[str, Any]] = [
            ("load, absent", lambda: store.load(memory_id)),
            ("read_raw, absent", lambda: store.read_raw(memory_id)),
            ("save creating", lambda: store.save(memory_id, [SystemMessage("s"), *_turn(0)], 0)),
            ("window turns", lambda: _window_turns(store, memory_id)),
            (
                "stale snapshot",
                lambda: (
                    other.update_messages(memory_id, _turn(5)),
                    store.modify(memory_id, lambda messages: [*messages, *_turn(6)]),
                ),
            ),
            ("modify", lambda: store.modify(memory_id, lambda messages: messages[-2:])),
            ("write_raw", lambda: store.write_raw(memory_id, store.read_raw(memory_id))),
            ("memory_times", lambda: store.memory_times(memory_id)),
            (
                "expire_at",
                lambda: store.expire_at(
                    memory_id, datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
                ),
            ),
            ("expire_at None", lambda: store.expire_at(memory_id, None)),
            ("delete", lambda: store.delete_messages(memory_id)),
            ("modify creating", lambda: store.modify(memory_id, lambda messages: [*messages, *_turn(7)])),
        ]
        if history:
            steps += [
                ("history page", lambda: store.history(memory_id, limit=2)),
                ("history reversed", lambda: store.history(memory_id, after=3, limit=2, reverse=True)),
                (
                    "trim one history",
                    lambda: store.trim_history(older_than=datetime.timedelta(days=1), memory_id=memory_id),
                ),
            ]
        faults: list[str] = []
        for label, step in steps:
            step()
            sent = commands.take()
            if not any(command.get(name) in (collection, f"{collection}_history") for name, command in sent):
                faults.append(f"{label}: sent nothing to the store's collections")
            for name, command in sent:
                faults.extend(f"{label}: {fault}" for fault in targeting_faults(name, command, collection, memory_id))
        assert faults == [], "\n".join(faults)
    finally:
        commands.recording = False
        other.close()
        store.close()
        _drop(client, collection)


def _window_turns(store: MongoChatMemoryStore, memory_id: str) -> None:
    memory = MessageWindowChatMemory(memory_id, store=store, max_messages=4, always_keep_system_message_first=True)
    for index in range(6):
        memory.add(*_turn(index))


def test_listing_and_batch_reads_span_shards(client: MongoClient[Any], commands: Commands) -> None:
    collection = f"scale_{uuid.uuid4().hex}"
    store = MongoChatMemoryStore(client, database=DATABASE, collection=collection)
    try:
        store.update_messages("a", _turn(0))
        for label, step in [
            ("memory_ids", lambda: list(store.memory_ids())),
            ("read_batch", lambda: store.read_batch(["a", "b"])),
        ]:
            commands.recording = True
            step()
            commands.recording = False
            sent = commands.take()
            assert any(targeting_faults(name, command, collection, "a") for name, command in sent), label
    finally:
        store.close()
        _drop(client, collection)


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("find", {"find": "c", "filter": {"_id": {"$in": ["m"]}}}),
        ("find", {"find": "c_history", "filter": {"h": 1}}),
        ("update", {"update": "c_locks", "updates": [{"q": {"token": b"t"}}]}),
        ("delete", {"delete": "c_history", "deletes": [{"q": {"m": "other"}}]}),
        ("insert", {"insert": "c_history", "documents": [{"m": "m"}, {"m": "other"}]}),
        ("createIndexes", {"createIndexes": "c"}),
        ("aggregate", {"aggregate": "c", "pipeline": [{"$sort": {"_id": 1}}]}),
    ],
)
def test_the_check_finds_untargeted_commands(name: str, command: dict[str, Any]) -> None:
    assert targeting_faults(name, command, "c", "m") != []


def test_the_check_passes_targeted_commands() -> None:
    assert targeting_faults("find", {"find": "c", "filter": {"_id": "m", "$expr": {}}}, "c", "m") == []
    assert targeting_faults("delete", {"delete": "c_history", "deletes": [{"q": {"m": {"$eq": "m"}}}]}, "c", "m") == []
    assert targeting_faults("hello", {"hello": 1}, "c", "m") == []


def test_a_write_concern_the_replica_set_cannot_meet_raises_store_error(client: MongoClient[Any]) -> None:
    """Two members asked of a single-node replica set: the write raises a StoreError naming the memory."""
    collection = f"scale_{uuid.uuid4().hex}"
    store = MongoChatMemoryStore(
        client, database=DATABASE, collection=collection, write_concern=WriteConcern(w=2, wtimeout=300)
    )
    try:
        with pytest.raises(StoreError, match="'m'"):
            store.update_messages("m", _turn(0))
    finally:
        store.close()
        _drop(client, collection)
