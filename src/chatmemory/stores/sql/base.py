"""What the sync and asyncio SQL stores share before any I/O: options, engine checks, the operations, repr.

:class:`SQLStoreBase` checks the constructor's options, makes or adopts the engine (each facade says how),
builds the statements once, and holds the snapshot cache and the store's
:class:`~chatmemory.stores.sql.operations.Operations`; the facades add only the executor that sends their
commands. Nothing here sends anything.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from sqlalchemy import Dialect
from sqlalchemy.exc import SQLAlchemyError

from chatmemory.core.store import validate_memory_id
from chatmemory.serialization.records import RecordCodec, codec_of
from chatmemory.stores.base import TTL, RetryPolicy, SnapshotCache, ttl_seconds
from chatmemory.stores.base.options import history_ttl_seconds
from chatmemory.stores.sql.dialect import dialect_of
from chatmemory.stores.sql.engine import autocommit_options, engine_isolation_level
from chatmemory.stores.sql.operations import Operations
from chatmemory.stores.sql.outcomes import CachedSnapshot, SQLFailure
from chatmemory.stores.sql.plan import Planner
from chatmemory.stores.sql.schema import (
    DEFAULT_TABLE_PREFIX,
    REQUIRED_SCHEMA_REVISION,
    SchemaAdmin,
    build_tables,
    validate_partitions,
    validate_table_prefix,
)
from chatmemory.stores.sql.statements import Statements

__all__ = ["SQLStoreBase", "shared_statements"]

_Engine = TypeVar("_Engine")
_Store = TypeVar("_Store", bound="SQLStoreBase[Any]")


class SQLStoreBase(Generic[_Engine]):
    """The state every SQL store keeps, checked at construction (see the executors for the arguments).

    Raises:
        TypeError: ``url_or_engine`` is neither a URL nor an engine of the executor's kind.
        ValueError: a URL that is not a SQL database URL, a driver or database the store does not use,
            ``engine_options`` with an engine, ``history_ttl`` without ``history`` or shorter than ``ttl``,
            ``partitions`` that is not an int from 1 to 1024 or on a database other than PostgreSQL.

    ``partitions`` (PostgreSQL): :meth:`create_schema` creates the message table ``PARTITION BY HASH
    (memory_id)`` in that many partitions (existing tables must already be partitioned so; they are
    never converted). Reads and writes are the same either way; see docs/scaling.md.
    """

    _repr_name: ClassVar[str]
    _engine_type: ClassVar[type[Any]]
    """The engine class the executor sends with (``Engine`` or ``AsyncEngine``)."""
    _turns_type: ClassVar[type[Any]]
    """Where the executor's writers of one memory queue in the process (``LocalTurns`` or ``AsyncLocalTurns``)."""
    _wrong_engine: ClassVar[str]
    """The TypeError's message for an argument that is neither (``{kind}``: its type's name)."""
    _wrong_dialect: ClassVar[str]
    """The ValueError's message for a database the store does not support (``{name}``: the dialect)."""

    def __init__(
        self,
        url_or_engine: str | _Engine,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        ttl: TTL = None,
        snapshot_cache_size: int = 1024,
        engine_options: dict[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        history: bool = False,
        history_ttl: TTL = None,
        partitions: int | None = None,
        encryption: RecordCodec | None = None,
    ) -> None:
        table_prefix = validate_table_prefix(table_prefix)
        self._codec = codec_of(encryption)
        self._ttl = ttl_seconds(ttl)
        self._history_ttl = history_ttl_seconds(history, history_ttl, self._ttl)
        self._history = history
        self._cache: SnapshotCache[CachedSnapshot] = SnapshotCache(snapshot_cache_size)
        self._retry = retry or RetryPolicy()
        self._turns: Any = self._turns_type()
        self._engine: _Engine
        if isinstance(url_or_engine, str):
            options = engine_options or {}
            self._engine = self._engine_from_url(url_or_engine, options)
            self._owns_client = True
            self._engine_options: dict[str, Any] | None = options
            # A connection kept between operations skips the pool's checkout: its pre-ping and recycling.
            self._keeps_connection = not options.get("pool_pre_ping") and options.get("pool_recycle", -1) < 0
        elif isinstance(url_or_engine, self._engine_type):
            if engine_options:
                raise ValueError("engine_options apply only when the store is given a URL")
            self._engine = url_or_engine
            self._owns_client = False
            self._engine_options = None
            self._keeps_connection = False  # the caller's pool: every connection goes back to it
        else:
            raise TypeError(self._wrong_engine.format(kind=type(url_or_engine).__name__))
        engine: Any = self._engine
        family = dialect_of(engine.dialect.name)
        if family is None:
            raise ValueError(self._wrong_dialect.format(name=engine.dialect.name))
        self._dialect = family.name
        self._partitions = validate_partitions(partitions, self._dialect)
        # Every connection the store uses is in autocommit; its transactions BEGIN themselves. An engine
        # already in autocommit is used as it is (no isolation switch at each pool checkout).
        switch = autocommit_options(engine_isolation_level(engine))
        self._autocommit = engine.execution_options(**switch) if switch else engine
        self._begin = family.begin
        self._statements = shared_statements(
            table_prefix,
            engine.dialect,
            expires=self._ttl is not None,
            history=history,
            history_expires=self._history_ttl is not None,
        )
        self._tables = self._statements.tables  # built once per prefix: later statements name these tables
        self._schema = SchemaAdmin(
            self._schema_engine(), engine.url, self._tables.prefix, self._dialect, self._partitions
        )
        planner = Planner(self._ttl, history, self._history_ttl, self._codec)
        self._operations = Operations(
            planner, self._statements, self._schema, self._cache, self._retry, self._check_open, self.__repr__
        )

    @classmethod
    def from_url(cls: type[_Store], url: str, **options: Any) -> _Store:
        """Build from a ``sqlite:``, ``postgresql:`` or ``mysql:``/``mariadb:`` URL (the store owns the engine)."""
        return cls(url, **options)

    def _engine_from_url(self, url: str, options: dict[str, Any]) -> _Engine:
        """The engine a store given ``url`` makes (and disposes of when it closes)."""
        raise NotImplementedError

    def _schema_engine(self) -> Any:
        """The sync engine schema checks connect with, or ``None`` when the executor passes connections."""
        return None

    if TYPE_CHECKING:  # the lifecycle mixin of each executor defines it

        def _check_open(self, operation: str, memory_id: str | None = None) -> None: ...

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        return self._ttl

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        return self._history

    @property
    def encryption(self) -> RecordCodec | None:
        """The keyring this store seals records with (``None``: records are plain)."""
        return self._codec if self._codec.sealed else None

    @property
    def history_ttl(self) -> float | None:
        """Seconds a history lives after the memory's last write (``None``: as long as the window)."""
        return self._history_ttl

    @property
    def table_prefix(self) -> str:
        """The prefix of the store's tables."""
        return self._tables.prefix

    @property
    def partitions(self) -> int | None:
        """How many hash partitions :meth:`create_schema` gives the message table (``None``: not partitioned)."""
        return self._partitions

    @property
    def required_schema_revision(self) -> str:
        """The schema revision this store reads and writes."""
        return REQUIRED_SCHEMA_REVISION

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing its rows by hand)."""
        self._cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._cache.clear()

    def __repr__(self) -> str:
        """The URL (password hidden), table prefix and ttl."""
        engine: Any = self._engine
        url = engine.url.render_as_string(hide_password=True)
        history = f", history=True, history_ttl={self._history_ttl!r}" if self._history else ""
        partitions = "" if self._partitions is None else f", partitions={self._partitions}"
        return (
            f"{self._repr_name}({url!r}, table_prefix={self._tables.prefix!r}, ttl={self._ttl!r}{history}{partitions})"
        )

    def _failure(self, exc: SQLAlchemyError) -> SQLFailure:
        """What the executors raise for a driver error: its kind, and the message the store reports."""
        return self._operations.dialect.failure(exc, self._schema.max_allowed_packet)


_SHARED_SIZE = 32
"""How many stores' statement sets (dialect, table prefix, options) a process keeps built."""
_shared: OrderedDict[tuple[Any, ...], Statements] = OrderedDict()
_shared_lock = threading.Lock()


