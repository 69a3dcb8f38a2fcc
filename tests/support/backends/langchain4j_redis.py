"""The LangChain4j Redis store on the standalone server and on the Redis Cluster; a fresh key prefix per store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from chatmemory import ChatMemoryStore, aio
from chatmemory.aio.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore as AsyncStore
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.langchain4j_redis.keys import glob_literal
from chatmemory.stores.redis import Redis, RedisCluster
from support.backends.redis import cluster_url, fresh_prefix, redis_url


def drop_prefix(client: Redis | RedisCluster, prefix: str) -> None:
    """Delete every key under ``prefix`` (on every primary of a cluster)."""
    pattern = glob_literal(prefix.encode("utf-8")) + b"*"
    if isinstance(client, RedisCluster):
        for key in list(client.scan_iter(match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES)):
            client.delete(key)
    else:
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)


class LangChain4jRedisBackend:
    """Sync stores sharing one client of the session."""

    def __init__(self, name: str, client: Redis | RedisCluster) -> None:
        self.name = name
        self.client = client
        self._prefixes: dict[int, str] = {}

    def make_store(self, **options: Any) -> LangChain4jRedisChatMemoryStore:
        prefix = options.pop("key_prefix", None) or fresh_prefix()
        store = LangChain4jRedisChatMemoryStore(self.client, key_prefix=prefix, **options)
        self._prefixes[id(store)] = prefix
        return store

    def write_raw(self, store: ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        raise NotImplementedError("the LangChain4j layout has no message records")

    def close_store(self, store: ChatMemoryStore) -> None:
        prefix = self._prefixes.pop(id(store), None)
        if prefix is not None:
            drop_prefix(self.client, prefix)
        assert isinstance(store, LangChain4jRedisChatMemoryStore)
        store.close()

    def close(self) -> None:
        self.client.close()


def open_backend() -> LangChain4jRedisBackend:
    return LangChain4jRedisBackend("langchain4j_redis", Redis.from_url(redis_url()))


def open_cluster_backend() -> LangChain4jRedisBackend:
    url = cluster_url().replace("+cluster", "", 1)
    return LangChain4jRedisBackend("langchain4j_redis_cluster", RedisCluster.from_url(url))


class AsyncLangChain4jRedisBackend:
    """Asyncio stores, each with its own client (a client is bound to its test's event loop)."""

    def __init__(self, name: str, url: str, cluster: bool) -> None:
        self.name = name
        self._url = url
        self._cluster = cluster
        self._prefixes: dict[int, str] = {}

    async def make_store(self, **options: Any) -> aio.ChatMemoryStore:
        prefix = options.pop("key_prefix", None) or fresh_prefix()
        client_type = AsyncRedisCluster if self._cluster else AsyncRedis
        client = client_type.from_url(self._url, socket_timeout=5.0, socket_connect_timeout=5.0)
        store = AsyncStore(client, key_prefix=prefix, **options)
        self._prefixes[id(store)] = prefix
        return store

    async def write_raw(self, store: aio.ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        raise NotImplementedError("the LangChain4j layout has no message records")

    async def close_store(self, store: aio.ChatMemoryStore) -> None:
        assert isinstance(store, AsyncStore)
        prefix = self._prefixes.pop(id(store), None)
        client = store.client
        if prefix is not None:
            pattern = glob_literal(prefix.encode("utf-8")) + b"*"
            keys = [key async for key in client.scan_iter(match=pattern, count=1000)]
            for key in keys:
                await client.delete(key)
        await store.aclose()
        await client.aclose()

    def close(self) -> None:
        pass


def open_async_backend() -> AsyncLangChain4jRedisBackend:
    return AsyncLangChain4jRedisBackend("langchain4j_redis", redis_url(), cluster=False)


def open_async_cluster_backend() -> AsyncLangChain4jRedisBackend:
    return AsyncLangChain4jRedisBackend("langchain4j_redis_cluster", cluster_url().replace("+cluster", "", 1), True)
