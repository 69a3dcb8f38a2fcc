"""Any store driven through the plain contract, beside a raw driver on the same server, turn by turn.

    python benchmarks/plain_contract.py URL [--turns 2000] [--windows 20 200] [--runs 3] [--history]
                                            [--modes plain memory]

Two modes, each printed as a table of its own (both by default):

* ``plain``: how LangChain4j-style memories, custom memories and most integrations call a store: every
  turn ``update_messages(id, whole_window)`` and then ``get_messages(id)``.
* ``memory``: how this library's own window memory calls it: every turn ``MessageWindowChatMemory.add`` of
  the turn's messages (a load, then a save at the loaded version: the memory's window, computed in
  Python), as one operation "add"; the floor's "add" is its read of the window (decoded) followed by its
  write of the turn, the least a hand-written memory does.

The conversation is the realistic one of ``workload.py`` (mixed English/Chinese texts of 40-800
characters, a tool call every 5th turn). Beside each store operation, interleaved so that drift hits both
alike, the raw driver does the least that keeps the same window on the same server. The sides take turns
going first (the store, then the floor on even turns; the floor first on odd ones): whatever runs right
after a read that decoded a window of 200 runs on cold caches, and with a fixed order one side would
always pay for it (measured on Redis, a store kept after the floor's read showed an update ratio
0.08-0.11 higher). The floor:

* PostgreSQL (psycopg, autocommit): one ``WITH ... INSERT ... DELETE`` statement; one ``SELECT``.
* SQLite (sqlite3) and MySQL/MariaDB (PyMySQL): one transaction of an ``INSERT`` of the new rows and a
  ``DELETE`` of the evicted ones; one ``SELECT``.
* Redis (redis-py): a pipeline of ``RPUSH``, ``LTRIM`` and ``EXPIRE``; one ``LRANGE``.
* MongoDB (pymongo): one ``$push`` with ``$each`` and ``$slice``; one ``find_one``.

Both sides encode with ``dumps_message`` and decode with ``loads_message``; the raw side encodes only the
new messages (it knows the diff), has no versions, no expiry bookkeeping and no conflict detection: it is
the floor, not an alternative. Printed per mode and window: median wall time and client CPU (thread time)
per operation (update and get, or add), for the store and the floor, their ratios, "runs": the lowest and
highest of each run's own wall ratio (how far one run alone may land from the median), and "flat": each
side's median update (or add) over the last 200 turns against the first 200. Medians over ``--runs`` runs.
``--history`` adds the store built with ``history=True`` beside the plain one. Figures only, no
assertions: not run in CI.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

_HERE = os.path.dirname(os.path.abspath(__file__))
# Run as a script, this directory comes first on sys.path: its redis.py / sql.py would shadow the drivers.
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
sys.path.append(_HERE)

from workload import sliding_windows  # noqa: E402

from chatmemory import ChatMessage, MessageWindowChatMemory, open_store  # noqa: E402
from chatmemory.serialization.native import dumps_message, loads_message  # noqa: E402

FLAT_SPAN = 200
TTL_SECONDS = 3600


class Floor:
    """The raw driver: ``update(id, window, appended, evicted)`` and ``get(id)``."""

    def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        raise NotImplementedError

    def get(self, memory_id: str) -> list[ChatMessage]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def driver_connect_args(url: str) -> dict[str, Any]:
    """Keyword arguments that connect psycopg (sync or async), PyMySQL or asyncmy to the server of ``url``."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        return {
            "host": parsed.host,
            "port": parsed.port or 5432,
            "user": parsed.username,
            "password": parsed.password,
            "dbname": parsed.database,
        }
    return {
        "host": parsed.host,
        "port": parsed.port or 3306,
        "user": parsed.username,
        "password": parsed.password or "",
        "database": parsed.database,
    }


_ROW_COLUMNS = {
    "postgresql": "memory_id text NOT NULL, seq bigint NOT NULL, payload bytea NOT NULL",
    "sqlite": "memory_id TEXT NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL",
    "mysql": "memory_id VARCHAR(255) NOT NULL, seq BIGINT NOT NULL, payload LONGBLOB NOT NULL",
}


