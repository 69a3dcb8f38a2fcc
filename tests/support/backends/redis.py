"""The Redis store on a standalone server; each store gets a fresh key prefix, removed on close."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from chatmemory import ChatMemoryStore, aio
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncRedisChatMemoryStore
from chatmemory.stores.redis import Redis, RedisChatMemoryStore, RedisCluster
from support.servers import server_url, unavailable

REDIS_EXAMPLE = "redis://127.0.0.1:6379/0"
CLUSTER_EXAMPLE = "redis+cluster://127.0.0.1:7000"


def _redis_container() -> tuple[Any, str]:
    from testcontainers.redis import RedisContainer

    container = RedisContainer("redis:7").start()
    return container, f"redis://{container.get_container_host_ip()}:{container.get_exposed_port(6379)}/0"


def redis_url() -> str:
    """The standalone server's URL (environment, testcontainers, else skip)."""
    return server_url("Redis", "CHATMEMORY_TEST_REDIS_URL", REDIS_EXAMPLE, _redis_container)


def cluster_url() -> str:
    """The cluster's ``redis+cluster://`` URL (environment, else skip)."""
    return server_url("Redis Cluster", "CHATMEMORY_TEST_REDIS_CLUSTER_URL", CLUSTER_EXAMPLE)


@contextlib.contextmanager
def raw_client(kind: str) -> Iterator[Redis | RedisCluster]:
    """A blocking client of the test server (``"server"``) or the test cluster (``"cluster"``), closed after."""
    made: Redis | RedisCluster
    if kind == "cluster":
        made = RedisCluster.from_url(cluster_url().replace("+cluster", "", 1))
    else:
        made = Redis.from_url(redis_url())
    try:
        yield made
    finally:
        made.close()


def fresh_prefix() -> str:
    """A key prefix no other test uses; its glob characters check that listing treats it literally."""
    return f"cmtest:{uuid.uuid4().hex[:12]}:*?[x]:"


def drop_prefix(client: Redis | RedisCluster, prefix: str) -> None:
    """Delete every key under ``prefix`` (on every primary of a cluster)."""
    pattern = RedisChatMemoryStore.key_pattern(prefix)
    if isinstance(client, RedisCluster):
        keys = list(client.scan_iter(match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES))
        for key in keys:
            client.delete(key)
    else:
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)


class RedisBackend:
    """Stores sharing one client of the session; ``client_factory`` builds it from the URL."""

    name = "redis"

    def __init__(self, client: Redis | RedisCluster) -> None:
        self.client = client
        self._prefixes: dict[int, str] = {}

    def make_store(self, **options: Any) -> ChatMemoryStore:
        prefix = options.pop("key_prefix", None) or fresh_prefix()
        store = RedisChatMemoryStore(self.client, key_prefix=prefix, **options)
        self._prefixes[id(store)] = prefix
        return store

    def write_raw(self, store: ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(store, RedisChatMemoryStore)
        store.write_raw(memory_id, records)

    def close_store(self, store: ChatMemoryStore) -> None:
        prefix = self._prefixes.pop(id(store), None)
        if prefix is not None:
            drop_prefix(self.client, prefix)
        assert isinstance(store, RedisChatMemoryStore)
        store.close()

    def close(self) -> None:
        self.client.close()


def open_backend() -> RedisBackend:
    return RedisBackend(Redis.from_url(redis_url()))


@contextlib.contextmanager
def private_server(*config: str) -> Iterator[Redis]:
    """A throwaway ``redis-server`` on a unix socket with ``config`` (e.g. ``"--maxmemory", "4mb"``).

    For what must not touch the shared server (eviction policies, memory limits). Skips (or fails under
    CHATMEMORY_TEST_REQUIRE_SERVICES=1) when no ``redis-server`` binary is installed.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server binary", "PATH", "/usr/bin")
        raise AssertionError("unreachable")
    with tempfile.TemporaryDirectory(prefix="cmtest-redis-") as directory:
        socket_path = os.path.join(directory, "redis.sock")
        process = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", socket_path, "--save", "", "--appendonly", "no", *config],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = Redis(unix_socket_path=socket_path)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except RedisConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            yield client
        finally:
            client.close()
            process.terminate()
            process.wait(timeout=10)


class AsyncRedisBackend:
    """Asyncio stores on the standalone server, each with its own client (clients are bound to a loop)."""

    name = "redis"

    def __init__(self, url: str) -> None:
        self.url = url
        self._prefixes: dict[int, str] = {}
        self._sync_client: Redis | RedisCluster = self._open_sync_client()

    def _open_sync_client(self) -> Redis | RedisCluster:
        return Redis.from_url(self.url)

    async def make_store(self, **options: Any) -> aio.ChatMemoryStore:
        prefix = options.pop("key_prefix", None) or fresh_prefix()
        store = AsyncRedisChatMemoryStore(self.url, key_prefix=prefix, **options)
        self._prefixes[id(store)] = prefix
        return store

    async def write_raw(self, store: aio.ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(store, AsyncRedisChatMemoryStore)
        await store.write_raw(memory_id, records)

    async def close_store(self, store: aio.ChatMemoryStore) -> None:
        assert isinstance(store, AsyncRedisChatMemoryStore)
        prefix = self._prefixes.pop(id(store), None)
        if prefix is not None:
            drop_prefix(self._sync_client, prefix)
        await store.aclose()

    def close(self) -> None:
        self._sync_client.close()


def open_async_backend() -> AsyncRedisBackend:
    return AsyncRedisBackend(redis_url())
