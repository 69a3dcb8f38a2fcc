"""Redis store against a raw pipelined RPUSH+LTRIM+EXPIRE / LRANGE baseline, on the same server, same run.

    python benchmarks/redis.py [--url redis://127.0.0.1:6379/0] [--turns 2000] [--windows 20 200] [--history]

For each window size the memory is filled, then every steady-state turn does the operations below; the
light ones run in one loop and the whole-list ones in a second, and the window sizes take turns within
each loop, so that load on the machine weighs on every column alike:

* store get: ``load()`` on the writing store (its snapshot cache makes this an "unchanged?" round trip);
* store update: ``save()`` of the window with the oldest message evicted and one appended;
* store update_messages: the same turn on another memory through the plain contract,
  ``update_messages(id, whole_window)`` (how LangChain4j-style memories and most integrations call a store);
* store get, cold: ``get_messages()`` on a second store with no cache (the whole list comes back and is
  decoded, as for a process that did not write last);
* store update, no cache: the same turn on a store with ``snapshot_cache_size=0`` (a full rewrite every turn);
* baseline update: one pipeline of ``RPUSH`` (the new record) + ``LTRIM`` + ``EXPIRE``;
* baseline get: ``LRANGE 0 -1`` and decoding every record.

The asyncio rows run the same light turns on one event loop: ``chatmemory.aio.stores.redis`` against the
same pipeline sent with ``redis.asyncio`` (the issue-11 goal: async update at most 1.2x that baseline).

With ``--history`` it measures history on against off instead: two stores on the same server, one built
with ``history=True``, take turns (same window, same messages, alternating which goes first) doing a
window memory's turn, ``load()`` then ``save()``; the table gives both medians and their ratio (the goal:
get with history at most 1.1x get without).

Both sides encode and decode with ``dumps_message`` / ``loads_message``. The baseline is not atomic
across processes, has no version check and cannot keep a system message first: it is the floor, not an
alternative. Bytes are what the client wrote to its socket for that one command. Figures only, no
assertions: this is not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
import uuid
from typing import Any

# Run as a script, this file's directory is first on sys.path and its name would shadow redis-py.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

from redis import Redis  # noqa: E402
from redis.asyncio import Redis as AsyncRedis  # noqa: E402
from redis.connection import Connection  # noqa: E402

from chatmemory import ChatMessage  # noqa: E402
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncRedisChatMemoryStore  # noqa: E402
from chatmemory.serialization.native import dumps_message, loads_message  # noqa: E402
from chatmemory.stores.redis import RedisChatMemoryStore  # noqa: E402

# The drivers are imported; now this directory may come back for the shared helpers.
sys.path.append(_HERE)
from measure import Timings, message  # noqa: E402

TTL_SECONDS = 3600


class CountingConnection(Connection):
    """A connection that counts the bytes it sends."""

    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        chunks = [command] if isinstance(command, (bytes, bytearray, memoryview)) else command
        CountingConnection.sent += sum(len(chunk) for chunk in chunks)
        super().send_packed_command(command, check_health)


class WindowRun:
    """One window size: a memory in the store, one on a cache-less store, and the baseline list."""

    def __init__(self, client: Redis, window: int) -> None:
        self.client, self.window = client, window
        self.prefix = f"chatmemory-bench:{uuid.uuid4().hex[:8]}:"
        self.store = RedisChatMemoryStore(client, key_prefix=self.prefix, ttl=TTL_SECONDS)
        self.cold_reader = RedisChatMemoryStore(client, key_prefix=self.prefix, ttl=TTL_SECONDS, snapshot_cache_size=0)
        self.uncached = RedisChatMemoryStore(client, key_prefix=self.prefix, ttl=TTL_SECONDS, snapshot_cache_size=0)
        self.baseline_key = f"{self.prefix}baseline".encode()
        self.results = {
            name: Timings(lambda: CountingConnection.sent)
            for name in (
                "store get",
                "store update",
                "store update_messages",
                "store get, cold",
                "store update, no cache",
                "baseline get",
                "baseline update",
            )
        }
        messages = [message(turn) for turn in range(window)]
        self.store.update_messages("cached", messages)
        self.store.update_messages("plain", messages)
        self.plain_window = messages
        self.uncached.update_messages("uncached", messages)
        client.rpush(self.baseline_key, *(dumps_message(m) for m in messages))
        client.expire(self.baseline_key, TTL_SECONDS)

    def baseline_update(self, new: ChatMessage) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(self.baseline_key, dumps_message(new))
        pipe.ltrim(self.baseline_key, -self.window, -1)
        pipe.expire(self.baseline_key, TTL_SECONDS)
        pipe.execute()

    def baseline_get(self) -> list[ChatMessage]:
        return [loads_message(record) for record in self.client.lrange(self.baseline_key, 0, -1)]

    def light_turn(self, turn: int) -> None:
        """A window memory's turn (load, then save one message in, one out) and the baseline's update."""
        new = message(self.window + turn)
        snapshot = self.results["store get"].measure(lambda: self.store.load("cached"))
        self.results["store update"].measure(
            lambda: self.store.save("cached", [*snapshot.messages[1:], new], snapshot.version)
        )
        self.results["baseline update"].measure(lambda: self.baseline_update(new))
        self.plain_window = [*self.plain_window[1:], new]
        self.results["store update_messages"].measure(lambda: self.store.update_messages("plain", self.plain_window))

    def heavy_turn(self, turn: int) -> None:
        """Whole-list transfers: a reader with no cache, the baseline's read, a cache-less writer."""
        self.results["store get, cold"].measure(lambda: self.cold_reader.get_messages("cached"))
        self.results["baseline get"].measure(self.baseline_get)
        snapshot = self.uncached.load("uncached")
        new = [*snapshot.messages[1:], message(self.window + turn)]
        self.results["store update, no cache"].measure(lambda: self.uncached.save("uncached", new, snapshot.version))

    def check_and_drop(self) -> None:
        assert self.store.get_messages("cached") == self.baseline_get() == self.cold_reader.get_messages("cached")
        assert self.cold_reader.get_messages("plain") == self.plain_window
        keys = list(self.client.scan_iter(match=RedisChatMemoryStore.key_pattern(self.prefix), count=1000))
        self.client.delete(*keys)


