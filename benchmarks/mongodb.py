"""MongoDB store against a raw ``update_one`` $push/$slice / ``find_one`` baseline, same server, same run.

    python benchmarks/mongodb.py [--url mongodb://127.0.0.1:27018/?replicaSet=secantus] [--turns 300]
                                 [--windows 20 200] [--no-retryable-writes] [--history]

For each window size the memory is filled, then every steady-state turn does, interleaved:

* store get: ``load()`` (one ``find_one``; the whole window comes back and is decoded);
* store update: ``save()`` of the window with the oldest message evicted and one appended;
* store update, system first: the same turn on a memory that keeps a system message at index 0 (the
  eviction is at position 1; the store still sends one ``$push``);
* baseline update: one ``update_one`` of ``$push`` (the new record, ``$each``/``$slice``) + ``$set`` of
  the expiry, no version filter;
* baseline get: ``find_one`` and decoding every record;
* async rows: the same store get / update through :mod:`chatmemory.aio.stores.mongodb` beside the same
  baseline through PyMongo's ``AsyncMongoClient``, on one event loop.

With ``--history`` the sync store's get and update are also measured on a store built with
``history=True`` (same collection name scheme, same turns, interleaved in the same run), and the table
ends with the history-on / history-off ratios the history issue asks for.

Both sides encode and decode with ``dumps_message`` / ``loads_message``. The baseline has no version
check and cannot keep a system message first: it is the floor, not an alternative. "bytes sent" is the
BSON size of the command document the driver sent (as a command listener sees it: with the session id
and cluster time, without the 21-byte OP_MSG framing). Figures only, no assertions: not run in CI.

On SecantusDB every retryable write costs about 10 ms of server time (under 1 ms without), which hides
everything else in the update timings; ``--no-retryable-writes`` (``retryWrites=false``) shows the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

# Run as a script, this file's directory is first on sys.path and its name would shadow nothing today,
# but keep the package imports unambiguous as the Redis benchmark does.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

import bson  # noqa: E402
from pymongo import AsyncMongoClient, MongoClient, monitoring  # noqa: E402

from chatmemory import ChatMessage, SystemMessage  # noqa: E402
from chatmemory.aio.stores.mongodb import MongoChatMemoryStore as AsyncMongoChatMemoryStore  # noqa: E402
from chatmemory.serialization.native import dumps_message, loads_message  # noqa: E402
from chatmemory.stores.mongodb import MongoChatMemoryStore  # noqa: E402

# The drivers are imported; now this directory may come back for the shared helpers.
sys.path.append(_HERE)
from measure import Timings, message  # noqa: E402

TTL_SECONDS = 3600
DATABASE = "chatmemory_bench"


class ByteCounter(monitoring.CommandListener):
    """Adds up the BSON size of every command the client sends."""

    sent = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        ByteCounter.sent += len(bson.encode(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def run_window(client: MongoClient[Any], window: int, turns: int, history: bool = False) -> dict[str, Timings]:
    collection_name = f"bench_{uuid.uuid4().hex[:8]}"
    store = MongoChatMemoryStore(client, database=DATABASE, collection=collection_name, ttl=TTL_SECONDS)
    history_store = MongoChatMemoryStore(
        client, database=DATABASE, collection=f"{collection_name}_h", ttl=TTL_SECONDS, history=True
    )
    raw = client[DATABASE][collection_name]
    names = ["store get", "store update", "store update, system", "baseline get", "baseline update"]
    if history:
        names += ["history store get", "history store update"]
    results = {name: Timings(lambda: ByteCounter.sent) for name in names}
    system = SystemMessage("You are a helpful assistant. Answer briefly.")
    messages = [message(turn) for turn in range(window)]
    store.update_messages("plain", messages)
    store.update_messages("system", [system, *messages[1:]])
    if history:
        history_store.update_messages("plain", messages)
    raw.insert_one(
        {
            "_id": "baseline",
            "messages": [dumps_message(m).decode() for m in messages],
            "expires_at": datetime.datetime.now(datetime.timezone.utc),
        }
    )

    def baseline_update(new: ChatMessage) -> None:
        expires_at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=TTL_SECONDS)
        raw.update_one(
            {"_id": "baseline"},
            {
                "$push": {"messages": {"$each": [dumps_message(new).decode()], "$slice": -window}},
                "$set": {"expires_at": expires_at},
            },
        )

    def baseline_get() -> list[ChatMessage]:
        document = raw.find_one({"_id": "baseline"})
        assert document is not None
        return [loads_message(record) for record in document["messages"]]

    def turn_on(memory_id: str, name: str, new: ChatMessage, keep_first: int, on: MongoChatMemoryStore = store) -> None:
        snapshot = on.load(memory_id)
        kept = [*snapshot.messages[:keep_first], *snapshot.messages[keep_first + 1 :], new]
        results[name].measure(lambda: on.save(memory_id, kept, snapshot.version))

    try:
        for turn in range(window, window + turns):
            new = message(turn)
            results["store get"].measure(lambda: store.load("plain"))
            turn_on("plain", "store update", new, 0)
            turn_on("system", "store update, system", new, 1)
            results["baseline update"].measure(lambda: baseline_update(new))  # noqa: B023
            results["baseline get"].measure(baseline_get)
            if history:
                results["history store get"].measure(lambda: history_store.load("plain"))
                turn_on("plain", "history store update", new, 0, history_store)
        assert store.get_messages("plain") == baseline_get()
        assert store.get_messages("system") == [system, *baseline_get()[1:]]
        if history:
            assert history_store.get_messages("plain") == baseline_get()
            newest = history_store.history("plain", reverse=True, limit=turns + window)
            assert len(newest.entries) == turns + window and newest.next_after is None
    finally:
        raw.drop()
        history_store.collection.drop()
        if history_store.history_collection is not None:
            history_store.history_collection.drop()
    return results


async def _measure(timings: Timings, action: Callable[[], Awaitable[Any]]) -> None:
    before = timings.bytes_sent()
    start = time.perf_counter_ns()
    await action()
    timings.micros.append((time.perf_counter_ns() - start) / 1000)
    timings.sent.append(timings.bytes_sent() - before)


async def run_window_async(url: str, retry_writes: bool, window: int, turns: int) -> dict[str, Timings]:
    """The same turns through the asyncio store and a raw ``AsyncMongoClient`` baseline."""
    client: AsyncMongoClient[Any] = AsyncMongoClient(url, event_listeners=[ByteCounter()], retryWrites=retry_writes)
    collection_name = f"bench_{uuid.uuid4().hex[:8]}"
    store = AsyncMongoChatMemoryStore(client, database=DATABASE, collection=collection_name, ttl=TTL_SECONDS)
    raw = client[DATABASE][collection_name]
    names = ("async store get", "async store update", "async baseline get", "async baseline update")
    results = {name: Timings(lambda: ByteCounter.sent) for name in names}
    messages = [message(turn) for turn in range(window)]
    await store.update_messages("plain", messages)
    await raw.insert_one({"_id": "baseline", "messages": [dumps_message(m).decode() for m in messages]})

    async def baseline_update(new: ChatMessage) -> None:
        expires_at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=TTL_SECONDS)
        await raw.update_one(
            {"_id": "baseline"},
            {
                "$push": {"messages": {"$each": [dumps_message(new).decode()], "$slice": -window}},
                "$set": {"expires_at": expires_at},
            },
        )

    async def baseline_get() -> list[ChatMessage]:
        document = await raw.find_one({"_id": "baseline"})
        assert document is not None
        return [loads_message(record) for record in document["messages"]]

    try:
        for turn in range(window, window + turns):
            new = message(turn)
            await _measure(results["async store get"], lambda: store.load("plain"))
            snapshot = await store.load("plain")
            kept = [*snapshot.messages[1:], new]
            await _measure(results["async store update"], lambda: store.save("plain", kept, snapshot.version))  # noqa: B023
            await _measure(results["async baseline update"], lambda: baseline_update(new))  # noqa: B023
            await _measure(results["async baseline get"], baseline_get)
        assert await store.get_messages("plain") == await baseline_get()
    finally:
        await raw.drop()
        await client.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", default=os.environ.get("CHATMEMORY_TEST_MONGODB_URL", "mongodb://127.0.0.1:27018/?replicaSet=secantus")
    )
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--no-retryable-writes", action="store_true", help="connect with retryWrites=false")
    parser.add_argument("--history", action="store_true", help="also measure a store built with history=True")
    options = parser.parse_args()
    client: MongoClient[Any] = MongoClient(
        options.url, event_listeners=[ByteCounter()], retryWrites=not options.no_retryable_writes
    )
    info = client.server_info()
    flavour = (
        f"SecantusDB {info['secantusVersion']} (reports {info['version']})"
        if "secantusVersion" in info
        else f"MongoDB {info['version']}"
    )
    print(
        f"{flavour} at {options.url} (retryWrites={not options.no_retryable_writes}); {options.turns} turns "
        "per window; "
        f"message ~{len(dumps_message(message(0)))} bytes encoded; ttl {TTL_SECONDS}s\n"
    )
    by_window = {}
    for window in options.windows:
        run_window(client, window, min(30, options.turns), options.history)  # warm-up: connections, collections
        by_window[window] = run_window(client, window, options.turns, options.history)
        retry = not options.no_retryable_writes
        asyncio.run(run_window_async(options.url, retry, window, min(30, options.turns)))
        by_window[window].update(asyncio.run(run_window_async(options.url, retry, window, options.turns)))
    print(f"{'window':>6}  {'operation':<24}{'median µs':>11}{'p99 µs':>10}{'bytes sent':>12}")
    for window, results in by_window.items():
        for name, timings in results.items():
            print(f"{window:>6}  {name:<24}{timings.median():>11.1f}{timings.p99():>10.1f}{timings.bytes():>12.0f}")
        print()
    print("ratios (median store / median baseline):")
    for window, results in by_window.items():
        update = results["store update"].median() / results["baseline update"].median()
        system_update = results["store update, system"].median() / results["baseline update"].median()
        get = results["store get"].median() / results["baseline get"].median()
        print(
            f"  window {window:>4}: update {update:.2f}x, update with system first {system_update:.2f}x, get {get:.2f}x"
        )
        async_update = results["async store update"].median() / results["async baseline update"].median()
        async_get = results["async store get"].median() / results["async baseline get"].median()
        print(
            f"  window {window:>4}: async update {async_update:.2f}x, async get {async_get:.2f}x (vs raw async pymongo)"
        )
    if options.history:
        print("history on / off (median, same run):")
        for window, results in by_window.items():
            get = results["history store get"].median() / results["store get"].median()
            update = results["history store update"].median() / results["store update"].median()
            print(f"  window {window:>4}: get {get:.2f}x, update {update:.2f}x")
    if len(by_window) >= 2:
        small, large = min(by_window), max(by_window)
        print(f"flatness (median at window {large} / window {small}):")
        for name in ("store update", "store update, system", "store get", "baseline update", "baseline get"):
            ratio = by_window[large][name].median() / by_window[small][name].median()
            print(f"  {name:<22} {ratio:.2f}x")
    client.close()


if __name__ == "__main__":
    main()
