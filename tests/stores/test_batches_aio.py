"""Batch reads and creates of the asyncio Redis (a server and a cluster), MongoDB and SQL stores.

The expectations of ``test_read_batch.py`` and ``test_create_batch.py``, awaited: a batch read gives each
memory as the one-memory reads give it (and as the blocking store's batch read gives it), absent and
expired ones as ``None``, damage reported, never raised; a batch create leaves each memory as
``save(id, messages, 0)`` then ``expire_at`` would, and leaves a memory that exists alone. A store with
history creates one by one, a Redis store that waits for replicas too (each write acknowledged). Each
batch goes to the server in the commands the blocking store sends for it. The SQL store runs on SQLite
from a URL (its worker threads), on an aiosqlite ``AsyncEngine`` passed in, on PostgreSQL (psycopg's
async mode) and on MariaDB (asyncmy).
"""

from __future__ import annotations

import datetime
import importlib
import re
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeAlias

import pytest
from pymongo import MongoClient, monitoring
from sqlalchemy import Engine, event

from chatmemory import StoreError, UserMessage
from chatmemory.aio.stores.mongodb import MongoChatMemoryStore as AsyncMongoStore
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncRedisStore
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLStore
from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError
from chatmemory.serialization.native import dumps_message
from chatmemory.stored_memories import NewMemory
from chatmemory.stores.mongodb import MongoChatMemoryStore
from chatmemory.stores.redis import Redis, RedisChatMemoryStore, RedisCluster, ReplicationError
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.engine import engine_from_url
from support.backends.mongodb import DATABASE, open_async_backend
from support.backends.redis import cluster_url, drop_prefix, fresh_prefix, private_server, redis_url
from support.backends.sqlite import AsyncSQLBackend
from support.batches import close_to, window
from support.mongo7_guard import Mongo7Guard

pytestmark = pytest.mark.asyncio

UTC = datetime.timezone.utc
HOUR = datetime.timedelta(hours=1)

AsyncStore: TypeAlias = "AsyncRedisStore | AsyncMongoStore | AsyncSQLStore"
BlockingStore: TypeAlias = "RedisChatMemoryStore | MongoChatMemoryStore | SQLChatMemoryStore"
Client: TypeAlias = "Redis | RedisCluster | MongoClient[Any] | Engine"
Make = Callable[..., Awaitable[AsyncStore]]
Blocking = Callable[[], BlockingStore]

REDIS_KINDS = [
    pytest.param("server", marks=pytest.mark.redis),
    pytest.param("cluster", marks=pytest.mark.redis_cluster),
]
MONGODB_KINDS = [pytest.param("mongodb", marks=pytest.mark.mongodb)]
# The asyncio SQL store from a SQLite URL (sqlite3 on its worker threads), on an aiosqlite AsyncEngine
# passed in, on PostgreSQL (psycopg async) and on MariaDB (asyncmy): each kind a module of support.backends.
SQL_KINDS = [
    pytest.param("sqlite", marks=pytest.mark.sqlite),
    pytest.param("sqlite_aiosqlite", marks=pytest.mark.sqlite),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]
SQL_KIND_NAMES = frozenset(str(param.values[0]) for param in SQL_KINDS)


def batch_steps(at: datetime.datetime) -> list[Callable[[Any], Any]]:
    """What a store is asked, in order, to see the commands its batches go in (``b`` to expire ``at``)."""
    return [
        lambda store: store.update_messages("there", window(2)),
        lambda store: store.create_batch([NewMemory("a", window(1)), NewMemory("b", window(2), True, at)]),
        lambda store: store.create_batch([NewMemory("there", window(1)), NewMemory("c", window(3))]),
        lambda store: store.read_batch(["a", "b", "c", "there", "absent"]),
    ]


class Sent(monitoring.CommandListener):
    """The names of the commands a MongoDB client sends to the memories (not handshakes or health checks)."""

    WATCHED = frozenset({"find", "findAndModify", "update", "delete", "insert", "createIndexes", "aggregate"})

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in self.WATCHED:
            with self._lock:
                self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> list[str]:
        with self._lock:
            taken, self.names = self.names, []
        return taken


