"""The asyncio executor of the LangChain4j-layout store: ``redis.asyncio`` clients, one per event loop.

As :mod:`.executor`, with the Redis store's asyncio sending and gate (:mod:`chatmemory.stores.redis.aio`:
a client and a :class:`~chatmemory.stores.redis.aio.RedisGate` per event loop) and ``asyncio.sleep``; a
driver exception is translated (:func:`~.executor.layout_error`) before it is thrown back into the
operation. :class:`AsyncLangChain4jExecutor` is the executor half of
``chatmemory.aio.stores.langchain4j_redis.LangChain4jRedisChatMemoryStore``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar

from chatmemory.core.driving import Sleep, Steps, drive_async
from chatmemory.core.errors import Operation, StoreError
from chatmemory.stores.base.turns import AsyncLocalTurns
from chatmemory.stores.langchain4j_redis.commands import Command, Scan
from chatmemory.stores.langchain4j_redis.executor import client_from_url, layout_error
from chatmemory.stores.langchain4j_redis.keys import glob_literal, memory_id_of
from chatmemory.stores.redis.commands import Acknowledged, Replication
from chatmemory.stores.redis.executor import DRIVER_ERRORS

from chatmemory.stores.redis.aio import (  # isort: skip - imports redis
    GatedClient,
    send_one_async,
)
from redis.asyncio import BlockingConnectionPool, Redis  # isort: skip
from redis.asyncio.cluster import RedisCluster  # isort: skip

__all__ = ["AsyncLangChain4jExecutor"]

_T = TypeVar("_T")


def _blocking_pool_client(url: str) -> Redis:
    return Redis.from_pool(BlockingConnectionPool.from_url(url))


class AsyncLangChain4jExecutor(GatedClient):
    """The asyncio LangChain4j-layout store's executor half: sends its operations' commands on each loop."""

    _cluster: bool
    _prefix: bytes
    _replication: Replication | None

    if TYPE_CHECKING:  # the store's lifecycle and base

        def _check_open(self, operation: str, memory_id: str | None = None) -> None: ...

        def _acknowledged(self, operation: str, step: Steps[Command, _T]) -> Steps[Command | Acknowledged, _T]: ...

    def _client_from_url(self, url: str) -> Any:
        # A blocking pool, as the native asyncio store's: a command waits for a free connection instead of
        # failing with "Too many connections"; ``max_connections`` and ``timeout`` in the URL's query apply.
        return client_from_url(url, _blocking_pool_client, RedisCluster)

    def _started(self) -> None:
        super()._started()
        self._turns = AsyncLocalTurns()

    async def _send(self, client: Redis | RedisCluster, command: Command | Acknowledged) -> object:
        if isinstance(command, Sleep):
            await asyncio.sleep(command.seconds)
            return None
        try:
            if not isinstance(command, Scan):
                return await send_one_async(client, self._cluster, command)
            pattern, kind = command.pattern, command.type
            if isinstance(client, RedisCluster):
                found = client.scan_iter(match=pattern, count=1000, _type=kind, target_nodes=RedisCluster.PRIMARIES)
            else:
                found = client.scan_iter(match=pattern, count=1000, _type=kind)
            return {key async for key in found}
        except DRIVER_ERRORS as exc:
            raise layout_error(exc, command) from exc

    async def _drive(self, operation: str, memory_id: str | None, step: Steps[Command, _T]) -> _T:
        self._check_open(operation, memory_id)
        if self._replication is None:
            return await drive_async(step, self._perform)
        return await drive_async(self._acknowledged(operation, step), self._perform)

    async def _memory_ids(self) -> AsyncIterator[str]:
        """The ids of the string keys under the prefix, each once (keys whose rest is no valid id skipped)."""
        pattern = glob_literal(self._prefix) + b"*"
        seen: set[str] = set()
        try:
            on: Any = self._on_loop()
            await on.gate.ready()
            async for found in on.client.scan_iter(match=pattern, count=1000, _type="string"):
                memory_id = memory_id_of(found, self._prefix)
                if memory_id is not None and memory_id not in seen:  # SCAN may return a key twice
                    seen.add(memory_id)
                    yield memory_id
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.LIST, detail=str(exc)) from exc