def run(client: Redis, windows: list[int], turns: int) -> dict[int, dict[str, Timings]]:
    """Every window's turns interleaved (so load on the machine weighs on all alike), light ones first."""
    runs = [WindowRun(client, window) for window in windows]
    try:
        for step in (WindowRun.light_turn, WindowRun.heavy_turn):
            for turn in range(turns):
                for each in runs if turn % 2 == 0 else reversed(runs):
                    step(each, turn)
        for each in runs:
            each.check_and_drop()
    except BaseException:
        for each in runs:
            each.client.delete(*each.client.scan_iter(match=RedisChatMemoryStore.key_pattern(each.prefix)))
        raise
    return {each.window: each.results for each in runs}


class AsyncWindowRun:
    """One window size on asyncio: the async store's turn and the raw async pipeline, same loop."""

    def __init__(self, client: AsyncRedis, window: int) -> None:
        self.client, self.window = client, window
        self.prefix = f"chatmemory-bench:{uuid.uuid4().hex[:8]}:"
        self.store = AsyncRedisChatMemoryStore(client, key_prefix=self.prefix, ttl=TTL_SECONDS)
        self.baseline_key = f"{self.prefix}baseline".encode()
        self.results = {name: Timings(lambda: 0) for name in ("async get", "async update", "raw async update")}

    async def fill(self) -> None:
        messages = [message(turn) for turn in range(self.window)]
        await self.store.update_messages("cached", messages)
        await self.client.rpush(self.baseline_key, *(dumps_message(m) for m in messages))

    async def turn(self, turn: int) -> None:
        new = message(self.window + turn)
        start = time.perf_counter_ns()
        snapshot = await self.store.load("cached")
        loaded = time.perf_counter_ns()
        await self.store.save("cached", [*snapshot.messages[1:], new], snapshot.version)
        saved = time.perf_counter_ns()
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(self.baseline_key, dumps_message(new))
        pipe.ltrim(self.baseline_key, -self.window, -1)
        pipe.expire(self.baseline_key, TTL_SECONDS)
        await pipe.execute()
        done = time.perf_counter_ns()
        for name, nanos in (
            ("async get", loaded - start),
            ("async update", saved - loaded),
            ("raw async update", done - saved),
        ):
            self.results[name].micros.append(nanos / 1000)
            self.results[name].sent.append(0)

    async def check_and_drop(self) -> None:
        stored = await self.store.get_messages("cached")
        assert [dumps_message(m) for m in stored] == await self.client.lrange(self.baseline_key, 0, -1)
        keys = [key async for key in self.client.scan_iter(match=RedisChatMemoryStore.key_pattern(self.prefix))]
        await self.client.delete(*keys)


