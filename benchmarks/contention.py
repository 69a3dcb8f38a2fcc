"""Many writers of one memory: how fast adds land when they contend, and what one uncontended add costs.

    python benchmarks/contention.py URL [URL ...] [--tasks 100] [--adds 20] [--threads 8] [--processes 8]
                                    [--sync-adds 100] [--hogs 2] [--solo 300] [--loads solo,asyncio,threads,sync]

For each store URL (``redis://``, ``redis+cluster://``, ``redis+langchain4j://``, ``postgresql+psycopg://``,
``mysql+pymysql://``, ``sqlite:///``, ``mongodb://``), on fresh namespaces:

* **asyncio, shared object**: ``--tasks`` tasks on one event loop share one
  ``chatmemory.aio.MessageWindowChatMemory`` and make ``--adds`` adds each (the memory queues them);
* **asyncio, independent objects**: the same load, each task with a memory object of its own (they meet only
  in the store, which queues them on its lock after a first conflict);
* **sync, shared object** and **sync, independent objects**: ``--threads`` threads on one store, sharing one
  ``MessageWindowChatMemory`` or each with its own, ``--sync-adds`` adds each (the sync twin of the two above);
* **sync, threads + processes**: ``--threads`` threads and ``--processes`` processes, each with its own store
  built from the URL and its own memory, ``--sync-adds`` adds each, beside ``--hogs`` processes burning a CPU;
* **solo**: one writer alone, ``--solo`` adds: the uncontended add (median and p99), the figure to compare
  between versions (run this script with ``PYTHONPATH`` set to another checkout's ``src`` for the other).

``--loads`` picks the rows (all by default). Each row prints adds kept, doubled and failed, the wall
time, adds per second, and the p50 / p99 latency of one add. The messages are the realistic workload's
user texts (``workload.py``). Figures only, no assertions: not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
sys.path.append(_HERE)

from workload import text  # noqa: E402

from chatmemory import MessageWindowChatMemory, UserMessage, aio, open_store  # noqa: E402

_NAMESPACE = {"redis": "key_prefix", "rediss": "key_prefix", "mongodb": "collection"}


def namespace(url: str) -> dict[str, Any]:
    """Options that put the run's memories in a namespace of their own."""
    scheme = url.split("://", 1)[0].split("+", 1)[0]
    tag = uuid.uuid4().hex[:10]
    option = _NAMESPACE.get(scheme, "table_prefix")
    return {option: f"bench_{tag}" + (":" if option == "key_prefix" else "_")}


def words(writer: int, adds: int) -> list[str]:
    rng = random.Random(writer)
    return [f"[{writer}-{index}] {text(rng)}" for index in range(adds)]


def open_sync(url: str, options: dict[str, Any]) -> Any:
    store = open_store(url, **options)
    if hasattr(store, "create_schema"):
        store.create_schema()
    return store


class Row:
    def __init__(self, name: str) -> None:
        self.name = name
        self.latencies: list[float] = []
        self.errors = 0
        self.wall = 0.0
        self.kept = 0
        self.doubled = 0
        self.expected = 0

    def show(self) -> str:
        latencies = sorted(self.latencies) or [0.0]
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
        rate = self.kept / self.wall if self.wall else 0.0
        return (
            f"| {self.name} | {self.expected} | {self.kept} | {self.doubled} | {self.errors} | {self.wall:.2f} s"
            f" | {rate:,.0f} | {p50:.2f} | {p99:.2f} |"
        )


def tally(row: Row, stored: list[Any], expected: int) -> None:
    texts = [message.text for message in stored]
    row.expected = expected
    row.kept = len(set(texts))
    row.doubled = sum(count - 1 for count in Counter(texts).values() if count > 1)


async def _async_run(url: str, options: dict[str, Any], tasks: int, adds: int, shared: bool) -> Row:
    row = Row(f"asyncio, {tasks} tasks x {adds}, {'one shared object' if shared else 'independent objects'}")
    store = aio.open_store(url, **options)
    memory_id = f"contended-{uuid.uuid4().hex}"
    common = aio.MessageWindowChatMemory(memory_id, max_messages=tasks * adds + 1, store=store)

    async def writer(n: int) -> None:
        memory = (
            common if shared else aio.MessageWindowChatMemory(memory_id, max_messages=tasks * adds + 1, store=store)
        )
        for said in words(n, adds):
            started = time.perf_counter()
            try:
                await memory.add(UserMessage(said))
            except Exception:
                row.errors += 1
            row.latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(writer(n) for n in range(tasks)))
    row.wall = time.perf_counter() - started
    tally(row, await store.get_messages(memory_id), tasks * adds)
    await store.delete_messages(memory_id)
    await store.aclose()  # type: ignore[attr-defined]
    return row


