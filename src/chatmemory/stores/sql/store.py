"""The SQL store (SQLAlchemy 2 Core), sync: it sends the commands of :mod:`chatmemory.stores.sql.operations`.

One row per message keyed by ``(memory_id, seq)`` and a head row per memory (see
:mod:`chatmemory.stores.sql.schema`). A write diffs by sequence: it deletes the evicted rows and inserts
only the new tail, so a steady-state turn costs the same whatever the window size. On PostgreSQL that
turn is one statement (data-modifying CTEs); elsewhere one short transaction.

With ``history=True`` a write deletes nothing: the head row's window ranges move past the rows it
evicts (see :mod:`chatmemory.stores.sql.window`), which stay as the memory's history, and the rows it
adds carry the write's time. A steady-state turn is then one head update and one insert.

The operations are written once for this store and the asyncio one; this module only sends their
commands: driver SQL straight on the DBAPI cursor of the checked-out connection (through
``exec_driver_sql`` when cursor events are listened to, so that they see every statement), SQLAlchemy
statements with ``Connection.execute``.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, TypeVar

from chatmemory.stores._optional import require

require("sqlalchemy", feature="SQLChatMemoryStore", extra="sql")

from sqlalchemy import Connection, Engine  # noqa: E402 - after the dependency check

from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage  # noqa: E402
from chatmemory.core.messages import ChatMessage  # noqa: E402
from chatmemory.core.store import Snapshot  # noqa: E402
from chatmemory.memory_times import MemoryTimes  # noqa: E402
from chatmemory.stores.base import Operation, StoreLifecycle  # noqa: E402
from chatmemory.stores.base.telemetry import StoreTelemetry  # noqa: E402
from chatmemory.stores.sql.commands import (  # noqa: E402
    CHECK_SCHEMA,
    RELEASE,
    Batch,
    Emit,
    ListingClosed,
    Result,
    Sleep,
    Statement,
    Steps,
    result_of,
)
from chatmemory.stores.sql.engine import engine_from_url  # noqa: E402
from chatmemory.stores.sql.locked_operations import Change  # noqa: E402
from chatmemory.stores.sql.operations import SQLOperations, check_listing  # noqa: E402
from chatmemory.stores.sql.reads import ReadRecord  # noqa: E402

__all__ = ["SQLChatMemoryStore"]

_traced = StoreTelemetry("sql", __name__)

_T = TypeVar("_T")


class SQLChatMemoryStore(StoreLifecycle, SQLOperations[Engine]):
    """A store in SQL tables; supports versioning, listing, TTL, schema commands and raw records.

    Create the tables with ``chatmemory migrate URL`` (or :func:`chatmemory.migrations.upgrade`), or with
    :meth:`create_schema` during development. A store on a schema that is behind raises
    :class:`~chatmemory.SchemaVersionError` naming the command to run.

    Args:
        url_or_engine: a SQLAlchemy URL (the store makes the engine and disposes of it in :meth:`close`;
            ``postgresql://`` means psycopg 3, ``mysql://`` PyMySQL) or an :class:`~sqlalchemy.Engine` the
            caller owns and closes. Any engine works, one in autocommit included: the store opens its
            transactions itself. An engine that is not in autocommit has its connections switched to it
            at each checkout (a round trip on some drivers); build yours with
            ``isolation_level="AUTOCOMMIT"`` to spare that.
        table_prefix: prefix of the store's tables (``<prefix>memories``, ``<prefix>messages``).
        ttl: seconds (or a ``timedelta``) a memory lives after its last write, by the database's clock;
            ``None``: forever.
        snapshot_cache_size: how many memories' last state to keep for diffing writes without a read
            (``0``: always rewrite whole windows).
        engine_options: passed to :func:`sqlalchemy.create_engine` when a URL is given (defaults:
            autocommit connections, a connect timeout of 10 s, a SQLite busy timeout of 30 s).
        retry: how long writers creating or replacing one memory at once retry their collisions.
        history: keep every message ever added to a memory, evicted ones included (see :meth:`history`):
            evicted rows stay in the message table, outside the window's ranges, instead of being deleted.
        history_ttl: seconds (or a ``timedelta``) a memory's history lives after its last write, at least
            ``ttl`` (``None``: it expires with the window). The head row then keeps the history's expiry
            and outlives the window until it passes: :meth:`purge_expired` leaves it until then, and a
            write after the window expired starts a new window but continues the history.

    Raises:
        ValueError: a URL that is not a SQL database URL, or a driver the store does not use; the message
            says what to use; ``history_ttl`` without ``history``, or shorter than ``ttl``.
    """

    _repr_name = "SQLChatMemoryStore"
    _engine_type = Engine
    _wrong_engine = (
        "SQLChatMemoryStore takes a URL or a sqlalchemy Engine, not {kind} "
        "(for an AsyncEngine use chatmemory.aio.stores.sql.SQLChatMemoryStore)"
    )
    _wrong_dialect = "SQLChatMemoryStore supports PostgreSQL, SQLite and MySQL/MariaDB, not {name!r}"

    def _engine_from_url(self, url: str, options: dict[str, Any]) -> Engine:
        return engine_from_url(url, options)

    def _schema_engine(self) -> Engine:
        return self._engine

    @functools.cached_property
    def _dbapi_error(self) -> type[Exception]:
        """The driver's base exception class (what the cursor path hands to SQLAlchemy's handler)."""
        error: type[Exception] = self._engine.dialect.loaded_dbapi.Error
        return error

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLChatMemoryStore:
        """Build from a ``sqlite:``, ``postgresql:`` or ``mysql:``/``mariadb:`` URL (the store owns the engine)."""
        return cls(url, **options)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine the store uses (made from the URL: its connections are in autocommit)."""
        return self._engine

    def _release(self) -> None:
        self._engine.dispose()

    # -------------------------------------------------------------------------------------------- schema

    def schema_revision(self) -> str | None:
        """The revision the store's tables are at (``None``: no tables yet)."""
        self._check_open(Operation.SCHEMA)
        return self._schema.revision()

    def create_schema(self) -> None:
        """Create the tables (the development quick path), or migrate existing ones to the newest revision."""
        self._check_open(Operation.SCHEMA)
        self._schema.create()

    def drop_schema(self) -> None:
        """Drop the store's tables and its version table (for tests and teardown: the data is gone)."""
        self._check_open(Operation.SCHEMA)
        self._schema.drop()
        self._cache.clear()

    # ---------------------------------------------------------------------------------------- the driver

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """A connection in a transaction of its own, committed unless the block raises (for tests)."""
        with self._autocommit.connect() as connection:
            connection.exec_driver_sql(self._begin)
            try:
                yield connection
            except BaseException:
                connection.exec_driver_sql("ROLLBACK")
                raise
            connection.exec_driver_sql("COMMIT")

    def _run(self, steps: Steps[_T]) -> _T:
        """Send each command ``steps`` yields; a driver error goes back in where it was yielded."""
        session = _Session(self)
        reply: Any = None
        error: Exception | None = None
        try:
            while True:
                try:
                    command = steps.send(reply) if error is None else steps.throw(error)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                try:
                    reply, error = session.perform(command), None
                except Exception as exc:  # the operation handles it, as around a direct call
                    reply, error = None, exc
        except BaseException as exc:
            session.end(exc)
            raise
        finally:
            session.end(None)

    def _iterate(self, steps: Steps[None]) -> Iterator[str]:
        """Like :meth:`_run`, handing out the ids the operation emits; a caller that stops ends it."""
        session = _Session(self)
        reply: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    command = steps.send(reply) if error is None else steps.throw(error)
                except (StopIteration, ListingClosed):
                    return
                reply, error = None, None
                if isinstance(command, Emit):
                    try:
                        yield from command.ids
                    except GeneratorExit:
                        error = ListingClosed()
                    continue
                try:
                    reply = session.perform(command)
                except Exception as exc:
                    error = exc
        except BaseException as exc:
            session.end(exc)
            raise
        finally:
            session.end(None)

    # ---------------------------------------------------------------------------------------------- reads

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one query)."""
        return self._run(self._load(memory_id))

    @_traced("get")
    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    @_traced("read_raw")
    def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id``, undecoded (also those of message rows without a head row)."""
        return self._run(self._read_raw(memory_id))

    @_traced("memory_times")
    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires (the database's clock); ``None`` if absent."""
        return self._run(self._memory_times(memory_id))

    # --------------------------------------------------------------------------------------------- writes

    @_traced("save")
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        return self._run(self._save(memory_id, messages, expected_version))

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        self._run(self._update(memory_id, messages))

    @_traced("write_raw")
    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        This imports data from another store without decoding it twice, and is how the contract suite
        plants corrupted data. With history it records nothing (the records are not history entries) and
        keeps the history the memory had.
        """
        self._run(self._write_raw(memory_id, records))

    @_traced("modify")
    def modify(self, memory_id: str, change: Change) -> int:
        """Read, change and write ``memory_id`` under its head row's lock; return the version it is at.

        Writers of one memory that call this queue on the database's row lock instead of conflicting and
        retrying: under heavy contention on one memory (many writers adding turns at once) each change
        costs one transaction, and none gives up. ``change`` gets the stored messages and returns the new
        list, or ``None`` to leave the memory as it is; it runs while the lock is held, so keep it short.
        A memory that does not exist yet is created under the same rule as :meth:`save` at version 0.

        Raises:
            CorruptedMemoryError: the stored memory does not decode (``change`` is not called).
            StoreError: the database failed, or writers creating the memory collided for the whole retry
                budget.
        """
        return self._run(self._modify(memory_id, change))

    @_traced("delete")
    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        self._run(self._delete(memory_id))

    @_traced("expire_at")
    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent.

        One statement on the head row; reads judge expiry by the database's clock on every query, so a
        cached snapshot never serves a memory this expired (the snapshot is forgotten all the same).

        Raises:
            ValueError: ``when`` is not an aware datetime.
        """
        self._run(self._expire_at(memory_id, when))

    # -------------------------------------------------------------------------------------------- history

    @_traced("history")
    def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :class:`~chatmemory.SupportsHistory`); one query.

        The entries are the message rows written with history, evicted or not, by sequence number.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            CorruptedMemoryError: an entry does not decode.
        """
        return self._run(self._history_page(memory_id, after, limit, reverse))

    @_traced("trim_history")
    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        Rows outside the window are deleted; rows still in the window stay (the window never changes) but
        are no longer history entries. A ``timedelta`` is counted back from the database's clock. One
        transaction of two statements; returns how many entries went.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        return self._run(self._trim(older_than, memory_id))

    # ------------------------------------------------------------------------------------ listing and TTL

    @_traced.iterator("list")
    def memory_ids(self, *, order: Literal["id", "newest"] = "id", page_size: int = 500) -> Iterator[str]:
        """The ids of live memories, by id (code point order) or most recently written first.

        Pages of ``page_size`` ids are read lazily (keyset pagination), so listing a large store streams.
        By id, each page reads its ids from the primary key. Newest first, the pages are read in one
        snapshot (a read transaction held until the listing ends, so a memory written meanwhile is
        neither missed nor listed twice) and each scans and sorts the head table (one short row per
        memory): the write time is deliberately not indexed, since every write changes it and the index
        would tax every turn; list by id to walk a very large store.
        """
        check_listing(order, page_size)
        self._run(self._ready(Operation.LIST))
        return self._iterate(self._pages(order, page_size))

    @_traced("purge_expired")
    def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired memories in transactions of ``batch_size`` memories; return how many went.

        Each batch scans the head table for expired rows (expiry times are not indexed, for the same
        reason as write times: see :meth:`memory_ids`); run it now and then, not per request.
        """
        return self._run(self._purge(batch_size))


