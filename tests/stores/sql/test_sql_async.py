"""The asyncio SQL store: the sync store's behaviour, shared layout, cancellation safety, concurrency."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import Engine, text
from sqlalchemy.util import greenlet_spawn

from chatmemory import ConcurrentUpdateError, CorruptedMemoryError, StoreError, UserMessage
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLStore
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.engine import in_transaction
from support.backends.sqlite import SQLBackend, counted_rollbacks

pytestmark = pytest.mark.asyncio


@pytest.fixture
def sync_store(sql_backend: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = sql_backend.make_store()
    yield made
    sql_backend.close_store(made)


@pytest_asyncio.fixture
async def store(sql_backend: SQLBackend, sync_store: SQLChatMemoryStore) -> AsyncIterator[AsyncSQLStore]:
    async with AsyncSQLStore(sql_backend.url, table_prefix=sync_store.table_prefix) as made:
        yield made


def operations_engine(store: AsyncSQLStore) -> Engine:
    """The sync engine whose pool the store's operations take connections from.

    SQLite from a URL: the ``sqlite3`` engine of its worker threads; otherwise the ``AsyncEngine``'s own.
    """
    return store._thread_engine or store.engine.sync_engine


def checked_out(store: AsyncSQLStore) -> int:
    """Connections out of the store's pools (the operations' and, when it differs, the ``AsyncEngine``'s),
    but for the one the store keeps for its next operation: those no call holds are leaked."""
    pools = {id(engine.pool): engine.pool for engine in (operations_engine(store), store.engine.sync_engine)}
    out = sum(int(pool.checkedout()) for pool in pools.values())  # type: ignore[attr-defined]
    driver = store._executor
    return out - len(driver._sync._kept)


def texts(*words: str) -> list[ChatMessage]:
    return [UserMessage(word) for word in words]


async def test_the_url_of_the_sync_store_maps_to_async_drivers(store: AsyncSQLStore) -> None:
    assert store.engine.driver in ("psycopg", "aiosqlite", "asyncmy")
    assert store.required_schema_revision == await store.schema_revision()


async def test_round_trip_versions_and_conflicts(store: AsyncSQLStore) -> None:
    assert await store.get_messages("m") == []
    assert (await store.load("m")).version == 0
    version = await store.save("m", (message for message in texts("a", "b")), 0)
    assert await store.get_messages("m") == texts("a", "b")
    with pytest.raises(ConcurrentUpdateError):
        await store.save("m", texts("x"), version - 1)
    newer = await store.save("m", [*texts("b"), *texts("c")], version)
    assert newer > version
    await store.update_messages("m", texts("d"))
    assert await store.load("m") == await store.load("m")
    assert [memory_id async for memory_id in store.memory_ids()] == ["m"]
    assert [memory_id async for memory_id in store.memory_ids(order="newest")] == ["m"]
    await store.delete_messages("m")
    assert await store.get_messages("m") == []


async def test_raw_records_and_corruption(store: AsyncSQLStore) -> None:
    await store.write_raw("bad", [b"\xff"])
    assert await store.read_raw("bad") == [b"\xff"]
    with pytest.raises(CorruptedMemoryError):
        await store.get_messages("bad")
    await store.update_messages("bad", texts("fixed"))
    assert await store.get_messages("bad") == texts("fixed")


async def test_sync_and_async_stores_share_the_layout_both_ways(
    store: AsyncSQLStore, sync_store: SQLChatMemoryStore
) -> None:
    sync_store.update_messages("shared", texts("from sync"))
    snapshot = await store.load("shared")
    assert snapshot.messages == texts("from sync")
    version = await store.save("shared", [*snapshot.messages, *texts("from async")], snapshot.version)
    assert sync_store.load("shared").messages == texts("from sync", "from async")
    assert sync_store.load("shared").version == version
    sync_store.save("shared", texts("from async", "sync again"), version)
    assert await store.get_messages("shared") == texts("from async", "sync again")


async def _append(store: AsyncSQLStore, memory_id: str, message: ChatMessage) -> None:
    while True:
        snapshot = await store.load(memory_id)
        try:
            await store.save(memory_id, [*snapshot.messages, message], snapshot.version)
            return
        except ConcurrentUpdateError:
            await asyncio.sleep(random.uniform(0, 0.003))


def _append_sync(store: SQLChatMemoryStore, memory_id: str, message: ChatMessage) -> None:
    import time

    while True:
        snapshot = store.load(memory_id)
        try:
            store.save(memory_id, [*snapshot.messages, message], snapshot.version)
            return
        except ConcurrentUpdateError:
            time.sleep(random.uniform(0, 0.003))


async def test_concurrent_sync_and_async_writers_lose_nothing(
    store: AsyncSQLStore, sync_store: SQLChatMemoryStore
) -> None:
    sync_messages = [UserMessage(f"sync {index}") for index in range(15)]
    async_messages = [UserMessage(f"async {task} {index}") for task in range(4) for index in range(8)]

    def sync_writer() -> None:
        for message in sync_messages:
            _append_sync(sync_store, "both", message)

    async def async_writer(task: int) -> None:
        for index in range(8):
            await _append(store, "both", async_messages[task * 8 + index])

    thread = threading.Thread(target=sync_writer)
    thread.start()
    await asyncio.gather(*(async_writer(task) for task in range(4)))
    await asyncio.to_thread(thread.join)
    stored = await store.get_messages("both")
    assert sorted(map(str, stored)) == sorted(map(str, sync_messages + async_messages))
    assert sync_store.get_messages("both") == stored


async def test_a_cancelled_write_leaves_the_old_or_the_new_list_and_frees_its_connection(
    store: AsyncSQLStore,
) -> None:
    old = texts("old 0", "old 1")
    await store.update_messages("c", old)
    outcomes = set()
    earlier: list[list[ChatMessage]] = []  # the lists the steps before tried to write
    for step in range(40):
        current = await store.load("c")
        new = [*current.messages[1:], UserMessage(f"new {step}")]
        # Cancel after a growing number of loop iterations (each await the write makes is one), and
        # every third time after a real delay, so cancellation lands inside driver I/O too.
        task = asyncio.create_task(store.save("c", new, current.version))
        if step % 3 == 2:
            await asyncio.sleep(random.uniform(0, 0.004))
        else:
            for _ in range(step):
                await asyncio.sleep(0)
        task.cancel()
        conflicted = False
        try:
            await task
            outcomes.add("finished")
        except asyncio.CancelledError:
            outcomes.add("cancelled")
        except ConcurrentUpdateError:
            conflicted = True
        assert checked_out(store) == 0
        after = await store.get_messages("c")
        # A write cancelled with its COMMIT on the way is decided by the server, which may apply it a
        # moment after the cancellation came back (closing the connection does not stop a COMMIT it has
        # received): then a later step finds that earlier list, whole; and if it landed after this step's
        # load, this step's save found the memory moved on, refused, and wrote nothing.
        if conflicted:
            assert after in earlier, (step, after)
        else:
            assert after in (current.messages, new) or after in earlier, (step, after)
        earlier.append(new)
    assert "cancelled" in outcomes


async def test_asyncio_timeout_leaves_a_whole_list(store: AsyncSQLStore) -> None:
    await store.update_messages("t", texts("kept"))
    for budget in (0.0005, 0.001, 0.002, 0.005):
        current = await store.load("t")
        new = [*current.messages, UserMessage(str(budget))]
        try:
            async with asyncio.timeout(budget):
                await store.save("t", new, current.version)
        except TimeoutError:
            pass
        assert checked_out(store) == 0
        assert await store.get_messages("t") in (current.messages, new)
    await _append(store, "t", UserMessage("after"))
    assert (await store.get_messages("t"))[-1] == UserMessage("after")


async def test_many_tasks_on_one_memory_lose_nothing(store: AsyncSQLStore) -> None:
    messages = [UserMessage(f"task {task} add {index}") for task in range(20) for index in range(5)]

    async def writer(task: int) -> None:
        for index in range(5):
            await _append(store, "many", messages[task * 5 + index])

    await asyncio.gather(*(writer(task) for task in range(20)))
    assert sorted(map(str, await store.get_messages("many"))) == sorted(map(str, messages))


async def test_a_closed_store_refuses_calls(sql_backend: SQLBackend, sync_store: SQLChatMemoryStore) -> None:
    store = AsyncSQLStore(sql_backend.url, table_prefix=sync_store.table_prefix)
    await store.update_messages("x", texts("a"))
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.get_messages("x")


async def test_bad_arguments_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="postgresql"):
        AsyncSQLStore("postgres@localhost/db")
    with pytest.raises(ValueError, match="RedisChatMemoryStore"):
        AsyncSQLStore("redis://localhost:6379/0")
    with pytest.raises(TypeError, match="sync Engine"):
        AsyncSQLStore(object())  # type: ignore[arg-type]


async def test_modify_queues_tasks_on_the_row_lock(store: AsyncSQLStore, sync_store: SQLChatMemoryStore) -> None:
    assert await store.modify("queued", lambda messages: None) == 0
    messages = [UserMessage(f"task {task} add {index}") for task in range(20) for index in range(5)]

    async def writer(task: int) -> None:
        for index in range(5):
            message = messages[task * 5 + index]
            await store.modify("queued", lambda current, message=message: [*current, message])

    thread = threading.Thread(
        target=lambda: [
            sync_store.modify("queued", lambda current, i=i: [*current, UserMessage(f"sync {i}")]) for i in range(10)
        ]
    )
    thread.start()
    await asyncio.gather(*(writer(task) for task in range(20)))
    await asyncio.to_thread(thread.join)
    stored = sorted(map(str, await store.get_messages("queued")))
    assert stored == sorted(map(str, [*messages, *(UserMessage(f"sync {i}") for i in range(10))]))
    assert checked_out(store) == 0


async def test_mariadb_connections_go_back_to_the_pool_without_rollback_unless_a_transaction_is_open(
    store: AsyncSQLStore,
) -> None:
    if store.engine.dialect.name not in ("mysql", "mariadb"):
        pytest.skip("asyncmy sends ROLLBACK on every rollback(); the other drivers skip it themselves")

    async def counters_of(driver_connection: Any) -> dict[str, int]:
        async with driver_connection.cursor() as cursor:
            await cursor.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Com_select', 'Com_rollback')")
            return {name: int(value) for name, value in await cursor.fetchall()}

    async def counters() -> dict[str, int]:
        # The connection the store's operations use: the one it keeps between them.
        kept = store._executor._sync
        pooled = kept.checkout()
        try:
            return await counters_of(pooled.dbapi_connection.driver_connection)  # type: ignore[union-attr]
        finally:
            assert kept.keep(pooled)

    await store.update_messages("m", texts("a", "b"))
    version = (await store.load("m")).version
    before = await counters()
    for _ in range(20):
        await store.get_messages("m")
    after = await counters()
    assert after["Com_select"] - before["Com_select"] == 20
    assert after["Com_rollback"] == before["Com_rollback"]

    async with store.engine.connect() as connection:  # handed back inside a transaction: rolled back
        handed_back = (await connection.get_raw_connection()).driver_connection
        rollbacks = (await counters_of(handed_back))["Com_rollback"]
        await connection.exec_driver_sql("BEGIN")
        await connection.exec_driver_sql(f"UPDATE {store._tables.memories.name} SET version = version + 100")
    assert (await counters_of(handed_back))["Com_rollback"] == rollbacks + 1
    assert (await store.load("m")).version == version


async def test_a_connection_handed_back_inside_a_transaction_is_rolled_back_before_anyone_reuses_it(
    store: AsyncSQLStore,
) -> None:
    await store.update_messages("m", texts("a", "b"))
    version = (await store.load("m")).version
    # The pooled connection itself, as the store's operations hold it (a SQLAlchemy Connection would roll
    # back on its own when closed): only the pool's reset stands between its transaction and the next user.
    pooled = await store.engine.raw_connection()
    handed_back = pooled.dbapi_connection

    def begin_and_hand_back() -> None:
        cursor = pooled.cursor()
        cursor.execute("BEGIN")
        cursor.execute(f"UPDATE {store._tables.memories.name} SET version = version + 100")
        cursor.close()
        assert in_transaction(handed_back)
        pooled.close()

    await greenlet_spawn(begin_and_hand_back)
    assert checked_out(store) == 0
    assert not in_transaction(handed_back)  # back in the pool, its transaction ended
    assert (await store.load("m")).version == version
    await store.update_messages("m", texts("b", "c"))  # and no lock is left behind


async def test_sqlite_connections_go_back_to_the_pool_without_a_rollback_unless_a_transaction_is_open(
    sql_backend: SQLBackend, sync_store: SQLChatMemoryStore
) -> None:
    if not sql_backend.url.startswith("sqlite"):
        pytest.skip("the driver's rollback() calls are counted on sqlite3's own connection class")
    # The operations' connections (sqlite3 on the store's worker threads) are counted; a rollback with
    # nothing open would be one more call per operation.
    counted = counted_rollbacks()
    options = {"connect_args": {"factory": counted}}
    async with AsyncSQLStore(sql_backend.url, table_prefix=sync_store.table_prefix, engine_options=options) as store:
        await store.update_messages("m", texts("a"))  # checks the schema and takes the locked path first
        counted.rollbacks = 0
        for turn in range(10):
            await store.update_messages("m", texts("a", f"b{turn}"))
            await store.get_messages("m")
        assert counted.rollbacks == 0
        pooled = operations_engine(store).raw_connection()
        pooled.cursor().execute("BEGIN")
        pooled.close()
        assert counted.rollbacks == 1  # one handed back inside a transaction is rolled back
        assert checked_out(store) == 0


async def test_sqlite_operations_run_on_the_stores_worker_threads_not_the_event_loops(
    sql_backend: SQLBackend, sync_store: SQLChatMemoryStore
) -> None:
    if not sql_backend.url.startswith("sqlite"):
        pytest.skip("only SQLite runs its operations on worker threads")
    threads: list[str] = []

    class Watched(sqlite3.Connection):
        def cursor(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
            threads.append(threading.current_thread().name)
            return super().cursor(*args, **kwargs)

    options = {"connect_args": {"factory": Watched}}
    async with AsyncSQLStore(sql_backend.url, table_prefix=sync_store.table_prefix, engine_options=options) as store:
        await store.update_messages("w", texts("a"))
        threads.clear()
        for turn in range(5):
            await store.update_messages("w", texts("a", f"b{turn}"))
            assert await store.get_messages("w") == texts("a", f"b{turn}")
        async for _ in store.memory_ids():
            pass
    assert threads, "no statement was counted"
    assert {name.rsplit("_", 1)[0] for name in threads} == {"chatmemory-sqlite"}, threads


async def test_creating_the_schema_on_mariadb_logs_no_warnings(
    sql_backend: SQLBackend, caplog: pytest.LogCaptureFixture
) -> None:
    if not sql_backend.url.startswith(("mysql", "mariadb")):
        pytest.skip("only MySQL/MariaDB warn of a named primary key (asyncmy logs each warning it is told of)")
    prefix = f"n{uuid.uuid4().hex[:8]}_"
    async with AsyncSQLStore(sql_backend.url, table_prefix=prefix) as made:
        try:
            with caplog.at_level(logging.INFO):
                await made.create_schema()
            assert [record.getMessage() for record in caplog.records if record.name.startswith("asyncmy")] == []
            assert await made.schema_revision() == made.required_schema_revision
            async with made.engine.connect() as connection:
                keys = await connection.execute(
                    text(
                        "SELECT table_name, GROUP_CONCAT(column_name ORDER BY seq_in_index)"
                        " FROM information_schema.statistics WHERE table_schema = DATABASE()"
                        " AND index_name = 'PRIMARY' AND table_name LIKE :tables GROUP BY table_name"
                    ),
                    {"tables": f"{prefix}%"},
                )
                assert dict(keys.all()) == {
                    f"{prefix}memories": "memory_id",
                    f"{prefix}messages": "memory_id,seq",
                    f"{prefix}alembic_version": "version_num",
                }
            await made.update_messages("m", texts("a", "b"))
            assert await made.get_messages("m") == texts("a", "b")
        finally:
            await made.drop_schema()
