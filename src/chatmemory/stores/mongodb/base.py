"""What the sync and asyncio MongoDB stores share: options, the planner and the operations.

:class:`MongoStoreBase` checks the constructor's options and holds the
:class:`~chatmemory.stores.mongodb.operations.MongoOperations` both executors drive; the client, its
collections and the write concern come from the clients half of each facade
(:class:`~chatmemory.stores.mongodb.executor.MongoClients`, which checks pymongo's options and names). No
driver here: nothing is sent.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chatmemory.core.store import validate_memory_id
from chatmemory.serialization.records import RecordCodec, codec_of
from chatmemory.stores.base import RetryPolicy, SnapshotCache, ttl_seconds
from chatmemory.stores.base.options import TTL, history_ttl_seconds
from chatmemory.stores.base.turns import DEFAULT_LOCK_LEASE, DEFAULT_LOCK_WAIT, LockOptions
from chatmemory.stores.mongodb.layout import HistoryConfig, MemoryState
from chatmemory.stores.mongodb.operations import MongoOperations
from chatmemory.stores.mongodb.plan import MongoPlanner

if TYPE_CHECKING:
    from pymongo.write_concern import WriteConcern

    from chatmemory.stores.mongodb.executor import Collections

__all__ = ["MongoStoreBase"]

_Client = TypeVar("_Client")
_Store = TypeVar("_Store", bound="MongoStoreBase[Any]")


class MongoStoreBase(Generic[_Client]):
    """The state every MongoDB store keeps, checked at construction (see the executors for the arguments).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a ``client_type``; ``history`` is not a bool;
            ``lock_lease`` or ``lock_wait`` is neither a number nor a ``timedelta``; ``write_concern`` is
            neither a tag, a number of members nor a ``WriteConcern``.
        ValueError: an invalid ttl, history_ttl, cache size, lock_lease, lock_wait, database or collection
            name; an unacknowledged ``write_concern``.
        StoreError: the URL cannot be parsed.

    ``write_concern`` (``"majority"``, a number of members, or a pymongo ``WriteConcern``) is carried by
    every write to the memories, history and lock collections; ``None`` keeps the client's (its URL's
    ``w=``). With ``"majority"`` an acknowledged write survives the failover of its primary; see
    docs/scaling.md.
    """

    _repr_name = "MongoChatMemoryStore"
    _client_type: type[Any]
    """The client class the executor sends with (``MongoClient`` or ``AsyncMongoClient``)."""
    _turns_type: type[Any]
    """Where the executor's writers of one memory queue in the process (``LocalTurns`` or ``AsyncLocalTurns``)."""

    def __init__(
        self,
        url_or_client: str | _Client,
        *,
        database: str | None = None,
        collection: str = "memories",
        ttl: TTL = None,
        snapshot_cache_size: int = 1024,
        retry: RetryPolicy | None = None,
        client_options: dict[str, Any] | None = None,
        history: bool = False,
        history_ttl: TTL = None,
        lock_lease: float | datetime.timedelta = DEFAULT_LOCK_LEASE,
        lock_wait: float | datetime.timedelta = DEFAULT_LOCK_WAIT,
        write_concern: str | int | WriteConcern | None = None,
        encryption: RecordCodec | None = None,
    ) -> None:
        self._codec = codec_of(encryption)
        self._write_concern = self._write_concern_of(write_concern)
        self._ttl = ttl_seconds(ttl)
        history_seconds = history_ttl_seconds(history, history_ttl, self._ttl)
        self._history = HistoryConfig(self._ttl, history_seconds) if history else None
        self._window_field = self._history.window_field if self._history is not None else "expires_at"
        cache: SnapshotCache[MemoryState] = SnapshotCache(snapshot_cache_size)
        self._retry = retry if retry is not None else RetryPolicy()
        self._lock = LockOptions.validate(lock_lease, lock_wait)
        self._turns: Any = self._turns_type()
        self._client: _Client
        self._client, self._owns_client = self._adopt(url_or_client, client_options)
        self._on: Collections = self._collections(database, collection)
        self._collection: Any = self._on.window
        self._history_collection: Any = self._on.history
        self._another_client: Callable[[], Collections] | None = self._client_maker(url_or_client, client_options)
        """Builds a client like the first with its collections (a store built from a URL); ``None``: it cannot."""
        planner = MongoPlanner(self._ttl, self._history, self._codec, collection=self._collection.name, lock=self._lock)
        self._ops = MongoOperations(planner, self._retry, cache, self._check_open, repr(self))
        """The operations both executors drive (the planner, the snapshot cache, the server's clock)."""
        self._started()

    def _started(self) -> None:
        """What an executor sets up once the options are checked and the first client is there."""

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        return self._ttl

    @property
    def write_concern(self) -> WriteConcern:
        """The write concern the store's writes carry (its ``write_concern`` option, else the client's)."""
        concern: WriteConcern = self._on.window.write_concern
        return concern

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        return self._history is not None

    @property
    def encryption(self) -> RecordCodec | None:
        """The keyring this store seals records with (``None``: records are plain)."""
        return self._codec if self._codec.sealed else None

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing its document by hand)."""
        self._ops.cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._ops.cache.clear()

    def __repr__(self) -> str:
        return (
            f"{self._repr_name}(database={self._collection.database.name!r}, "
            f"collection={self._collection.name!r}, ttl={self._ttl!r}"
            + ("" if self._history is None else f", history=True, history_ttl={self._history.history_ttl!r}")
            + ("" if self._write_concern is None else f", write_concern={self._write_concern.document!r}")
            + ")"
        )

    if TYPE_CHECKING:  # the lifecycle mixin and the clients half (executor.MongoClients) of each facade

        def _check_open(self, operation: str, memory_id: str | None = None) -> None: ...

        def _write_concern_of(self, value: str | int | WriteConcern | None) -> WriteConcern | None: ...

        def _adopt(self, url_or_client: Any, options: dict[str, Any] | None) -> tuple[Any, bool]: ...

        def _collections(self, database: str | None, collection: str) -> Collections: ...

        def _client_maker(
            self, url_or_client: Any, options: dict[str, Any] | None
        ) -> Callable[[], Collections] | None: ...

    @classmethod
    def from_url(cls: type[_Store], url: str, **options: Any) -> _Store:
        """Build from a ``mongodb://`` or ``mongodb+srv://`` URL (options go to the constructor)."""
        if not url.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError(f"MongoChatMemoryStore takes mongodb:// or mongodb+srv:// URLs, not {url!r}")
        return cls(url, **options)
