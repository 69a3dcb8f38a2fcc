"""The asyncio LangChain4j Redis store's ``modify``: tasks queue instead of storming, on the server and the cluster.

``modify`` returns the version the memory is at and a change returning ``None`` writes nothing; a lock left
by a dead holder delays the next writer by its lease at most; tasks cancelled anywhere never leave the lock
taken; tasks each with a window memory object of their own add to one memory and keep every add, as tasks
sharing one object do. Every wait is bounded: a test that hangs fails on its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from chatmemory import ChatMessage, UserMessage
from chatmemory.aio import MessageWindowChatMemory, SupportsLockedUpdate
from chatmemory.aio.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.langchain4j_redis.keys import glob_literal, lock_key
from support.backends.redis import cluster_url, redis_url

pytestmark = pytest.mark.redis

TIMEOUT = 240.0
"""Seconds any test here may wait for its writers before it fails."""
LEASE = 0.5
"""The lease of the stores here: the longest a dead holder may keep the others waiting."""
SLACK = 0.6
"""What a loaded two-core machine may add to a wait (polling backoff, scheduling) beyond the lease."""
TASKS = int(os.environ.get("CHATMEMORY_CONTENTION_TASKS", "50"))
ADDS = int(os.environ.get("CHATMEMORY_CONTENTION_TASK_ADDS", "10"))
"""The issue's figures are 100 tasks x 20 adds (set both variables); the suite runs 50 x 10."""