@pytest.fixture(params=[*REDIS_KINDS, *MONGODB_KINDS, *SQL_KINDS])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def sql_backends() -> Iterator[dict[str, AsyncSQLBackend]]:
    """The SQL backends the module's tests opened (a SQLite file each, or a server), closed at its end."""
    opened: dict[str, AsyncSQLBackend] = {}
    yield opened
    for backend in opened.values():
        backend.close()


@pytest.fixture
def sql_backend(kind: str, sql_backends: dict[str, AsyncSQLBackend]) -> AsyncSQLBackend | None:
    """The SQL backend of ``kind`` (``None`` for the other stores)."""
    if kind not in SQL_KIND_NAMES:
        return None
    if kind not in sql_backends:
        sql_backends[kind] = importlib.import_module(f"support.backends.{kind}").open_async_backend()
    return sql_backends[kind]


@pytest.fixture
def url(kind: str, sql_backend: AsyncSQLBackend | None) -> str:
    """The URL the asyncio stores are built from (for MongoDB, with the test backend's client options)."""
    if sql_backend is not None:
        return sql_backend.url
    if kind == "mongodb":
        return open_async_backend().url
    return cluster_url() if kind == "cluster" else redis_url()


@pytest.fixture
def sync_client(kind: str, url: str) -> Iterator[Client]:
    """A blocking client of the same server: for SQL, the engine a blocking store would make from the URL."""
    made: Client
    if kind in SQL_KIND_NAMES:
        made = engine_from_url(url.replace("sqlite+aiosqlite://", "sqlite://", 1), {})  # the file through sqlite3
        yield made
        made.dispose()
        return
    if kind == "mongodb":
        made = MongoClient(url)
    elif kind == "cluster":
        made = RedisCluster.from_url(url.replace("+cluster", "", 1))
    else:
        made = Redis.from_url(url)
    yield made
    made.close()


def fresh_place(kind: str) -> str:
    """Where a store keeps memories no other test sees: a Redis key prefix, a MongoDB collection, SQL tables."""
    if kind in SQL_KIND_NAMES:
        return f"b{uuid.uuid4().hex[:12]}_"
    return f"memories_{uuid.uuid4().hex}" if kind == "mongodb" else fresh_prefix()


@pytest.fixture
def guard() -> Mongo7Guard:
    """Sees every command of the asyncio MongoDB stores a test builds: none MongoDB 7.0 would reject."""
    return Mongo7Guard()


@pytest.fixture
def sent() -> Sent:
    """The commands the asyncio MongoDB stores a test builds send."""
    return Sent()


@pytest.fixture
async def make(
    kind: str,
    url: str,
    sync_client: Client,
    sql_backend: AsyncSQLBackend | None,
    guard: Mongo7Guard,
    sent: Sent,
) -> AsyncIterator[Make]:
    """Builds asyncio stores from the URL (SQL: as the backend does), each in a fresh place unless given one;
    closes and drops them."""
    made: list[AsyncStore] = []
    places: list[str] = []

    async def build(place: str | None = None, **options: Any) -> AsyncStore:
        places.append(place or fresh_place(kind))
        store: AsyncStore
        if sql_backend is not None:
            built = await sql_backend.make_store(table_prefix=places[-1], **options)
            assert isinstance(built, AsyncSQLStore)
            store = built
        elif kind == "mongodb":
            listeners = {"event_listeners": [guard, sent]}
            store = AsyncMongoStore(url, database=DATABASE, collection=places[-1], client_options=listeners, **options)
        else:
            store = AsyncRedisStore(url, key_prefix=places[-1], **options)
        made.append(store)
        return store

    yield build
    for store in made:
        await store.aclose()
        if isinstance(store, AsyncSQLStore):
            await store.engine.dispose()  # an engine passed in stays open when the store closes
    for place in places:
        if isinstance(sync_client, Engine):
            with SQLChatMemoryStore(sync_client, table_prefix=place) as dropping:
                dropping.drop_schema()
        elif isinstance(sync_client, MongoClient):
            database = sync_client[DATABASE]
            for name in database.list_collection_names():
                if name.startswith(place):
                    database.drop_collection(name)
        else:
            drop_prefix(sync_client, place)
    guard.check()


@pytest.fixture
def place(kind: str) -> str:
    """The place of the ``store`` fixture's store, for a blocking store of the same memories."""
    return fresh_place(kind)


@pytest.fixture
async def store(make: Make, place: str) -> AsyncStore:
    return await make(place)


