"""The asyncio Redis stores' way to their client: commands admitted in order, a cluster client initialized once.

A :class:`RedisGate` lets one task initialize a ``RedisCluster`` client while the others wait (concurrent
first commands race in the cluster's discovery), then admits the store's commands in the order they were
sent, no more at once than the client has connections: ``max_connections`` of a standalone client's pool
(within its ``timeout``, for a blocking pool), or of each node of a cluster client, whose pool does not
wait (:mod:`chatmemory.aio.stores.admission`). Commands other code sends on a client it shares with the
store are not counted. :class:`GatedClient` keeps a client and its gate per event loop. Why:
*The Redis gate* in ``docs/asyncio.md``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from chatmemory.aio.stores.admission import Admission
from chatmemory.aio.stores.loops import PerLoop
from chatmemory.core.errors import StoreError
from chatmemory.stores.base.operations import Operation

__all__ = ["GatedClient", "RedisGate", "admission_for"]

_DEFAULT_MAX_CONNECTIONS = 100
"""redis-py's default ``max_connections`` per node of ``redis.asyncio.cluster.RedisCluster``."""


def admission_for(client: Redis | RedisCluster) -> Admission | None:
    """An admission as wide as ``client``'s connections (``None``: a pool without a usable bound)."""
    if isinstance(client, RedisCluster):
        limit = client.get_connection_kwargs().get("max_connections") or _DEFAULT_MAX_CONNECTIONS
        return Admission(int(limit), None, f"max_connections={int(limit)} per node")
    pool = client.connection_pool
    limit = getattr(pool, "max_connections", None)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        return None
    if isinstance(pool, BlockingConnectionPool):
        # It waits ``timeout`` seconds for a connection (None: for ever); the store's commands wait as long
        # for their turn, and then find a connection free.
        timeout = pool.timeout
        wait = "no timeout" if timeout is None else f"timeout={timeout:g} s"
        return Admission(limit, timeout, f"max_connections={limit}, {wait}")
    # A pool that does not wait fails a command beyond ``max_connections``: the store's commands wait instead.
    return Admission(limit, None, f"max_connections={limit}")


class RedisGate:
    """Lets commands through once the client is ready, in order, no more at once than it has connections.

    Args:
        client: the store's client.
    """

    def __init__(self, client: Redis | RedisCluster) -> None:
        self._cluster = client if isinstance(client, RedisCluster) else None
        self._lock = asyncio.Lock()
        self.turns = admission_for(client)
        """Taken for each command the store sends (``None``: the client's pool has no bound)."""

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


class _OnLoop:
    """What an asyncio Redis store uses on one event loop: a client bound to that loop and its gate."""

    __slots__ = ("client", "gate")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.gate = RedisGate(client)


async def _close(on: _OnLoop) -> None:
    await on.client.aclose()


class GatedClient:
    """What the asyncio Redis stores do with their clients: one per event loop, sent through a :class:`RedisGate`.

    A store built from a URL makes a client per event loop (:class:`~chatmemory.aio.stores.loops.PerLoop`),
    so ``asyncio.run`` twice, or several threads each running its own loop, share one store. A client the
    caller passed in serves the first loop only: on another the store raises
    :class:`~chatmemory.core.errors.StoreError` at once, naming the fix.

    A store sends each command with its ``_send(client, command)``; :meth:`_perform` (what its operations
    are driven with) finds the running loop's client and waits for its gate first.
    """

    _client: Any
    _owns_client: bool
    _repr_name: ClassVar[str]
    _per_loop: PerLoop[_OnLoop]

    if TYPE_CHECKING:  # the store's own, and its client holder's

        async def _send(self, client: Any, command: Any) -> object: ...

        def _another_client(self) -> Any: ...

    def _started(self) -> None:
        self._per_loop = PerLoop(self._for_loop, _close, closes_with_loop=self._owns_client)

    def _for_loop(self, first: bool) -> _OnLoop:
        client = self._client if first else self._another_client()
        if client is None:
            raise StoreError(
                Operation.CONNECT,
                detail=(
                    f"the redis-py client given to {self._repr_name} belongs to the event loop it first ran on, "
                    "and this is another one; build the store from a URL (it then keeps a client per event "
                    "loop), or build one store per event loop"
                ),
            )
        return _OnLoop(client)

    def _on_loop(self) -> _OnLoop:
        """The running loop's client and gate (made now if this loop has none yet)."""
        return self._per_loop.get()

    def _loop_client(self) -> Any:
        """The client of the running loop (made now if this loop has none yet)."""
        return self._per_loop.get().client

    async def _perform(self, command: Any) -> object:
        on = await self._per_loop.ready()
        gate = on.gate
        await gate.ready()
        if gate.turns is None:
            return await self._send(on.client, command)
        async with gate.turns:
            return await self._send(on.client, command)

    async def _release(self) -> None:
        if not self._per_loop.used:
            await self._client.aclose()
        await self._per_loop.aclose()