def shared_statements(
    prefix: str, dialect: Dialect, *, expires: bool, history: bool = False, history_expires: bool = False
) -> Statements:
    """:class:`Statements` for a store, built once per process for its dialect, table prefix and options.

    Building and rendering them costs milliseconds of CPU, felt by every store opened from a URL (a CLI
    command, a short-lived worker). The statements are the same for every store of one key; each store
    gets its own copy of the set, with its own dialect and its own lazily rendered shapes (those rendered
    after the first connection may depend on the server the dialect has seen). The tables of ``prefix``
    are built with the set (:attr:`Statements.tables`): a statement the store builds must name the same
    ``Table`` objects.
    """
    key = (
        type(dialect),
        dialect.name,
        dialect.driver,
        dialect.paramstyle,
        getattr(dialect, "server_version_info", None),
        prefix,
        expires,
        history,
        history_expires,
    )
    with _shared_lock:
        built = _shared.get(key)
        if built is not None:
            _shared.move_to_end(key)
    if built is None:
        tables = build_tables(prefix)
        built = Statements(tables, dialect, expires=expires, history=history, history_expires=history_expires)
        with _shared_lock:
            _shared[key] = built
            while len(_shared) > _SHARED_SIZE:
                _shared.popitem(last=False)
    return built.for_store(dialect)
