"""The connection a store keeps between calls: which one, when not, and that nothing else sees it.

A store that made its engine keeps the connection a call ended with for its next call, sparing it the
pool's checkout and return. These tests pin when it does (a sound connection outside a transaction, on a
queue pool nothing listens to), when it does not (the caller's engine, pre-ping, recycling, a NullPool),
that the pool never counts more out than the store keeps, and that a forked child never uses it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.pool import NullPool

from chatmemory import UserMessage
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLStore
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends.sqlite import SQLBackend


def texts(*words: str) -> list[ChatMessage]:
    return [UserMessage(word) for word in words]


@pytest.fixture
def store(sql_backend: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = sql_backend.make_store()
    yield made
    sql_backend.close_store(made)


def _kept(store: SQLChatMemoryStore) -> list[Any]:
    """The DBAPI connections the store keeps for its next call."""
    return [pooled.dbapi_connection for pooled in store._executor._kept]


def _calls(store: SQLChatMemoryStore, memory_id: str, turns: int = 5) -> None:
    for turn in range(turns):
        store.update_messages(memory_id, texts(*(f"{memory_id} {index}" for index in range(turn + 1))))
        assert store.get_messages(memory_id)[-1] == UserMessage(f"{memory_id} {turn}")


def test_each_call_takes_the_connection_the_last_one_ended_with(sql_backend: SQLBackend) -> None:
    store = sql_backend.make_store()
    # A memory's first write takes the locked path, whose SQLAlchemy statements run on a Connection,
    # which hands its connection back when it closes; the calls after it send driver SQL alone.
    store.update_messages("m", texts("a"))
    assert store.get_messages("m") == texts("a")
    (kept,) = _kept(store)
    pool: Any = store.engine.pool
    _calls(store, "m")
    assert _kept(store) == [kept]  # the same DBAPI connection, call after call
    assert pool.checkedout() == 1  # and the only one out of the pool
    store.drop_schema()
    store.close()
    assert pool.checkedout() == 0  # handed back before the engine was disposed


def test_a_store_on_the_callers_engine_hands_every_connection_back(sql_backend: SQLBackend) -> None:
    engine = create_engine(sql_backend.url)
    try:
        with SQLChatMemoryStore(engine, table_prefix=sql_backend.fresh_prefix()) as store:
            store.create_schema()
            _calls(store, "m")
            assert _kept(store) == []
            assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
            store.drop_schema()
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "options",
    [{"pool_pre_ping": True}, {"pool_recycle": 3600}, {"poolclass": NullPool}],
    ids=["pre-ping", "recycle", "NullPool"],
)
def test_a_pool_that_checks_or_closes_connections_gets_each_one_back(
    sql_backend: SQLBackend, options: dict[str, Any]
) -> None:
    # Pre-ping and recycling happen at the checkout a kept connection would skip; a NullPool's user
    # wants no connection left open between calls.
    store = sql_backend.make_store(engine_options=options)
    try:
        _calls(store, "m")
        assert _kept(store) == []
        pool: Any = store.engine.pool
        if not isinstance(pool, NullPool):  # which closes each connection handed back
            assert pool.checkedout() == 0
    finally:
        sql_backend.close_store(store)


def test_nothing_is_kept_while_something_listens_to_the_pools_checkouts(store: SQLChatMemoryStore) -> None:
    seen: list[str] = []

    def checkout(*_: Any) -> None:
        seen.append("checkout")

    def checkin(*_: Any) -> None:
        seen.append("checkin")

    _calls(store, "m", turns=1)
    assert len(_kept(store)) == 1  # a connection kept before the listeners came
    event.listen(store.engine, "checkout", checkout)
    event.listen(store.engine, "checkin", checkin)
    try:
        _calls(store, "m", turns=2)
        # The kept connection served the first call, which then handed it back; every later call
        # was seen checking out and in.
        assert seen == ["checkin", "checkout", "checkin", "checkout", "checkin", "checkout", "checkin"]
        assert _kept(store) == []
    finally:
        event.remove(store.engine, "checkout", checkout)
        event.remove(store.engine, "checkin", checkin)


def test_a_connection_left_in_a_transaction_is_not_kept(store: SQLChatMemoryStore) -> None:
    store.update_messages("m", texts("a"))
    store.get_messages("m")
    driver = store._executor
    pooled = driver.checkout()
    cursor = pooled.cursor()
    cursor.execute(store._begin)
    cursor.close()
    assert not driver.keep(pooled)  # the pool's reset must end the transaction first
    pooled.close()
    assert _kept(store) == []
    assert store.get_messages("m") == texts("a")


def _in_threads(store: SQLChatMemoryStore, threads: int, turns: int) -> list[BaseException]:
    """``threads`` threads making ``turns`` calls each on memories of their own; what they raised."""
    failures: list[BaseException] = []

    def work(name: str) -> None:
        try:
            _calls(store, name, turns=turns)
        except BaseException as exc:  # reported by the caller
            failures.append(exc)

    started = [threading.Thread(target=work, args=(f"t{index}",)) for index in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return failures


def test_threads_sharing_a_store_keep_no_more_connections_out_than_it_keeps(store: SQLChatMemoryStore) -> None:
    assert _in_threads(store, threads=4, turns=20) == []
    assert len(_kept(store)) == 1  # however many calls ended at once
    assert store.engine.pool.checkedout() == 1  # type: ignore[attr-defined]  # none out that nobody holds


_SESSION_ID = {"postgres": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}


def _session_id(store: SQLChatMemoryStore, query: str) -> int:
    """The server's id for the session the store's next call runs on (the connection it keeps)."""
    driver = store._executor
    pooled = driver.checkout()
    cursor = pooled.cursor()
    cursor.execute(query)
    (session,) = cursor.fetchone()
    cursor.close()
    assert driver.keep(pooled)
    return int(session)


def test_no_connection_is_kept_while_the_pool_would_have_none_left_to_give(sql_backend: SQLBackend) -> None:
    # One connection in all: kept by the thread that last used it, the other threads would wait in the
    # pool until its timeout. It goes back to the pool instead, and every thread gets its turns.
    store = sql_backend.make_store(engine_options={"pool_size": 1, "max_overflow": 0, "pool_timeout": 5})
    try:
        assert _in_threads(store, threads=3, turns=4) == []
        assert _kept(store) == []
        assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    finally:
        sql_backend.close_store(store)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_uses_the_connection_its_parent_keeps(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    if sql_backend.name not in _SESSION_ID:
        pytest.skip("SQLite has no server session to tell apart")
    query = _SESSION_ID[sql_backend.name]
    store.update_messages("m", texts("a"))
    store.get_messages("m")
    parents = _session_id(store, query)
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which reports through the pipe
        code = 1
        try:
            # As SQLAlchemy advises after a fork: the pool's connections are the parent's too.
            store.engine.dispose(close=False)
            ok = store.get_messages("m") == texts("a")
            os.write(writing, f"{int(ok)} {_session_id(store, query)}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(writing)
    with os.fdopen(reading) as pipe:
        report = pipe.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ok, childs = report.split()
    assert ok == "1"
    assert int(childs) != parents  # a session of its own
    assert _session_id(store, query) == parents  # and the parent's kept connection is as it was
    assert store.get_messages("m") == texts("a")


# ------------------------------------------------------------------------------------------ asyncio


def _async_kept(store: AsyncSQLStore) -> list[Any]:
    return [pooled.dbapi_connection for pooled in store._executor._sync._kept]


def _operations_pool(store: AsyncSQLStore) -> Any:
    """The pool the store's operations take connections from (SQLite from a URL: its worker threads')."""
    return (store._thread_engine or store.engine.sync_engine).pool


@pytest.mark.asyncio
async def test_an_asyncio_store_keeps_its_connection_from_call_to_call(sql_backend: SQLBackend) -> None:
    # On SQLite the operations run on worker threads: the kept connection goes from thread to thread.
    sync = sql_backend.make_store()
    try:
        store = AsyncSQLStore(sql_backend.url, table_prefix=sync.table_prefix)
        await store.update_messages("m", texts("a"))
        assert await store.get_messages("m") == texts("a")
        (kept,) = _async_kept(store)
        pool = _operations_pool(store)
        for turn in range(5):
            await store.update_messages("m", texts(*(f"w{index}" for index in range(turn + 1))))
            assert await store.get_messages("m") == texts(*(f"w{index}" for index in range(turn + 1)))
        assert _async_kept(store) == [kept]
        assert pool.checkedout() == 1
        await store.aclose()
        assert pool.checkedout() == 0  # handed back before the engine was disposed
    finally:
        sql_backend.close_store(sync)


@pytest.mark.asyncio
async def test_concurrent_asyncio_calls_keep_no_more_out_than_the_store_keeps(sql_backend: SQLBackend) -> None:
    sync = sql_backend.make_store()
    try:
        async with AsyncSQLStore(sql_backend.url, table_prefix=sync.table_prefix) as store:

            async def work(name: str) -> None:
                for turn in range(10):
                    await store.update_messages(name, texts(*(f"{name} {index}" for index in range(turn + 1))))
                    assert (await store.get_messages(name))[-1] == UserMessage(f"{name} {turn}")

            await asyncio.gather(*(work(f"t{index}") for index in range(6)))
            assert len(_async_kept(store)) == 1  # SQLite's worker threads too, however many ended at once
            assert _operations_pool(store).checkedout() == 1
    finally:
        sql_backend.close_store(sync)