@pytest.fixture(params=["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def url(request: pytest.FixtureRequest) -> str:
    return str(redis_url() if request.param == "server" else cluster_url())


@pytest.fixture(params=[False, True], ids=["plain", "history"])
def history(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
async def store(url: str, history: bool) -> AsyncIterator[LangChain4jRedisChatMemoryStore]:
    prefix = f"lc4j-locked-aio:{uuid.uuid4().hex[:10]}:"
    made = LangChain4jRedisChatMemoryStore(url, key_prefix=prefix, lock_lease=LEASE, history=history)
    yield made
    client = made.client
    keys = [key async for key in client.scan_iter(match=glob_literal(prefix.encode()) + b"*", count=1000)]
    for key in keys:
        await client.delete(key)
    await made.aclose()


def _append(text: str) -> Callable[[list[ChatMessage]], list[ChatMessage]]:
    return lambda messages: [*messages, UserMessage(text)]


def _texts(messages: list[ChatMessage]) -> list[str]:
    return [str(message.text) if isinstance(message, UserMessage) else repr(message) for message in messages]


async def test_modify_returns_the_version_and_none_writes_nothing(store: LangChain4jRedisChatMemoryStore) -> None:
    assert isinstance(store, SupportsLockedUpdate)
    assert await asyncio.wait_for(store.modify("new", lambda messages: None), TIMEOUT) == 0
    assert await store.client.exists(store.key_of("new")) == 0
    first = await asyncio.wait_for(store.modify("m", _append("a")), TIMEOUT)
    assert (await store.load("m")).version == first
    second = await asyncio.wait_for(store.modify("m", _append("b")), TIMEOUT)
    assert second > first and (await store.load("m")).version == second
    assert await asyncio.wait_for(store.modify("m", lambda messages: None), TIMEOUT) == second
    assert (await store.load("m")).version == second and _texts(await store.get_messages("m")) == ["a", "b"]
    if store.keeps_history:
        assert _texts((await store.history("m")).messages) == ["a", "b"]
    assert await store.client.exists(lock_key(store.key_of("m"))) == 0


async def test_a_planted_lock_delays_modify_by_its_lease_at_most(store: LangChain4jRedisChatMemoryStore) -> None:
    await store.modify("m", _append("a"))
    assert await store.client.set(lock_key(store.key_of("m")), b"dead holder", px=int(LEASE * 1000), nx=True)
    started = time.perf_counter()
    await asyncio.wait_for(store.modify("m", _append("b")), TIMEOUT)
    waited = time.perf_counter() - started
    assert LEASE - 0.1 < waited < LEASE + SLACK  # it did wait for the lease, and no longer
    assert _texts(await store.get_messages("m")) == ["a", "b"]


async def _lock_gone(checker: AsyncRedis | AsyncRedisCluster, key: bytes, within: float) -> bool:
    deadline = time.monotonic() + within
    while await checker.exists(key):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


async def test_tasks_cancelled_in_their_turn_never_leave_the_lock_taken(url: str) -> None:
    # Two connections and readers beside the writer: its commands wait their turn, so a cancellation after
    # its change often finds it waiting to send the save or the unlock. The lease is 30 s: a lock left
    # taken would still be there a second later.
    prefix = f"lc4j-locked-aio:{uuid.uuid4().hex[:10]}:"
    store = LangChain4jRedisChatMemoryStore(f"{url}?max_connections=2", key_prefix=prefix, lock_lease=30)
    # The store's client has two connections per node, all its own: the test looks with another client.
    checker = (
        AsyncRedisCluster.from_url(url.replace("+cluster", "", 1)) if "+cluster" in url else AsyncRedis.from_url(url)
    )
    key = lock_key(store.key_of("m"))
    reading = True

    async def read() -> None:
        while reading:
            await store.load("noise")

    readers = [asyncio.ensure_future(read()) for _ in range(6)]
    rng = random.Random(7)
    try:
        for n in range(20):
            changed = asyncio.Event()

            def change(messages: list[ChatMessage], n: int = n, changed: asyncio.Event = changed) -> list[ChatMessage]:
                changed.set()
                return [*messages, UserMessage(f"t{n}")]

            task = asyncio.ensure_future(store.modify("m", change))
            await asyncio.wait_for(changed.wait(), TIMEOUT)
            await asyncio.sleep(rng.uniform(0, 0.003))
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, TIMEOUT)
            assert await _lock_gone(checker, key, within=1.0), f"task {n} left the lock taken"
        reading = False
        await asyncio.wait_for(asyncio.gather(*readers), TIMEOUT)
        await asyncio.wait_for(store.modify("m", _append("last")), TIMEOUT)
        texts = _texts(await store.get_messages("m"))
        assert texts[-1] == "last" and len(texts) == len(set(texts))
    finally:
        reading = False
        await asyncio.gather(*readers, return_exceptions=True)
        await checker.delete(key)
        await checker.aclose()
        await store.delete_messages("m")
        await store.aclose()


async def _add(memory: MessageWindowChatMemory, text: str, errors: list[str], latencies: list[float]) -> None:
    started = time.perf_counter()
    try:
        await memory.add(UserMessage(text))
    except Exception as exc:  # counted, reported below
        errors.append(f"{type(exc).__name__}: {exc}")
    latencies.append(time.perf_counter() - started)


async def _adds(memory: MessageWindowChatMemory, name: str, errors: list[str], latencies: list[float]) -> None:
    for index in range(ADDS):
        await _add(memory, f"{name}:{index}", errors, latencies)


@pytest.mark.parametrize("objects", ["independent", "shared"])
async def test_tasks_adding_to_one_memory_keep_every_add(
    store: LangChain4jRedisChatMemoryStore, url: str, objects: str
) -> None:
    errors: list[str] = []
    latencies: list[float] = []
    shared = MessageWindowChatMemory("m", max_messages=TASKS * ADDS, store=store)

    def memory() -> MessageWindowChatMemory:
        return (
            MessageWindowChatMemory("m", max_messages=TASKS * ADDS, store=store) if objects == "independent" else shared
        )

    started = time.perf_counter()
    await asyncio.wait_for(
        asyncio.gather(*(_adds(memory(), f"t{n}", errors, latencies) for n in range(TASKS))), TIMEOUT
    )
    wall = time.perf_counter() - started
    texts = _texts(await store.get_messages("m"))
    expected = {f"t{n}:{index}" for n in range(TASKS) for index in range(ADDS)}
    doubled = sum(count - 1 for count in Counter(texts).values())
    p50, p99 = statistics.median(latencies), statistics.quantiles(latencies, n=100)[98]
    where = "cluster" if url.startswith("redis+cluster") else "server"
    print(
        f"\nlangchain4j-redis {where} history={store.keeps_history} {objects}: {TASKS} tasks x {ADDS} adds: "
        f"kept {len(set(texts) & expected)}/{len(expected)}, doubled {doubled}, errors {len(errors)}; "
        f"add p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms; wall {wall:.2f} s"
    )
    assert not errors, errors[:3]
    assert set(texts) == expected and doubled == 0
    for n in range(TASKS):  # each task's adds in its own order
        assert [text for text in texts if text.startswith(f"t{n}:")] == [f"t{n}:{index}" for index in range(ADDS)]
    assert await store.client.exists(lock_key(store.key_of("m"))) == 0
