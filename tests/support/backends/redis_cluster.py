"""The Redis store on a Redis Cluster (through redis-py's cluster client, blocking and asyncio)."""

from __future__ import annotations

from chatmemory.stores.redis import Redis, RedisCluster
from support.backends.redis import AsyncRedisBackend, RedisBackend, cluster_url


class RedisClusterBackend(RedisBackend):
    name = "redis_cluster"


def open_backend() -> RedisClusterBackend:
    url = cluster_url()
    return RedisClusterBackend(RedisCluster.from_url(url.replace("+cluster", "", 1)))


class AsyncRedisClusterBackend(AsyncRedisBackend):
    """Asyncio stores on the cluster, built from its ``redis+cluster://`` URL."""

    name = "redis_cluster"

    def _open_sync_client(self) -> Redis | RedisCluster:
        return RedisCluster.from_url(self.url.replace("+cluster", "", 1))


def open_async_backend() -> AsyncRedisClusterBackend:
    return AsyncRedisClusterBackend(cluster_url())
