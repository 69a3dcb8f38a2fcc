"""What the sync and asyncio MongoDB stores share: options, clients, collections, the planner and operations.

:class:`MongoStoreBase` checks the constructor's options, builds or adopts the client (pymongo's client
options, names and write concern are checked here), names the collections and holds the
:class:`~chatmemory.stores.mongodb.operations.MongoOperations` both executors drive; the executors add
only how they send a command. Nothing is sent from here.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar
from urllib.parse import parse_qsl, urlsplit

from chatmemory.core.errors import StoreError
from chatmemory.core.optional import require
from chatmemory.core.store import validate_memory_id
from chatmemory.serialization.records import RecordCodec, codec_of
from chatmemory.stores.base import Operation, RetryPolicy, SnapshotCache, ttl_seconds
from chatmemory.stores.base.options import TTL, history_ttl_seconds
from chatmemory.stores.base.turns import DEFAULT_LOCK_LEASE, DEFAULT_LOCK_WAIT, LockOptions

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from bson.codec_options import CodecOptions  # noqa: E402 - imported once the driver is known to be installed
from pymongo.errors import InvalidName  # noqa: E402
from pymongo.write_concern import WriteConcern  # noqa: E402

from chatmemory.stores.mongodb.commands import Command, Target  # noqa: E402
from chatmemory.stores.mongodb.executor import DRIVER_ERRORS, describe  # noqa: E402
from chatmemory.stores.mongodb.layout import (  # noqa: E402
    Document,
    HistoryConfig,
    MemoryState,
    history_collection_name,
    lock_collection_name,
)
from chatmemory.stores.mongodb.operations import MongoOperations  # noqa: E402
from chatmemory.stores.mongodb.plan import MongoPlanner  # noqa: E402

__all__ = ["CODEC_OPTIONS", "DEFAULT_DATABASE", "DEFAULT_TIMEOUTS_MS", "Collections", "MongoStoreBase", "WriteConcern"]

_Client = TypeVar("_Client")
_Store = TypeVar("_Store", bound="MongoStoreBase[Any]")

CODEC_OPTIONS: Final[CodecOptions[Document]] = CodecOptions(
    document_class=dict, tz_aware=True, tzinfo=datetime.timezone.utc
)
"""Documents as dicts and aware UTC dates, whatever the caller's client uses."""

DEFAULT_TIMEOUTS_MS: Final = {
    "serverSelectionTimeoutMS": 5_000,
    "connectTimeoutMS": 5_000,
    "socketTimeoutMS": 30_000,
}
"""Timeouts a store built from a URL uses unless the URL or ``client_options`` set them: a server that is
down fails the first call within 5 s (pymongo's defaults wait 30 s for a server and forever for a reply)."""


