"""The asyncio Redis stores' way to a ``redis.asyncio`` cluster client: initialized once, never over its limit.

``redis.asyncio.cluster.RedisCluster`` discovers the cluster on its first command. When several first
commands are in flight at once (a service that starts under load, or tasks sharing a new store), they race
in that discovery, and redis-py 8 hands some of them a connection whose stream is ``None``
(``AttributeError: 'NoneType' object has no attribute 'writelines'``). The asyncio Redis stores therefore
let one task initialize the client while the others wait, and only then send commands.

Nor does that client have a blocking pool: a command that finds all ``max_connections`` of its node busy
fails with ``MaxConnectionsError`` ("Too many connections"), so hundreds of tasks on one store would fail
where a standalone store's blocking pool makes them wait. The gate therefore keeps the store's commands
in flight under the client's ``max_connections`` (per node, so under it on every node): the others wait
for a turn. Commands other code sends on a client it shares with the store are not counted.
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

_DEFAULT_MAX_CONNECTIONS = 100
"""redis-py's default ``max_connections`` per node of ``redis.asyncio.cluster.RedisCluster``."""


class ClusterGate:
    """Lets commands through once the client is ready; a cluster client's no more at once than it has connections.

    Args:
        client: the store's client.
    """

    def __init__(self, client: Redis | RedisCluster) -> None:
        self._cluster = client if isinstance(client, RedisCluster) else None
        self._lock = asyncio.Lock()
        self.turns: asyncio.Semaphore | None = None
        """Taken for each command sent to a cluster client; ``None`` for a standalone one (its pool waits)."""
        if isinstance(client, RedisCluster):
            limit = client.get_connection_kwargs().get("max_connections") or _DEFAULT_MAX_CONNECTIONS
            self.turns = asyncio.Semaphore(int(limit))

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

    async def _send(self, command: Any) -> object: ...


class GatedClient:
    """What the asyncio Redis stores do with their client: send through the :class:`ClusterGate`, close it.

    A store sends each command with its ``_send``; :meth:`_perform` (what its operations are driven with)
    waits for the gate first.
    """

    def _started(self: _Gated) -> None:
        self._gate = ClusterGate(self._client)

    async def _perform(self: _Gated, command: Any) -> object:
        gate = self._gate
        await gate.ready()
        if gate.turns is None:
            return await self._send(command)
        async with gate.turns:
            return await self._send(command)

    async def _release(self: _Gated) -> None:
        await self._client.aclose()
