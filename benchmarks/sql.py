"""SQL store on PostgreSQL against a raw one-statement psycopg baseline, same server, same run.

    python benchmarks/sql.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test] [--turns 2000]
                             [--windows 20 200]

For each window size the memory is filled, then every steady-state turn (interleaved, so drift hits
both sides alike, the sides taking turns going first) does:

* store update: ``save()`` of the window with the oldest message evicted and one appended, at the version
  of the previous turn (what a window memory does after its ``load()``);
* store get: ``get_messages()`` on the writing store — one query; rows it already decoded come back
  without their payload (its snapshot cache), so only the new message is decoded;
* store get, cold: ``get_messages()`` on a second store with no snapshot cache (every payload comes back
  and is decoded, as for a process that did not write last);
* baseline update: one autocommit statement ``WITH new AS (INSERT …) DELETE …`` (insert the new record,
  delete the evicted one) on a plain psycopg connection;
* baseline get: one ``SELECT payload … ORDER BY seq`` and decoding every record.

Both sides encode and decode with ``dumps_message`` / ``loads_message``. The baseline has no version
check, no expiry and no head row: it is the floor, not an alternative. "Flat" compares the median update
of the last 200 turns with that of the first 200 (the conversation is ten times longer by then). With
``--url`` naming SQLite or MySQL/MariaDB the store runs alone (the baseline is psycopg only). Figures only,
no assertions: this is not run in CI.

``--contention``: 16 writers (8 threads, 8 processes) add 100 messages each to one memory while two
processes burn the CPU, through ``MessageWindowChatMemory.add`` (an optimistic load and save, then one
``modify`` under the lock after a conflict) and through ``store.modify`` alone (under the head row's
lock); it prints what was kept, lost, doubled, the errors and the p50/p99 add latency.

``--history``: the store with ``history=True`` against the same store without, same server, same run,
turns interleaved (the order alternating each turn): update (``save``), get (the writing store, with
its snapshot cache) and get, cold (a store without cache), for a plain window and (``--system``) one
whose system message stays first while the messages after it are evicted. With history every evicted
row stays in the table (the memory's history grows by a row a turn), so this also shows whether the
window read stays flat as the history grows. Each table also holds ``--background`` other memories (a
window each, and with history as long a history as the measured memory's at the end), so that both
sides read through the index as in a shared table. Works on every SQL URL.

Async rows (``--async-turns``, 0 to skip) time the asyncio store (:mod:`chatmemory.aio.stores.sql`) the
same way, beside a raw ``psycopg.AsyncConnection`` baseline running the same two statements.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

# Run as a script, this file's directory is first on sys.path and its name would shadow the sql module.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

from sqlalchemy import event  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from chatmemory import AiMessage, ChatMessage, MessageWindowChatMemory, SystemMessage, UserMessage  # noqa: E402
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLChatMemoryStore  # noqa: E402
from chatmemory.serialization.native import dumps_message, loads_message  # noqa: E402
from chatmemory.stores.sql import SQLChatMemoryStore  # noqa: E402

sys.path.append(_HERE)
from plain_contract import driver_connect_args  # noqa: E402

TTL_SECONDS = 3600
FLAT_SPAN = 200
COUNTED_TURNS = 20


def message(turn: int) -> ChatMessage:
    """A turn of a plausible conversation (~300 bytes encoded)."""
    if turn % 2:
        return AiMessage(f"Answer {turn}: " + "the weather in Munich is mild, around 14°C, with light rain. " * 3)
    return UserMessage(f"Question {turn}: what is the weather like in Munich today, and should I bring a coat?")


SIDES = ("baseline", "store")
"""The two sides of a timed turn, in the order of odd turns (even turns reverse it)."""


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def timed(action: Callable[..., Any], *arguments: Any) -> tuple[float, Any]:
    start = time.perf_counter_ns()
    result = action(*arguments)
    return (time.perf_counter_ns() - start) / 1000, result


class Baseline:
    """The floor: one autocommit statement per update, one SELECT per read, on a raw psycopg connection."""

    def __init__(self, url: str, table: str) -> None:
        import psycopg

        self.connection = psycopg.connect(**driver_connect_args(url), autocommit=True)
        self.table = table
        self.connection.execute(
            f"CREATE TABLE {table} (memory_id text NOT NULL, seq bigint NOT NULL, payload bytea NOT NULL, "
            "PRIMARY KEY (memory_id, seq))"
        )
        self.update_sql = (
            f"WITH new AS (INSERT INTO {table} (memory_id, seq, payload) VALUES (%s, %s, %s)) "
            f"DELETE FROM {table} WHERE memory_id = %s AND seq <= %s"
        )
        self.read_sql = f"SELECT payload FROM {table} WHERE memory_id = %s ORDER BY seq"

    def fill(self, memory_id: str, messages: list[ChatMessage]) -> None:
        with self.connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {self.table} (memory_id, seq, payload) VALUES (%s, %s, %s)",
                [(memory_id, seq, dumps_message(m)) for seq, m in enumerate(messages)],
            )

    def update(self, memory_id: str, seq: int, new: ChatMessage, window: int) -> None:
        self.connection.execute(self.update_sql, (memory_id, seq, dumps_message(new), memory_id, seq - window))

    def get(self, memory_id: str) -> list[ChatMessage]:
        rows = self.connection.execute(self.read_sql, (memory_id,)).fetchall()
        return [loads_message(row[0], memory_id=memory_id) for row in rows]

    def close(self) -> None:
        self.connection.execute(f"DROP TABLE IF EXISTS {self.table}")
        self.connection.close()


def run_window(url: str, window: int, turns: int, with_baseline: bool) -> dict[str, Any]:
    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    store = SQLChatMemoryStore(url, table_prefix=prefix, ttl=TTL_SECONDS)
    store.create_schema()
    statements = 0

    def count(*_: Any) -> None:
        nonlocal statements
        statements += 1

    cold = SQLChatMemoryStore(url, table_prefix=prefix, snapshot_cache_size=0)
    baseline = Baseline(url, f"{prefix}baseline") if with_baseline else None
    memory_id = f"bench-{uuid.uuid4().hex}"
    try:
        messages = [message(turn) for turn in range(window)]
        version = store.save(memory_id, messages, 0)
        if baseline is not None:
            baseline.fill(memory_id, messages)
        samples: dict[str, list[float]] = {
            "update": [],
            "get": [],
            "get, cold": [],
            "baseline update": [],
            "baseline get": [],
        }
        statements_per_update: list[int] = []
        gc.disable()
        try:
            for turn in range(window, window + turns):
                new = message(turn)
                messages = [*messages[1:], new]
                # The sides take turns going first (see plain_contract.py: whatever runs right after a read
                # that decoded a window runs on cold caches).
                for side in SIDES if turn % 2 else SIDES[::-1]:
                    if side == "store":
                        elapsed, version = timed(store.save, memory_id, messages, version)
                        samples["update"].append(elapsed)
                        elapsed, got = timed(store.get_messages, memory_id)
                        samples["get"].append(elapsed)
                        elapsed, got_cold = timed(cold.get_messages, memory_id)
                        samples["get, cold"].append(elapsed)
                        if turn == window:
                            assert got == messages == got_cold, "the store holds another window"
                    elif baseline is not None:
                        elapsed, _ = timed(baseline.update, memory_id, turn, new, window)
                        samples["baseline update"].append(elapsed)
                        elapsed, got_baseline = timed(baseline.get, memory_id)
                        samples["baseline get"].append(elapsed)
                        if turn == window:
                            assert got_baseline == messages, "the baseline holds another window"
        finally:
            gc.enable()
        # Statements are counted on turns of their own: a cursor listener sends every statement through
        # SQLAlchemy's execution path, which the timed turns must not pay.
        event.listen(store.engine, "before_cursor_execute", count)
        try:
            for turn in range(window + turns, window + turns + COUNTED_TURNS):
                messages = [*messages[1:], message(turn)]
                before = statements
                version = store.save(memory_id, messages, version)
                statements_per_update.append(statements - before)
        finally:
            event.remove(store.engine, "before_cursor_execute", count)
        assert store.get_messages(memory_id) == messages
        return {"samples": samples, "statements": statements_per_update}
    finally:
        if baseline is not None:
            baseline.close()
        cold.close()
        store.drop_schema()
        store.close()


class AsyncBaseline:
    """The async floor: the same statements as :class:`Baseline` on a raw ``psycopg.AsyncConnection``."""

    def __init__(self, connection: Any, table: str) -> None:
        self.connection = connection
        self.table = table
        self.update_sql = (
            f"WITH new AS (INSERT INTO {table} (memory_id, seq, payload) VALUES (%s, %s, %s)) "
            f"DELETE FROM {table} WHERE memory_id = %s AND seq <= %s"
        )
        self.read_sql = f"SELECT payload FROM {table} WHERE memory_id = %s ORDER BY seq"

    @classmethod
    async def open(cls, url: str, table: str) -> AsyncBaseline:
        import psycopg

        connection = await psycopg.AsyncConnection.connect(**driver_connect_args(url), autocommit=True)
        await connection.execute(
            f"CREATE TABLE {table} (memory_id text NOT NULL, seq bigint NOT NULL, payload bytea NOT NULL, "
            "PRIMARY KEY (memory_id, seq))"
        )
        return cls(connection, table)

    async def fill(self, memory_id: str, messages: list[ChatMessage]) -> None:
        async with self.connection.cursor() as cursor:
            await cursor.executemany(
                f"INSERT INTO {self.table} (memory_id, seq, payload) VALUES (%s, %s, %s)",
                [(memory_id, seq, dumps_message(m)) for seq, m in enumerate(messages)],
            )

    async def update(self, memory_id: str, seq: int, new: ChatMessage, window: int) -> None:
        await self.connection.execute(self.update_sql, (memory_id, seq, dumps_message(new), memory_id, seq - window))

    async def get(self, memory_id: str) -> list[ChatMessage]:
        rows = await (await self.connection.execute(self.read_sql, (memory_id,))).fetchall()
        return [loads_message(row[0], memory_id=memory_id) for row in rows]

    async def close(self) -> None:
        await self.connection.execute(f"DROP TABLE IF EXISTS {self.table}")
        await self.connection.close()


async def atimed(action: Callable[..., Any], *arguments: Any) -> tuple[float, Any]:
    start = time.perf_counter_ns()
    result = await action(*arguments)
    return (time.perf_counter_ns() - start) / 1000, result


async def run_window_async(url: str, window: int, turns: int, with_baseline: bool) -> dict[str, list[float]]:
    """Async store save/get and the raw async baseline, interleaved turn by turn."""
    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    store = AsyncSQLChatMemoryStore(url, table_prefix=prefix, ttl=TTL_SECONDS)
    await store.create_schema()
    baseline = await AsyncBaseline.open(url, f"{prefix}baseline") if with_baseline else None
    memory_id = f"bench-{uuid.uuid4().hex}"
    samples: dict[str, list[float]] = {"update": [], "get": [], "baseline update": [], "baseline get": []}
    try:
        messages = [message(turn) for turn in range(window)]
        version = await store.save(memory_id, messages, 0)
        if baseline is not None:
            await baseline.fill(memory_id, messages)
        gc.disable()
        try:
            for turn in range(window, window + turns):
                new = message(turn)
                messages = [*messages[1:], new]
                for side in SIDES if turn % 2 else SIDES[::-1]:  # taking turns, as in the blocking rows
                    if side == "store":
                        elapsed, version = await atimed(store.save, memory_id, messages, version)
                        samples["update"].append(elapsed)
                        elapsed, got = await atimed(store.get_messages, memory_id)
                        samples["get"].append(elapsed)
                        if turn == window:
                            assert got == messages, "the async store holds another window"
                    elif baseline is not None:
                        elapsed, _ = await atimed(baseline.update, memory_id, turn, new, window)
                        samples["baseline update"].append(elapsed)
                        elapsed, got_baseline = await atimed(baseline.get, memory_id)
                        samples["baseline get"].append(elapsed)
                        if turn == window:
                            assert got_baseline == messages, "the async baseline holds another window"
        finally:
            gc.enable()
        return samples
    finally:
        if baseline is not None:
            await baseline.close()
        await store.drop_schema()
        await store.aclose()


def run_history_window(url: str, window: int, turns: int, system: bool, background: int) -> dict[str, list[float]]:
    """Update, get and cold get with history on and off, interleaved turn by turn (see the module docstring)."""
    stores: dict[str, tuple[SQLChatMemoryStore, SQLChatMemoryStore]] = {}
    for name, history in (("off", False), ("on", True)):
        prefix = f"bench{uuid.uuid4().hex[:8]}_"
        store = SQLChatMemoryStore(url, table_prefix=prefix, ttl=TTL_SECONDS, history=history)
        store.create_schema()
        stores[name] = (store, SQLChatMemoryStore(url, table_prefix=prefix, snapshot_cache_size=0))
        everything = [message(turn) for turn in range(window + turns)]
        for index in range(background):
            other = f"background-{index}"
            version = store.save(other, everything, 0)
            store.save(other, everything[-window:], version)
        with store.engine.connect() as connection:
            if store.engine.dialect.name != "sqlite":
                for table in (store._tables.memories.name, store._tables.messages.name):
                    connection.exec_driver_sql(f"ANALYZE {'TABLE ' if 'mysql' in url else ''}{table}")
            else:
                connection.exec_driver_sql("ANALYZE")
    memory_id = f"bench-{uuid.uuid4().hex}"
    samples: dict[str, list[float]] = {f"{op} {name}": [] for op in ("update", "get", "get, cold") for name in stores}
    try:
        head: list[ChatMessage] = [SystemMessage("You are a helpful assistant. Answer briefly.")] if system else []
        messages = [*head, *(message(turn) for turn in range(window - len(head)))]
        versions = {name: store.save(memory_id, messages, 0) for name, (store, _) in stores.items()}
        gc.disable()
        try:
            for turn in range(window, window + turns):
                messages = [*head, *messages[len(head) + 1 :], message(turn)]
                order = list(stores) if turn % 2 else list(reversed(stores))
                for name in order:
                    store, cold = stores[name]
                    elapsed, versions[name] = timed(store.save, memory_id, messages, versions[name])
                    samples[f"update {name}"].append(elapsed)
                for name in order:
                    elapsed, got = timed(stores[name][0].get_messages, memory_id)
                    samples[f"get {name}"].append(elapsed)
                    if turn == window:
                        assert got == messages, "the store holds another window"
                for name in order:
                    elapsed, got = timed(stores[name][1].get_messages, memory_id)
                    samples[f"get, cold {name}"].append(elapsed)
                    if turn == window:
                        assert got == messages, "the cold store reads another window"
        finally:
            gc.enable()
        history = stores["on"][0].history(memory_id, limit=1, reverse=True)
        assert history.messages == [messages[-1]], "the history misses the last message"
        for name, (store, _) in stores.items():
            with store.engine.connect() as connection:
                table = store._tables.messages.name
                samples[f"rows {name}"] = [
                    float(connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())
                ]
        return samples
    finally:
        for store, cold in stores.values():
            cold.close()
            store.drop_schema()
            store.close()


def history_table(url: str, windows: list[int], turns: int, system: bool, background: int) -> None:
    """Print the history on/off table."""
    shown = make_url(url).render_as_string(hide_password=True)
    kind = "system message kept first" if system else "plain window"
    print(
        f"{shown}: history off vs on, {kind}, {background} other memories, {turns} steady-state turns per window, "
        "µs (median / p99)"
    )
    header = f"{'window':>6}  {'operation':<12}{'history off':>18}{'history on':>18}{'on/off (median)':>17}"
    print(header)
    print("-" * len(header))
    for window in windows:
        samples = run_history_window(url, window, turns, system, background)
        for operation in ("update", "get", "get, cold"):
            off, on = samples[f"{operation} off"], samples[f"{operation} on"]
            ratio = statistics.median(on) / statistics.median(off)
            print(
                f"{window:>6}  {operation:<12}{statistics.median(off):>9.0f} / {percentile(off, 0.99):>6.0f}"
                f"{statistics.median(on):>9.0f} / {percentile(on, 0.99):>6.0f}{ratio:>16.2f}x"
            )
        rows_off, rows_on = int(samples["rows off"][0]), int(samples["rows on"][0])
        print(f"{window:>6}  {'table rows':<12}{rows_off:>18}{rows_on:>18}")


_CONTENTION_WRITER = """
import json, sys, time
from chatmemory import MessageWindowChatMemory, UserMessage
from chatmemory.stores.sql import SQLChatMemoryStore
url, prefix, name, adds, how = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
latencies, errors = [], []
with SQLChatMemoryStore(url, table_prefix=prefix) as store:
    memory = MessageWindowChatMemory("contended", max_messages=100_000, store=store)
    for index in range(adds):
        message = UserMessage(f"{name}-{index}")
        start = time.perf_counter()
        try:
            if how == "modify":
                store.modify("contended", lambda messages: [*messages, message])
            else:
                memory.add(message)
        except Exception as exc:
            errors.append(type(exc).__name__)
        latencies.append(time.perf_counter() - start)
