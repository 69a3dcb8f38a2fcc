"""Issue 10 item 6 for MongoDB: many writers on one memory, threads and processes, on a busy machine.

16 writers (8 threads, 8 processes) x 100 adds (``CHATMEMORY_CONTENTION_ADDS``; 10 by default) to one
memory while two processes burn CPU. Each add is a
window memory's read-modify-write (load, evict to 100 messages, append, save at the loaded version),
retried under :class:`~chatmemory.stores.base.RetryPolicy`'s time budget with jittered backoff, as the
memories do. Every successful save reports the version it started from and the one it wrote: the 1,600
saves must form one chain (a lost update shows as two saves from one version, a doubled add as a text
twice), no writer gives up, and the stored window is the chain's last 100 texts. The add latency
percentiles are printed (figures, not assertions).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from chatmemory import ConcurrentUpdateError, UserMessage
from chatmemory.stores.base import RetryPolicy
from chatmemory.stores.mongodb import MongoChatMemoryStore
from support.backends.mongodb import DATABASE, mongodb_url

pytestmark = pytest.mark.mongodb

THREADS, PROCESSES, WINDOW = 8, 8, 100
ADDS = int(os.environ.get("CHATMEMORY_CONTENTION_ADDS", "10"))
"""Adds per writer. The issue's figure is 100 (set CHATMEMORY_CONTENTION_ADDS=100): on SecantusDB, a
Python server sharing two cores with the burners, that run takes about five minutes, so the suite runs 10."""
Link = tuple[int, int, str, float]
"""A successful save: (version read, version written, text added, seconds the add took)."""


def _burn(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def _add(store: MongoChatMemoryStore, policy: RetryPolicy, text: str) -> Link:
    started = time.perf_counter()
    attempts = policy.start()
    while True:
        snapshot = store.load("chat")
        try:
            kept = [*snapshot.messages[-(WINDOW - 1) :], UserMessage(text)]
            written = store.save("chat", kept, snapshot.version)
            return snapshot.version, written, text, time.perf_counter() - started
        except ConcurrentUpdateError:
            delay = attempts.backoff()
            if delay is None:
                raise
            time.sleep(delay)


def _write(url: str, collection: str, name: str, start: Any) -> tuple[list[Link], str | None]:
    """One writer: ``ADDS`` adds; the links it made and the error that stopped it, if any."""
    links: list[Link] = []
    policy = RetryPolicy(max_delay=0.5)
    with MongoChatMemoryStore(url, database=DATABASE, collection=collection) as store:
        store.load("chat")  # connect before the start line
        start.wait()
        try:
            links.extend(_add(store, policy, f"{name}:{index}") for index in range(ADDS))
        except Exception as exc:
            return links, f"{type(exc).__name__}: {exc}"
    return links, None


def _process_writer(url: str, collection: str, name: str, start: Any, results: Any) -> None:
    results.put((name, *_write(url, collection, name, start)))


@pytest.fixture
def collection_name() -> Iterator[str]:
    name = f"contention_{uuid.uuid4().hex}"
    yield name
    with MongoClient(mongodb_url()) as client:
        client[DATABASE].drop_collection(name)


def test_sixteen_writers_on_one_memory_lose_and_double_nothing(collection_name: str) -> None:
    url = mongodb_url()
    spawn = multiprocessing.get_context("spawn")
    start, results = spawn.Event(), spawn.Queue()
    burners = [spawn.Process(target=_burn, args=(600,), daemon=True) for _ in range(2)]
    processes = [
        spawn.Process(target=_process_writer, args=(url, collection_name, f"p{n}", start, results), daemon=True)
        for n in range(PROCESSES)
    ]
    by_thread: dict[str, tuple[list[Link], str | None]] = {}
    threads = [
        threading.Thread(
            target=lambda name: by_thread.__setitem__(name, _write(url, collection_name, name, start)), args=(f"t{n}",)
        )
        for n in range(THREADS)
    ]
    try:
        for worker in [*burners, *processes, *threads]:
            worker.start()
        time.sleep(1.0)  # let the spawned processes import and connect
        began = time.monotonic()
        start.set()
        collected = {name: (links, error) for name, links, error in (results.get(timeout=600) for _ in processes)}
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - began
    finally:
        for worker in [*burners, *processes]:
            worker.terminate()
            worker.join()
    collected.update(by_thread)

    errors = {name: error for name, (_, error) in collected.items() if error is not None}
    links = sorted(link for made, _ in collected.values() for link in made)
    texts = [text for _, _, text, _ in links]
    latencies = sorted(seconds for *_, seconds in links)
    with MongoChatMemoryStore(url, database=DATABASE, collection=collection_name) as store:
        stored = [message.text for message in store.get_messages("chat")]  # type: ignore[attr-defined]
    p50, p99 = statistics.median(latencies) * 1000, statistics.quantiles(latencies, n=100)[98] * 1000
    total = (THREADS + PROCESSES) * ADDS
    print(
        f"\nMongoDB contention: {THREADS} threads + {PROCESSES} processes x {ADDS} adds, 2 CPU burners: "
        f"kept {len(set(texts))}/{total}, doubled {len(texts) - len(set(texts))}, errors {len(errors)}, "
        f"add p50 {p50:.1f} ms, p99 {p99:.1f} ms, {elapsed:.1f} s"
    )
    assert not errors, errors
    assert len(texts) == len(set(texts)) == total
    # One chain: each save starts from the version the previous one wrote.
    for (_, written, _, _), (read, _, _, _) in itertools.pairwise(links):
        assert read == written
    assert stored == texts[-WINDOW:]
