"""The Redis store: sends the plans of :mod:`.plan` with redis-py's blocking client.

Every read and every write is one Lua script run (``EVALSHA``, falling back to ``EVAL`` when the server
does not know the script), so each is atomic and one round trip, on a single server and on Redis Cluster
alike. What is stored, and how, is described in ``scripts/head.lua``; what is sent, in :mod:`.plan`.
"""

from __future__ import annotations

import datetime
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

from chatmemory.core.errors import HistoryNotEnabledError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage, history_query
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.stores.base.lifecycle import StoreLifecycle
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

from redis import Redis  # isort: skip - after driver.py checked that the extra is installed
from redis.cluster import RedisCluster  # isort: skip

__all__ = ["Redis", "RedisChatMemoryStore", "RedisCluster"]

_traced = StoreTelemetry("redis", __name__)

T = TypeVar("T")


class RedisChatMemoryStore(StoreLifecycle):
    """A store on Redis or Redis Cluster; supports versioning, listing, TTL, raw records and history.

    Args:
        url_or_client: a ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` or
            ``rediss+cluster://`` URL (the store builds the client, owns it and closes it in
            :meth:`close`), or a ``redis.Redis`` / ``redis.cluster.RedisCluster`` client created with
            ``decode_responses=False`` (the caller owns and closes it).
        key_prefix: put before every key; stores with different prefixes share nothing (``""``: none).
        ttl: seconds (or a ``timedelta``) a memory lives after its last write; ``None``: forever.
        refresh_ttl_on_read: reads slide the expiry too.
        snapshot_cache_size: how many memories' last snapshots to keep for diffing writes and skipping
            unchanged reads (``0``: none; every write then sends the whole list).
        socket_timeout: seconds to wait for a reply, for a client built from a URL (default
            :data:`~chatmemory.stores.redis.config.DEFAULT_SOCKET_TIMEOUT`); a ``socket_timeout`` in the
            URL's query wins.
        history: keep every message ever added to a memory (see :mod:`chatmemory.core.history`), in a
            third key of the memory's hash slot, appended by the same script run as the window.
        history_ttl: seconds (or a ``timedelta``) a history lives after the memory's last write, at least
            ``ttl``; ``None``: it expires with the window.
        socket_connect_timeout: seconds to wait for a connection, likewise (default
            :data:`~chatmemory.stores.redis.config.DEFAULT_SOCKET_CONNECT_TIMEOUT`).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a client, or an option has the wrong type.
        ValueError: a bad URL, a client that decodes responses, or an option out of range.
        StoreError: a cluster URL whose nodes cannot be reached or are not in cluster mode.
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
            client = self._client_from_url(url_or_client, options)
            self._owns_client = True
        elif isinstance(url_or_client, (Redis, RedisCluster)):
            client = url_or_client
            self._owns_client = False
        else:
            raise TypeError(
                "RedisChatMemoryStore takes a Redis URL or a redis.Redis / redis.cluster.RedisCluster client, "
                f"not {type(url_or_client).__name__}"
            )
        if client.get_encoder().decode_responses:
            if self._owns_client:
                client.close()
            raise ValueError(DECODING_CLIENT)
        self._client = client
        self._options = options
        self._key_space = KeySpace(options.key_prefix)
        self._cache: SnapshotCache[CachedMemory] = SnapshotCache(options.snapshot_cache_size)
        self._planner = Planner(
            self._key_space, options.ttl, options.refresh_ttl_on_read, options.history, options.history_ttl
        )
        self._steps = Steps(self._planner, self._cache)

    @staticmethod
    def _client_from_url(url: str, options: StoreOptions) -> Redis | RedisCluster:
        target = ClientTarget.parse(url)
        try:
            if target.cluster:
                return RedisCluster.from_url(target.url, **options.client_options())
            return Redis.from_url(target.url, **options.client_options())
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.CONNECT) from exc

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

    @staticmethod
    def key_pattern(key_prefix: str) -> bytes:
        """A SCAN MATCH pattern for every key a store with ``key_prefix`` writes (the prefix taken literally)."""
        return KeySpace.pattern_of_prefix(key_prefix)

    # ------------------------------------------------------------------------------------ driving

    def _run(self, call: ScriptCall) -> object:
        try:
            try:
                return self._client.evalsha(call.script.sha, len(call.names), *call.names, *call.args)
            except NoScriptError:
                # The server has not seen the script (restarted, flushed, a new cluster node): EVAL runs it
                # and caches it there.
                return self._client.eval(call.script.source, len(call.names), *call.names, *call.args)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, call.operation, call.memory_id) from exc

    def _drive(self, operation: str, memory_id: str, step: Generator[ScriptCall, object, T]) -> T:
        self._check_open(operation, memory_id)
        call = next(step)
        while True:
            reply = self._run(call)
            try:
                call = step.send(reply)
            except StopIteration as done:
                result: T = done.value
                return result

    # ---------------------------------------------------------------------------------- operations

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version."""
        return self._drive(Operation.READ, memory_id, self._steps.load(memory_id))

    @_traced("get")
    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    @_traced("save")
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``."""
        return self._drive(Operation.WRITE, memory_id, self._steps.save(memory_id, messages, expected_version))

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        self._drive(Operation.WRITE, memory_id, self._steps.update(memory_id, messages))

    @_traced("write_raw")
    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read."""
        self._drive(Operation.WRITE, memory_id, self._steps.write_raw(memory_id, records))

    @_traced("read_raw")
    def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` as they are, even when the memory is damaged."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        try:
            records = self._client.lrange(self._key_space.keys_of(memory_id).messages, 0, -1)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.READ, memory_id) from exc
        return cast("list[bytes]", records)  # the client does not decode responses

    @_traced("delete")
    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` (its window and its history); idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.DELETE, memory_id)
        self._cache.forget(memory_id)
        keys = self._key_space.keys_of(memory_id)
        try:
            self._client.delete(*keys.with_history)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.DELETE, memory_id) from exc

    @_traced.iterator("list")
    def memory_ids(self) -> Iterator[str]:
        """The ids of the stored memories, in no particular order (SCAN over every primary)."""
        self._check_open(Operation.LIST)
        seen: set[str] = set()
        try:
            for key in self._scan(self._key_space.meta_pattern):
                memory_id = self._key_space.id_of_meta_key(key)
                # SCAN may return a key twice; a key that does not parse belongs to someone else.
                if memory_id is not None and memory_id not in seen:
                    seen.add(memory_id)
                    yield memory_id
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.LIST) from exc

    @_traced("memory_times")
    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires, by the server's clock; ``None`` if absent.

        A damaged memory is answered too, from what is left of it. A memory last written by an earlier
        version of this store has no known write time (``last_write`` is ``None``).
        """
        call = times_call(self._key_space, memory_id)
        self._check_open(Operation.READ, call.memory_id)
        return times_of(call, self._run(call))

    @_traced("expire_at")
    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make ``memory_id`` expire at ``when`` (aware), or never with ``None``; its keys at once.

        A history without a ``history_ttl`` of its own gets the same expiry; one with keeps its own.

        A time in the past removes the memory; an unknown id stays absent. The next write slides the expiry
        by the store's ``ttl`` as usual.

        Raises:
            ValueError: ``when`` is a naive datetime.
        """
        call = expire_at_call(self._key_space, memory_id, when, self._planner.history_follows_window)
        self._check_open(Operation.WRITE, call.memory_id)
        expire_at_done(call, self._run(call))

    def _scan(self, pattern: bytes) -> Iterator[bytes]:
        """The keys matching ``pattern`` (on every primary of a cluster); SCAN may give a key twice."""
        if isinstance(self._client, RedisCluster):
            return self._client.scan_iter(match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES)
        return self._client.scan_iter(match=pattern, count=1000)

    @_traced("history")
    def history(
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
        return self._drive(Operation.READ, memory_id, self._steps.history(memory_id, query))

    @_traced("trim_history")
    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
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
            return self._drive(Operation.WRITE, memory_id, self._steps.trim(memory_id, args))
        self._check_open(Operation.WRITE)
        try:
            keys = set(self._scan(self._key_space.history_pattern))
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.LIST) from exc
        removed = 0
        for key in keys:
            owner = self._key_space.id_of_history_key(key)
            if owner is not None:
                removed += self._drive(Operation.WRITE, owner, self._steps.trim(owner, args))
        return removed

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing it by hand)."""
        self._cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._cache.clear()

    def _release(self) -> None:
        self._client.close()

    def _history_repr(self) -> str:
        if not self._options.history:
            return ""
        return f", history=True, history_ttl={self._options.history_ttl!r}"

    def __repr__(self) -> str:
        kind = "cluster" if isinstance(self._client, RedisCluster) else "server"
        return (
            f"RedisChatMemoryStore({kind}, key_prefix={self._options.key_prefix!r}, ttl={self._options.ttl!r}, "
            f"refresh_ttl_on_read={self._options.refresh_ttl_on_read!r}{self._history_repr()})"
        )