async def run_async(url: str, windows: list[int], turns: int) -> dict[int, dict[str, Timings]]:
    """The asyncio turns of every window, interleaved like :func:`run`'s."""
    client = AsyncRedis.from_url(url)
    try:
        runs = [AsyncWindowRun(client, window) for window in windows]
        for each in runs:
            await each.fill()
        for turn in range(turns):
            for each in runs if turn % 2 == 0 else reversed(runs):
                await each.turn(turn)
        for each in runs:
            await each.check_and_drop()
        return {each.window: each.results for each in runs}
    finally:
        await client.aclose()


class HistoryRun:
    """One window size, history off and on: two stores, one memory each, the same turns."""

    OPERATIONS = ("get", "update")

    def __init__(self, client: Redis, window: int) -> None:
        self.client, self.window = client, window
        self.prefix = f"chatmemory-bench:{uuid.uuid4().hex[:8]}:"
        self.stores = {
            history: RedisChatMemoryStore(client, key_prefix=self.prefix, ttl=TTL_SECONDS, history=history)
            for history in (False, True)
        }
        self.results = {
            (history, name): Timings(lambda: CountingConnection.sent)
            for history in (False, True)
            for name in self.OPERATIONS
        }
        self.turns = 0
        messages = [message(turn) for turn in range(window)]
        for history, store in self.stores.items():
            store.update_messages(f"m{history}", messages)

    def turn(self, turn: int) -> None:
        new = message(self.window + turn)
        for history in (False, True) if turn % 2 == 0 else (True, False):
            store, memory_id = self.stores[history], f"m{history}"
            snapshot = self.results[history, "get"].measure(lambda: store.load(memory_id))  # noqa: B023
            self.results[history, "update"].measure(
                lambda: store.save(memory_id, [*snapshot.messages[1:], new], snapshot.version)  # noqa: B023
            )
        self.turns += 1

    def check_and_drop(self) -> None:
        assert self.stores[False].get_messages("mFalse") == self.stores[True].get_messages("mTrue")
        newest = self.stores[True].history("mTrue", reverse=True, limit=1).entries[0]
        assert newest.sequence == self.window + self.turns
        keys = list(self.client.scan_iter(match=RedisChatMemoryStore.key_pattern(self.prefix), count=1000))
        self.client.delete(*keys)


def run_history(client: Redis, windows: list[int], turns: int) -> dict[int, HistoryRun]:
    """History off and on, every window's turns interleaved."""
    runs = [HistoryRun(client, window) for window in windows]
    try:
        for turn in range(turns):
            for each in runs if turn % 2 == 0 else reversed(runs):
                each.turn(turn)
        for each in runs:
            each.check_and_drop()
    except BaseException:
        for each in runs:
            each.client.delete(*each.client.scan_iter(match=RedisChatMemoryStore.key_pattern(each.prefix)))
        raise
    return {each.window: each for each in runs}


