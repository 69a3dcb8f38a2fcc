"""Initializing a ``redis.asyncio`` cluster client once, before its first command.

``redis.asyncio.cluster.RedisCluster`` discovers the cluster on its first command. When several first
commands are in flight at once (a service that starts under load, or tasks sharing a new store), they race
in that discovery, and redis-py 8 hands some of them a connection whose stream is ``None``
(``AttributeError: 'NoneType' object has no attribute 'writelines'``). The asyncio Redis stores therefore
let one task initialize the client while the others wait, and only then send commands.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from chatmemory.core.errors import StoreError
from chatmemory.stores.base.operations import Operation

__all__ = ["ClusterGate", "GatedClient"]


class ClusterGate:
    """Lets commands through once the client is ready: at once for a standalone client.

    Args:
        client: the store's client.
    """

    def __init__(self, client: Redis | RedisCluster) -> None:
        self._cluster = client if isinstance(client, RedisCluster) else None
        self._lock = asyncio.Lock()

    async def ready(self) -> None:
        """Wait until the client may take commands, initializing a cluster client the first time.

        Raises:
            StoreError: the cluster could not be reached; the next call tries again.
        """
        if self._cluster is None:
            return
        async with self._lock:
            cluster = self._cluster
            if cluster is None:
                return
            try:
                await cluster.initialize()
            except (RedisError, RedisClusterException) as exc:
                raise StoreError(Operation.CONNECT, detail=str(exc)) from exc
            self._cluster = None


class _Gated(Protocol):
    _client: Any
    _gate: ClusterGate


class GatedClient:
    """What the asyncio Redis stores do with their client: gate it (:class:`ClusterGate`) and close it."""

    def _started(self: _Gated) -> None:
        self._gate = ClusterGate(self._client)

    async def _release(self: _Gated) -> None:
        await self._client.aclose()