@pytest.fixture
def blocking(sync_client: Client, place: str) -> Iterator[Blocking]:
    """Builds the blocking store of the ``store`` fixture's memories (closed after the test)."""
    made: list[BlockingStore] = []

    def build() -> BlockingStore:
        store: BlockingStore
        if isinstance(sync_client, Engine):
            store = SQLChatMemoryStore(sync_client, table_prefix=place)
        elif isinstance(sync_client, MongoClient):
            store = MongoChatMemoryStore(sync_client, database=DATABASE, collection=place)
        else:
            store = RedisChatMemoryStore(sync_client, key_prefix=place)
        made.append(store)
        return store

    yield build
    for store in made:
        store.close()


async def damage(store: AsyncStore, sync_client: Client, memory_id: str) -> None:
    """Break ``memory_id`` beyond what a read accepts (as ``test_read_batch.py`` does)."""
    if isinstance(store, AsyncMongoStore):
        await store.collection.update_one({"_id": memory_id}, {"$set": {"messages": 3}})
    elif isinstance(store, AsyncSQLStore):  # its message rows without their head row
        assert isinstance(sync_client, Engine)
        memories = store._tables.memories
        with SQLChatMemoryStore(sync_client, table_prefix=store.table_prefix) as breaking:
            with breaking._transaction() as connection:
                connection.execute(memories.delete().where(memories.c.memory_id == memory_id))
    else:
        assert isinstance(sync_client, (Redis, RedisCluster))
        sync_client.delete(store._key_space.keys_of(memory_id).meta)


# ------------------------------------------------------------------------------------------ reads


async def test_each_memory_as_the_one_memory_reads_give_it(store: AsyncStore, blocking: Blocking) -> None:
    now = datetime.datetime.now(UTC)
    ids = [f"m-{n:02d}" for n in range(12)]
    for n, memory_id in enumerate(ids):
        await store.update_messages(memory_id, window(n))
        if n % 3 == 0:
            await store.expire_at(memory_id, now + HOUR)
    await store.update_messages(ids[5], window(2))  # a window that shrank: only its live rows are read
    await store.update_messages("gone", window(1))
    await store.expire_at("gone", now - HOUR)
    asked = ["absent", *ids, "gone", ids[0]]
    found = await store.read_batch(asked)
    assert len(found) == len(asked)
    assert found[0] is None and found[-2] is None
    for memory_id, stored in zip([*asked[1:-2], ids[0]], [*found[1:-2], found[-1]], strict=True):
        assert stored is not None and stored.memory_id == memory_id and stored.damage is None
        assert stored.records == await store.read_raw(memory_id)
        assert stored.version == (await store.load(memory_id)).version
        assert stored.times == await store.memory_times(memory_id)
    assert found[1 + 3] is not None and found[1 + 3].times is not None
    assert found[1 + 3].times.expires_at is not None
    assert found[1 + 1] is not None and found[1 + 1].times is not None
    assert found[1 + 1].times.expires_at is None
    # The blocking store of the same memories reads the same batch.
    assert blocking().read_batch(asked) == found
    assert await store.read_batch([]) == []


async def test_records_that_do_not_decode_are_read_as_stored(store: AsyncStore) -> None:
    records = [dumps_message(UserMessage("fine")), b"{not json"]
    await store.write_raw("broken", records)
    (stored,) = await store.read_batch(["broken"])
    assert stored is not None and stored.records == records == await store.read_raw("broken")
    assert stored.damage is None


async def test_a_damaged_memory_is_reported_with_its_damage_never_left_out(
    store: AsyncStore, sync_client: Client, blocking: Blocking
) -> None:
    await store.update_messages("fine", window(2))
    await store.update_messages("broken", window(3))
    await damage(store, sync_client, "broken")
    with pytest.raises(CorruptedMemoryError):
        await store.load("broken")
    fine, broken = await store.read_batch(["fine", "broken"])
    assert fine is not None and fine.damage is None and len(fine.records) == 3
    assert broken is not None and broken.damage
    if not isinstance(store, AsyncMongoStore):  # a MongoDB document whose messages are no array has no records
        assert broken.records == await store.read_raw("broken")
    assert blocking().read_batch(["fine", "broken"]) == [fine, broken]


