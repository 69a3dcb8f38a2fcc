"""The Redis store on a Redis Cluster (through redis-py's cluster client)."""

from __future__ import annotations

from chatmemory.stores.redis import RedisCluster
from support.backends.redis import RedisBackend, cluster_url


class RedisClusterBackend(RedisBackend):
    name = "redis_cluster"


def open_backend() -> RedisClusterBackend:
    url = cluster_url()
    return RedisClusterBackend(RedisCluster.from_url(url.replace("+cluster", "", 1)))