print(json.dumps({"latencies": latencies, "errors": errors}))
"""
_BURNER = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass\n"


def contention(url: str, how: str, threads: int = 8, processes: int = 8, adds: int = 100) -> str:
    """One contention run (see the module docstring); returns its line of figures."""
    import json
    import subprocess
    import threading

    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    with SQLChatMemoryStore(url, table_prefix=prefix) as setup:
        setup.create_schema()
    burners = [subprocess.Popen([sys.executable, "-c", _BURNER]) for _ in range(2)]
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    try:
        command = [sys.executable, "-c", _CONTENTION_WRITER, url, prefix]
        children = [
            subprocess.Popen([*command, f"p{index}", str(adds), how], stdout=subprocess.PIPE, text=True)
            for index in range(processes)
        ]
        outputs: list[str] = []
        shared = SQLChatMemoryStore(url, table_prefix=prefix)

        def thread_writer(name: str) -> None:
            memory = MessageWindowChatMemory("contended", max_messages=100_000, store=shared)
            for index in range(adds):
                message = UserMessage(f"{name}-{index}")
                began = time.perf_counter()
                try:
                    if how == "modify":
                        shared.modify("contended", lambda messages, message=message: [*messages, message])
                    else:
                        memory.add(message)
                except Exception as exc:
                    errors.append(type(exc).__name__)
                latencies.append(time.perf_counter() - began)

        workers = [threading.Thread(target=thread_writer, args=(f"t{index}",)) for index in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        shared.close()
        outputs += [child.communicate()[0] for child in children]
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    elapsed = time.perf_counter() - start
    for output in outputs:
        report = json.loads(output)
        latencies += report["latencies"]
        errors += report["errors"]
    with SQLChatMemoryStore(url, table_prefix=prefix) as check:
        stored = [str(message) for message in check.get_messages("contended")]
        check.drop_schema()
    written = (threads + processes) * adds
    doubled = len(stored) - len(set(stored))
    return (
        f"{how:<8} {threads + processes} writers x {adds}: kept {len(set(stored))}/{written}, doubled {doubled}, "
        f"errors {len(errors)}, p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms, {elapsed:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("CHATMEMORY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--async-turns", type=int, default=1000, help="turns of the async rows (0: none)")
    parser.add_argument("--contention", action="store_true", help="run the contention figures instead")
    parser.add_argument("--history", action="store_true", help="compare history=True with history off instead")
    parser.add_argument("--system", action="store_true", help="with --history: a system message stays first")
    parser.add_argument("--background", type=int, default=50, help="with --history: other memories per table")
    arguments = parser.parse_args()
    if arguments.history:
        history_table(arguments.url, arguments.windows, arguments.turns, arguments.system, arguments.background)
        return
    if arguments.contention:
        for how in ("add", "modify"):
            print(contention(arguments.url, how), flush=True)
        return
    with_baseline = make_url(arguments.url).get_backend_name() == "postgresql"
    shown = make_url(arguments.url).render_as_string(hide_password=True)
    print(f"{shown}: {arguments.turns} steady-state turns per window, µs (median / p99)")
    header = f"{'window':>6}  {'operation':<16}{'store':>18}{'baseline':>18}{'ratio (median)':>16}"
    print(header)
    print("-" * len(header))
    for window in arguments.windows:
        result = run_window(arguments.url, window, arguments.turns, with_baseline)
        samples = result["samples"]
        for operation in ("update", "get", "get, cold"):
            mine = samples[operation]
            line = f"{window:>6}  {operation:<16}{statistics.median(mine):>9.0f} / {percentile(mine, 0.99):>6.0f}"
            if with_baseline:
                theirs = samples[f"baseline {operation.split(',')[0]}"]
                ratio = statistics.median(mine) / statistics.median(theirs)
                line += f"{statistics.median(theirs):>9.0f} / {percentile(theirs, 0.99):>6.0f}{ratio:>15.2f}x"
            print(line)
        updates = samples["update"]
        if len(updates) >= 2 * FLAT_SPAN:
            # The baseline's beside the store's: on a shared machine both drift alike.
            flats = [
                f"{statistics.median(times[-FLAT_SPAN:]) / statistics.median(times[:FLAT_SPAN]):.2f}x"
                for times in (updates, samples["baseline update"] if with_baseline else None)
                if times is not None
            ]
            print(
                f"{window:>6}  {'update flat':<16}{'last/first ' + str(FLAT_SPAN) + ' turns':>18}"
                + "".join(f"{flat:>18}" for flat in flats)
            )
        counts = sorted(set(result["statements"]))
        print(f"{window:>6}  {'statements/upd.':<16}{', '.join(map(str, counts)):>18}")
        if arguments.async_turns:
            import asyncio

            timings = asyncio.run(run_window_async(arguments.url, window, arguments.async_turns, with_baseline))
            for operation in ("update", "get"):
                mine = timings[operation]
                name = "async " + operation
                line = f"{window:>6}  {name:<16}{statistics.median(mine):>9.0f} / {percentile(mine, 0.99):>6.0f}"
                if with_baseline:
                    theirs = timings[f"baseline {operation}"]
                    ratio = statistics.median(mine) / statistics.median(theirs)
                    line += f"{statistics.median(theirs):>9.0f} / {percentile(theirs, 0.99):>6.0f}{ratio:>15.2f}x"
                print(line)


if __name__ == "__main__":
    main()