@pytest.mark.parametrize("kind", REDIS_KINDS, indirect=True)
async def test_a_key_of_another_type_fails_the_batch_as_it_fails_the_blocking_one(
    store: AsyncRedisStore, sync_client: Redis | RedisCluster, blocking: Blocking
) -> None:
    await store.update_messages("fine", window(2))
    await store.update_messages("wrong", window(2))
    sync_client.delete(store._key_space.keys_of("wrong").meta)
    sync_client.rpush(store._key_space.keys_of("wrong").meta, b"not a hash")
    with pytest.raises(CorruptedMemoryError) as sync_raised:
        blocking().read_batch(["fine", "wrong"])
    with pytest.raises(CorruptedMemoryError) as raised:
        await store.read_batch(["fine", "wrong"])
    assert raised.value.memory_id == sync_raised.value.memory_id == "wrong"
    assert str(raised.value) == str(sync_raised.value)
    assert type(raised.value.__cause__) is type(sync_raised.value.__cause__)


async def test_a_window_with_a_pinned_run_is_read_whole(make: Make) -> None:
    """A store with history keeps evicted rows; a first run kept before them (pinned) is read with the rest."""
    store = await make(history=True)
    system, *turns = window(6)
    await store.update_messages("pinned", [system, *turns[:3]])
    await store.update_messages("pinned", [system, *turns[2:]])  # evicts right after the kept system message
    await store.update_messages("plain", window(2))
    pinned, plain = await store.read_batch(["pinned", "plain"])
    assert pinned is not None and pinned.records == await store.read_raw("pinned")
    assert (await store.load("pinned")).messages == [system, *turns[2:]]
    assert plain is not None and plain.records == await store.read_raw("plain")


async def test_a_closed_store_refuses_batches(make: Make) -> None:
    store = await make()
    await store.aclose()
    with pytest.raises(StoreError):
        await store.read_batch(["a"])
    with pytest.raises(StoreError):
        await store.create_batch([NewMemory("a", window(1))])


# ---------------------------------------------------------------------------------------- creates


@pytest.mark.parametrize("options", [{}, {"ttl": 3600}, {"history": True}], ids=["plain", "ttl", "history"])
async def test_a_batch_creates_what_one_by_one_saves_would(make: Make, options: dict[str, Any]) -> None:
    batched, saved = await make(**options), await make(**options)
    at = (datetime.datetime.now(UTC) + HOUR).replace(microsecond=0)
    memories = [
        NewMemory(f"m-{n:02d}", window(n), sets_expiry=n % 3 != 0, expires_at=at if n % 3 == 1 else None)
        for n in range(9)
    ]
    versions = await batched.create_batch(memories)
    for memory in memories:
        await saved.save(memory.memory_id, memory.messages, 0)
        if memory.sets_expiry:
            await saved.expire_at(memory.memory_id, memory.expires_at)
    assert len(versions) == len(memories)
    for memory, version in zip(memories, versions, strict=True):
        assert version is not None and version > 0
        snapshot = await batched.load(memory.memory_id)
        assert snapshot.version == version
        assert snapshot.messages == await saved.get_messages(memory.memory_id) == list(memory.messages)
        assert await batched.read_raw(memory.memory_id) == await saved.read_raw(memory.memory_id)
        times, expected = await batched.memory_times(memory.memory_id), await saved.memory_times(memory.memory_id)
        assert times is not None and expected is not None
        assert close_to(times.expires_at, expected.expires_at), memory
        if memory.sets_expiry:
            assert close_to(times.expires_at, memory.expires_at)
    if options.get("history"):
        page = await batched.history("m-04")
        assert [entry.message for entry in page.entries] == window(4)
    # A created memory goes on like any other: a conditional write at its version.
    version = versions[4]
    assert version is not None and await batched.save("m-04", window(5), version) > version
    assert await batched.create_batch([]) == []


async def test_memories_that_exist_are_not_touched(store: AsyncStore) -> None:
    await store.update_messages("there", window(2))
    await store.expire_at("there", None)
    before = await store.load("there")
    at = datetime.datetime.now(UTC) + HOUR
    versions = await store.create_batch(
        [NewMemory("new-1", window(1)), NewMemory("there", window(7), True, at), NewMemory("new-2", window(3))]
    )
    assert versions[1] is None and versions[0] is not None and versions[2] is not None
    after = await store.load("there")
    assert (after.messages, after.version) == (before.messages, before.version)
    times = await store.memory_times("there")
    assert times is not None and times.expires_at is None
    assert await store.get_messages("new-2") == window(3)


