"""More tasks than the client has connections: they wait for one instead of failing, standalone and cluster.

A standalone store built from a URL uses a blocking pool; ``redis.asyncio.cluster.RedisCluster`` has no
such pool (a command beyond ``max_connections`` per node raises ``MaxConnectionsError``), so the store
itself keeps its commands in flight under that limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from chatmemory import UserMessage
from chatmemory.aio import MessageWindowChatMemory
from chatmemory.aio.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore as AsyncLangChain4jStore
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncStore
from chatmemory.stores.redis import Redis, RedisCluster
from support.backends.redis import cluster_url, drop_prefix, fresh_prefix, redis_url

pytestmark = pytest.mark.asyncio

_LIMIT = 3
_TASKS = 60


@pytest.fixture(params=["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def prefix(kind: str) -> Iterator[str]:
    client: Redis | RedisCluster
    client = (
        RedisCluster.from_url(cluster_url().replace("+cluster", "", 1))
        if kind == "cluster"
        else Redis.from_url(redis_url())
    )
    chosen = fresh_prefix()
    yield chosen
    drop_prefix(client, chosen)
    client.close()


def _limited_url(kind: str) -> str:
    url = cluster_url() if kind == "cluster" else redis_url()
    return f"{url}{'&' if '?' in url else '?'}max_connections={_LIMIT}"


async def _many_tasks(store: AsyncStore | AsyncLangChain4jStore) -> None:
    async def conversation(number: int) -> None:
        memory = MessageWindowChatMemory(f"limit-{number}", max_messages=4, store=store)
        for turn in range(3):
            await memory.add(UserMessage(f"{number} says {turn}"))
        assert [m.text for m in await memory.messages()] == [f"{number} says {t}" for t in range(3)]  # type: ignore[attr-defined]

    await asyncio.gather(*(conversation(number) for number in range(_TASKS)))


async def test_more_tasks_than_connections_wait_for_one(kind: str, prefix: str) -> None:
    async with AsyncStore(_limited_url(kind), key_prefix=prefix, ttl=60) as store:
        await _many_tasks(store)


async def test_more_tasks_than_connections_wait_for_one_on_the_langchain4j_layout(kind: str, prefix: str) -> None:
    async with AsyncLangChain4jStore(_limited_url(kind), key_prefix=prefix, ttl=60) as store:
        await _many_tasks(store)
