"""Window memories under concurrency: 200 memories on one event loop beside 16 threads of sync memories.

Prints turns per second (a turn: the user's message and the answer, one ``add``), the median, p99 and
slowest latency of one turn, and when the first and the last memory had played all their turns, for the
asyncio memories (``chatmemory.aio``, one task per memory) and for the sync memories (a pool of 16
threads sharing the memories), both on the store a URL names. With more tasks than the store has
connections, the slowest turn and the spread of the finishing times show whether tasks take their turns
in order (the stores admit operations first come, first served) or a few take turn after turn while the
others wait (the threads play their memories one after another: their spread is the run's length)::

    python benchmarks/memories.py                       # the in-memory stores
    python benchmarks/memories.py redis://127.0.0.1:6379/0 --memories 200 --turns 20

Each run writes fresh memory ids and deletes them at the end. A store with a schema gets it created first.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
import uuid

# This folder holds redis.py and mongodb.py, which would shadow the drivers of those names: look in it last.
sys.path.append(sys.path.pop(0))
from typing import Any

from measure import message

import chatmemory
from chatmemory import aio


def _report(label: str, turns: int, seconds: float, micros: list[float], finished: list[float]) -> None:
    p99 = statistics.quantiles(micros, n=100)[98] if len(micros) >= 100 else max(micros)
    print(
        f"{label:<34} {turns / seconds:>10,.0f} turns/s   median {statistics.median(micros):>8,.0f} us   "
        f"p99 {p99:>9,.0f} us   slowest {max(micros):>9,.0f} us   "
        f"memories done from {min(finished):.2f} s to {max(finished):.2f} s"
    )


async def run_async(url: str, memories: int, turns: int, window: int) -> None:
    """One task per memory on one loop, every task playing ``turns`` turns."""
    store = aio.open_store(url)
    async with store:
        if isinstance(store, aio.SupportsSchema):
            await store.create_schema()
        prefix = f"bench-{uuid.uuid4().hex[:8]}"
        micros: list[float] = []
        finished: list[float] = []

        async def conversation(number: int) -> None:
            memory = aio.MessageWindowChatMemory(f"{prefix}-{number}", max_messages=window, store=store)
            for turn in range(turns):
                started = time.perf_counter_ns()
                await memory.add(message(2 * turn), message(2 * turn + 1))
                micros.append((time.perf_counter_ns() - started) / 1000)
            finished.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(conversation(number) for number in range(memories)))
        _report(
            f"asyncio, {memories} tasks on one loop", memories * turns, time.perf_counter() - began, micros, finished
        )
        for number in range(memories):
            await store.delete_messages(f"{prefix}-{number}")


def run_threads(url: str, memories: int, turns: int, window: int, threads: int) -> None:
    """``threads`` threads sharing ``memories`` sync memories, each memory played by one thread."""
    store: Any = chatmemory.open_store(url)
    with store:
        if isinstance(store, chatmemory.SupportsSchema):
            store.create_schema()
        prefix = f"bench-{uuid.uuid4().hex[:8]}"
        micros: list[float] = []
        finished: list[float] = []
        lock = threading.Lock()

        def play(numbers: range) -> None:
            mine: list[float] = []
            done: list[float] = []
            for number in numbers:
                memory = chatmemory.MessageWindowChatMemory(f"{prefix}-{number}", max_messages=window, store=store)
                for turn in range(turns):
                    started = time.perf_counter_ns()
                    memory.add(message(2 * turn), message(2 * turn + 1))
                    mine.append((time.perf_counter_ns() - started) / 1000)
                done.append(time.perf_counter() - began)
            with lock:
                micros.extend(mine)
                finished.extend(done)

        workers = [threading.Thread(target=play, args=(range(i, memories, threads),)) for i in range(threads)]
        began = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        _report(f"sync, {threads} threads", memories * turns, time.perf_counter() - began, micros, finished)
        for number in range(memories):
            store.delete_messages(f"{prefix}-{number}")


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and print both rows."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", nargs="?", default="memory://")
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--threads", type=int, default=16)
    options = parser.parse_args(argv)
    print(f"{options.url}: {options.memories} memories x {options.turns} turns, window {options.window}")
    asyncio.run(run_async(options.url, options.memories, options.turns, options.window))
    run_threads(options.url, options.memories, options.turns, options.window, options.threads)


if __name__ == "__main__":
    main()
