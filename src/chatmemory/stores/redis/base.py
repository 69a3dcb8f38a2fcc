"""What the blocking and the asyncio Redis stores share before any I/O: options, client, keys, cache, repr.

:class:`RedisStoreBase` checks the constructor's options, builds or adopts the client, and holds the key
space, the snapshot cache, the planner and the operations (:class:`~chatmemory.stores.redis.steps.Steps`);
it also checks the arguments of the history methods. The executors add only how a command is sent.
This module imports redis-py (through :mod:`~chatmemory.stores.redis.driver`), never sends anything.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any, TypeVar

from chatmemory.core.errors import HistoryNotEnabledError
from chatmemory.core.history import HistoryEntry, HistoryQuery, checked_restore, history_query
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.serialization.records import RecordCodec, codec_of
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.base.options import TTL
from chatmemory.stores.base.snapshot_cache import SnapshotCache
from chatmemory.stores.base.turns import DEFAULT_LOCK_LEASE, DEFAULT_LOCK_WAIT
from chatmemory.stores.redis.cached import CachedMemory
from chatmemory.stores.redis.client import ClientHolder
from chatmemory.stores.redis.commands import Sends
from chatmemory.stores.redis.config import (
    DEFAULT_REPLICAS_TIMEOUT,
    DEFAULT_SOCKET_CONNECT_TIMEOUT,
    DEFAULT_SOCKET_TIMEOUT,
    ClientTarget,
    StoreOptions,
)
from chatmemory.stores.redis.driver import DECODING_CLIENT, DRIVER_ERRORS, store_error
from chatmemory.stores.redis.history import trim_args
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.plan import Planner
from chatmemory.stores.redis.steps import Steps

__all__ = ["RedisStoreBase"]

_Client = TypeVar("_Client")
_Store = TypeVar("_Store", bound="RedisStoreBase[Any]")


class RedisStoreBase(ClientHolder[_Client]):
    """The state every Redis store keeps, checked at construction (see the executors for the arguments).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a ``client_types`` client, or an option has the
            wrong type.
        ValueError: a bad URL, a client that decodes responses, or an option out of range.
        StoreError: a cluster URL whose nodes cannot be reached or are not in cluster mode.
    """

    def __init__(
        self,
        url_or_client: str | _Client,
        *,
        key_prefix: str = "chatmemory:",
        ttl: TTL = None,
        refresh_ttl_on_read: bool = False,
        snapshot_cache_size: int = 1024,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        socket_connect_timeout: float = DEFAULT_SOCKET_CONNECT_TIMEOUT,
        history: bool = False,
        history_ttl: TTL = None,
        lock_lease: float | datetime.timedelta = DEFAULT_LOCK_LEASE,
        lock_wait: float | datetime.timedelta = DEFAULT_LOCK_WAIT,
        replicas_to_ack: int = 0,
        replicas_timeout: float | datetime.timedelta = DEFAULT_REPLICAS_TIMEOUT,
        encryption: RecordCodec | None = None,
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
            lock_lease=lock_lease,
            lock_wait=lock_wait,
            replicas_to_ack=replicas_to_ack,
            replicas_timeout=replicas_timeout,
        )
        self._options = options
        self._key_space = KeySpace(options.key_prefix)
        self._cache: SnapshotCache[CachedMemory] = SnapshotCache(options.snapshot_cache_size)
        self._planner = Planner(
            self._key_space,
            options.ttl,
            options.refresh_ttl_on_read,
            options.history,
            options.history_ttl,
            codec_of(encryption),
        )
        self._steps = Steps(self._planner, self._cache)
        self._hold(url_or_client, self._from_url, _check_client)

    @property
    def key_prefix(self) -> str:
        """What every key of this store starts with."""
        return self._options.key_prefix

    def _from_url(self, url: str) -> Any:
        target = ClientTarget.parse(url)
        try:
            return self._connect(target, self._options)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.CONNECT) from exc

    @classmethod
    def _connect(cls, target: ClientTarget, options: StoreOptions) -> Any:
        """A client for ``target``, built without connecting (the executor's client classes)."""
        raise NotImplementedError

    @classmethod
    def from_url(cls: type[_Store], url: str, **options: Any) -> _Store:
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
    def encryption(self) -> RecordCodec | None:
        """The keyring this store seals records with (``None``: records are plain)."""
        return self._planner.codec if self._planner.codec.sealed else None

    def keys_of(self, memory_id: str) -> tuple[bytes, bytes]:
        """The metadata and message-list keys of ``memory_id`` (in one hash slot)."""
        keys = self._key_space.keys_of(memory_id)
        return keys.meta, keys.messages

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing it by hand)."""
        self._cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._cache.clear()

    # ------------------------------------------------------------------- the history methods' arguments

    def _require_history(self) -> None:
        if not self._options.history:
            raise HistoryNotEnabledError(repr(self))

    def _history_query(self, after: int | None, limit: int, reverse: bool) -> HistoryQuery:
        """The page :meth:`history` reads, checked before anything is sent.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        query = history_query(after, limit, reverse)
        self._require_history()
        return query

    def _restore(
        self, memory_id: str, entries: Sequence[HistoryEntry], window: Sequence[ChatMessage] | None
    ) -> Sends[int]:
        """The restore of ``entries`` (and ``window``) into the history of ``memory_id``, its arguments checked now.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            TypeError, ValueError: see :func:`~chatmemory.core.history.checked_restore`.
        """
        memory_id = validate_memory_id(memory_id)
        restored = checked_restore(memory_id, entries)
        messages = None if window is None else checked_messages(window)
        self._require_history()
        return self._steps.restore(memory_id, restored, messages)

    def _trim(self, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None) -> Sends[int]:
        """The trim of one memory's history, or of every memory's, its arguments checked now.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        args = trim_args(older_than)
        self._require_history()
        if memory_id is not None:
            return self._steps.trim(memory_id, args)
        return self._steps.trim_all(args)

    def __repr__(self) -> str:
        options = self._options
        history = "" if not options.history else f", history=True, history_ttl={options.history_ttl!r}"
        return (
            f"{self._repr_name}({'cluster' if self._cluster else 'server'}, key_prefix={options.key_prefix!r}, "
            f"ttl={options.ttl!r}, refresh_ttl_on_read={options.refresh_ttl_on_read!r}{history})"
        )


def _check_client(client: Any) -> None:
    if client.get_encoder().decode_responses:
        raise ValueError(DECODING_CLIENT)
