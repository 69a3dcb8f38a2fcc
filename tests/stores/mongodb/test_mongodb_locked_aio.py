"""The asyncio MongoDB store: writers queue in ``modify``, and one store serves any event loop.

Tasks each with a memory object of their own add to one memory; cancellation never leaves the lock taken;
``asyncio.run`` twice and five threads each running a loop share one store built from a URL, and every
client it made is closed (counted by a pool listener); a caller's client on another loop is refused at
once. Every wait is bounded: a test that hangs fails on its timeout.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient, MongoClient, monitoring

from chatmemory import ChatMessage, ConcurrentUpdateError, StoreError, UserMessage
from chatmemory.aio import MessageWindowChatMemory, SupportsContentionHint, SupportsLockedUpdate
from chatmemory.aio.stores.mongodb import MongoChatMemoryStore
from support.backends.mongodb import DATABASE, mongodb_url

pytestmark = pytest.mark.mongodb

TIMEOUT = 240.0
"""Seconds any test here may wait for its writers before it fails."""
TASKS = int(os.environ.get("CHATMEMORY_CONTENTION_TASKS", "50"))
ADDS = int(os.environ.get("CHATMEMORY_CONTENTION_TASK_ADDS", "10"))
"""The issue's figures are 100 tasks x 20 adds (set both variables): on SecantusDB, a Python server on two
shared cores, that run takes minutes (the window document grows to 2,000 messages), so the suite runs 50 x 10."""


class Pools(monitoring.ConnectionPoolListener):
    """Counts the connection pools clients open and close (one per server per client)."""

    def __init__(self) -> None:
        self.created = 0
        self.closed = 0
        self._lock = threading.Lock()

    def pool_created(self, event: monitoring.PoolCreatedEvent) -> None:
        with self._lock:
            self.created += 1

    def pool_closed(self, event: monitoring.PoolClosedEvent) -> None:
        with self._lock:
            self.closed += 1

    def pool_ready(self, event: monitoring.PoolReadyEvent) -> None:
        pass

    def pool_cleared(self, event: monitoring.PoolClearedEvent) -> None:
        pass

    def connection_created(self, event: monitoring.ConnectionCreatedEvent) -> None:
        pass

    def connection_ready(self, event: monitoring.ConnectionReadyEvent) -> None:
        pass

    def connection_closed(self, event: monitoring.ConnectionClosedEvent) -> None:
        pass

    def connection_check_out_started(self, event: monitoring.ConnectionCheckOutStartedEvent) -> None:
        pass

    def connection_check_out_failed(self, event: monitoring.ConnectionCheckOutFailedEvent) -> None:
        pass

    def connection_checked_out(self, event: monitoring.ConnectionCheckedOutEvent) -> None:
        pass

    def connection_checked_in(self, event: monitoring.ConnectionCheckedInEvent) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> str:
    return mongodb_url()


@pytest.fixture
def collection_name(url: str) -> Iterator[str]:
    name = f"locked_aio_{uuid.uuid4().hex}"
    yield name
    with MongoClient(url, serverSelectionTimeoutMS=10_000) as client:
        client[DATABASE].drop_collection(name)
        client[DATABASE].drop_collection(f"{name}_locks")


@pytest.fixture
def pools() -> Pools:
    return Pools()


@pytest.fixture
def make_store(url: str, collection_name: str, pools: Pools) -> Any:
    def make(**options: Any) -> MongoChatMemoryStore:
        return MongoChatMemoryStore(
            url,
            database=DATABASE,
            collection=collection_name,
            client_options={"event_listeners": [pools]},
            **options,
        )

    return make


def _texts(messages: list[ChatMessage]) -> list[str]:
    return [message.text for message in messages]  # type: ignore[attr-defined]


def _appending(text: str) -> Any:
    return lambda stored: [*stored, UserMessage(text)]


# ------------------------------------------------------------------------------------------- modify


async def test_modify_returns_the_version_and_none_writes_nothing(make_store: Any, collection_name: str) -> None:
    async with make_store() as store:
        assert isinstance(store, SupportsLockedUpdate)
        assert isinstance(store, SupportsContentionHint)
        assert await store.modify("m", lambda stored: None) == 0
        assert (await store.load("m")).version == 0  # still absent
        version = await store.modify("m", _appending("a"))
        assert version == (await store.load("m")).version > 0
        assert await store.modify("m", lambda stored: None) == version
        assert (await store.load("m")).version == version
        assert [memory_id async for memory_id in store.memory_ids()] == ["m"]
        assert await store.collection.database[f"{collection_name}_locks"].count_documents({}) == 0


async def test_a_planted_lock_delays_modify_by_its_lease_at_most(make_store: Any, collection_name: str) -> None:
    async with make_store(lock_wait=10) as store:
        locks = store.collection.database[f"{collection_name}_locks"]
        await locks.update_one(
            {"_id": "m"}, [{"$set": {"token": "x", "expires_at": {"$add": ["$$NOW", 500]}}}], upsert=True
        )
        started = time.monotonic()
        await asyncio.wait_for(store.modify("m", _appending("a")), TIMEOUT)
        assert 0.3 < time.monotonic() - started < 2.5
        await locks.update_one(
            {"_id": "m"}, [{"$set": {"token": "x", "expires_at": {"$add": ["$$NOW", 60_000]}}}], upsert=True
        )
        short: MongoChatMemoryStore = make_store(lock_wait=0.2)
        with pytest.raises(ConcurrentUpdateError, match="'m'"):
            await asyncio.wait_for(short.modify("m", _appending("b")), TIMEOUT)
        await short.aclose()
        assert _texts(await store.get_messages("m")) == ["a"]


async def test_tasks_cancelled_anywhere_never_leave_the_lock_taken(make_store: Any, collection_name: str) -> None:
    # A lock left taken would stop the last modify for the 30 s lease, past its 5 s lock_wait.
    # Two stores: the second one's tasks wait on the server's lock (polling), the first one's in the process.
    async with make_store(lock_lease=30, lock_wait=5) as store, make_store(lock_lease=30, lock_wait=5) as other:
        rng = random.Random(7)
        for round_ in range(5):
            tasks = [
                asyncio.ensure_future((store, other)[n % 2].modify("m", _appending(f"{round_}:{n}"))) for n in range(20)
            ]
            for task in tasks:
                await asyncio.sleep(rng.uniform(0, 0.01))
                task.cancel()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), TIMEOUT)
            await asyncio.wait_for(store.modify("m", _appending(f"{round_}:last")), TIMEOUT)
            texts = _texts(await store.get_messages("m"))
            assert texts[-1] == f"{round_}:last"
            assert len(texts) == len(set(texts))
            assert await store.collection.database[f"{collection_name}_locks"].count_documents({}) == 0


async def _add(memory: MessageWindowChatMemory, text: str, errors: list[str], latencies: list[float]) -> None:
    started = time.perf_counter()
    try:
        await memory.add(UserMessage(text))
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    latencies.append(time.perf_counter() - started)


async def _adds(memory: MessageWindowChatMemory, name: str, errors: list[str], latencies: list[float]) -> None:
    for index in range(ADDS):
        await _add(memory, f"{name}:{index}", errors, latencies)


@pytest.mark.parametrize("objects", ["independent", "shared"])
async def test_tasks_adding_to_one_memory_keep_every_add(make_store: Any, objects: str) -> None:
    async with make_store() as store:
        shared = MessageWindowChatMemory("m", max_messages=10_000, store=store)
        errors: list[str] = []
        latencies: list[float] = []
        memories = [
            shared if objects == "shared" else MessageWindowChatMemory("m", max_messages=10_000, store=store)
            for _ in range(TASKS)
        ]
        await store.load("m")  # connect first
        started = time.monotonic()
        await asyncio.wait_for(
            asyncio.gather(*(_adds(memory, f"t{n}", errors, latencies) for n, memory in enumerate(memories))),
            TIMEOUT,
        )
        elapsed = time.monotonic() - started
        texts = _texts(await store.get_messages("m"))
    total = TASKS * ADDS
    p50, p99 = statistics.median(latencies) * 1000, statistics.quantiles(latencies, n=100)[98] * 1000
    print(
        f"\nMongoDB asyncio, {objects} memory objects: {TASKS} tasks x {ADDS} adds: kept {len(set(texts))}/{total}, "
        f"doubled {len(texts) - len(set(texts))}, errors {len(errors)}, p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
        f"{elapsed:.1f} s"
    )
    assert not errors, errors[:3]
    assert len(texts) == len(set(texts)) == total


# ------------------------------------------------------------------------------------- event loops


def test_asyncio_run_twice_with_one_store(make_store: Any, pools: Pools) -> None:
    store: MongoChatMemoryStore = make_store()

    async def add(text: str) -> None:
        memory = MessageWindowChatMemory("m", max_messages=10, store=store)
        await asyncio.wait_for(memory.add(UserMessage(text)), TIMEOUT)

    asyncio.run(add("first"))
    assert pools.created == pools.closed == 1  # the first loop's client closed with its loop
    asyncio.run(add("second"))

    async def read_and_close() -> list[ChatMessage]:
        try:
            return await asyncio.wait_for(store.get_messages("m"), TIMEOUT)
        finally:
            await store.aclose()

    assert _texts(asyncio.run(read_and_close())) == ["first", "second"]
    assert pools.created == pools.closed == 3


def test_five_threads_each_running_a_loop_share_one_store(make_store: Any, pools: Pools) -> None:
    store: MongoChatMemoryStore = make_store()
    errors: list[str] = []

    def run(name: str) -> None:
        async def adds() -> None:
            memory = MessageWindowChatMemory("m", max_messages=1_000, store=store)
            for index in range(50):
                await memory.add(UserMessage(f"{name}:{index}"))

        try:
            asyncio.run(asyncio.wait_for(adds(), TIMEOUT))
        except Exception as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(f"t{n}",), name=f"t{n}") for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT + 10)
    assert not [thread.name for thread in threads if thread.is_alive()], "a thread hangs"
    assert not errors, errors
    texts = _texts(asyncio.run(store.get_messages("m")))
    assert len(texts) == len(set(texts)) == 250
    asyncio.run(store.aclose())
    assert pools.created == pools.closed >= 5


def test_aclose_closes_the_client_of_a_loop_running_in_another_thread(make_store: Any, pools: Pools) -> None:
    store: MongoChatMemoryStore = make_store()
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(store.save("m", [UserMessage("there")], 0), other).result(TIMEOUT)

        async def here() -> None:
            await store.load("m")
            assert pools.created == 2
            await store.aclose()

        asyncio.run(asyncio.wait_for(here(), TIMEOUT))
        assert pools.closed == 2  # the other loop's client too, though that loop still runs
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(TIMEOUT)
        other.close()


def test_a_callers_client_on_another_loop_is_refused_at_once(url: str, collection_name: str) -> None:
    first = asyncio.new_event_loop()
    client: AsyncMongoClient[Any] = AsyncMongoClient(url, serverSelectionTimeoutMS=10_000)
    store = MongoChatMemoryStore(client, database=DATABASE, collection=collection_name)
    try:
        first.run_until_complete(asyncio.wait_for(store.save("m", [UserMessage("a")], 0), TIMEOUT))

        async def elsewhere() -> None:
            with pytest.raises(StoreError, match="build the store from a URL"):
                await asyncio.wait_for(store.load("m"), 5)
            with pytest.raises(StoreError, match="one store"):
                await asyncio.wait_for(store.modify("m", _appending("b")), 5)

        asyncio.run(elsewhere())
        # A store given a client the caller already ran on another loop says the same.
        other = MongoChatMemoryStore(client, database=DATABASE, collection=collection_name)
        asyncio.run(_refused(other))
        assert _texts(first.run_until_complete(store.get_messages("m"))) == ["a"]
    finally:
        first.run_until_complete(client.close())
        first.close()


async def _refused(store: MongoChatMemoryStore) -> None:
    with pytest.raises(StoreError, match="build the store from a URL"):
        await asyncio.wait_for(store.load("m"), 5)