class RowTable:
    """The SQL floors' table of (memory_id, seq, payload) rows: its statements, and each memory's seqs.

    No I/O: the sync floors here and the asyncio ones of ``plain_contract_aio.py`` send its statements.
    """

    def __init__(self, backend: str) -> None:
        name = f"floor_{uuid.uuid4().hex[:10]}"
        m = "?" if backend == "sqlite" else "%s"
        self.create = f"CREATE TABLE {name} ({_ROW_COLUMNS[backend]}, PRIMARY KEY (memory_id, seq))"
        self.insert = f"INSERT INTO {name} (memory_id, seq, payload) VALUES ({m}, {m}, {m})"
        self.delete = f"DELETE FROM {name} WHERE memory_id = {m} AND seq < {m}"
        self.read = f"SELECT payload FROM {name} WHERE memory_id = {m} ORDER BY seq"
        self.drop = f"DROP TABLE IF EXISTS {name}"
        self.update = (
            f"WITH new AS (INSERT INTO {name} (memory_id, seq, payload) "
            "SELECT %s, unnest(%s::bigint[]), unnest(%s::bytea[])) "
            f"DELETE FROM {name} WHERE memory_id = %s AND seq < %s"
        )
        """PostgreSQL's whole turn as one statement (:meth:`update_parameters`)."""
        self.next_seq: dict[str, int] = {}
        self.first_seq: dict[str, int] = {}

    def turn(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> tuple[list, int]:
        """The rows a turn inserts (new messages encoded) and the first seq it keeps."""
        start = self.next_seq.get(memory_id, 0)
        new = window[len(window) - appended :] if appended else []
        rows = [(memory_id, start + index, dumps_message(message)) for index, message in enumerate(new)]
        self.next_seq[memory_id] = start + len(rows)
        first = self.first_seq.get(memory_id, 0) + evicted
        self.first_seq[memory_id] = first
        return rows, first

    @staticmethod
    def update_parameters(memory_id: str, rows: list, first: int) -> tuple[Any, ...]:
        """Parameters of :attr:`update` for a turn's rows and first kept seq."""
        return (memory_id, [row[1] for row in rows], [row[2] for row in rows], memory_id, first)


class PostgresFloor(Floor):
    def __init__(self, url: str) -> None:
        import psycopg

        self.table = RowTable("postgresql")
        self.connection = psycopg.connect(**driver_connect_args(url), autocommit=True)
        self.connection.execute(self.table.create)

    def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        rows, first = self.table.turn(memory_id, window, appended, evicted)
        self.connection.execute(self.table.update, RowTable.update_parameters(memory_id, rows, first))

    def get(self, memory_id: str) -> list[ChatMessage]:
        rows = self.connection.execute(self.table.read, (memory_id,)).fetchall()
        return [loads_message(row[0], memory_id=memory_id) for row in rows]

    def close(self) -> None:
        self.connection.execute(self.table.drop)
        self.connection.close()


class _DbApiFloor(Floor):
    """SQLite and MySQL: one transaction with an INSERT of the new rows and a DELETE of the evicted ones."""

    connection: Any
    table: RowTable

    def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        rows, first = self.table.turn(memory_id, window, appended, evicted)
        cursor = self.connection.cursor()
        if rows:
            cursor.executemany(self.table.insert, rows)
        if evicted:
            cursor.execute(self.table.delete, (memory_id, first))
        self.connection.commit()

    def get(self, memory_id: str) -> list[ChatMessage]:
        cursor = self.connection.cursor()
        cursor.execute(self.table.read, (memory_id,))
        rows = cursor.fetchall()
        self.connection.commit()
        return [loads_message(bytes(row[0]), memory_id=memory_id) for row in rows]

    def close(self) -> None:
        cursor = self.connection.cursor()
        cursor.execute(self.table.drop)
        self.connection.commit()
        self.connection.close()


class SQLiteFloor(_DbApiFloor):
    def __init__(self, url: str) -> None:
        import sqlite3

        self.table = RowTable("sqlite")
        self.connection = sqlite3.connect(urlsplit(url).path[1:] or ":memory:")
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute(self.table.create)
        self.connection.commit()


class MySQLFloor(_DbApiFloor):
    def __init__(self, url: str) -> None:
        import pymysql

        self.table = RowTable("mysql")
        self.connection = pymysql.connect(**driver_connect_args(url), autocommit=False)
        cursor = self.connection.cursor()
        cursor.execute(self.table.create)
        self.connection.commit()


class RedisFloor(Floor):
    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)
        self.prefix = f"floor:{uuid.uuid4().hex[:10]}:"

    def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        key = self.prefix + memory_id
        pipeline = self.client.pipeline(transaction=False)
        if appended:
            pipeline.rpush(key, *(dumps_message(message) for message in window[len(window) - appended :]))
        pipeline.ltrim(key, -len(window), -1)
        pipeline.expire(key, TTL_SECONDS)
        pipeline.execute()

    def get(self, memory_id: str) -> list[ChatMessage]:
        return [
            loads_message(record, memory_id=memory_id) for record in self.client.lrange(self.prefix + memory_id, 0, -1)
        ]

    def close(self) -> None:
        for key in self.client.scan_iter(match=self.prefix + "*"):
            self.client.delete(key)
        self.client.close()


