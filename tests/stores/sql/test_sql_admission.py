"""Many tasks on one asyncio SQL store: operations admitted in turn, as many at once as the pool keeps.

SQLAlchemy's pool gives a returned connection to whoever asks next, which is the task that returned it:
without admission, a few tasks would take turn after turn while the others waited for all of them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from chatmemory import StoreError, UserMessage
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLStore
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.sql.aio import AsyncExecutor, admission_for
from support.backends.sqlite import SQLBackend

pytestmark = pytest.mark.asyncio

ONE_CONNECTION = {"pool_size": 1, "max_overflow": 0}


def texts(tag: str, count: int) -> list[ChatMessage]:
    return [UserMessage(f"{tag} {index}") for index in range(count)]


async def _play(store: AsyncSQLStore, tasks: int, turns: int) -> list[tuple[int, int]]:
    """``tasks`` tasks writing ``turns`` turns each, read back after each; the order turns ended in."""
    order: list[tuple[int, int]] = []

    async def task(number: int) -> None:
        for turn in range(turns):
            await store.update_messages(f"t{number}", texts(f"t{number}", turn + 1))
            order.append((number, turn))
            assert await store.get_messages(f"t{number}") == texts(f"t{number}", turn + 1)

    await asyncio.gather(*(task(number) for number in range(tasks)))
    return order


def _on_the_event_loop(sql_backend: SQLBackend, store: AsyncSQLStore) -> AsyncExecutor:
    driver = store._executor
    if not isinstance(driver, AsyncExecutor):
        # SQLite from a URL: operations go to worker threads, queued in order by their executor.
        pytest.skip("SQLite runs its operations on worker threads, not on the event loop's pool")
    return driver


async def test_tasks_take_their_turns_in_rounds_when_the_pool_runs_short(sql_backend: SQLBackend) -> None:
    sync = sql_backend.make_store()
    try:
        async with AsyncSQLStore(
            sql_backend.url, table_prefix=sync.table_prefix, engine_options=ONE_CONNECTION
        ) as store:
            _on_the_event_loop(sql_backend, store)
            order = await _play(store, tasks=4, turns=4)
            assert order == [(number, turn) for turn in range(4) for number in range(4)]
    finally:
        sql_backend.close_store(sync)


async def test_many_tasks_never_open_more_connections_than_the_pool_keeps(sql_backend: SQLBackend) -> None:
    # Let through more operations than pool_size and the overflow connections would be opened and closed
    # over and over; admitted pool_size at a time, the store opens no more than pool_size.
    sync = sql_backend.make_store()
    try:
        async with AsyncSQLStore(
            sql_backend.url, table_prefix=sync.table_prefix, engine_options={"pool_size": 2, "max_overflow": 10}
        ) as store:
            _on_the_event_loop(sql_backend, store)
            from sqlalchemy import event

            opened: list[Any] = []
            event.listen(store.engine.sync_engine, "connect", lambda connection, record: opened.append(connection))

            await _play(store, tasks=12, turns=5)
            assert len(opened) <= 2
    finally:
        sql_backend.close_store(sync)


async def test_a_task_waits_no_longer_than_the_pools_timeout(sql_backend: SQLBackend) -> None:
    sync = sql_backend.make_store()
    try:
        async with AsyncSQLStore(
            sql_backend.url,
            table_prefix=sync.table_prefix,
            engine_options={**ONE_CONNECTION, "pool_timeout": 0.3},
        ) as store:
            _on_the_event_loop(sql_backend, store)
            await store.update_messages("a", texts("a", 1))
            listing = store.memory_ids()
            assert await listing.__anext__() == "a"  # the listing holds the one connection meanwhile
            started = time.monotonic()
            with pytest.raises(StoreError) as raised:
                await store.get_messages("a")
            assert time.monotonic() - started >= 0.25
            message = str(raised.value)
            assert "'a'" in message and "within 0.3 s" in message and "pool_size=1" in message
            await listing.aclose()
            assert await store.get_messages("a") == texts("a", 1)  # its turn came back
    finally:
        sql_backend.close_store(sync)


async def test_the_admission_is_as_wide_as_the_pool_keeps_connections(sql_backend: SQLBackend) -> None:
    url = sql_backend.url.replace("+pymysql", "+asyncmy").replace("sqlite:", "sqlite+aiosqlite:")

    async def width(**options: Any) -> int | None:
        engine = create_async_engine(url, **options)  # connects to nothing until used
        try:
            admission = admission_for(engine.sync_engine.pool)
            return None if admission is None else admission.limit
        finally:
            await engine.dispose()

    if sql_backend.name != "sqlite":
        assert await width() == 5  # SQLAlchemy's default pool_size
    assert await width(pool_size=3, max_overflow=7) == 3
    assert await width(pool_size=1, max_overflow=0) == 1
    # Pools that never make a checkout wait: nothing to wait for in turn.
    assert await width(pool_size=0, max_overflow=4) is None  # SQLAlchemy: pool_size=0 sets no bound
    assert await width(pool_size=2, max_overflow=-1) is None
    assert await width(poolclass=NullPool) is None
