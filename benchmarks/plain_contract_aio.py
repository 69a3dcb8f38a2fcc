"""The asyncio stores driven through the plain contract, beside a raw asyncio driver on the same server.

    python benchmarks/plain_contract_aio.py URL [--turns 2000] [--windows 20 200] [--runs 3]
                                                [--modes plain memory]

``plain_contract.py`` on one event loop: every turn ``await store.update_messages(id, whole_window)`` and
then ``await store.get_messages(id)`` on the ``chatmemory.aio`` store the URL names, beside the same floor
sent with each driver's asyncio API, on the same server, the sides taking turns going first:

* PostgreSQL (psycopg's ``AsyncConnection``, autocommit): one ``WITH ... INSERT ... DELETE``; one ``SELECT``;
* SQLite (aiosqlite) and MySQL/MariaDB (asyncmy): one transaction of an ``INSERT`` of the new rows and a
  ``DELETE`` of the evicted ones; one ``SELECT``;
* Redis (``redis.asyncio``): a pipeline of ``RPUSH``, ``LTRIM`` and ``EXPIRE``; one ``LRANGE``;
* MongoDB (PyMongo's ``AsyncMongoClient``): one ``$push`` with ``$each`` and ``$slice``; one ``find_one``.

The ``memory`` mode drives the store through ``chatmemory.aio.MessageWindowChatMemory.add`` (a load, then a
save), beside the floor's read of the window and write of the turn, as ``plain_contract.py``'s does.
The workload, the encoding and decoding, the medians and the table are ``plain_contract.py``'s. Client CPU
is the whole process's, every thread's: aiosqlite runs SQLite on a thread of its own per connection, and
the SQLite store from a URL runs its operations on worker threads
(``chatmemory.stores.sql.aio.ThreadExecutor``); the event loop runs nothing else meanwhile. Figures only,
no assertions: not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
sys.path.append(_HERE)

from plain_contract import MODES, OPERATIONS, TTL_SECONDS, Clock, RowTable, driver_connect_args, print_window  # noqa: E402
from workload import sliding_windows  # noqa: E402

from chatmemory import ChatMessage  # noqa: E402
from chatmemory.aio import MessageWindowChatMemory, open_store  # noqa: E402
from chatmemory.serialization.native import dumps_message, loads_message  # noqa: E402


class AsyncFloor:
    """The raw asyncio driver: ``update(id, window, appended, evicted)`` and ``get(id)``."""

    async def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        raise NotImplementedError

    async def get(self, memory_id: str) -> list[ChatMessage]:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class AsyncPostgresFloor(AsyncFloor):
    async def open(self, url: str) -> AsyncPostgresFloor:
        import psycopg

        self.table = RowTable("postgresql")
        self.connection = await psycopg.AsyncConnection.connect(**driver_connect_args(url), autocommit=True)
        await self.connection.execute(self.table.create)
        return self

    async def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        rows, first = self.table.turn(memory_id, window, appended, evicted)
        await self.connection.execute(self.table.update, RowTable.update_parameters(memory_id, rows, first))

    async def get(self, memory_id: str) -> list[ChatMessage]:
        cursor = await self.connection.execute(self.table.read, (memory_id,))
        return [loads_message(row[0], memory_id=memory_id) for row in await cursor.fetchall()]

    async def close(self) -> None:
        await self.connection.execute(self.table.drop)
        await self.connection.close()


class AsyncSQLiteFloor(AsyncFloor):
    """One transaction with an INSERT of the new rows and a DELETE of the evicted ones."""

    async def open(self, url: str) -> AsyncSQLiteFloor:
        import aiosqlite

        self.table = RowTable("sqlite")
        self.connection = await aiosqlite.connect(urlsplit(url).path[1:])
        await self.connection.execute("PRAGMA journal_mode=WAL")
        await self.connection.execute(self.table.create)
        await self.connection.commit()
        return self

    async def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        rows, first = self.table.turn(memory_id, window, appended, evicted)
        cursor = await self.connection.cursor()
        if rows:
            await cursor.executemany(self.table.insert, rows)
        if evicted:
            await cursor.execute(self.table.delete, (memory_id, first))
        await cursor.close()
        await self.connection.commit()

    async def get(self, memory_id: str) -> list[ChatMessage]:
        cursor = await self.connection.cursor()
        await cursor.execute(self.table.read, (memory_id,))
        rows = await cursor.fetchall()
        await cursor.close()
        await self.connection.commit()
        return [loads_message(bytes(row[0]), memory_id=memory_id) for row in rows]

    async def close(self) -> None:
        await self.connection.execute(self.table.drop)
        await self.connection.commit()
        await self.connection.close()


class AsyncMySQLFloor(AsyncFloor):
    """One transaction with an INSERT of the new rows and a DELETE of the evicted ones."""

    async def open(self, url: str) -> AsyncMySQLFloor:
        import asyncmy

        self.table = RowTable("mysql")
        self.connection = await asyncmy.connect(**driver_connect_args(url), autocommit=False)
        async with self.connection.cursor() as cursor:  # asyncmy's cursor() is not awaited
            await cursor.execute(self.table.create)
        await self.connection.commit()
        return self

    async def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        rows, first = self.table.turn(memory_id, window, appended, evicted)
        async with self.connection.cursor() as cursor:
            if rows:
                await cursor.executemany(self.table.insert, rows)
            if evicted:
                await cursor.execute(self.table.delete, (memory_id, first))
        await self.connection.commit()

    async def get(self, memory_id: str) -> list[ChatMessage]:
        async with self.connection.cursor() as cursor:
            await cursor.execute(self.table.read, (memory_id,))
            rows = await cursor.fetchall()
        await self.connection.commit()
        return [loads_message(bytes(row[0]), memory_id=memory_id) for row in rows]

    async def close(self) -> None:
        async with self.connection.cursor() as cursor:
            await cursor.execute(self.table.drop)
        await self.connection.commit()
        await self.connection.ensure_closed()


class AsyncRedisFloor(AsyncFloor):
    async def open(self, url: str) -> AsyncRedisFloor:
        import redis.asyncio

        self.client = redis.asyncio.Redis.from_url(url)
        self.prefix = f"floor:{uuid.uuid4().hex[:10]}:"
        return self

    async def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        key = self.prefix + memory_id
        pipeline = self.client.pipeline(transaction=False)
        if appended:
            pipeline.rpush(key, *(dumps_message(message) for message in window[len(window) - appended :]))
        pipeline.ltrim(key, -len(window), -1)
        pipeline.expire(key, TTL_SECONDS)
        await pipeline.execute()

    async def get(self, memory_id: str) -> list[ChatMessage]:
        records = await self.client.lrange(self.prefix + memory_id, 0, -1)
        return [loads_message(record, memory_id=memory_id) for record in records]

    async def close(self) -> None:
        async for key in self.client.scan_iter(match=self.prefix + "*"):
            await self.client.delete(key)
        await self.client.aclose()


class AsyncMongoFloor(AsyncFloor):
    async def open(self, url: str) -> AsyncMongoFloor:
        from pymongo import AsyncMongoClient

        self.client: Any = AsyncMongoClient(url)
        self.collection = self.client["chatmemory_bench"][f"floor_{uuid.uuid4().hex[:10]}"]
        return self

    async def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        new = [dumps_message(message) for message in window[len(window) - appended :]] if appended else []
        await self.collection.update_one(
            {"_id": memory_id}, {"$push": {"messages": {"$each": new, "$slice": -len(window)}}}, upsert=True
        )

    async def get(self, memory_id: str) -> list[ChatMessage]:
        document = await self.collection.find_one({"_id": memory_id}) or {"messages": []}
        return [loads_message(bytes(record), memory_id=memory_id) for record in document["messages"]]

    async def close(self) -> None:
        await self.collection.drop()
        await self.client.close()


async def floor_for(url: str) -> AsyncFloor:
    base = urlsplit(url).scheme.lower().split("+", 1)[0]
    floors: dict[str, Any] = {
        "postgresql": AsyncPostgresFloor,
        "postgres": AsyncPostgresFloor,
        "sqlite": AsyncSQLiteFloor,
        "mysql": AsyncMySQLFloor,
        "mariadb": AsyncMySQLFloor,
        "redis": AsyncRedisFloor,
        "rediss": AsyncRedisFloor,
        "mongodb": AsyncMongoFloor,
    }
    if base not in floors:
        raise SystemExit(f"no raw asyncio floor for {url}")
    floor: AsyncFloor = await floors[base]().open(url)
    return floor


async def store_for(url: str) -> Any:
    base = urlsplit(url).scheme.lower().split("+", 1)[0]
    if base in ("postgresql", "postgres", "sqlite", "mysql", "mariadb"):
        store = open_store(url, table_prefix=f"b{uuid.uuid4().hex[:8]}_")
        await store.create_schema()  # type: ignore[attr-defined]
        return store
    if base in ("redis", "rediss"):
        return open_store(url, key_prefix=f"bench:{uuid.uuid4().hex[:8]}:")
    return open_store(url, collection=f"bench_{uuid.uuid4().hex[:8]}")


async def drop(store: Any, memory_id: str) -> None:
    """Remove what the run wrote: the memory, then the store's tables or collection, then the store."""
    await store.delete_messages(memory_id)
    if callable(getattr(store, "drop_schema", None)):
        await store.drop_schema()
    elif getattr(store, "collection", None) is not None:
        await store.collection.drop()
    await store.aclose()