def threads_run(url: str, options: dict[str, Any], threads: int, adds: int, shared: bool) -> Row:
    row = Row(f"sync, {threads} threads x {adds}, {'one shared object' if shared else 'independent objects'}")
    store = open_store(url, **options)
    memory_id = f"contended-{uuid.uuid4().hex}"
    common = MessageWindowChatMemory(memory_id, max_messages=threads * adds + 1, store=store)
    guard = threading.Lock()

    def writer(n: int) -> None:
        memory = common if shared else MessageWindowChatMemory(memory_id, max_messages=threads * adds + 1, store=store)
        latencies, errors = [], 0
        for said in words(n, adds):
            started = time.perf_counter()
            try:
                memory.add(UserMessage(said))
            except Exception:
                errors += 1
            latencies.append(time.perf_counter() - started)
        with guard:
            row.latencies += latencies
            row.errors += errors

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    row.wall = time.perf_counter() - started
    tally(row, store.get_messages(memory_id), threads * adds)
    store.delete_messages(memory_id)
    store.close()
    return row


def _sync_writer(url: str, options: dict[str, Any], memory_id: str, n: int, adds: int, out: Any) -> None:
    store = open_store(url, **options)
    memory = MessageWindowChatMemory(memory_id, max_messages=100_000, store=store)
    latencies, errors = [], 0
    for said in words(n, adds):
        started = time.perf_counter()
        try:
            memory.add(UserMessage(said))
        except Exception:
            errors += 1
        latencies.append(time.perf_counter() - started)
    store.close()
    out.put((latencies, errors))


def _burn(until: float) -> None:
    while time.monotonic() < until:
        pass


def sync_run(url: str, options: dict[str, Any], threads: int, processes: int, adds: int, hogs: int) -> Row:
    row = Row(f"sync, {threads} threads + {processes} processes x {adds}, {hogs} CPU hogs")
    memory_id = f"contended-{uuid.uuid4().hex}"
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    burners = [spawn.Process(target=_burn, args=(time.monotonic() + 600,)) for _ in range(hogs)]
    workers: list[Any] = [
        spawn.Process(target=_sync_writer, args=(url, options, memory_id, n, adds, results)) for n in range(processes)
    ]
    for burner in burners:
        burner.start()
    local: Any = _LocalQueue()
    workers += [
        threading.Thread(target=_sync_writer, args=(url, options, memory_id, processes + n, adds, local))
        for n in range(threads)
    ]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    row.wall = time.perf_counter() - started
    for burner in burners:
        burner.kill()
    for _ in range(processes):
        latencies, errors = results.get()
        row.latencies += latencies
        row.errors += errors
    for latencies, errors in local.items:
        row.latencies += latencies
        row.errors += errors
    store = open_store(url, **options)
    tally(row, store.get_messages(memory_id), (threads + processes) * adds)
    store.delete_messages(memory_id)
    store.close()
    return row


class _LocalQueue:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self._lock = threading.Lock()

    def put(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)


def solo(url: str, options: dict[str, Any], adds: int) -> Row:
    row = Row(f"solo writer, {adds} adds (window 20)")
    store = open_store(url, **options)
    memory_id = f"solo-{uuid.uuid4().hex}"
    memory = MessageWindowChatMemory(memory_id, max_messages=20, store=store)
    for said in words(0, adds):
        started = time.perf_counter()
        memory.add(UserMessage(said))
        row.latencies.append(time.perf_counter() - started)
    row.wall = sum(row.latencies)
    row.expected = row.kept = adds
    store.delete_messages(memory_id)
    store.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--adds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--sync-adds", type=int, default=100)
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--solo", type=int, default=300)
    parser.add_argument("--loads", default="solo,asyncio,threads,sync", help="the rows to run, comma-separated")
    args = parser.parse_args()
    loads = set(args.loads.split(","))
    for url in args.urls:
        options = namespace(url)
        store = open_sync(url, options)  # the tables, once
        store.close()
        print(f"\n{url}\n")
        print("| load | adds | kept | doubled | errors | wall | adds/s | p50 ms | p99 ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        if "solo" in loads:
            print(solo(url, options, args.solo).show(), flush=True)
        if "asyncio" in loads:
            for shared in (True, False):
                print(asyncio.run(_async_run(url, options, args.tasks, args.adds, shared)).show(), flush=True)
        if "threads" in loads:
            for shared in (True, False):
                print(threads_run(url, options, args.threads, args.sync_adds, shared).show(), flush=True)
        if "sync" in loads:
            row = sync_run(url, options, args.threads, args.processes, args.sync_adds, args.hogs)
            print(row.show(), flush=True)
        if hasattr(store, "drop_schema"):
            store = open_store(url, **options)
            store.drop_schema()
            store.close()


if __name__ == "__main__":
    main()
