"""The Redis store on asyncio: sends the same plans as :mod:`chatmemory.stores.redis` with ``redis.asyncio``.

Every operation is the same sequence of script calls as in the blocking store (see
:mod:`chatmemory.stores.redis.steps`), each awaited. One script run is atomic on the server, so a task
cancelled at any ``await`` leaves the memory at its old list or its new one; redis-py drops a connection
whose reply was abandoned and puts it back in the pool, so no connection is lost or reused mid-reply.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Generator, Iterable, Sequence
from typing import Any, TypeVar, cast

from chatmemory.core.errors import HistoryNotEnabledError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage, history_query
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.stores.base.lifecycle import AsyncStoreLifecycle
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.base.options import TTL
from chatmemory.stores.base.snapshot_cache import SnapshotCache
from chatmemory.stores.base.telemetry import StoreTelemetry
from chatmemory.stores.redis.config import (
    DEFAULT_SOCKET_CONNECT_TIMEOUT,
    DEFAULT_SOCKET_TIMEOUT,
    ClientTarget,
    StoreOptions,
)
from chatmemory.stores.redis.driver import DECODING_CLIENT, DRIVER_ERRORS, NoScriptError, store_error
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.plan import CachedMemory, Planner, ScriptCall
from chatmemory.stores.redis.steps import Steps
from chatmemory.stores.redis.times import expire_at_call, expire_at_done, times_call, times_of

from redis.asyncio import BlockingConnectionPool, Redis  # isort: skip - after driver.py checked that the extra is installed
from redis.asyncio.cluster import RedisCluster  # isort: skip

from chatmemory.aio.stores.redis_cluster_gate import ClusterGate  # isort: skip - imports redis

__all__ = ["Redis", "RedisChatMemoryStore", "RedisCluster"]

_traced = StoreTelemetry("redis", __name__)

T = TypeVar("T")


class RedisChatMemoryStore(AsyncStoreLifecycle):
    """An asyncio store on Redis or Redis Cluster; supports versioning, listing, TTL, raw records and history.

    The memories are the ones the blocking :class:`chatmemory.stores.redis.RedisChatMemoryStore` reads and
    writes: both stores can share a server, a key prefix and each memory.

    Args:
        url_or_client: a ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` or
            ``rediss+cluster://`` URL (the store builds the client, owns it and closes it in
            :meth:`aclose`), or a ``redis.asyncio.Redis`` / ``redis.asyncio.cluster.RedisCluster`` client
            created with ``decode_responses=False`` (the caller owns and closes it). A cluster client
            built from a URL finds the cluster on its first command.
        key_prefix: put before every key; stores with different prefixes share nothing (``""``: none).
        ttl: seconds (or a ``timedelta``) a memory lives after its last write; ``None``: forever.
        refresh_ttl_on_read: reads slide the expiry too.
        snapshot_cache_size: how many memories' last snapshots to keep for diffing writes and skipping
            unchanged reads (``0``: none; every write then sends the whole list).
        socket_timeout: seconds to wait for a reply, for a client built from a URL (a ``socket_timeout``
            in the URL's query wins).
        history: keep every message ever added to a memory (see :mod:`chatmemory.core.history`), in a
            third key of the memory's hash slot, appended by the same script run as the window.
        history_ttl: seconds (or a ``timedelta``) a history lives after the memory's last write, at least
            ``ttl``; ``None``: it expires with the window.
        socket_connect_timeout: seconds to wait for a connection, likewise.

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor an asyncio client, or an option has the wrong type.
        ValueError: a bad URL, a client that decodes responses, or an option out of range.
    """

    def __init__(
        self,
        url_or_client: str | Redis | RedisCluster,
        *,
        key_prefix: str = "chatmemory:",
        ttl: TTL = None,
        refresh_ttl_on_read: bool = False,
        snapshot_cache_size: int = 1024,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        socket_connect_timeout: float = DEFAULT_SOCKET_CONNECT_TIMEOUT,
        history: bool = False,
        history_ttl: TTL = None,
    ) -> None:
        options = StoreOptions.validate(
            key_prefix=key_prefix,
            ttl=ttl,
            refresh_ttl_on_read=refresh_ttl_on_read,
            snapshot_cache_size=snapshot_cache_size,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
            history=history,
            history_ttl=history_ttl,
        )
        client: Redis | RedisCluster
        if isinstance(url_or_client, str):
            target = ClientTarget.parse(url_or_client)
            try:
                # Neither connects here: a standalone client on its first command, a cluster client when
                # it first initializes (also on its first command).
                if target.cluster:
                    client = RedisCluster.from_url(target.url, **options.client_options())
                else:
                    # A blocking pool: when every connection is busy (hundreds of tasks on one store), a
                    # command waits for a free one instead of failing with "Too many connections".
                    # ``max_connections`` and ``timeout`` in the URL's query override the pool's defaults.
                    pool = BlockingConnectionPool.from_url(target.url, **options.client_options())
                    client = Redis.from_pool(pool)
            except DRIVER_ERRORS as exc:
                raise store_error(exc, Operation.CONNECT) from exc
            self._owns_client = True
        elif isinstance(url_or_client, (Redis, RedisCluster)):
            client = url_or_client
            self._owns_client = False
        else:
            raise TypeError(
                "chatmemory.aio.stores.redis.RedisChatMemoryStore takes a Redis URL or a redis.asyncio.Redis / "
                f"redis.asyncio.cluster.RedisCluster client, not {type(url_or_client).__name__} "
                "(a blocking redis.Redis client goes to chatmemory.stores.redis.RedisChatMemoryStore)"
            )
        if client.get_encoder().decode_responses:
            # Nothing is connected yet, and closing is a coroutine: the unused client is just dropped.
            raise ValueError(DECODING_CLIENT)
        self._client = client
        self._gate = ClusterGate(client)
        self._options = options
        self._key_space = KeySpace(options.key_prefix)
        self._cache: SnapshotCache[CachedMemory] = SnapshotCache(options.snapshot_cache_size)
        self._planner = Planner(
            self._key_space, options.ttl, options.refresh_ttl_on_read, options.history, options.history_ttl
        )
        self._steps = Steps(self._planner, self._cache)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisChatMemoryStore:
        """Build from a ``redis://``, ``rediss://``, ``unix://`` or ``redis[s]+cluster://`` URL."""
        return cls(url, **options)

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        return self._options.ttl

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        return self._options.history

    @property
    def client(self) -> Redis | RedisCluster:
        """The Redis client the store uses."""
        return self._client

    def keys_of(self, memory_id: str) -> tuple[bytes, bytes]:
        """The metadata and message-list keys of ``memory_id`` (in one hash slot)."""
        keys = self._key_space.keys_of(memory_id)
        return keys.meta, keys.messages

    # ------------------------------------------------------------------------------------ driving

    async def _run(self, call: ScriptCall) -> object:
        await self._gate.ready()
        return await self._run_now(call)

    async def _run_now(self, call: ScriptCall) -> object:
        try:
            try:
                return await self._client.evalsha(call.script.sha, len(call.names), *call.names, *call.args)
            except NoScriptError:
                # The server has not seen the script (restarted, flushed, a new cluster node): EVAL runs it
                # and caches it there.
                return await self._client.eval(call.script.source, len(call.names), *call.names, *call.args)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, call.operation, call.memory_id) from exc

    async def _drive(self, operation: str, memory_id: str, step: Generator[ScriptCall, object, T]) -> T:
        self._check_open(operation, memory_id)
        call = next(step)
        while True:
            reply = await self._run(call)
            try:
                call = step.send(reply)
            except StopIteration as done:
                result: T = done.value
                return result

    # ---------------------------------------------------------------------------------- operations

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version."""
        return await self._drive(Operation.READ, memory_id, self._steps.load(memory_id))

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (await self.load(memory_id)).messages

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``."""
        return await self._drive(Operation.WRITE, memory_id, self._steps.save(memory_id, messages, expected_version))

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        await self._drive(Operation.WRITE, memory_id, self._steps.update(memory_id, messages))

    @_traced.coroutine("write_raw")
    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read."""
        await self._drive(Operation.WRITE, memory_id, self._steps.write_raw(memory_id, records))

    @_traced.coroutine("read_raw")
    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` as they are, even when the memory is damaged."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        try:
            records = await self._client.lrange(self._key_space.keys_of(memory_id).messages, 0, -1)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.READ, memory_id) from exc
        return cast("list[bytes]", records)  # the client does not decode responses

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` (its window and its history); idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.DELETE, memory_id)
        self._cache.forget(memory_id)
        keys = self._key_space.keys_of(memory_id)
        try:
            await self._client.delete(*keys.with_history)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.DELETE, memory_id) from exc

    @_traced.async_iterator("list")
    async def memory_ids(self) -> AsyncIterator[str]:
        """The ids of the stored memories, in no particular order (SCAN over every primary)."""
        self._check_open(Operation.LIST)
        seen: set[str] = set()
        try:
            async for key in self._scan(self._key_space.meta_pattern):
                memory_id = self._key_space.id_of_meta_key(key)
                # SCAN may return a key twice; a key that does not parse belongs to someone else.
                if memory_id is not None and memory_id not in seen:
                    seen.add(memory_id)
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
        self._check_open(Operation.READ, call.memory_id)
        return times_of(call, await self._run(call))

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
        self._check_open(Operation.WRITE, call.memory_id)
        expire_at_done(call, await self._run(call))

    def _scan(self, pattern: bytes) -> AsyncIterator[bytes]:
        """The keys matching ``pattern`` (on every primary of a cluster); SCAN may give a key twice."""
        if isinstance(self._client, RedisCluster):
            return self._client.scan_iter(match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES)
        return self._client.scan_iter(match=pattern, count=1000)

    @_traced.coroutine("history")
    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            CorruptedMemoryError: an entry's message does not decode.
        """
        query = history_query(after, limit, reverse)
        if not self._options.history:
            raise HistoryNotEnabledError(repr(self))
        return await self._drive(Operation.READ, memory_id, self._steps.history(memory_id, query))

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
        args = Planner.trim_args(older_than)
        if not self._options.history:
            raise HistoryNotEnabledError(repr(self))
        if memory_id is not None:
            return await self._drive(Operation.WRITE, memory_id, self._steps.trim(memory_id, args))
        self._check_open(Operation.WRITE)
        try:
            keys = {key async for key in self._scan(self._key_space.history_pattern)}
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.LIST) from exc
        removed = 0
        for key in keys:
            owner = self._key_space.id_of_history_key(key)
            if owner is not None:
                removed += await self._drive(Operation.WRITE, owner, self._steps.trim(owner, args))
        return removed

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing it by hand)."""
        self._cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._cache.clear()

    async def _release(self) -> None:
        await self._client.aclose()

    def _history_repr(self) -> str:
        if not self._options.history:
            return ""
        return f", history=True, history_ttl={self._options.history_ttl!r}"

    def __repr__(self) -> str:
        kind = "cluster" if isinstance(self._client, RedisCluster) else "server"
        return (
            f"chatmemory.aio.stores.redis.RedisChatMemoryStore({kind}, key_prefix={self._options.key_prefix!r}, "
            f"ttl={self._options.ttl!r}, refresh_ttl_on_read={self._options.refresh_ttl_on_read!r}"
            f"{self._history_repr()})"
        )