class MongoFloor(Floor):
    def __init__(self, url: str) -> None:
        from pymongo import MongoClient

        self.client: Any = MongoClient(url)
        self.collection = self.client["chatmemory_bench"][f"floor_{uuid.uuid4().hex[:10]}"]

    def update(self, memory_id: str, window: Sequence[ChatMessage], appended: int, evicted: int) -> None:
        new = [dumps_message(message) for message in window[len(window) - appended :]] if appended else []
        self.collection.update_one(
            {"_id": memory_id}, {"$push": {"messages": {"$each": new, "$slice": -len(window)}}}, upsert=True
        )

    def get(self, memory_id: str) -> list[ChatMessage]:
        document = self.collection.find_one({"_id": memory_id}) or {"messages": []}
        return [loads_message(bytes(record), memory_id=memory_id) for record in document["messages"]]

    def close(self) -> None:
        self.collection.drop()
        self.client.close()


def floor_for(url: str) -> Floor:
    scheme = urlsplit(url).scheme.lower()
    base = scheme.split("+", 1)[0]
    if base in ("postgresql", "postgres"):
        return PostgresFloor(url)
    if base == "sqlite":
        return SQLiteFloor(url)
    if base in ("mysql", "mariadb"):
        return MySQLFloor(url)
    if base in ("redis", "rediss"):
        return RedisFloor(url)
    if base == "mongodb":
        return MongoFloor(url)
    raise SystemExit(f"no raw floor for {url}")


def store_for(url: str, **options: Any) -> Any:
    base = urlsplit(url).scheme.lower().split("+", 1)[0]
    if base in ("postgresql", "postgres", "sqlite", "mysql", "mariadb"):
        store = open_store(url, table_prefix=f"b{uuid.uuid4().hex[:8]}_", **options)
        store.create_schema()
        return store
    if base in ("redis", "rediss"):
        return open_store(url, key_prefix=f"bench:{uuid.uuid4().hex[:8]}:", **options)
    if base == "mongodb":
        return open_store(url, collection=f"bench_{uuid.uuid4().hex[:8]}", **options)
    return open_store(url, **options)


def drop(store: Any, memory_id: str) -> None:
    """Remove what the run wrote: the memory, then the namespace where the store has one to drop."""
    store.delete_messages(memory_id)
    if callable(getattr(store, "drop_schema", None)):
        store.drop_schema()
    elif getattr(store, "collection", None) is not None:
        store.collection.drop()
    store.close()