class _Session:
    """The connection one operation holds (checked out by its first statement) and how it sends commands."""

    __slots__ = ("_connection", "_store")

    def __init__(self, store: SQLChatMemoryStore) -> None:
        self._store = store
        self._connection: Connection | None = None

    def perform(self, command: Any) -> Any:
        """Send ``command``; return what the operation receives."""
        if type(command) is Statement:
            return self._send(command)
        if type(command) is Batch:
            results = []
            for statement in command.statements:
                result = self._send(statement)
                results.append(result)
                if statement.expect is not None and result != statement.expect:
                    break
            return results
        if command is RELEASE:
            self.end(None)
        elif command is CHECK_SCHEMA:
            self._store._schema.check()
        elif isinstance(command, Sleep):
            time.sleep(command.seconds)
        else:  # pragma: no cover - every command is handled above
            raise TypeError(f"not a command: {command!r}")
        return None

    def _send(self, command: Statement) -> Any:
        connection = self._connection
        if connection is None:
            connection = self._connection = self._store._autocommit.connect()
        sql = command.statement
        if type(sql) is not str:
            return result_of(command.result, connection.execute(sql, command.parameters))
        parameters = command.parameters
        if connection._has_events or self._store._engine._has_events:
            return result_of(command.result, connection.exec_driver_sql(sql, parameters))
        cursor = connection.connection.cursor()
        try:
            if command.many:
                cursor.executemany(sql, parameters)
            elif parameters is None:
                cursor.execute(sql)
            else:
                cursor.execute(sql, parameters)
            kind = command.result
            if kind is Result.ROWCOUNT:
                return int(cursor.rowcount)
            if kind is Result.RECORDS:
                return [ReadRecord._make(row) for row in cursor.fetchall()]
            return cursor.fetchone()  # Result.FIRST, the only other result asked of driver SQL
        except self._store._dbapi_error as exc:
            connection._handle_dbapi_exception(exc, sql, parameters, cursor, None)
            raise  # pragma: no cover - the handler raises
        finally:
            cursor.close()

    def end(self, error: BaseException | None) -> None:
        """Hand the connection back (a connection interrupted mid-call is never reused)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            if error is not None and not isinstance(error, Exception):
                connection.invalidate()
            connection.close()