def client_options(url: str, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The keyword arguments a store passes to the client it builds from ``url``.

    The default timeouts apply unless ``url`` names them (case-insensitively, as MongoDB URL options
    are) or ``overrides`` does; ``overrides`` win over everything.
    """
    named = {key.lower() for key, _ in parse_qsl(urlsplit(url).query)}
    options: dict[str, Any] = {key: value for key, value in DEFAULT_TIMEOUTS_MS.items() if key.lower() not in named}
    options.update(overrides or {})
    return options


DEFAULT_DATABASE: Final = "chatmemory"
"""The database a store uses when neither its ``database`` argument nor its URL names one."""


def database_name(given: str | None, client: Any) -> str:
    """The database a store uses: ``given``, else the one its URL names, else :data:`DEFAULT_DATABASE`.

    The URL's database is its path (``mongodb://host/NAME?...``). ``client`` is the store's ``MongoClient``
    or ``AsyncMongoClient``, built from the store's URL or passed in (then the URL it was built with);
    reading the name it was given does no I/O.
    """
    if given is not None:
        return given
    name: str = client.get_default_database(DEFAULT_DATABASE).name
    return name


def write_concern_of(value: str | int | WriteConcern | None) -> WriteConcern | None:
    """The write concern a store's ``write_concern`` option asks for (``None``: the client's own).

    ``"majority"`` (or another ``w`` tag name), a number of members, or a pymongo ``WriteConcern`` (for
    ``j`` or ``wtimeout`` too). It must be acknowledged: every write of the store reads its reply (the
    version it matched, the document it left).

    Raises:
        TypeError: not one of those.
        ValueError: an empty tag, fewer than one member, or an unacknowledged ``WriteConcern`` (``w=0``).
    """
    if value is None:
        return None
    if isinstance(value, WriteConcern):
        concern = value
    elif isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(
            f"write_concern must be 'majority', a number of members or a pymongo WriteConcern, not {value!r}"
        )
    elif isinstance(value, str) and not value:
        raise ValueError("write_concern must name a w tag such as 'majority', not ''")
    elif isinstance(value, int) and value < 1:
        raise ValueError(f"write_concern must be at least 1 member (the store reads every write's reply), not {value}")
    else:
        concern = WriteConcern(w=value)
    if not concern.acknowledged:
        raise ValueError(
            "write_concern must be acknowledged (w >= 1 or 'majority'): the store reads the reply of every write"
        )
    return concern


def collection_of(client: Any, database: str, collection: str, write_concern: WriteConcern | None = None) -> Any:
    """The memories collection of ``client`` (a ``MongoClient`` or an ``AsyncMongoClient``), names checked.

    ``write_concern``: the one its writes carry (``None``: the client's, from its URL or options).

    Raises:
        ValueError: MongoDB cannot hold ``database`` or ``collection`` as a name (the fix in the message).
    """
    try:
        db = client.get_database(database)
    except (InvalidName, TypeError) as exc:
        raise invalid_name("database", database, exc) from exc
    try:
        return db.get_collection(collection, codec_options=CODEC_OPTIONS, write_concern=write_concern)
    except (InvalidName, TypeError) as exc:
        raise invalid_name("collection", collection, exc) from exc


def invalid_name(kind: str, name: object, exc: Exception) -> ValueError:
    """The error for a database or collection name MongoDB cannot hold (``kind``: ``"database"`` ...)."""
    return ValueError(
        f"MongoChatMemoryStore {kind} name {name!r} is not valid in MongoDB ({exc}); use a non-empty name "
        "without '$', NUL, spaces, '.', '/' or '\\' (for a database) or a name that neither starts with "
        "'system.' nor holds '$' or NUL (for a collection), e.g. 'chatmemory' / 'memories'"
    )


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
        self._write_concern = write_concern_of(write_concern)
        self._ttl = ttl_seconds(ttl)
        history_seconds = history_ttl_seconds(history, history_ttl, self._ttl)
        self._history = HistoryConfig(self._ttl, history_seconds) if history else None
        self._window_field = self._history.window_field if self._history is not None else "expires_at"
        cache: SnapshotCache[MemoryState] = SnapshotCache(snapshot_cache_size)
        self._retry = retry if retry is not None else RetryPolicy()
        self._lock = LockOptions.validate(lock_lease, lock_wait)
        self._turns: Any = self._turns_type()
        self._client: _Client
        self._client, self._owns_client = _client(url_or_client, self._client_type, client_options)
        database = database_name(database, self._client)
        self._on = Collections(
            self._client, database, collection, history=self._history is not None, write_concern=self._write_concern
        )
        self._collection: Any = self._on.window
        self._history_collection: Any = self._on.history
        self._another_client: Callable[[], Collections] | None = None
        """Builds a client like the first with its collections (a store built from a URL); ``None``: it cannot."""
        if isinstance(url_or_client, str):
            self._another_client = _client_maker(
                url_or_client,
                self._client_type,
                client_options,
                self._on,
                history=self._history is not None,
                write_concern=self._write_concern,
            )
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

    if TYPE_CHECKING:  # the lifecycle mixin of each executor's class defines it

        def _check_open(self, operation: str, memory_id: str | None = None) -> None: ...

    @classmethod
    def from_url(cls: type[_Store], url: str, **options: Any) -> _Store:
        """Build from a ``mongodb://`` or ``mongodb+srv://`` URL (options go to the constructor)."""
        if not url.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError(f"MongoChatMemoryStore takes mongodb:// or mongodb+srv:// URLs, not {url!r}")
        return cls(url, **options)


class Collections:
    """The collections of a store on one client: memories, histories (``None`` without history) and locks."""

    __slots__ = ("client", "history", "locks", "window")

    def __init__(
        self, client: Any, database: str, collection: str, *, history: bool, write_concern: WriteConcern | None = None
    ) -> None:
        self.client = client
        self.window: Any = collection_of(client, database, collection, write_concern)
        self.history: Any = (
            collection_of(client, database, history_collection_name(collection), write_concern) if history else None
        )
        self.locks: Any = collection_of(client, database, lock_collection_name(collection), write_concern)

    def method(self, command: Command) -> Any:
        """The driver method ``command`` calls (on the memories, history or lock collection, or ``admin``)."""
        target = command.target
        if target is Target.WINDOW:
            receiver = self.window
        elif target is Target.HISTORY:
            receiver = self.history
        elif target is Target.LOCKS:
            receiver = self.locks
        else:
            receiver = self.client.admin
        return getattr(receiver, command.method)


def _client_maker(
    url: str,
    client_type: type[Any],
    options: dict[str, Any] | None,
    first: Collections,
    *,
    history: bool,
    write_concern: WriteConcern | None = None,
) -> Callable[[], Collections]:
    """What builds another client from ``url`` as the constructor did, with the collections ``first`` has."""
    database, collection = first.window.database.name, first.window.name
    arguments = client_options(url, options)

    def make() -> Collections:
        client = client_type(url, **arguments)
        return Collections(client, database, collection, history=history, write_concern=write_concern)

    return make


def _client(url_or_client: Any, client_type: type[Any], options: dict[str, Any] | None) -> tuple[Any, bool]:
    """The client to use and whether the store owns it (built it from a URL)."""
    if isinstance(url_or_client, str):
        try:
            return client_type(url_or_client, **client_options(url_or_client, options)), True
        except (*DRIVER_ERRORS, ValueError, TypeError) as exc:  # the URI parser raises ConfigurationError/ValueError
            raise StoreError(Operation.CONNECT, detail=describe(exc)) from exc
    if isinstance(url_or_client, client_type):
        return url_or_client, False
    raise TypeError(f"expected a MongoDB URL or a pymongo.{client_type.__name__}, got {type(url_or_client).__name__}")
