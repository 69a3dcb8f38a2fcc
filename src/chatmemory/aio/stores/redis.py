"""The Redis store on asyncio: sends the same operations as :mod:`chatmemory.stores.redis` with ``redis.asyncio``.

Every operation is the same sequence of commands as in the blocking store (see
:mod:`chatmemory.stores.redis.operations`), each awaited by the asyncio executor
(:mod:`chatmemory.stores.redis.aio`). One script run is atomic on the server, so a task cancelled at any
``await`` leaves the memory at its old list or its new one; redis-py drops a connection whose reply was
abandoned and puts it back in the pool, so no connection is lost or reused mid-reply.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Iterable, Sequence

from chatmemory.core.driving import drive_async
from chatmemory.core.errors import Operation
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryEntry, HistoryPage
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Change, Snapshot, validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import Resealed
from chatmemory.stored_memories import NewMemory, StoredMemory, create_one_async
from chatmemory.stores.base.facade import AsyncStoreLifecycle, StoreTelemetry
from chatmemory.stores.base.turns import AsyncLocalTurns, modify_in_turn_async
from chatmemory.stores.redis.base import RedisStoreBase
from chatmemory.stores.redis.executor import DRIVER_ERRORS, store_error
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.operations import Operations
from chatmemory.stores.redis.plan import expire_at_call, times_call

from chatmemory.stores.redis.aio import AsyncRedisExecutor  # isort: skip - imports redis

from redis.asyncio import Redis  # isort: skip - after executor.py checked that the extra is installed
from redis.asyncio.cluster import RedisCluster  # isort: skip

__all__ = ["Redis", "RedisChatMemoryStore", "RedisCluster"]

_traced = StoreTelemetry("redis", __name__)


class RedisChatMemoryStore(AsyncRedisExecutor, AsyncStoreLifecycle, RedisStoreBase[Redis | RedisCluster]):
    """A store on Redis or Redis Cluster; supports versioning, locked updates, listing, TTL, raw records, history.

    Writers of one memory that conflict take turns in :meth:`modify`: threads (or, for the asyncio store,
    tasks) sharing the store queue in the process, writers elsewhere on a lease lock in the memory's hash
    slot (``{id}:lock``), never listed.

    :class:`chatmemory.stores.redis.RedisChatMemoryStore` and its asyncio twin
    :class:`chatmemory.aio.stores.redis.RedisChatMemoryStore` take the same arguments and read and write the
    same memories: both can share a server, a key prefix and each memory. The asyncio store works from any
    event loop: built from a URL, it keeps a client per loop (see
    :class:`~chatmemory.stores.redis.aio.GatedClient`); a client passed in serves its first loop only.

    Args:
        url_or_client: a ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` or
            ``rediss+cluster://`` URL (the store builds the client, owns it and closes it in
            :meth:`aclose`), or a client created with ``decode_responses=False`` (the caller owns and
            closes it): a ``redis.Redis`` / ``redis.cluster.RedisCluster`` for the sync store, a
            ``redis.asyncio.Redis`` / ``redis.asyncio.cluster.RedisCluster`` for the asyncio one.
        key_prefix: put before every key; stores with different prefixes share nothing (``""``: none).
        ttl: seconds (or a ``timedelta``) a memory lives after its last write; ``None``: forever.
        refresh_ttl_on_read: reads slide the expiry too.
        snapshot_cache_size: how many memories' last snapshots to keep for diffing writes and skipping
            unchanged reads (``0``: none; every write then sends the whole list).
        socket_timeout: seconds to wait for a reply, for a client built from a URL (default
            :data:`~chatmemory.stores.redis.base.DEFAULT_SOCKET_TIMEOUT`); a ``socket_timeout`` in the
            URL's query wins.
        socket_connect_timeout: seconds to wait for a connection, likewise (default
            :data:`~chatmemory.stores.redis.base.DEFAULT_SOCKET_CONNECT_TIMEOUT`).
        history: keep every message ever added to a memory (see :mod:`chatmemory.core.history`), in a
            third key of the memory's hash slot, appended by the same script run as the window.
        history_ttl: seconds (or a ``timedelta``) a history lives after the memory's last write, at least
            ``ttl``; ``None``: it expires with the window.
        lock_lease: seconds (or a ``timedelta``) after which the lock of :meth:`modify` is free again when
            its holder died or hung (default 5): the longest a dead writer keeps the others waiting.
        lock_wait: seconds (or a ``timedelta``) :meth:`modify` waits for that lock before it raises
            :class:`~chatmemory.ConcurrentUpdateError` (default 30).
        replicas_to_ack: how many replicas must hold each write that changes a memory before it returns:
            the write is sent with ``WAIT replicas_to_ack replicas_timeout`` behind it (``0``, the default:
            no waiting). Fewer acknowledgements raise
            :class:`~chatmemory.stores.redis.ReplicationError` once the write is done; it stays.
        replicas_timeout: seconds (or a ``timedelta``) a write waits for them (default
            :data:`~chatmemory.stores.redis.base.DEFAULT_REPLICAS_TIMEOUT`).
        encryption: a :class:`chatmemory.encryption.Keyring`: every message record (window and history) is
            sealed with AES-256-GCM, bound to its memory id (see ``docs/encryption.md``).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a client of the store's kind (blocking or
            asyncio), or an option has the wrong type.
        ValueError: a bad URL, a client that decodes responses, or an option out of range.
        StoreError: the sync store built from a cluster URL whose nodes cannot be reached or are not in
            cluster mode (an asyncio cluster client built from a URL finds the cluster on its first command).
    """

    _repr_name = "chatmemory.aio.stores.redis.RedisChatMemoryStore"
    _client_types = (Redis, RedisCluster)
    _wrong_client = (
        "chatmemory.aio.stores.redis.RedisChatMemoryStore takes a Redis URL or a redis.asyncio.Redis / "
        "redis.asyncio.cluster.RedisCluster client, not {name} "
        "(a blocking redis.Redis client goes to chatmemory.stores.redis.RedisChatMemoryStore)"
    )

    @staticmethod
    def key_pattern(key_prefix: str) -> bytes:
        """A SCAN MATCH pattern for every key a store with ``key_prefix`` writes (the prefix taken literally)."""
        return KeySpace.pattern_of_prefix(key_prefix)

    # ------------------------------------------------------------------------------------ driving

    def _started(self) -> None:
        super()._started()
        self._turns = AsyncLocalTurns()

    # ---------------------------------------------------------------------------------- operations

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version."""
        return await self._drive(Operation.READ, memory_id, self._operations.load(memory_id))

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (await self.load(memory_id)).messages

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``."""
        step = self._operations.save(memory_id, messages, expected_version)
        return await self._drive(Operation.WRITE, memory_id, step)

    @_traced.coroutine("save")
    async def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        step = self._operations.save(memory_id, messages, expected_version, also_recorded)
        return await self._drive(Operation.WRITE, memory_id, step)

    def contended(self, memory_id: str) -> bool:
        """Whether writers of this process queued for ``memory_id`` lately (see ``SupportsContentionHint``)."""
        return self._turns.contended(memory_id)

    @_traced.coroutine("modify")
    async def modify(self, memory_id: str, change: Change) -> int:
        """Apply ``change`` to ``memory_id`` in its writers' turn; return the version it is at afterwards.

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``lock_wait`` seconds; nothing was written.
        """
        memory_id = validate_memory_id(memory_id)  # one turn for UUID(x) and str(UUID(x))
        operations, lock = self._operations, self._options.lock
        return await modify_in_turn_async(
            self._turns,
            memory_id,
            lock.lease,
            lock=lambda token: self._drive(Operation.WRITE, memory_id, operations.lock(memory_id, token, lock)),
            unlock=lambda token: self._drive(Operation.WRITE, memory_id, operations.unlock(memory_id, token)),
            change=lambda: self._drive(Operation.WRITE, memory_id, operations.locked_change(memory_id, change)),
        )

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        await self._drive(Operation.WRITE, memory_id, self._operations.update(memory_id, messages))

    @_traced.coroutine("write_raw")
    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read."""
        await self._drive(Operation.WRITE, memory_id, self._operations.write_raw(memory_id, records))

    @_traced.coroutine("read_raw")
    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` as they are, even when the memory is damaged."""
        return await self._drive(Operation.READ, memory_id, self._operations.read_raw(memory_id))

    @_traced.coroutine("reseal")
    async def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` under the primary key (see :class:`~chatmemory.SupportsReseal`)."""
        return await self._drive(Operation.WRITE, memory_id, self._operations.reseal(memory_id))

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` (its window and its history); idempotent."""
        await self._drive(Operation.DELETE, memory_id, self._operations.delete(memory_id))

    @_traced.async_iterator("list")
    async def memory_ids(self) -> AsyncIterator[str]:
        """The ids of the stored memories, in no particular order (SCAN over every primary)."""
        self._check_open(Operation.LIST)
        seen: set[str] = set()
        try:
            async for key in self._scan(self._loop_client(), self._key_space.meta_pattern):
                if (memory_id := self._key_space.new_id_of_meta_key(key, seen)) is not None:
                    yield memory_id
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.LIST) from exc

    @_traced.coroutine("memory_times")
    async def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires, by the server's clock; ``None`` if absent.

        A damaged memory is answered too, from what is left of it. A memory last written by an earlier
        version of this store has no known write time (``last_write`` is ``None``).
        """
        call = times_call(self._key_space, memory_id)
        return await self._drive(Operation.READ, call.memory_id, Operations.times(call))

    @_traced.coroutine("read_batch")
    async def read_batch(self, memory_ids: Sequence[str]) -> list[StoredMemory | None]:
        """``memory_ids`` as stored (records, version, times) in one pipeline; ``None`` for an absent one.

        See :class:`chatmemory.stored_memories.SupportsBatchReads`. A damaged memory's records come back in
        the same pipeline, as ``read_raw`` reads them.
        """
        self._check_open(Operation.READ)
        return await drive_async(self._operations.read_batch(memory_ids), self._perform)

    @_traced.coroutine("create_batch")
    async def create_batch(self, memories: Sequence[NewMemory]) -> list[int | None]:
        """Create the ``memories`` that do not exist and set their expiries, in two pipelines.

        See :class:`chatmemory.stored_memories.SupportsBatchCreates`: each create is conditional on the
        memory being absent, as ``save(id, messages, 0)`` is; ``None`` for one that exists.
        """
        self._check_open(Operation.WRITE)
        if self._options.replication is not None:
            # Writes that wait for replicas go one by one, each acknowledged as every write of this store is.
            return [await create_one_async(self, memory, skips_damaged=False) for memory in memories]
        # The executor sends a Pipelined batch in one pipeline, and any other command as _drive would.
        return await drive_async(self._operations.create_batch(memories), self._perform)

    @_traced.coroutine("expire_at")
    async def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make ``memory_id`` expire at ``when`` (aware), or never with ``None``; its keys at once.

        A history without a ``history_ttl`` of its own gets the same expiry; one with keeps its own.

        A time in the past removes the memory; an unknown id stays absent. The next write slides the expiry
        by the store's ``ttl`` as usual.

        Raises:
            ValueError: ``when`` is a naive datetime.
        """
        call = expire_at_call(self._key_space, memory_id, when, self._planner.history_follows_window)
        await self._drive(Operation.WRITE, call.memory_id, Operations.expire(call))

    @_traced.coroutine("history")
    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            CorruptedMemoryError: an entry's message does not decode.
        """
        query = self._history_query(after, limit, reverse)
        return await self._drive(Operation.READ, memory_id, self._operations.history(memory_id, query))

    @_traced.coroutine("restore_history")
    async def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the entries the history lacks, as they are (see :class:`chatmemory.aio.store.SupportsHistoryRestore`).

        One script in the memory's hash slot. A Redis history numbers its entries one after another:
        entries with gaps between their sequences, or beside the history's, are refused.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            UnrestorableHistoryError: the sequences are not consecutive; nothing was written.
        """
        return await self._drive(Operation.WRITE, memory_id, self._restore(memory_id, entries, window))

    @_traced.coroutine("trim_history")
    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        A ``timedelta`` is counted back from the server's clock. The windows are not touched.

        Returns:
            How many entries were removed.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        return await self._drive(Operation.TRIM, memory_id, self._trim(older_than, memory_id))