async def one_run(url: str, window: int, turns: int, mode: str = "plain") -> dict[str, Clock]:
    store = await store_for(url)
    floor = await floor_for(url)
    clocks = {f"{side} {op}": Clock(time.process_time_ns) for side in ("store", "floor") for op in OPERATIONS[mode]}
    memory_id = f"user-{uuid.uuid4().hex[:8]}"
    memory = MessageWindowChatMemory(memory_id, max_messages=window, store=store)

    async def store_turn(current: list[ChatMessage], appended: int, evicted: int, turn: int) -> None:
        await clocks["store update"].arun(lambda: store.update_messages(memory_id, current))
        got = await clocks["store get"].arun(lambda: store.get_messages(memory_id))
        if turn % 500 == 0:
            assert got == current, f"the store read back another window at turn {turn}"

    async def floor_turn(current: list[ChatMessage], appended: int, evicted: int, turn: int) -> None:
        await clocks["floor update"].arun(lambda: floor.update(memory_id, current, appended, evicted))
        got = await clocks["floor get"].arun(lambda: floor.get(memory_id))
        if turn % 500 == 0:
            assert got == current, f"the floor read back another window at turn {turn}"

    async def memory_turn(current: list[ChatMessage], appended: int, evicted: int, turn: int) -> None:
        await clocks["store add"].arun(lambda: memory.add(*current[len(current) - appended :]))
        if turn % 500 == 0:
            assert await memory.messages() == current, f"the memory holds another window at turn {turn}"

    async def floor_add(current: list[ChatMessage], appended: int, evicted: int, turn: int) -> None:
        async def add() -> list[ChatMessage]:
            stored = await floor.get(memory_id)
            await floor.update(memory_id, current, appended, evicted)
            return stored

        stored = await clocks["floor add"].arun(add)
        if turn % 500 == 0 and turn:
            assert stored[-1] == current[-appended - 1], f"the floor read back another window at turn {turn}"

    pair = (memory_turn, floor_add) if mode == "memory" else (store_turn, floor_turn)
    try:
        for turn, (current, appended, evicted) in enumerate(sliding_windows(turns, window)):
            # The sides take turns going first, as in plain_contract.py.
            for side_turn in pair if turn % 2 == 0 else reversed(pair):
                await side_turn(current, appended, evicted, turn)
    finally:
        await floor.close()
        await drop(store, memory_id)
    return clocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("url")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="plain contract, window memory")
    args = parser.parse_args()
    shown = urlsplit(args.url)._replace(netloc=urlsplit(args.url).hostname or "").geturl()
    print(f"{shown} (asyncio): {args.turns} turns, medians of {args.runs} runs, µs (wall / client CPU)")
    for mode in args.modes:
        for window in args.windows:
            runs = [asyncio.run(one_run(args.url, window, args.turns, mode)) for _ in range(args.runs)]
            print_window(window, runs, ["store", "floor"], mode)


if __name__ == "__main__":
    main()