def main_history(client: Redis, windows: list[int], turns: int) -> None:
    """Print history on against off."""
    gc.collect()
    gc.disable()
    try:
        run_history(client, windows, min(200, turns))  # warm-up
        by_window = run_history(client, windows, turns)
    finally:
        gc.enable()
    print("history on vs off, same run (load() then save() of one turn; median and p99 in µs):")
    print(
        f"{'window':>6}  {'operation':<10}{'off median':>11}{'on median':>11}{'on/off':>8}"
        f"{'off p99':>9}{'on p99':>9}{'off bytes':>11}{'on bytes':>10}"
    )
    for window, each in by_window.items():
        for name in HistoryRun.OPERATIONS:
            off, on = each.results[False, name], each.results[True, name]
            print(
                f"{window:>6}  {name:<10}{off.median():>11.1f}{on.median():>11.1f}{on.median() / off.median():>7.2f}x"
                f"{off.p99():>9.1f}{on.p99():>9.1f}{off.bytes():>11.0f}{on.bytes():>10.0f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("CHATMEMORY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--history", action="store_true", help="measure history=True against history off")
    options = parser.parse_args()
    client = Redis.from_url(options.url, connection_class=CountingConnection)
    print(
        f"Redis {client.info('server')['redis_version']} at {options.url}; {options.turns} turns per window; "
        f"message ~{len(dumps_message(message(0)))} bytes encoded; ttl {TTL_SECONDS}s\n"
    )
    if options.history:
        main_history(client, options.windows, options.turns)
        client.close()
        return
    # Reference counting frees everything these turns allocate; the cyclic collector would only add
    # pauses, proportional to the live heap, to whichever operation happened to trigger it.
    gc.collect()
    gc.disable()
    try:
        run(client, options.windows, min(200, options.turns))  # warm-up: connections, scripts, caches
        by_window = run(client, options.windows, options.turns)
        asyncio.run(run_async(options.url, options.windows, min(200, options.turns)))
        async_by_window = asyncio.run(run_async(options.url, options.windows, options.turns))
    finally:
        gc.enable()
    print(f"{'window':>6}  {'operation':<24}{'median µs':>11}{'p99 µs':>10}{'bytes sent':>12}")
    for window, results in by_window.items():
        for name, timings in results.items():
            print(f"{window:>6}  {name:<24}{timings.median():>11.1f}{timings.p99():>10.1f}{timings.bytes():>12.0f}")
        print()
    print("ratios (median store / median baseline):")
    for window, results in by_window.items():
        parts = []
        pairs = (
            ("update", "store update", "baseline update"),
            ("update_messages", "store update_messages", "baseline update"),
            ("get", "store get", "baseline get"),
            ("cold get", "store get, cold", "baseline get"),
        )
        for operation, store_name, baseline_name in pairs:
            parts.append(f"{operation} {results[store_name].median() / results[baseline_name].median():.2f}x")
        print(f"  window {window:>4}: " + ", ".join(parts))
    print("\nasyncio, one event loop (redis.asyncio):")
    print(f"{'window':>6}  {'operation':<24}{'median µs':>11}{'p99 µs':>10}")
    for window, results in async_by_window.items():
        for name, timings in results.items():
            print(f"{window:>6}  {name:<24}{timings.median():>11.1f}{timings.p99():>10.1f}")
    for window, results in async_by_window.items():
        ratio = results["async update"].median() / results["raw async update"].median()
        versus_sync = results["async update"].median() / by_window[window]["store update"].median()
        print(
            f"  window {window:>4}: async update / raw async baseline {ratio:.2f}x (goal <= 1.2x); "
            f"async / sync store update {versus_sync:.2f}x"
        )
    if len(by_window) >= 2:
        small, large = min(by_window), max(by_window)
        print(f"flatness (median at window {large} / window {small}):")
        for name in ("store update", "store get", "store get, cold", "baseline update", "baseline get"):
            ratio = by_window[large][name].median() / by_window[small][name].median()
            print(f"  {name:<20} {ratio:.2f}x")
    client.close()


if __name__ == "__main__":
    main()