async def test_an_expired_memory_is_created_again(store: AsyncStore) -> None:
    await store.update_messages("old", window(4))
    await store.expire_at("old", datetime.datetime.now(UTC) - HOUR)
    (version,) = await store.create_batch([NewMemory("old", window(1))])
    assert version is not None
    assert (await store.load("old")).messages == window(1)


async def test_a_second_copy_of_an_id_in_the_batch_is_none(store: AsyncStore) -> None:
    versions = await store.create_batch(
        [NewMemory("twice", window(1)), NewMemory("once", window(2)), NewMemory("twice", window(5))]
    )
    assert versions[0] is not None and versions[1] is not None and versions[2] is None
    assert await store.get_messages("twice") == window(1)
    with pytest.raises(ConcurrentUpdateError):
        await store.save("twice", window(3), 0)


async def test_a_batch_run_again_creates_only_what_is_missing(store: AsyncStore) -> None:
    memories = [NewMemory(f"r-{n}", window(n)) for n in range(6)]
    first = await store.create_batch(memories[:3])
    again = await store.create_batch(memories)
    assert all(version is not None for version in first)
    assert again[:3] == [None, None, None] and all(version is not None for version in again[3:])
    for memory, version in zip(memories, [*first, *again[3:]], strict=True):
        assert (await store.load(memory.memory_id)).version == version


@pytest.mark.parametrize("kind", MONGODB_KINDS, indirect=True)
async def test_a_batch_goes_in_the_commands_the_blocking_store_sends(make: Make, url: str, sent: Sent) -> None:
    """A batch read is one ``find``, a batch create one unordered ``insert_many`` (and one ``find`` of the
    refused ids), on MongoDB as from the blocking store."""
    at = datetime.datetime.now(UTC) + HOUR
    steps = batch_steps(at)
    store = await make()
    awaited = [(await step(store), sent.take()) for step in steps]
    blocking_sent = Sent()
    collection = fresh_place("mongodb")
    with MongoClient(url, event_listeners=[blocking_sent]) as client:
        try:
            blocking = MongoChatMemoryStore(client, database=DATABASE, collection=collection)
            blocked = [(step(blocking), blocking_sent.take()) for step in steps]
        finally:
            for name in client[DATABASE].list_collection_names():
                if name.startswith(collection):
                    client[DATABASE].drop_collection(name)
    assert [names for _, names in awaited] == [names for _, names in blocked]
    created = [[version is None for version in value] for value, _ in awaited[1:3]]
    assert (
        created
        == [[version is None for version in value] for value, _ in blocked[1:3]]
        == [[False, False], [True, False]]
    )
    assert awaited[1][1].count("insert") == awaited[2][1].count("insert") == 1
    assert awaited[3][1] == ["find"]
    read = awaited[3][0]
    assert [stored is None for stored in read] == [False, False, False, False, True]
    assert read[1].times is not None and close_to(read[1].times.expires_at, at)


@pytest.mark.parametrize("kind", [pytest.param("server", marks=pytest.mark.redis)], indirect=True)
async def test_writes_that_wait_for_replicas_go_one_by_one(make: Make, sync_client: Redis | RedisCluster) -> None:
    """Each create is an acknowledged write: on a server without replicas the first one raises, and stays."""
    if sync_client.info("replication").get("connected_slaves"):
        pytest.skip("the server has replicas")
    store = await make(replicas_to_ack=1, replicas_timeout=0.05)
    with pytest.raises(ReplicationError) as raised:
        await store.create_batch([NewMemory("first", window(1)), NewMemory("second", window(2))])
    assert raised.value.memory_id == "first" and raised.value.acked == 0
    assert await store.get_messages("first") == window(1)
    assert await store.read_batch(["second"]) == [None]


