"""The SQL store on asyncio (SQLAlchemy's asyncio engine): the same tables, statements and plans.

Drivers, each behind the same extra as the sync store's:

* PostgreSQL: psycopg 3 in its async mode, with the same ``postgresql+psycopg://`` URL (``chatmemory[postgres]``);
* SQLite: aiosqlite (``sqlite:///file.db`` is mapped to ``sqlite+aiosqlite:///file.db``; ``chatmemory[sql]``);
* MySQL/MariaDB: asyncmy (``mysql://`` and ``mysql+pymysql://`` are mapped to ``mysql+asyncmy://``;
  ``chatmemory[mysql]``). asyncmy is maintained, compiled (its protocol code is Cython), and works with
  the PyMySQL release the sync store uses. aiomysql, the other choice, runs PyMySQL's own protocol code,
  and that coupling breaks: aiomysql 0.3.2 fails to send any ``bytes`` parameter with PyMySQL 1.2 (which
  changed an escaping helper aiomysql imports), and every memory id here is bytes.

Every decision (what to read, what to write, when to retry) is made by
:mod:`chatmemory.stores.sql.plan` and :mod:`chatmemory.stores.sql.writes`, exactly as for
:class:`chatmemory.stores.sql.SQLChatMemoryStore`; a memory written by one store is read and extended
by the other.

Cancellation: a task cancelled inside a call (or timed out by ``asyncio.timeout``) leaves the memory at
its old or its new list: an open transaction is never committed, and the connection it held is
invalidated (the server rolls back when it closes) and its pool slot released, since a driver
interrupted mid-protocol cannot be trusted with the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Literal

from chatmemory.stores._optional import require

require("sqlalchemy", feature="chatmemory.aio.stores.sql.SQLChatMemoryStore", extra="sql")

from sqlalchemy.exc import SQLAlchemyError  # noqa: E402 - after the dependency check
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine  # noqa: E402

from chatmemory.core.errors import ChatMemoryError, HistoryNotEnabledError  # noqa: E402
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage, history_query, trim_cutoff  # noqa: E402
from chatmemory.core.memory_id import validate_memory_id  # noqa: E402
from chatmemory.core.messages import ChatMessage  # noqa: E402
from chatmemory.core.store import Snapshot  # noqa: E402
from chatmemory.memory_times import MemoryTimes  # noqa: E402
from chatmemory.stores.base import (  # noqa: E402
    TTL,
    AsyncStoreLifecycle,
    Operation,
    RetryPolicy,
    SnapshotCache,
    ttl_seconds,
)
from chatmemory.stores.base.options import history_ttl_seconds  # noqa: E402
from chatmemory.stores.base.telemetry import StoreTelemetry  # noqa: E402
from chatmemory.stores.sql import plan  # noqa: E402
from chatmemory.stores.sql.engine import (  # noqa: E402
    autocommit_options,
    begin_statement,
    dialect_family,
    driver_options,
    engine_isolation_level,
    install_connect_hooks,
    missing_driver,
    normalize_url,
    snapshot_statements,
)
from chatmemory.stores.sql.plan import CachedSnapshot, WriteRequest  # noqa: E402
from chatmemory.stores.sql.reads import clock_time, decode_history, history_parameters  # noqa: E402
from chatmemory.stores.sql.schema import DEFAULT_TABLE_PREFIX, REQUIRED_SCHEMA_REVISION, build_tables  # noqa: E402
from chatmemory.stores.sql.schema_admin import SchemaAdmin, revision_on  # noqa: E402
from chatmemory.stores.sql.statements import Statements  # noqa: E402
from chatmemory.stores.sql.times import expiry_parameter, stamp_parameter, times_of  # noqa: E402
from chatmemory.stores.sql.writes import WriteLoop, retry_read  # noqa: E402

__all__ = ["SQLChatMemoryStore"]

_traced = StoreTelemetry("sql", __name__)


class _Abort(Exception):
    def __init__(self, outcome: plan.Corrupted | plan.Conflict) -> None:
        super().__init__(type(outcome).__name__)
        self.outcome = outcome


class SQLChatMemoryStore(AsyncStoreLifecycle):
    """The asyncio twin of :class:`chatmemory.stores.sql.SQLChatMemoryStore`: same arguments, coroutines.

    Args:
        url_or_engine: a URL (the store makes an :class:`~sqlalchemy.ext.asyncio.AsyncEngine` and disposes
            of it in :meth:`aclose`; sync driver names are mapped to their async twins) or an ``AsyncEngine``
            the caller owns and disposes of.
        table_prefix: prefix of the store's tables.
        ttl: seconds (or a ``timedelta``) a memory lives after its last write, by the database's clock.
        snapshot_cache_size: how many memories' last state to keep for diffing writes without a read.
        engine_options: passed to :func:`~sqlalchemy.ext.asyncio.create_async_engine` when a URL is given.
        retry: how long writers creating or replacing one memory at once retry their collisions.
        history: keep every message ever added to a memory (see the sync store).
        history_ttl: seconds (or a ``timedelta``) a history lives after the memory's last write, at least
            ``ttl`` (``None``: it expires with the window).

    Raises:
        ValueError: a URL that is not a SQL database URL, or a driver the store does not use;
            ``history_ttl`` without ``history``, or shorter than ``ttl``.
    """

    def __init__(
        self,
        url_or_engine: str | AsyncEngine,
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
            url = normalize_url(url_or_engine, asynchronous=True)
            try:
                self._engine = create_async_engine(url, **driver_options(url, engine_options or {}))
            except ImportError as exc:
                raise missing_driver(url, exc, "chatmemory.aio.stores.sql.SQLChatMemoryStore") from exc
            install_connect_hooks(self._engine.sync_engine)
            self._owns_client = True
        elif isinstance(url_or_engine, AsyncEngine):
            if engine_options:
                raise ValueError("engine_options apply only when the store is given a URL")
            self._engine = url_or_engine
            self._owns_client = False
        else:
            raise TypeError(
                f"the asyncio SQLChatMemoryStore takes a URL or an AsyncEngine, not {type(url_or_engine).__name__} "
                "(for a sync Engine use chatmemory.stores.sql.SQLChatMemoryStore)"
            )
        self._dialect = dialect_family(self._engine.dialect.name)
        if self._dialect not in ("postgresql", "sqlite", "mysql"):
            raise ValueError(f"the SQL store supports PostgreSQL, SQLite and MySQL/MariaDB, not {self._dialect!r}")
        self._autocommit = self._engine.execution_options(**autocommit_options(engine_isolation_level(self._engine)))
        self._begin = begin_statement(self._dialect)
        self._statements = Statements(
            self._tables,
            self._engine.dialect,
            expires=self._ttl is not None,
            history=history,
            history_expires=self._history_ttl is not None,
        )
        self._schema = SchemaAdmin(None, self._engine.url, self._tables.prefix, self._dialect)
        self._schema_lock = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLChatMemoryStore:
        """Build from a URL (the store owns the engine)."""
        return cls(url, **options)

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
    def engine(self) -> AsyncEngine:
        """The asyncio engine the store uses."""
        return self._engine

    @property
    def table_prefix(self) -> str:
        """The prefix of the store's tables."""
        return self._tables.prefix

    async def _release(self) -> None:
        await self._engine.dispose()

    def __repr__(self) -> str:
        """The URL (password hidden), table prefix and ttl."""
        url = self._engine.url.render_as_string(hide_password=True)
        history = f", history=True, history_ttl={self._history_ttl!r}" if self._history else ""
        return f"aio.SQLChatMemoryStore({url!r}, table_prefix={self._tables.prefix!r}, ttl={self._ttl!r}{history})"

    # ------------------------------------------------------------------------------------- connections

    @contextlib.asynccontextmanager
    async def _connect(self, operation: str, memory_id: str | None) -> AsyncIterator[AsyncConnection]:
        """A pooled autocommit connection; driver errors become StoreErrors, cancellation invalidates it."""
        try:
            async with self._autocommit.connect() as connection:
                try:
                    yield connection
                except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                    # Interrupted mid-protocol: never reuse it; closing it rolls back any transaction.
                    await asyncio.shield(connection.invalidate())
                    raise
        except ChatMemoryError:
            raise
        except SQLAlchemyError as exc:
            raise self._schema.store_error(operation, memory_id, exc) from exc

    @contextlib.asynccontextmanager
    async def _transaction(self, connection: AsyncConnection) -> AsyncIterator[AsyncConnection]:
        await connection.exec_driver_sql(self._begin)
        try:
            yield connection
        except Exception:
            await connection.exec_driver_sql("ROLLBACK")
            raise
        await connection.exec_driver_sql("COMMIT")

    # ------------------------------------------------------------------------------------------ schema

    @property
    def required_schema_revision(self) -> str:
        """The schema revision this store reads and writes."""
        return REQUIRED_SCHEMA_REVISION

    async def schema_revision(self) -> str | None:
        """The revision the store's tables are at (``None``: no tables yet)."""
        self._check_open(Operation.SCHEMA)
        prefix = self._tables.prefix
        async with self._connect(Operation.SCHEMA, None) as connection:
            return await connection.run_sync(lambda sync: revision_on(sync, prefix))

    async def create_schema(self) -> None:
        """Create the tables at the required revision (development); tables behind raise SchemaVersionError."""
        self._check_open(Operation.SCHEMA)
        async with self._connect(Operation.SCHEMA, None) as connection:
            await connection.run_sync(self._schema.create_on)

    async def drop_schema(self) -> None:
        """Drop the store's tables and its version table (the data is gone)."""
        self._check_open(Operation.SCHEMA)
        async with self._connect(Operation.SCHEMA, None) as connection:
            await connection.run_sync(self._schema.drop_on)
        self._cache.clear()

    async def _ready(self, operation: str, memory_id: str | None = None) -> None:
        self._check_open(operation, memory_id)
        if self._schema.checked:
            return
        async with self._schema_lock:
            if not self._schema.checked:
                async with self._connect(Operation.SCHEMA, None) as connection:
                    await connection.run_sync(self._schema.check_on)

    # ------------------------------------------------------------------------------------------- reads

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one query)."""
        memory_id = validate_memory_id(memory_id)
        await self._ready(Operation.READ, memory_id)
        for attempt in retry_read():
            cached = self._cache.get(memory_id) if attempt.use_cache else None
            async with self._connect(Operation.READ, memory_id) as connection:
                with attempt.errors():
                    read = self._statements.fast_read
                    result = await connection.exec_driver_sql(
                        read.sql, read.bind(plan.read_parameters(memory_id, cached))
                    )
                    rows = result.all()
            if attempt.failed:
                continue
            decoded = plan.decode_read(memory_id, rows, cached)
            if isinstance(decoded, plan.Corrupted):
                self._cache.forget(memory_id)
                raise decoded.error(memory_id)
            if isinstance(decoded, plan.StaleCache):
                self._cache.forget(memory_id)
                attempt.stale()
                continue
            if decoded.state is None:
                self._cache.forget(memory_id)
            else:
                self._cache.put(memory_id, decoded.state)
            return decoded.snapshot
        raise AssertionError("unreachable: the last read attempt raises")

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (await self.load(memory_id)).messages

    @_traced.coroutine("read_raw")
    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id``, undecoded."""
        memory_id = validate_memory_id(memory_id)
        await self._ready(Operation.READ, memory_id)
        async with self._connect(Operation.READ, memory_id) as connection:
            result = await connection.execute(self._statements.read, plan.read_parameters(memory_id, None))
            return plan.raw_records(result.all())

    @_traced.coroutine("memory_times")
    async def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires (the database's clock); ``None`` if absent."""
        memory_id = validate_memory_id(memory_id)
        await self._ready(Operation.READ, memory_id)
        async with self._connect(Operation.READ, memory_id) as connection:
            result = await connection.execute(self._statements.times, {"p_id": memory_id})
            return times_of(result.first())

    # ------------------------------------------------------------------------------------------ writes

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        memory_id = validate_memory_id(memory_id)
        return await self._write(self._request(memory_id, messages, expected_version))

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        memory_id = validate_memory_id(memory_id)
        await self._write(self._request(memory_id, messages, None))

    @_traced.coroutine("write_raw")
    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        With history it records nothing and keeps the history the memory had (see the sync store).
        """
        memory_id = validate_memory_id(memory_id)
        request = WriteRequest.of_records(
            memory_id, records, self._ttl, history=self._history, history_ttl=self._history_ttl
        )
        await self._write(request)

    def _request(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int | None) -> WriteRequest:
        return WriteRequest.of_messages(
            memory_id, messages, expected_version, self._ttl, history=self._history, history_ttl=self._history_ttl
        )

    async def _write(self, request: WriteRequest) -> int:
        await self._ready(Operation.WRITE, request.memory_id)
        loop = WriteLoop(request, self._retry, self._dialect)
        while True:
            outcome: plan.Written | plan.Conflict | plan.Corrupted | None = None
            cached = self._cache.get(request.memory_id)
            diff = plan.plan_diff(request, cached) if loop.may_diff else None
            async with self._connect(Operation.WRITE, request.memory_id) as connection:
                with loop.errors():
                    if diff is not None:
                        outcome = await self._write_diff(connection, diff)
                    else:
                        outcome = await self._write_locked(connection, request, cached)
            if outcome is not None:
                written = loop.settle(outcome, diffed=diff is not None)
                if written is not None:
                    if written.state is None:
                        self._cache.forget(request.memory_id)
                    else:
                        self._cache.put(request.memory_id, written.state)
                    return written.version
            delay = loop.delay()
            if delay:
                await asyncio.sleep(delay)

    async def _write_diff(self, connection: AsyncConnection, diff: plan.DiffWrite) -> plan.Written | plan.Conflict:
        self._schema.check_payloads(diff.request.memory_id, diff.payloads)
        if self._statements.has_diff_statement:
            statement = self._statements.diff_postgresql(*diff.shape)
            result = await connection.exec_driver_sql(statement, diff.postgresql_parameters())
            return plan.diff_outcome(diff, result.first() is not None)
        try:
            statements = self._statements
            async with self._transaction(connection):
                bump = statements.fast_bump_head
                bumped = await connection.exec_driver_sql(bump.sql, bump.bind(diff.head_parameters()))
                if bumped.rowcount != 1:
                    raise _Abort(plan.Conflict())
                if diff.removed_seqs:
                    removal = statements.removal(len(diff.removed_seqs))
                    await connection.exec_driver_sql(removal.sql, removal.bind(diff.removal_parameters()))
                if diff.payloads:
                    insert = (
                        statements.fast_insert_history if diff.request.recorded else statements.fast_insert_messages
                    )
                    await connection.exec_driver_sql(insert.sql, insert.bind_many(diff.rows()))
        except _Abort:
            return plan.diff_outcome(diff, False)
        return plan.diff_outcome(diff, True)

    async def _write_locked(
        self, connection: AsyncConnection, request: WriteRequest, cached: CachedSnapshot | None
    ) -> plan.Written | plan.Conflict | plan.Corrupted:
        try:
            async with self._transaction(connection):
                head = await self._lock_head(connection, request.memory_id)
                if plan.window_needed(request, cached, head):
                    # With history a write records what it adds to the stored window: read it under the lock.
                    current = await self._locked_window(connection, request.memory_id, head, cached)
                    cached = current.state if isinstance(current, plan.ReadResult) else None
                decision = plan.plan_locked(request, cached, head)
                if not isinstance(decision, plan.LockedWrite):
                    return decision
                await self._apply(connection, request.memory_id, decision)
        except _Abort as aborted:
            return aborted.outcome
        return plan.Written(decision.version, decision.state)

    async def _lock_head(self, connection: AsyncConnection, memory_id: str) -> plan.LockedHead:
        row = (await connection.execute(self._statements.lock_head, {"p_id": memory_id})).first()
        clock = None if row is not None else (await connection.execute(self._statements.clock, {"p_id": ""})).scalar()
        return plan.locked_head(row, clock)

    async def _apply(self, connection: AsyncConnection, memory_id: str, decision: plan.LockedWrite) -> None:
        """Run a locked write's statements in the open transaction; stray rows abort it."""
        statements = self._statements
        self._schema.check_payloads(memory_id, (row["payload"] for row in decision.rows))
        if decision.insert_head:
            await connection.execute(statements.insert_head, decision.head)
            strays = (await connection.execute(statements.delete_all, decision.head)).rowcount
            damage = plan.stray_rows(decision, strays)
            if damage is not None:
                raise _Abort(damage)
        else:
            if decision.delete_all:
                await connection.execute(statements.delete_all, decision.head)
            elif decision.deleted_seqs:
                await connection.execute(statements.delete_seqs, decision.delete_parameters())
            if decision.flagged_seqs:
                await connection.execute(statements.flag_seqs, decision.flag_parameters())
            await connection.execute(statements.rewrite_head, decision.head)
        if decision.rows:
            insert = statements.insert_history if decision.recorded else statements.insert_messages
            await connection.execute(insert, decision.rows)

    @_traced.coroutine("modify")
    async def modify(self, memory_id: str, change: Callable[[list[ChatMessage]], Iterable[ChatMessage] | None]) -> int:
        """Read, change and write ``memory_id`` under its head row's lock (see the sync store's ``modify``)."""
        memory_id = validate_memory_id(memory_id)
        await self._ready(Operation.WRITE, memory_id)
        loop = WriteLoop(None, self._retry, self._dialect)
        while True:
            outcome: plan.Written | plan.Unchanged | plan.Conflict | plan.Corrupted | None = None
            async with self._connect(Operation.WRITE, memory_id) as connection:
                with loop.errors():
                    outcome = await self._modify_once(connection, memory_id, change)
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
            if isinstance(outcome, plan.Conflict):
                loop.conflicted()
            delay = loop.delay()
            if delay:
                await asyncio.sleep(delay)

    async def _modify_once(
        self,
        connection: AsyncConnection,
        memory_id: str,
        change: Callable[[list[ChatMessage]], Iterable[ChatMessage] | None],
    ) -> plan.Written | plan.Unchanged | plan.Conflict | plan.Corrupted:
        cached = self._cache.get(memory_id)
        try:
            async with self._transaction(connection):
                head = await self._lock_head(connection, memory_id)
                current = await self._locked_window(connection, memory_id, head, cached)
                if isinstance(current, plan.Corrupted):
                    return current
                new = change(list(current.snapshot.messages))
                if new is None:
                    return plan.Unchanged(current.snapshot.version)
                request = self._request(memory_id, new, current.snapshot.version)
                decision = plan.plan_locked(request, current.state, head)
                if not isinstance(decision, plan.LockedWrite):
                    return decision
                await self._apply(connection, memory_id, decision)
        except _Abort as aborted:
            return aborted.outcome
        return plan.Written(decision.version, decision.state)

    async def _locked_window(
        self, connection: AsyncConnection, memory_id: str, head: plan.LockedHead, cached: CachedSnapshot | None
    ) -> plan.ReadResult | plan.Corrupted:
        """The stored window, read under the head row's lock (again without the cache if it was stale)."""
        rows = await self._read_locked(connection, memory_id, cached, head)
        current = plan.locked_read(memory_id, head, cached, rows)
        if isinstance(current, plan.StaleCache):
            rows = await self._read_locked(connection, memory_id, None, head)
            current = plan.locked_read(memory_id, head, None, rows)
        if isinstance(current, plan.StaleCache):  # pragma: no cover - every payload was sent
            raise AssertionError("a read without the cache cannot find it stale")
        return current

    async def _read_locked(
        self, connection: AsyncConnection, memory_id: str, cached: CachedSnapshot | None, head: plan.LockedHead
    ) -> Sequence[Any]:
        if not (head.present and head.live):
            return []
        result = await connection.execute(self._statements.read, plan.read_parameters(memory_id, cached))
        rows: Sequence[Any] = result.all()
        return rows

    # ----------------------------------------------------------------------------------------- history

    @_traced.coroutine("history")
    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see the sync store); one query.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            CorruptedMemoryError: an entry does not decode.
        """
        memory_id = validate_memory_id(memory_id)
        query = history_query(after, limit, reverse)
        self._require_history()
        await self._ready(Operation.READ, memory_id)
        statement = self._statements.history_page(reverse, after is not None)
        async with self._connect(Operation.READ, memory_id) as connection:
            rows = (await connection.execute(statement, history_parameters(memory_id, query))).all()
        return decode_history(memory_id, rows, query)

    @_traced.coroutine("trim_history")
    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than``; never the window (see the sync store).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        trim_cutoff(older_than, datetime.datetime.now(datetime.timezone.utc))  # check the argument first
        if memory_id is not None:
            memory_id = validate_memory_id(memory_id)
        self._require_history()
        await self._ready(Operation.WRITE, memory_id)
        delete, unrecord = self._statements.trim(memory_id is not None)
        async with self._connect(Operation.WRITE, memory_id) as connection:
            now = clock_time((await connection.execute(self._statements.server_clock)).scalar_one())
            parameters: dict[str, Any] = {"p_cutoff": stamp_parameter(trim_cutoff(older_than, now), self._dialect)}
            if memory_id is not None:
                parameters["p_id"] = memory_id
            async with self._transaction(connection):
                removed = (await connection.execute(delete, parameters)).rowcount
                removed += (await connection.execute(unrecord, parameters)).rowcount
        return int(removed)

    def _require_history(self) -> None:
        if not self._history:
            raise HistoryNotEnabledError(repr(self))

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        memory_id = validate_memory_id(memory_id)
        await self._ready(Operation.DELETE, memory_id)
        loop = WriteLoop(None, self._retry, self._dialect)
        while True:
            async with self._connect(Operation.DELETE, memory_id) as connection:
                with loop.errors():
                    async with self._transaction(connection):
                        await connection.execute(self._statements.delete_head, {"p_id": memory_id})
                        await connection.execute(self._statements.delete_all, {"p_id": memory_id})
            if not loop.failed:
                break
            delay = loop.delay()
            if delay:
                await asyncio.sleep(delay)
        self._cache.forget(memory_id)

    @_traced.coroutine("expire_at")
    async def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent.

        One statement on the head row; reads judge expiry by the database's clock on every query, so a
        cached snapshot never serves a memory this expired (the snapshot is forgotten all the same).

        Raises:
            ValueError: ``when`` is not an aware datetime.
        """
        memory_id = validate_memory_id(memory_id)
        parameters = {"p_id": memory_id, "p_expires_at": expiry_parameter(when, self._dialect)}
        await self._ready(Operation.WRITE, memory_id)
        async with self._connect(Operation.WRITE, memory_id) as connection:
            await connection.execute(self._statements.set_expiry, parameters)
        self._cache.forget(memory_id)

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing its rows by hand)."""
        self._cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._cache.clear()

    # --------------------------------------------------------------------------------- listing and TTL

    @_traced.async_iterator("list")
    async def memory_ids(self, *, order: Literal["id", "newest"] = "id", page_size: int = 500) -> AsyncIterator[str]:
        """The ids of live memories, by id or most recently written first (see the sync store)."""
        if order not in ("id", "newest"):
            raise ValueError("order must be 'id' or 'newest'")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError("page_size must be an int >= 1")
        await self._ready(Operation.LIST)
        async with self._connect(Operation.LIST, None) as connection:
            begin, setup = snapshot_statements(self._dialect) if order == "newest" else (None, None)
            if setup is not None:
                await connection.exec_driver_sql(setup)
            if begin is not None:
                await connection.exec_driver_sql(begin)
            try:
                after: tuple[Any, ...] | None = None
                while True:
                    self._check_open(Operation.LIST)
                    statement = self._statements.list_page(order, after is not None, page_size)
                    names = ("p_after_id", "p_after_updated")
                    parameters = {} if after is None else dict(zip(names, after, strict=True))
                    rows = (await connection.execute(statement, parameters)).all()
                    for row in rows:
                        yield row.memory_id
                    if len(rows) < page_size:
                        return
                    after = (rows[-1].memory_id, rows[-1].updated_at)
            finally:
                if begin is not None:
                    await connection.exec_driver_sql("ROLLBACK")

    @_traced.coroutine("purge_expired")
    async def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired memories in transactions of ``batch_size`` memories; return how many went."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be an int >= 1")
        await self._ready(Operation.PURGE)
        statements = self._statements
        purged = 0
        while True:
            async with self._connect(Operation.PURGE, None) as connection, self._transaction(connection):
                ids = list((await connection.execute(statements.lock_expired(batch_size))).scalars())
                if ids:
                    await connection.execute(statements.delete_heads, {"p_ids": ids})
                    await connection.execute(statements.delete_messages_of, {"p_ids": ids})
            self._cache.forget(*ids)
            purged += len(ids)
            if len(ids) < batch_size:
                return purged
