"""What the blocking and the asyncio Redis stores share before any I/O: options, client, keys, cache, repr.

:class:`RedisStoreBase` checks the constructor's options (:class:`StoreOptions`), takes the client
(:class:`ClientHolder`: built from a URL by the executor, or adopted), and holds the key space, the
snapshot cache, the planner and the operations (:class:`~.operations.Operations`); it also checks the
arguments of the history methods. The executors (:mod:`.executor`, :mod:`.aio`) add how a client is
built and how a command is sent. No driver import and no I/O here.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from chatmemory.core.driving import Steps
from chatmemory.core.errors import HistoryNotEnabledError
from chatmemory.core.history import HistoryEntry, HistoryQuery, checked_restore, history_query
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.store import validate_memory_id
from chatmemory.serialization.records import RecordCodec, codec_of
from chatmemory.stores.base.options import (
    TTL,
    history_ttl_seconds,
    ttl_seconds,
    validate_prefix,
    validate_snapshot_cache_size,
)
from chatmemory.stores.base.turns import DEFAULT_LOCK_LEASE, DEFAULT_LOCK_WAIT, LockOptions
from chatmemory.stores.base.versions import SnapshotCache
from chatmemory.stores.redis.commands import Command, Replication, positive_seconds
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.operations import Operations
from chatmemory.stores.redis.outcomes import CachedMemory
from chatmemory.stores.redis.plan import Planner, trim_args

__all__ = [
    "DECODING_CLIENT",
    "DEFAULT_REPLICAS_TIMEOUT",
    "DEFAULT_SOCKET_CONNECT_TIMEOUT",
    "DEFAULT_SOCKET_TIMEOUT",
    "ClientHolder",
    "ClientTarget",
    "HistoryArguments",
    "RedisStoreBase",
    "StoreOptions",
]

_Client = TypeVar("_Client")
_Command = TypeVar("_Command")
_Command_co = TypeVar("_Command_co", covariant=True)
_Store = TypeVar("_Store", bound="RedisStoreBase[Any]")

DECODING_CLIENT = (
    "RedisChatMemoryStore needs a client with decode_responses=False: message records are bytes. "
    "Create a separate client for the store, without decode_responses=True"
)

DEFAULT_SOCKET_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a connection to a server, for clients a store builds from a URL."""
DEFAULT_SOCKET_TIMEOUT = 10.0
"""Seconds to wait for a reply (a script run of a memory is far shorter), for clients built from a URL."""

DEFAULT_REPLICAS_TIMEOUT = 1.0
"""Seconds a write waits for ``replicas_to_ack`` replicas before it raises ``ReplicationError``."""

_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
_SCHEMES = ("redis", "rediss", "unix", *_CLUSTER_SCHEMES)


@dataclass(frozen=True, slots=True)
class ClientTarget:
    """The client a URL asks for.

    Attributes:
        url: the URL as the driver takes it (``redis[s]+cluster`` becomes ``redis[s]``).
        cluster: build a cluster client.
    """

    url: str
    cluster: bool

    @classmethod
    def parse(cls, url: str) -> ClientTarget:
        """The target of ``url``.

        Raises:
            ValueError: ``url`` is not a Redis URL; the message shows one.
        """
        scheme, separator, rest = url.partition("://")
        if not separator or scheme.lower() not in _SCHEMES:
            raise ValueError(
                f"{url!r} is not a Redis URL: use redis://host:6379/0, rediss:// (TLS), unix:///path/redis.sock "
                "or redis+cluster://host:7000 (Redis Cluster)"
            )
        base = _CLUSTER_SCHEMES.get(scheme.lower())
        if base is not None:
            return cls(f"{base}://{rest}", cluster=True)
        return cls(url, cluster=False)


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """The options of a Redis store, validated (see ``RedisChatMemoryStore`` for their meaning)."""

    key_prefix: str
    ttl: float | None
    refresh_ttl_on_read: bool
    snapshot_cache_size: int
    socket_timeout: float
    socket_connect_timeout: float
    history: bool = False
    history_ttl: float | None = None
    lock: LockOptions = LockOptions()  # noqa: RUF009 - frozen, so one shared default is safe
    replication: Replication | None = None

    @classmethod
    def validate(
        cls,
        *,
        key_prefix: str,
        ttl: TTL,
        refresh_ttl_on_read: bool,
        snapshot_cache_size: int,
        socket_timeout: float,
        socket_connect_timeout: float,
        history: bool = False,
        history_ttl: TTL = None,
        lock_lease: float | datetime.timedelta = DEFAULT_LOCK_LEASE,
        lock_wait: float | datetime.timedelta = DEFAULT_LOCK_WAIT,
        replicas_to_ack: int = 0,
        replicas_timeout: float | datetime.timedelta = DEFAULT_REPLICAS_TIMEOUT,
    ) -> StoreOptions:
        """The options, or the error that says which one is wrong and what to pass.

        Raises:
            TypeError: an option has the wrong type (e.g. ``key_prefix=None``).
            ValueError: an option is out of range.
        """
        seconds = ttl_seconds(ttl)
        return cls(
            validate_prefix("key_prefix", key_prefix),
            seconds,
            bool(refresh_ttl_on_read),
            validate_snapshot_cache_size(snapshot_cache_size),
            positive_seconds("socket_timeout", socket_timeout),
            positive_seconds("socket_connect_timeout", socket_connect_timeout),
            history,
            history_ttl_seconds(history, history_ttl, seconds),
            LockOptions.validate(lock_lease, lock_wait),
            Replication.validate(replicas_to_ack, replicas_timeout),
        )

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for a client built from a URL; the URL's own query options take precedence."""
        return {"socket_timeout": self.socket_timeout, "socket_connect_timeout": self.socket_connect_timeout}


