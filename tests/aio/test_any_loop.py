"""An asyncio store serves any event loop: ``asyncio.run`` twice, and several threads each running a loop of its own.

Stores built from a URL, as applications build them, on every backend. A hang fails the test (threads are
joined with a deadline), and so does any error, including an unclosed-resource warning.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from typing import Any

import pytest

from chatmemory import UserMessage, aio
from chatmemory.aio import MessageWindowChatMemory
from chatmemory.core.errors import StoreError
from support.recipes import RECIPE_BACKENDS, Recipe, recipe

MARKS = {"langchain4j_redis": "redis"}
THREADS, ADDS_EACH, DEADLINE = 5, 50, 120.0


@pytest.fixture(
    params=[pytest.param(name, id=name, marks=getattr(pytest.mark, MARKS.get(name, name))) for name in RECIPE_BACKENDS]
)
def made(request: pytest.FixtureRequest) -> Any:
    made = recipe(request.param)
    made.open().close()  # the tables, once
    yield made
    made.cleanup()


async def _add(store: aio.ChatMemoryStore, memory_id: str, tag: str, adds: int) -> None:
    memory = MessageWindowChatMemory(memory_id, max_messages=10_000, store=store)
    for index in range(adds):
        await memory.add(UserMessage(f"{tag}-{index}"))


async def _texts(store: aio.ChatMemoryStore, memory_id: str) -> list[str]:
    return [message.text for message in await store.get_messages(memory_id)]  # type: ignore[union-attr]


def test_one_store_serves_asyncio_run_twice(made: Recipe) -> None:
    store = made.aopen()
    memory_id = f"loops-{uuid.uuid4().hex}"
    asyncio.run(_add(store, memory_id, "first", 3))
    asyncio.run(_add(store, memory_id, "second", 3))
    assert asyncio.run(_texts(store, memory_id)) == [f"{tag}-{n}" for tag in ("first", "second") for n in range(3)]
    asyncio.run(store.aclose())  # type: ignore[attr-defined]


def test_threads_each_running_a_loop_share_one_store(made: Recipe) -> None:
    store = made.aopen()
    memory_id = f"loops-{uuid.uuid4().hex}"
    errors: list[BaseException] = []

    def run(tag: str) -> None:
        try:
            asyncio.run(_add(store, memory_id, tag, ADDS_EACH))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"t{n}",), daemon=True) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert not any(thread.is_alive() for thread in threads), f"writers still running after {DEADLINE:.0f} s"
    assert not errors, f"{len(errors)} threads failed, the first with {errors[0]!r}"
    stored = asyncio.run(_texts(store, memory_id))
    assert len(stored) == THREADS * ADDS_EACH and not [t for t, c in Counter(stored).items() if c > 1]
    asyncio.run(store.aclose())  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["redis", "redis_cluster"], ids=["redis", "redis_cluster"])
def test_a_client_given_by_the_caller_refuses_another_loop_with_the_fix(name: str) -> None:
    pytest.importorskip("redis")
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

    from chatmemory.aio.stores.redis import RedisChatMemoryStore

    url = recipe(name).url
    first = asyncio.new_event_loop()
    try:
        client: Any = RedisCluster.from_url(url.replace("+cluster", "")) if "cluster" in url else Redis.from_url(url)
        store = RedisChatMemoryStore(client, key_prefix=f"cmtest:{uuid.uuid4().hex[:12]}:")
        first.run_until_complete(store.get_messages("a"))
        with pytest.raises(StoreError, match="build the store from a URL"):
            asyncio.run(store.get_messages("a"))
        first.run_until_complete(client.aclose())
    finally:
        first.close()
