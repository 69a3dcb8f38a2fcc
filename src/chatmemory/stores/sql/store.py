"""The SQL store (SQLAlchemy 2 Core), sync: it sends the plans of :mod:`chatmemory.stores.sql.plan`.

One row per message keyed by ``(memory_id, seq)`` and a head row per memory (see
:mod:`chatmemory.stores.sql.schema`). A write diffs by sequence: it deletes the evicted rows and inserts
only the new tail, so a steady-state turn costs the same whatever the window size. On PostgreSQL that
turn is one statement (data-modifying CTEs); elsewhere one short transaction.

With ``history=True`` a write deletes nothing: the head row's window ranges move past the rows it
evicts (see :mod:`chatmemory.stores.sql.window`), which stay as the memory's history, and the rows it
adds carry the write's time. A steady-state turn is then one head update and one insert.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

from chatmemory.stores._optional import require

require("sqlalchemy", feature="SQLChatMemoryStore", extra="sql")

from sqlalchemy import Connection, Engine  # noqa: E402 - after the dependency check
from sqlalchemy.exc import SQLAlchemyError  # noqa: E402

from chatmemory.core.errors import ChatMemoryError, HistoryNotEnabledError  # noqa: E402
from chatmemory.core.history import (  # noqa: E402
    DEFAULT_HISTORY_PAGE,
    HistoryPage,
    history_query,
    trim_cutoff,
)
from chatmemory.core.memory_id import validate_memory_id  # noqa: E402
from chatmemory.core.messages import ChatMessage  # noqa: E402
from chatmemory.core.store import Snapshot  # noqa: E402
from chatmemory.memory_times import MemoryTimes  # noqa: E402
from chatmemory.stores.base import (  # noqa: E402
    TTL,
    Operation,
    RetryPolicy,
    SnapshotCache,
    StoreLifecycle,
    ttl_seconds,
)
from chatmemory.stores.base.options import history_ttl_seconds  # noqa: E402
from chatmemory.stores.base.telemetry import StoreTelemetry  # noqa: E402
from chatmemory.stores.sql import plan  # noqa: E402
from chatmemory.stores.sql.engine import (  # noqa: E402
    autocommit_options,
    begin_statement,
    dialect_family,
    engine_from_url,
    engine_isolation_level,
    snapshot_statements,
)
from chatmemory.stores.sql.plan import CachedSnapshot, WriteRequest  # noqa: E402
from chatmemory.stores.sql.reads import ReadRecord, clock_time, decode_history, history_parameters  # noqa: E402
from chatmemory.stores.sql.schema import DEFAULT_TABLE_PREFIX, REQUIRED_SCHEMA_REVISION, build_tables  # noqa: E402
from chatmemory.stores.sql.schema_admin import SchemaAdmin  # noqa: E402
from chatmemory.stores.sql.statements import Statements  # noqa: E402
from chatmemory.stores.sql.times import expiry_parameter, stamp_parameter, times_of  # noqa: E402
from chatmemory.stores.sql.writes import WriteLoop, retry_read  # noqa: E402

__all__ = ["SQLChatMemoryStore"]

_traced = StoreTelemetry("sql", __name__)


class _Abort(Exception):
    """Rolls a write transaction back with an outcome (stray rows found)."""

    def __init__(self, outcome: plan.Corrupted) -> None:
        super().__init__(outcome.detail)
        self.outcome = outcome


class SQLChatMemoryStore(StoreLifecycle):
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

    def __init__(
        self,
        url_or_engine: str | Engine,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        ttl: TTL = None,
        snapshot_cache_size: int = 1024,
        engine_options: dict[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        history: bool = False,
        history_ttl: TTL = None,
    ) -> None:
        self._tables = build_tables(table_prefix)
        self._ttl = ttl_seconds(ttl)
        self._history_ttl = history_ttl_seconds(history, history_ttl, self._ttl)
        self._history = history
        self._cache: SnapshotCache[CachedSnapshot] = SnapshotCache(snapshot_cache_size)
        self._retry = retry or RetryPolicy()
        if isinstance(url_or_engine, str):
            self._engine = engine_from_url(url_or_engine, engine_options or {})
            self._owns_client = True
        elif isinstance(url_or_engine, Engine):
            if engine_options:
                raise ValueError("engine_options apply only when the store is given a URL")
            self._engine = url_or_engine
            self._owns_client = False
        else:
            raise TypeError(
                f"SQLChatMemoryStore takes a URL or a sqlalchemy Engine, not {type(url_or_engine).__name__} "
                "(for an AsyncEngine use chatmemory.aio.stores.sql.SQLChatMemoryStore)"
            )
        self._dialect = dialect_family(self._engine.dialect.name)
        if self._dialect not in ("postgresql", "sqlite", "mysql"):
            raise ValueError(
                f"SQLChatMemoryStore supports PostgreSQL, SQLite and MySQL/MariaDB, not {self._engine.dialect.name!r}"
            )
        # Every connection the store uses is in autocommit; its transactions BEGIN themselves. An engine
        # already in autocommit is used as it is (no isolation switch at each pool checkout).
        self._autocommit = self._engine.execution_options(**autocommit_options(engine_isolation_level(self._engine)))
        self._begin = begin_statement(self._dialect)
        self._dbapi_error: type[Exception] = self._engine.dialect.loaded_dbapi.Error
        self._statements = Statements(
            self._tables,
            self._engine.dialect,
            expires=self._ttl is not None,
            history=history,
            history_expires=self._history_ttl is not None,
        )
        self._schema = SchemaAdmin(self._engine, self._engine.url, self._tables.prefix, self._dialect)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLChatMemoryStore:
        """Build from a ``sqlite:``, ``postgresql:`` or ``mysql:``/``mariadb:`` URL (the store owns the engine)."""
        return cls(url, **options)

    # ------------------------------------------------------------------------------------------ lifecycle

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        return self._ttl

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        return self._history

    @property
    def history_ttl(self) -> float | None:
        """Seconds a history lives after the memory's last write (``None``: as long as the window)."""
        return self._history_ttl

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine the store uses (made from the URL: its connections are in autocommit)."""
        return self._engine

    @property
    def table_prefix(self) -> str:
        """The prefix of the store's tables."""
        return self._tables.prefix

    def _release(self) -> None:
        self._engine.dispose()

    def __repr__(self) -> str:
        """The URL (password hidden), table prefix and ttl."""
        url = self._engine.url.render_as_string(hide_password=True)
        history = f", history=True, history_ttl={self._history_ttl!r}" if self._history else ""
        return f"SQLChatMemoryStore({url!r}, table_prefix={self._tables.prefix!r}, ttl={self._ttl!r}{history})"

    # -------------------------------------------------------------------------------------------- schema

    @property
    def required_schema_revision(self) -> str:
        """The schema revision this store reads and writes."""
        return REQUIRED_SCHEMA_REVISION

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

    def _ready(self, operation: str, memory_id: str | None = None) -> None:
        self._check_open(operation, memory_id)
        self._schema.check()

    # ----------------------------------------------------------------------------------------- driver I/O

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        with self._autocommit.connect() as connection:
            self._run(connection, self._begin)
            try:
                yield connection
            except BaseException:
                self._run(connection, "ROLLBACK")
                raise
            self._run(connection, "COMMIT")

    def _run(self, connection: Connection, sql: str, parameters: Any = None, *, many: bool = False) -> int:
        """Run driver SQL (a rendered statement) on ``connection``; return the row count.

        Straight on the DBAPI cursor of the checked-out connection, errors handled as SQLAlchemy does
        (wrapped, a lost connection invalidated); through ``exec_driver_sql`` when cursor events are
        listened to, so that they see every statement.
        """
        if connection._has_events or self._engine._has_events:
            return int(connection.exec_driver_sql(sql, parameters).rowcount)
        cursor = connection.connection.cursor()
        try:
            if many:
                cursor.executemany(sql, parameters)
            elif parameters is None:
                cursor.execute(sql)
            else:
                cursor.execute(sql, parameters)
            return int(cursor.rowcount)
        except self._dbapi_error as exc:
            connection._handle_dbapi_exception(exc, sql, parameters, cursor, None)
            raise  # pragma: no cover - the handler raises
        finally:
            cursor.close()

    def _fetch_read(self, connection: Connection, parameters: Any) -> list[ReadRecord]:
        """The rows of the rendered read statement (see :meth:`_run`)."""
        sql = self._statements.fast_read.sql
        if connection._has_events or self._engine._has_events:
            return [ReadRecord._make(row) for row in connection.exec_driver_sql(sql, parameters)]
        cursor = connection.connection.cursor()
        try:
            cursor.execute(sql, parameters)
            return [ReadRecord._make(row) for row in cursor.fetchall()]
        except self._dbapi_error as exc:
            connection._handle_dbapi_exception(exc, sql, parameters, cursor, None)
            raise  # pragma: no cover - the handler raises
        finally:
            cursor.close()

    @contextlib.contextmanager
    def _driver_errors(self, operation: str, memory_id: str | None) -> Iterator[None]:
        try:
            yield
        except ChatMemoryError:
            raise
        except SQLAlchemyError as exc:
            raise self._schema.store_error(operation, memory_id, exc) from exc

    # ---------------------------------------------------------------------------------------------- reads

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one query)."""
        memory_id = validate_memory_id(memory_id)
        self._ready(Operation.READ, memory_id)
        for attempt in retry_read():
            cached = self._cache.get(memory_id) if attempt.use_cache else None
            with self._driver_errors(Operation.READ, memory_id), attempt.errors():
                parameters = self._statements.fast_read.bind(plan.read_parameters(memory_id, cached))
                with self._autocommit.connect() as connection:
                    rows = self._fetch_read(connection, parameters)
            if attempt.failed:
                continue
            result = plan.decode_read(memory_id, rows, cached)
            if isinstance(result, plan.Corrupted):
                self._cache.forget(memory_id)
                raise result.error(memory_id)
            if isinstance(result, plan.StaleCache):
                self._cache.forget(memory_id)
                attempt.stale()
                continue
            if result.state is None:
                self._cache.forget(memory_id)
            else:
                self._cache.put(memory_id, result.state)
            return result.snapshot
        raise AssertionError("unreachable: the last read attempt raises")

    @_traced("get")
    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    @_traced("read_raw")
    def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id``, undecoded (also those of message rows without a head row)."""
        memory_id = validate_memory_id(memory_id)
        self._ready(Operation.READ, memory_id)
        with self._driver_errors(Operation.READ, memory_id), self._autocommit.connect() as connection:
            rows = connection.execute(self._statements.read, plan.read_parameters(memory_id, None)).all()
        return plan.raw_records(rows)

    @_traced("memory_times")
    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires (the database's clock); ``None`` if absent."""
        memory_id = validate_memory_id(memory_id)
        self._ready(Operation.READ, memory_id)
        with self._driver_errors(Operation.READ, memory_id), self._autocommit.connect() as connection:
            row = connection.execute(self._statements.times, {"p_id": memory_id}).first()
        return times_of(row)

    # --------------------------------------------------------------------------------------------- writes

    @_traced("save")
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        memory_id = validate_memory_id(memory_id)
        return self._write(self._request(memory_id, messages, expected_version))

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        memory_id = validate_memory_id(memory_id)
        self._write(self._request(memory_id, messages, None))

    @_traced("write_raw")
    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        This imports data from another store without decoding it twice, and is how the contract suite
        plants corrupted data. With history it records nothing (the records are not history entries) and
        keeps the history the memory had.
        """
        memory_id = validate_memory_id(memory_id)
        self._write(
            WriteRequest.of_records(memory_id, records, self._ttl, history=self._history, history_ttl=self._history_ttl)
        )

    def _request(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int | None) -> WriteRequest:
        return WriteRequest.of_messages(
            memory_id, messages, expected_version, self._ttl, history=self._history, history_ttl=self._history_ttl
        )

    def _write(self, request: WriteRequest) -> int:
        self._ready(Operation.WRITE, request.memory_id)
        loop = WriteLoop(request, self._retry, self._dialect)
        while True:
            outcome: plan.Written | plan.Conflict | plan.Corrupted | None
            with self._driver_errors(Operation.WRITE, request.memory_id), loop.errors():
                cached = self._cache.get(request.memory_id)
                diff = plan.plan_diff(request, cached) if loop.may_diff else None
                outcome = self._write_diff(diff) if diff is not None else self._write_locked(request, cached)
            if loop.failed:
                delay = loop.delay()
                if delay:
                    time.sleep(delay)
                continue
            assert outcome is not None
            result = loop.settle(outcome, diffed=diff is not None)
            if result is None:
                delay = loop.delay()
                if delay:
                    time.sleep(delay)
                continue
            if result.state is None:
                self._cache.forget(request.memory_id)
            else:
                self._cache.put(request.memory_id, result.state)
            return result.version

    def _write_diff(self, diff: plan.DiffWrite) -> plan.Written | plan.Conflict:
        self._schema.check_payloads(diff.request.memory_id, diff.payloads)
        if self._statements.has_diff_statement:
            statement = self._statements.diff_postgresql(*diff.shape)
            with self._autocommit.connect() as connection:
                matched = connection.exec_driver_sql(statement, diff.postgresql_parameters()).first() is not None
            return plan.diff_outcome(diff, matched)
        try:
            statements = self._statements
            with self._transaction() as connection:
                bump = statements.fast_bump_head
                if self._run(connection, bump.sql, bump.bind(diff.head_parameters())) != 1:
                    raise _Abort(plan.Corrupted("stale"))
                if diff.removed_seqs:
                    removal = statements.removal(len(diff.removed_seqs))
                    self._run(connection, removal.sql, removal.bind(diff.removal_parameters()))
                if diff.payloads:
                    insert = (
                        statements.fast_insert_history if diff.request.recorded else statements.fast_insert_messages
                    )
                    self._run(connection, insert.sql, insert.bind_many(diff.rows()), many=True)
        except _Abort:
            return plan.diff_outcome(diff, False)
        return plan.diff_outcome(diff, True)

    def _write_locked(
        self, request: WriteRequest, cached: CachedSnapshot | None
    ) -> plan.Written | plan.Conflict | plan.Corrupted:
        try:
            with self._transaction() as connection:
                row = connection.execute(self._statements.lock_head, {"p_id": request.memory_id}).first()
                clock = None if row is not None else connection.execute(self._statements.clock, {"p_id": ""}).scalar()
                head = plan.locked_head(row, clock)
                if plan.window_needed(request, cached, head):
                    # With history a write records what it adds to the stored window: read it under the lock.
                    current = self._locked_window(connection, request.memory_id, head, cached)
                    cached = current.state if isinstance(current, plan.ReadResult) else None
                decision = plan.plan_locked(request, cached, head)
                if not isinstance(decision, plan.LockedWrite):
                    return decision
                self._apply(connection, request.memory_id, decision)
        except _Abort as aborted:
            return aborted.outcome
        return plan.Written(decision.version, decision.state)

    def _apply(self, connection: Connection, memory_id: str, decision: plan.LockedWrite) -> None:
        """Run a locked write's statements in the open transaction; stray rows abort it."""
        statements = self._statements
        self._schema.check_payloads(memory_id, (row["payload"] for row in decision.rows))
        if decision.insert_head:
            connection.execute(statements.insert_head, decision.head)
            damage = plan.stray_rows(decision, connection.execute(statements.delete_all, decision.head).rowcount)
            if damage is not None:
                raise _Abort(damage)
        else:
            if decision.delete_all:
                connection.execute(statements.delete_all, decision.head)
            elif decision.deleted_seqs:
                connection.execute(statements.delete_seqs, decision.delete_parameters())
            if decision.flagged_seqs:
                connection.execute(statements.flag_seqs, decision.flag_parameters())
            connection.execute(statements.rewrite_head, decision.head)
        if decision.rows:
            connection.execute(
                statements.insert_history if decision.recorded else statements.insert_messages, decision.rows
            )

    @_traced("modify")
    def modify(self, memory_id: str, change: Callable[[list[ChatMessage]], Iterable[ChatMessage] | None]) -> int:
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
        memory_id = validate_memory_id(memory_id)
        self._ready(Operation.WRITE, memory_id)
        loop = WriteLoop(None, self._retry, self._dialect)
        while True:
            outcome: plan.Written | plan.Unchanged | plan.Conflict | plan.Corrupted | None = None
            with self._driver_errors(Operation.WRITE, memory_id), loop.errors():
                outcome = self._modify_once(memory_id, change)
            if isinstance(outcome, plan.Corrupted):
                raise outcome.error(memory_id)
            if isinstance(outcome, plan.Unchanged):
                return outcome.version
            if isinstance(outcome, plan.Written):
                if outcome.state is None:
                    self._cache.forget(memory_id)
                else:
                    self._cache.put(memory_id, outcome.state)
                return outcome.version
            # A conflict here is two writers creating the memory at once: read it again.
            loop.conflicted()
            delay = loop.delay()
            if delay:
                time.sleep(delay)

    def _modify_once(
        self, memory_id: str, change: Callable[[list[ChatMessage]], Iterable[ChatMessage] | None]
    ) -> plan.Written | plan.Unchanged | plan.Conflict | plan.Corrupted:
        cached = self._cache.get(memory_id)
        try:
            with self._transaction() as connection:
                row = connection.execute(self._statements.lock_head, {"p_id": memory_id}).first()
                clock = None if row is not None else connection.execute(self._statements.clock, {"p_id": ""}).scalar()
                head = plan.locked_head(row, clock)
                current = self._locked_window(connection, memory_id, head, cached)
                if isinstance(current, plan.Corrupted):
                    return current
                new = change(list(current.snapshot.messages))
                if new is None:
                    return plan.Unchanged(current.snapshot.version)
                request = self._request(memory_id, new, current.snapshot.version)
                decision = plan.plan_locked(request, current.state, head)
                if not isinstance(decision, plan.LockedWrite):
                    return decision
                self._apply(connection, memory_id, decision)
        except _Abort as aborted:
            return aborted.outcome
        return plan.Written(decision.version, decision.state)

    def _locked_window(
        self, connection: Connection, memory_id: str, head: plan.LockedHead, cached: CachedSnapshot | None
    ) -> plan.ReadResult | plan.Corrupted:
        """The stored window, read under the head row's lock (again without the cache if it was stale)."""
        current = plan.locked_read(memory_id, head, cached, self._read_locked(connection, memory_id, cached, head))
        if isinstance(current, plan.StaleCache):
            current = plan.locked_read(memory_id, head, None, self._read_locked(connection, memory_id, None, head))
        if isinstance(current, plan.StaleCache):  # pragma: no cover - every payload was sent
            raise AssertionError("a read without the cache cannot find it stale")
        return current

    def _read_locked(
        self, connection: Connection, memory_id: str, cached: CachedSnapshot | None, head: plan.LockedHead
    ) -> Sequence[Any]:
        if not (head.present and head.live):
            return []
        return connection.execute(self._statements.read, plan.read_parameters(memory_id, cached)).all()

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
        memory_id = validate_memory_id(memory_id)
        query = history_query(after, limit, reverse)
        self._require_history()
        self._ready(Operation.READ, memory_id)
        statement = self._statements.history_page(reverse, after is not None)
        with self._driver_errors(Operation.READ, memory_id), self._autocommit.connect() as connection:
            rows = connection.execute(statement, history_parameters(memory_id, query)).all()
        return decode_history(memory_id, rows, query)

    @_traced("trim_history")
    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        Rows outside the window are deleted; rows still in the window stay (the window never changes) but
        are no longer history entries. A ``timedelta`` is counted back from the database's clock. One
        transaction of two statements; returns how many entries went.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        trim_cutoff(older_than, datetime.datetime.now(datetime.timezone.utc))  # check the argument first
        if memory_id is not None:
            memory_id = validate_memory_id(memory_id)
        self._require_history()
        self._ready(Operation.WRITE, memory_id)
        delete, unrecord = self._statements.trim(memory_id is not None)
        with self._driver_errors(Operation.WRITE, memory_id):
            with self._autocommit.connect() as connection:
                now = clock_time(connection.execute(self._statements.server_clock).scalar_one())
            parameters: dict[str, Any] = {"p_cutoff": stamp_parameter(trim_cutoff(older_than, now), self._dialect)}
            if memory_id is not None:
                parameters["p_id"] = memory_id
            with self._transaction() as connection:
                removed = connection.execute(delete, parameters).rowcount
                removed += connection.execute(unrecord, parameters).rowcount
        return int(removed)

    def _require_history(self) -> None:
        if not self._history:
            raise HistoryNotEnabledError(repr(self))

    @_traced("delete")
    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._ready(Operation.DELETE, memory_id)
        loop = WriteLoop(None, self._retry, self._dialect)
        while True:
            with self._driver_errors(Operation.DELETE, memory_id), loop.errors():
                with self._transaction() as connection:
                    # The head row first: writers lock it before any message row, so this order cannot deadlock.
                    connection.execute(self._statements.delete_head, {"p_id": memory_id})
                    connection.execute(self._statements.delete_all, {"p_id": memory_id})
            if not loop.failed:
                break
            delay = loop.delay()
            if delay:
                time.sleep(delay)
        self._cache.forget(memory_id)

    @_traced("expire_at")
    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent.

        One statement on the head row; reads judge expiry by the database's clock on every query, so a
        cached snapshot never serves a memory this expired (the snapshot is forgotten all the same).

        Raises:
            ValueError: ``when`` is not an aware datetime.
        """
        memory_id = validate_memory_id(memory_id)
        parameters = {"p_id": memory_id, "p_expires_at": expiry_parameter(when, self._dialect)}
        self._ready(Operation.WRITE, memory_id)
        with self._driver_errors(Operation.WRITE, memory_id), self._autocommit.connect() as connection:
            connection.execute(self._statements.set_expiry, parameters)
        self._cache.forget(memory_id)

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing its rows by hand)."""
        self._cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._cache.clear()

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
        if order not in ("id", "newest"):
            raise ValueError("order must be 'id' or 'newest'")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError("page_size must be an int >= 1")
        self._ready(Operation.LIST)
        return self._pages(order, page_size)

    def _pages(self, order: str, page_size: int) -> Iterator[str]:
        with contextlib.ExitStack() as stack:
            snapshot: Connection | None = None
            if order == "newest":
                with self._driver_errors(Operation.LIST, None):
                    snapshot = stack.enter_context(self._snapshot())
            after: tuple[Any, ...] | None = None
            while True:
                self._check_open(Operation.LIST)
                statement = self._statements.list_page(order, after is not None, page_size)
                parameters = {} if after is None else dict(zip(("p_after_id", "p_after_updated"), after, strict=True))
                with self._driver_errors(Operation.LIST, None):
                    if snapshot is not None:
                        rows = snapshot.execute(statement, parameters).all()
                    else:
                        with self._autocommit.connect() as connection:
                            rows = connection.execute(statement, parameters).all()
                for row in rows:
                    yield row.memory_id
                if len(rows) < page_size:
                    return
                after = (rows[-1].memory_id, rows[-1].updated_at)

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[Connection]:
        """A read transaction whose statements all see the database as of its first one."""
        begin, setup = snapshot_statements(self._dialect)
        with self._autocommit.connect() as connection:
            if setup is not None:
                connection.exec_driver_sql(setup)
            connection.exec_driver_sql(begin)
            try:
                yield connection
            finally:
                connection.exec_driver_sql("ROLLBACK")

    @_traced("purge_expired")
    def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired memories in transactions of ``batch_size`` memories; return how many went.

        Each batch scans the head table for expired rows (expiry times are not indexed, for the same
        reason as write times: see :meth:`memory_ids`); run it now and then, not per request.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be an int >= 1")
        self._ready(Operation.PURGE)
        statements = self._statements
        purged = 0
        while True:
            with self._driver_errors(Operation.PURGE, None), self._transaction() as connection:
                ids = list(connection.execute(statements.lock_expired(batch_size)).scalars())
                if ids:
                    connection.execute(statements.delete_heads, {"p_ids": ids})
                    connection.execute(statements.delete_messages_of, {"p_ids": ids})
            self._cache.forget(*ids)
            purged += len(ids)
            if len(ids) < batch_size:
                return purged