@pytest.mark.redis
async def test_scripts_the_server_forgot_are_sent_again_in_full() -> None:
    """After ``SCRIPT FLUSH`` each command of a batch answered ``NOSCRIPT`` goes again as ``EVAL``."""
    with private_server() as client:
        url = "unix://" + client.connection_pool.connection_kwargs["path"]
        async with AsyncRedisStore(url) as store:
            await store.update_messages("there", window(2))
            client.script_flush()
            versions = await store.create_batch([NewMemory("there", window(1)), NewMemory("new", window(3), True)])
            assert versions[0] is None and versions[1] is not None
            client.script_flush()
            there, new = await store.read_batch(["there", "new"])
            assert there is not None and there.records == [dumps_message(m) for m in window(2)]
            assert new is not None and new.version == versions[1] and new.times is not None
            assert new.times.expires_at is None


class Statements:
    """The statements an engine sends to the tables of one prefix, the prefix taken out (and whether many).

    Named placeholders read as positional ones: asyncmy's are ``%s`` where PyMySQL's are ``%(name)s``.
    """

    def __init__(self, engine: Engine, prefix: str) -> None:
        self._engine = engine
        self._prefix = prefix
        self.sent: list[tuple[str, bool]] = []  # by one thread at a time: the stores' calls are awaited in turn
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if self._prefix in statement:
            plain = re.sub(r"%\([^)]*\)s", "%s", statement.replace(self._prefix, "<prefix>"))
            self.sent.append((plain, executemany))

    def take(self) -> list[tuple[str, bool]]:
        taken, self.sent = self.sent, []
        return taken

    def remove(self) -> None:
        event.remove(self._engine, "before_cursor_execute", self._seen)


@pytest.mark.parametrize("kind", SQL_KINDS, indirect=True)
async def test_a_batch_goes_in_the_statements_the_blocking_store_sends(
    make: Make, kind: str, sync_client: Engine
) -> None:
    """A batch read is one ``SELECT`` of the head rows and their rows, a batch create one transaction
    of the lookups and one ``executemany`` each of head and message rows: from the asyncio store as from
    the blocking one, on each driver."""
    at = datetime.datetime.now(UTC) + HOUR
    steps = batch_steps(at)
    store = await make()
    assert isinstance(store, AsyncSQLStore)
    await store.load("warm")  # the schema checked before the statements are counted
    statements = Statements(store._thread_engine or store.engine.sync_engine, store.table_prefix)
    try:
        awaited = [(await step(store), statements.take()) for step in steps]
    finally:
        statements.remove()
    place = fresh_place(kind)
    await make(place)  # its tables
    with SQLChatMemoryStore(sync_client, table_prefix=place) as blocking:
        blocking.load("warm")
        blocking_statements = Statements(sync_client, place)
        try:
            blocked = [(step(blocking), blocking_statements.take()) for step in steps]
        finally:
            blocking_statements.remove()
    assert [sent for _, sent in awaited] == [sent for _, sent in blocked]
    created = [[version is None for version in value] for value, _ in awaited[1:3]]
    assert created == [[version is None for version in value] for value, _ in blocked[1:3]]
    assert created == [[False, False], [True, False]]  # versions are the database's clock: they differ
    assert sum(many for _, many in awaited[1][1]) == 2  # the head rows and the message rows, each in one
    assert len(awaited[3][1]) == 2  # heads with their rows (one state each), and the stray rows of the absent id
    read = awaited[3][0]
    assert [stored is None for stored in read] == [False, False, False, False, True]
    assert read[1].times is not None and close_to(read[1].times.expires_at, at)


@pytest.mark.parametrize("kind", SQL_KINDS, indirect=True)
async def test_rows_without_their_head_row_are_left_as_the_blocking_store_leaves_them(
    store: AsyncSQLStore, sync_client: Engine, blocking: Blocking
) -> None:
    """Stray rows send their id through ``save`` one by one, which refuses it: ``None``, nothing written."""
    await store.update_messages("strays", window(3))
    await damage(store, sync_client, "strays")
    rows = await store.read_raw("strays")
    versions = await store.create_batch([NewMemory("strays", window(1)), NewMemory("new", window(2))])
    assert versions[0] is None and versions[1] is not None
    assert await store.read_raw("strays") == rows
    strays, new = await store.read_batch(["strays", "new"])
    assert strays is not None and strays.damage and strays.records == rows
    assert new is not None and new.version == versions[1]
    assert blocking().create_batch([NewMemory("strays", window(1))]) == [None]
    assert blocking().read_batch(["strays", "new"]) == [strays, new]
