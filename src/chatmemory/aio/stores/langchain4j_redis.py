"""The asyncio twin of :class:`chatmemory.stores.langchain4j_redis.LangChain4jRedisChatMemoryStore`.

Same layout, arguments, decisions (:mod:`chatmemory.stores.langchain4j_redis.plan`) and operations
(:mod:`chatmemory.stores.langchain4j_redis.operations`), on redis-py's asyncio clients:
``await store.load(...)``, ``async for memory_id in store.memory_ids()``, ``await store.aclose()``.
A Java service and sync or async Python services share one memory.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Iterable
from typing import TypeVar

from chatmemory.core.errors import StoreError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Change, Snapshot
from chatmemory.stores._optional import require
from chatmemory.stores.base.lifecycle import AsyncStoreLifecycle
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.base.telemetry import StoreTelemetry
from chatmemory.stores.base.turns import AsyncLocalTurns, modify_in_turn_async

require("redis", feature="LangChain4jRedisChatMemoryStore", extra="redis")

from redis.asyncio import BlockingConnectionPool, Redis  # noqa: E402 - only once the extra is known to be installed
from redis.asyncio.cluster import RedisCluster  # noqa: E402
from redis.exceptions import RedisError  # noqa: E402

from chatmemory.aio.stores.redis_gate import GatedClient  # noqa: E402 - imports redis
from chatmemory.stores.base.driving import drive_async  # noqa: E402
from chatmemory.stores.langchain4j_redis.commands import Command, Scan, Sends, Sleep  # noqa: E402
from chatmemory.stores.langchain4j_redis.operations import LangChain4jOperations  # noqa: E402
from chatmemory.stores.langchain4j_redis.plan import glob_literal, memory_id_of  # noqa: E402
from chatmemory.stores.redis.acknowledged_sending import send_acknowledged_async  # noqa: E402
from chatmemory.stores.redis.replication import Acknowledged  # noqa: E402
from chatmemory.stores.redis.resending import send_resending_async  # noqa: E402
from chatmemory.stores.redis.sending import send_async  # noqa: E402

__all__ = ["LangChain4jRedisChatMemoryStore"]

T = TypeVar("T")

_traced = StoreTelemetry("langchain4j-redis", __name__)


class LangChain4jRedisChatMemoryStore(GatedClient, AsyncStoreLifecycle, LangChain4jOperations[Redis | RedisCluster]):
    """A memory per Redis string holding LangChain4j's JSON, with coroutine methods (see the sync store).

    Every ``save`` is a compare-and-set of the whole value, so a Python writer never overwrites a Java
    write it has not seen; a Java writer (a plain ``SET``) can overwrite a Python write it has not seen.
    Versions are this store object's own. Supports versioning, locked updates, TTL, listing and history.

    Writers that conflict take turns in :meth:`modify`: tasks of one event loop sharing the store queue in
    the process, writers elsewhere on the lease lock beside the value (see the sync store).

    Takes the arguments of :class:`chatmemory.stores.langchain4j_redis.LangChain4jRedisChatMemoryStore`, with a
    ``redis.asyncio.Redis`` / ``redis.asyncio.cluster.RedisCluster`` client (``decode_responses=False``; you
    close it) in place of a blocking one; a store built from a URL owns its client and closes it in
    :meth:`aclose`.

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor an asyncio redis-py client; ``replicas_to_ack`` is
            not an int.
        ValueError: a bad ``ttl``, ``key_prefix``, ``replicas_to_ack`` or ``replicas_timeout``, a client with
            ``decode_responses=True``.
    """

    _repr_name = "chatmemory.aio.LangChain4jRedisChatMemoryStore"
    _client_types = (Redis, RedisCluster)

    @classmethod
    def _standalone_from_url(cls, url: str) -> Redis:
        # A blocking pool, as the native asyncio store's: a command waits for a free connection instead of
        # failing with "Too many connections"; ``max_connections`` and ``timeout`` in the URL's query apply.
        return Redis.from_pool(BlockingConnectionPool.from_url(url))

    _wrong_client = (
        "chatmemory.aio LangChain4jRedisChatMemoryStore takes a Redis URL or a redis.asyncio.Redis / "
        "redis.asyncio.cluster.RedisCluster client, not {name}"
    )

    # ------------------------------------------------------------------------------------ driving

    def _started(self) -> None:
        super()._started()
        self._turns = AsyncLocalTurns()

    async def _send(self, client: Redis | RedisCluster, command: Command | Acknowledged) -> object:
        if isinstance(command, Sleep):
            await asyncio.sleep(command.seconds)
            return None
        if isinstance(command, Acknowledged):
            return await send_acknowledged_async(client, command)
        if not isinstance(command, Scan):
            if self._cluster:
                return await send_resending_async(client, command)
            return await send_async(client, command)
        pattern, kind = command.pattern, command.type
        if isinstance(client, RedisCluster):
            found = client.scan_iter(match=pattern, count=1000, _type=kind, target_nodes=RedisCluster.PRIMARIES)
        else:
            found = client.scan_iter(match=pattern, count=1000, _type=kind)
        return {key async for key in found}

    async def _drive(self, operation: str, memory_id: str | None, step: Sends[T]) -> T:
        self._check_open(operation, memory_id)
        if self._replication is None:
            return await drive_async(step, self._perform)
        return await drive_async(self._acknowledged(operation, step), self._perform)

    # ---------------------------------------------------------------------------------- operations

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (``Snapshot([], 0)`` for no key)."""
        return await self._drive(Operation.READ, memory_id, self._load(memory_id))

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (await self._drive(Operation.READ, memory_id, self._load(memory_id, versioned=False))).messages

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if the key still holds the value read at ``expected_version`` (compare-and-set)."""
        return await self._drive(Operation.WRITE, memory_id, self._save(memory_id, messages, expected_version))

    @_traced.coroutine("save")
    async def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Iterable[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        steps = self._save(memory_id, messages, expected_version, also_recorded)
        return await self._drive(Operation.WRITE, memory_id, steps)

    def contended(self, memory_id: str) -> bool:
        """Whether writers of this process queued for ``memory_id`` lately (see ``SupportsContentionHint``)."""
        return self._turns.contended(memory_id)

    @_traced.coroutine("modify")
    async def modify(self, memory_id: str, change: Change) -> int:
        """Apply ``change`` to ``memory_id`` in its writers' turn; return the version it is at afterwards.

        See :class:`chatmemory.aio.SupportsLockedUpdate` and the sync store's :meth:`modify`. A task
        cancelled in its turn gives the lock back all the same (the unlock runs on, shielded).

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``lock_wait`` seconds; nothing was written.
            CorruptedMemoryError: the stored value does not decode (``change`` is not called).
        """
        memory_id = validate_memory_id(memory_id)  # one turn for UUID(x) and str(UUID(x))
        return await modify_in_turn_async(
            self._turns,
            memory_id,
            self._lock_options.lease,
            lock=lambda token: self._drive(Operation.WRITE, memory_id, self._lock(memory_id, token)),
            unlock=lambda token: self._drive(Operation.WRITE, memory_id, self._unlock(memory_id, token)),
            change=lambda: self._drive(Operation.WRITE, memory_id, self._locked_change(memory_id, change)),
        )

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the value of ``memory_id`` (a plain ``SET``, as LangChain4j writes)."""
        await self._drive(Operation.WRITE, memory_id, self._update(memory_id, messages))

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Delete the key of ``memory_id``, its history and its write ids; idempotent."""
        await self._drive(Operation.DELETE, memory_id, self._delete(memory_id))

    @_traced.async_iterator("list")
    async def memory_ids(self) -> AsyncIterator[str]:
        """The ids of the string keys under ``key_prefix`` (keys whose rest is no valid id are skipped)."""
        self._check_open(Operation.LIST)
        pattern = glob_literal(self._prefix) + b"*"
        seen: set[str] = set()
        try:
            on = self._on_loop()
            await on.gate.ready()
            async for found in on.client.scan_iter(match=pattern, count=1000, _type="string"):
                memory_id = memory_id_of(found, self._prefix)
                if memory_id is not None and memory_id not in seen:  # SCAN may return a key twice
                    seen.add(memory_id)
                    yield memory_id
        except RedisError as exc:
            raise StoreError(Operation.LIST, detail=str(exc)) from exc

    @_traced.coroutine("history")
    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        return await self._drive(Operation.READ, memory_id, self._history_page(memory_id, after, limit, reverse))

    @_traced.coroutine("trim_history")
    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        A ``timedelta`` is counted back from the server's clock. The values are not touched.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        return await self._drive(Operation.TRIM, memory_id, self._trim(older_than, memory_id))