class Clock:
    """Wall and CPU microseconds of the operations of one kind.

    CPU is the calling thread's (``time.thread_time_ns``) unless another counter is given, such as the
    whole process's (``time.process_time_ns``) where a driver works on threads of its own.
    """

    def __init__(self, cpu_ns: Callable[[], int] = time.thread_time_ns) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._cpu_ns = cpu_ns

    def run(self, action: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter_ns(), self._cpu_ns()
        result = action()
        self.cpu.append((self._cpu_ns() - cpu) / 1000)
        self.wall.append((time.perf_counter_ns() - wall) / 1000)
        return result

    async def arun(self, action: Callable[[], Awaitable[Any]]) -> Any:
        """:meth:`run` for a coroutine (the event loop runs nothing else meanwhile)."""
        wall, cpu = time.perf_counter_ns(), self._cpu_ns()
        result = await action()
        self.cpu.append((self._cpu_ns() - cpu) / 1000)
        self.wall.append((time.perf_counter_ns() - wall) / 1000)
        return result


def _store_turn(
    clocks: dict[str, Clock], name: str, store: Any, memory_id: str, current: list[ChatMessage], turn: int
) -> None:
    clocks[f"{name} update"].run(lambda: store.update_messages(memory_id, current))
    got = clocks[f"{name} get"].run(lambda: store.get_messages(memory_id))
    if turn % 500 == 0:
        assert got == current, f"{name} read back another window at turn {turn}"


def _floor_turn(
    clocks: dict[str, Clock],
    floor: Floor,
    memory_id: str,
    current: list[ChatMessage],
    appended: int,
    evicted: int,
    turn: int,
) -> None:
    clocks["floor update"].run(lambda: floor.update(memory_id, current, appended, evicted))
    got = clocks["floor get"].run(lambda: floor.get(memory_id))
    if turn % 500 == 0:
        assert got == current, f"the floor read back another window at turn {turn}"


def _memory_turn(
    clocks: dict[str, Clock],
    name: str,
    memory: MessageWindowChatMemory,
    current: list[ChatMessage],
    appended: int,
    turn: int,
) -> None:
    clocks[f"{name} add"].run(lambda: memory.add(*current[len(current) - appended :]))
    if turn % 500 == 0:
        got = memory.messages()
        assert got == current, f"{name}'s memory holds another window at turn {turn}"


def _floor_add(
    clocks: dict[str, Clock],
    floor: Floor,
    memory_id: str,
    current: list[ChatMessage],
    appended: int,
    evicted: int,
    turn: int,
) -> None:
    def add() -> list[ChatMessage]:
        stored = floor.get(memory_id)
        floor.update(memory_id, current, appended, evicted)
        return stored

    stored = clocks["floor add"].run(add)
    if turn % 500 == 0 and turn:
        assert stored[-1] == current[-appended - 1], f"the floor read back another window at turn {turn}"


MODES = ("plain", "memory")
OPERATIONS = {"plain": ("update", "get"), "memory": ("add",)}


def one_run(url: str, window: int, turns: int, history: bool, mode: str = "plain") -> dict[str, Clock]:
    sides: dict[str, Any] = {"store": store_for(url)}
    if history:
        sides["history"] = store_for(url, history=True)
    floor = floor_for(url)
    clocks = {f"{side} {op}": Clock() for side in [*sides, "floor"] for op in OPERATIONS[mode]}
    memory_id = f"user-{uuid.uuid4().hex[:8]}"
    memories = {
        name: MessageWindowChatMemory(memory_id, max_messages=window, store=store) for name, store in sides.items()
    }
    try:
        for turn, (current, appended, evicted) in enumerate(sliding_windows(turns, window)):
            if mode == "memory":
                turns_of_sides = [
                    *(
                        functools.partial(_memory_turn, clocks, name, memory, current, appended, turn)
                        for name, memory in memories.items()
                    ),
                    functools.partial(_floor_add, clocks, floor, memory_id, current, appended, evicted, turn),
                ]
            else:
                turns_of_sides = [
                    *(
                        functools.partial(_store_turn, clocks, name, store, memory_id, current, turn)
                        for name, store in sides.items()
                    ),
                    functools.partial(_floor_turn, clocks, floor, memory_id, current, appended, evicted, turn),
                ]
            # The order alternates, so that each side runs after the others' read as often as after its own:
            # a read that decodes a long window leaves the caches cold for whatever runs next.
            for side_turn in turns_of_sides if turn % 2 == 0 else reversed(turns_of_sides):
                side_turn()
    finally:
        floor.close()
        for store in sides.values():
            drop(store, memory_id)
    return clocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("url")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--history", action="store_true", help="also the store built with history=True")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="plain contract, window memory")
    args = parser.parse_args()
    shown = urlsplit(args.url)._replace(netloc=urlsplit(args.url).hostname or "").geturl()
    print(f"{shown}: {args.turns} turns, medians of {args.runs} runs, µs (wall / client CPU)")
    for mode in args.modes:
        for window in args.windows:
            runs = [one_run(args.url, window, args.turns, args.history, mode) for _ in range(args.runs)]
            print_window(window, runs, ["store", *(["history"] if args.history else []), "floor"], mode)


def print_window(window: int, runs: list[dict[str, Clock]], sides: list[str], mode: str = "plain") -> None:
    """The table of one window in ``mode``: medians over ``runs`` per side and operation, ratios, "flat"."""

    def median(key: str, field: str, part: slice = slice(None)) -> float:
        return statistics.median(statistics.median(getattr(run[key], field)[part]) for run in runs)

    def spread(key: str, op: str) -> str:
        """The lowest and highest of the runs' own wall ratios (each run's median over the floor's)."""
        ratios = [
            statistics.median(run[f"{key} {op}"].wall) / statistics.median(run[f"floor {op}"].wall) for run in runs
        ]
        return f"{min(ratios):.2f}-{max(ratios):.2f}"

    print(f"\n{'window memory' if mode == 'memory' else 'plain contract'}, window {window}")
    print(f"{'':22}{'wall':>10}{'x floor':>9}{'runs':>12}{'cpu':>10}{'x floor':>9}")
    operations = OPERATIONS[mode]
    for op in operations:
        floor_wall, floor_cpu = median(f"floor {op}", "wall"), median(f"floor {op}", "cpu")
        for side in sides:
            wall, cpu = median(f"{side} {op}", "wall"), median(f"{side} {op}", "cpu")
            print(
                f"{side + ' ' + op:22}{wall:10.0f}{wall / floor_wall:9.2f}{spread(side, op):>12}"
                f"{cpu:10.0f}{cpu / floor_cpu:9.2f}"
            )
    writes = operations[0]
    for side in sides:
        first = median(f"{side} {writes}", "wall", slice(0, FLAT_SPAN))
        last = median(f"{side} {writes}", "wall", slice(-FLAT_SPAN, None))
        print(f"flat ({side} {writes}, last {FLAT_SPAN} / first {FLAT_SPAN} turns): {last / first:.2f}")


if __name__ == "__main__":
    main()