class ClientHolder(Generic[_Client]):
    """Holds the store's client and whether the store owns it; the executor names its client classes.

    Also the base of the LangChain4j-layout stores (:mod:`chatmemory.stores.langchain4j_redis.base`).
    """

    _repr_name: ClassVar[str]
    """The store's name in its ``repr``."""
    _client_types: ClassVar[tuple[type[Any], type[Any]]]
    """The standalone and the cluster client class the executor sends with."""
    _wrong_client: ClassVar[str]
    """The ``TypeError`` message for a ``url_or_client`` of another type (``{name}``: its type's name)."""

    def _hold(self, url_or_client: str | _Client, build: Callable[[str], Any], check: Callable[[Any], None]) -> None:
        """Keep the client ``build`` makes from a URL, or the one given, once ``check`` accepts it.

        Raises:
            TypeError: ``url_or_client`` is neither a URL nor one of the executor's clients.
            ValueError: ``check`` refused the client (an owned one is let go first).
        """
        client: Any
        self._build = build
        if isinstance(url_or_client, str):
            client = build(url_or_client)
            self._url: str | None = url_or_client
            self._owns_client = True
        elif isinstance(url_or_client, self._client_types):
            client = url_or_client
            self._url = None
            self._owns_client = False
        else:
            raise TypeError(self._wrong_client.format(name=type(url_or_client).__name__))
        try:
            check(client)
        except ValueError:
            self._discard(client)
            raise
        self._client: _Client = client
        self._cluster = isinstance(client, self._client_types[1])
        self._started()

    def _another_client(self) -> Any:
        """One more client like the first, from the URL the store was built from (``None``: given a client)."""
        return None if self._url is None else self._build(self._url)

    def _discard(self, client: Any) -> None:
        """Let go of a client the store will not use (the executor closes an owned one if it can)."""

    def _started(self) -> None:
        """Set up what the executor needs once the client is known."""

    @property
    def client(self) -> _Client:
        """The redis-py client the store uses."""
        return self._client


class _Trims(Protocol[_Command_co]):
    def trim(self, memory_id: str, args: tuple[bytes, ...], /) -> Steps[_Command_co, int]: ...

    def trim_all(self, args: tuple[bytes, ...], /) -> Steps[_Command_co, int]: ...


class HistoryArguments(Generic[_Command]):
    """The history methods' argument checks, shared by the Redis and the LangChain4j-layout store bases."""

    _operations: _Trims[_Command]

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        raise NotImplementedError

    def _require_history(self) -> None:
        if not self.keeps_history:
            raise HistoryNotEnabledError(repr(self))

    def _history_query(self, after: int | None, limit: int, reverse: bool) -> HistoryQuery:
        """The page :meth:`history` reads, checked before anything is sent.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        query = history_query(after, limit, reverse)
        self._require_history()
        return query

    def _trim(self, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None) -> Steps[_Command, int]:
        """The trim of one memory's history, or of every memory's, its arguments checked now.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        args = trim_args(older_than)
        self._require_history()
        if memory_id is not None:
            return self._operations.trim(memory_id, args)
        return self._operations.trim_all(args)


class RedisStoreBase(ClientHolder[_Client], HistoryArguments[Command]):
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
        self._operations: Operations = Operations(self._planner, self._cache)
        self._hold(url_or_client, self._from_url, _check_client)

    @property
    def key_prefix(self) -> str:
        """What every key of this store starts with."""
        return self._options.key_prefix

    def _from_url(self, url: str) -> Any:
        """A client for ``url``, built without connecting (the executor's client classes).

        Raises:
            ValueError: ``url`` is not a Redis URL.
            StoreError: a cluster whose nodes cannot be reached or are not in cluster mode.
        """
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

    def _restore(
        self, memory_id: str, entries: Sequence[HistoryEntry], window: Sequence[ChatMessage] | None
    ) -> Steps[Command, int]:
        """The restore of ``entries`` (and ``window``) into the history of ``memory_id``, its arguments checked now.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            TypeError, ValueError: see :func:`~chatmemory.core.history.checked_restore`.
        """
        memory_id = validate_memory_id(memory_id)
        restored = checked_restore(memory_id, entries)
        messages = None if window is None else checked_messages(window)
        self._require_history()
        return self._operations.restore(memory_id, restored, messages)

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
