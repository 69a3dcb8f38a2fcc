"""The SQL store (SQLAlchemy 2 Core): PostgreSQL (psycopg 3), SQLite, MySQL/MariaDB (PyMySQL).

One row per message keyed by ``(memory_id, seq)`` and a head row per memory (see
:mod:`chatmemory.stores.sql_schema`). A write diffs by sequence: it deletes the evicted rows and inserts
only the new tail, so a steady-state turn costs the same whatever the window size. On PostgreSQL that
turn is one statement (data-modifying CTEs); elsewhere one short transaction.
"""

from __future__ import annotations

import contextlib
import datetime
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar

from chatmemory.stores._optional import require
from chatmemory.stores.base.options import ttl_seconds

require("sqlalchemy", feature="SQLChatMemoryStore", extra="sql")
require("alembic", feature="SQLChatMemoryStore", extra="sql")

from sqlalchemy import Connection, Engine  # noqa: E402 - after the dependency check
from sqlalchemy.exc import DBAPIError, SQLAlchemyError  # noqa: E402

from chatmemory import migrations  # noqa: E402
from chatmemory.core.errors import (  # noqa: E402
    ChatMemoryError,
    ConcurrentUpdateError,
    StoreError,
)
from chatmemory.core.memory_id import validate_memory_id  # noqa: E402
from chatmemory.core.messages import ChatMessage, require_message  # noqa: E402
from chatmemory.core.sequence_diff import diff_messages  # noqa: E402
from chatmemory.core.store import Snapshot  # noqa: E402
from chatmemory.serialization.native import dumps_message, loads_message  # noqa: E402
from chatmemory.stores.sql_engine import engine_from_url, is_autocommit, is_conflict, transaction  # noqa: E402
from chatmemory.stores.sql_schema import DEFAULT_TABLE_PREFIX, build_tables  # noqa: E402
from chatmemory.stores.sql_snapshots import CachedSnapshot, SnapshotCache  # noqa: E402
from chatmemory.stores.sql_statements import Statements  # noqa: E402
from chatmemory.stores.sql_writes import Conflict, TurnWrite, write_locked  # noqa: E402

__all__ = ["SQLChatMemoryStore"]

_UNCONDITIONAL_ATTEMPTS = 8
"""Tries of an unconditional write (update, delete) that collides with another writer creating the memory."""


_T = TypeVar("_T")


class SQLChatMemoryStore:
    """A store in SQL tables; supports versioning, listing and TTL.

    Create the tables with ``chatmemory migrate URL`` (or :func:`chatmemory.migrations.upgrade`), or with
    :meth:`create_schema` during development. A store on a schema that is behind raises
    :class:`~chatmemory.SchemaVersionError` naming the command to run.

    Args:
        url_or_engine: a SQLAlchemy URL (the store makes the engine and disposes of it in :meth:`close`;
            ``postgresql://`` means psycopg 3) or an :class:`~sqlalchemy.Engine` the caller owns and closes.
        table_prefix: prefix of the store's tables (``<prefix>memories``, ``<prefix>messages``).
        ttl: seconds (or a ``timedelta``) a memory lives after its last write; ``None``: forever.
        snapshot_cache_size: how many memories' last state to keep for diffing writes without a read
            (``0``: always rewrite whole windows).
        engine_options: passed to :func:`sqlalchemy.create_engine` when a URL is given.
    """

    def __init__(
        self,
        url_or_engine: str | Engine,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        ttl: float | datetime.timedelta | None = None,
        snapshot_cache_size: int = 1024,
        engine_options: dict[str, Any] | None = None,
    ) -> None:
        self._tables = build_tables(table_prefix)
        self._ttl = ttl_seconds(ttl)
        self._cache = SnapshotCache(snapshot_cache_size)
        self._owns_engine = isinstance(url_or_engine, str)
        if isinstance(url_or_engine, str):
            self._engine = engine_from_url(url_or_engine, engine_options or {})
        else:
            if engine_options:
                raise ValueError("engine_options apply only when the store is given a URL")
            self._engine = url_or_engine
        dialect = self._engine.dialect.name
        self._dialect = "mysql" if dialect == "mariadb" else dialect
        if self._dialect not in ("postgresql", "sqlite", "mysql"):
            raise ValueError(f"SQLChatMemoryStore supports PostgreSQL, SQLite and MySQL/MariaDB, not {dialect!r}")
        # Autocommit connections let a single statement run without BEGIN/COMMIT round trips (PostgreSQL)
        # and let SQLite transactions start with BEGIN IMMEDIATE (see _transaction).
        # A store-made PostgreSQL engine is in autocommit already (see engine_from_url); the schema
        # migrations run in transactions on it.
        autocommit = is_autocommit(self._engine)
        self._autocommit_engine = (
            self._engine if autocommit else self._engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        self._schema_engine = (
            self._engine.execution_options(isolation_level="READ COMMITTED") if autocommit else self._engine
        )
        self._statements = Statements(self._tables, self._engine.dialect)
        self._schema_checked = False
        self._schema_lock = threading.Lock()
        self._closed = False

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
    def engine(self) -> Engine:
        """The SQLAlchemy engine the store uses.

        A PostgreSQL engine the store made from a URL is in autocommit (unless ``engine_options`` set an
        ``isolation_level``): each statement commits on its own, and ``engine.begin()`` does not open a
        database transaction; use ``engine.execution_options(isolation_level="READ COMMITTED")`` for one.
        """
        return self._engine

    @property
    def table_prefix(self) -> str:
        """The prefix of the store's tables."""
        return self._tables.prefix

    def close(self) -> None:
        """Dispose of the engine if the store made it from a URL; an engine passed in is left open."""
        if self._owns_engine and not self._closed:
            self._engine.dispose()
        self._closed = True

    def __enter__(self) -> SQLChatMemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        url = self._engine.url.render_as_string(hide_password=True)
        return f"SQLChatMemoryStore({url!r}, table_prefix={self._tables.prefix!r}, ttl={self._ttl!r})"

    def create_schema(self) -> None:
        """Create the tables (the development quick path), or migrate existing ones to the newest revision."""
        migrations.create_schema(self._schema_engine, table_prefix=self._tables.prefix)
        self._schema_checked = False

    def drop_schema(self) -> None:
        """Drop the store's tables and its version table (for tests and teardown: the data is gone)."""
        migrations.drop_schema(self._schema_engine, table_prefix=self._tables.prefix)
        self._cache.clear()
        self._schema_checked = False

    def _check_schema(self) -> None:
        if self._schema_checked:
            return
        with self._schema_lock:
            if not self._schema_checked:
                migrations.check_schema(self._schema_engine, table_prefix=self._tables.prefix)
                self._schema_checked = True

    # ----------------------------------------------------------------------------------------- driver I/O

    def _now(self) -> datetime.datetime:
        now = datetime.datetime.now(datetime.timezone.utc)
        # Only PostgreSQL keeps the zone; MySQL DATETIME and SQLite text hold naive UTC.
        return now if self._dialect == "postgresql" else now.replace(tzinfo=None)

    def _expiry(self, now: datetime.datetime) -> datetime.datetime | None:
        return None if self._ttl is None else now + datetime.timedelta(seconds=self._ttl)

    def _transaction(self) -> contextlib.AbstractContextManager[Connection]:
        return transaction(self._engine, self._autocommit_engine)

    @contextlib.contextmanager
    def _driver_errors(self, operation: str, memory_id: str | None) -> Iterator[None]:
        try:
            yield
        except ChatMemoryError:
            raise
        except SQLAlchemyError as exc:
            raise StoreError(operation, memory_id, str(exc).splitlines()[0]) from exc

    # ---------------------------------------------------------------------------------------------- reads

    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one query)."""
        memory_id = validate_memory_id(memory_id)
        self._check_schema()
        cached = self._cache.get(memory_id)
        parameters = {
            "p_id": memory_id,
            "p_now": self._now(),
            # -1 matches no incarnation (they are non-negative): every payload is sent.
            "p_known_incarnation": -1 if cached is None else cached.incarnation,
            "p_known_next": 0 if cached is None else cached.next_seq,
        }
        with self._driver_errors("load", memory_id):
            connection_source = self._autocommit_engine if self._dialect == "postgresql" else self._engine
            with connection_source.connect() as connection:
                rows = connection.execute(self._statements.read, parameters).all()
        if not rows:
            return Snapshot([], 0)
        head = rows[0]
        pairs = [(row.seq, row.payload) for row in rows if row.seq is not None]
        # Within one incarnation a sequence number is written once and never reused (rewrites take new
        # ones), so every row below the cached next_seq is a message of the cached snapshot: the query
        # left its payload out, and it is not decoded again.
        known = (
            dict(zip(cached.seqs, cached.messages, strict=True))
            if (cached is not None and cached.incarnation == head.incarnation)
            else {}
        )
        messages = tuple(
            known[seq] if payload is None else loads_message(payload, memory_id=memory_id) for seq, payload in pairs
        )
        self._cache.put(
            memory_id,
            CachedSnapshot(head.version, head.incarnation, head.next_seq, tuple(seq for seq, _ in pairs), messages),
        )
        return Snapshot(list(messages), head.version)

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    # --------------------------------------------------------------------------------------------- writes

    def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        memory_id = validate_memory_id(memory_id)
        messages = tuple(messages)
        for message in messages:
            require_message(message)
        self._check_schema()
        cached = self._cache.get(memory_id)
        if cached is not None and expected_version > 0 and cached.version == expected_version:
            plan = diff_messages(cached.messages, messages)
            if not plan.is_rewrite:
                return self._save_diff(memory_id, cached, messages, plan.deleted, plan.appended)
        return self._write_locked(memory_id, messages, expected_version)

    def _save_diff(
        self,
        memory_id: str,
        cached: CachedSnapshot,
        messages: tuple[ChatMessage, ...],
        deleted: tuple[int, ...],
        appended: tuple[ChatMessage, ...],
    ) -> int:
        now = self._now()
        turn = TurnWrite(
            memory_id,
            cached,
            [cached.seqs[index] for index in deleted],
            [dumps_message(message) for message in appended],
            now,
            self._expiry(now),
        )
        with self._driver_errors("save", memory_id):
            try:
                if self._statements.has_diff_statement:
                    with self._autocommit_engine.connect() as connection:
                        written = turn.run_postgresql(connection, self._statements)
                else:
                    with self._transaction() as connection:
                        turn.run(connection, self._statements)
                    written = True
            except Conflict:
                written = False
            except DBAPIError as exc:
                if not is_conflict(self._dialect, exc):
                    raise
                written = False
        if not written:
            # The cached snapshot still describes its version truly; the next load reuses its messages.
            raise ConcurrentUpdateError(memory_id, cached.version)
        gone = set(deleted)
        seqs = tuple(seq for index, seq in enumerate(cached.seqs) if index not in gone) + tuple(turn.new_seqs)
        version = cached.version + 1
        self._cache.put(
            memory_id, CachedSnapshot(version, cached.incarnation, cached.next_seq + len(appended), seqs, messages)
        )
        return version

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        memory_id = validate_memory_id(memory_id)
        messages = tuple(messages)
        for message in messages:
            require_message(message)
        self._check_schema()
        self._write_locked(memory_id, messages, None)

    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        This imports data from another store without decoding it twice, and is how the contract suite
        plants corrupted data.
        """
        memory_id = validate_memory_id(memory_id)
        self._check_schema()
        self._write_locked(memory_id, None, None, [bytes(record) for record in records])

    def _write_locked(
        self,
        memory_id: str,
        messages: tuple[ChatMessage, ...] | None,
        expected_version: int | None,
        raw: list[bytes] | None = None,
    ) -> int:
        """The general write: lock the head row, check the version, diff against the cache or rewrite."""
        # Encode before touching the database: an unencodable message changes nothing.
        payloads = [dumps_message(message) for message in messages] if messages is not None else raw or []
        if expected_version is not None:
            try:
                return self._retrying(
                    "save",
                    memory_id,
                    1,
                    lambda: self._write_locked_once(memory_id, messages, payloads, expected_version),
                )
            except Conflict:
                raise ConcurrentUpdateError(memory_id, expected_version) from None
        return self._retrying(
            "update",
            memory_id,
            _UNCONDITIONAL_ATTEMPTS,
            lambda: self._write_locked_once(memory_id, messages, payloads, None),
        )

    def _retrying(self, operation: str, memory_id: str, attempts: int, write: Callable[[], _T]) -> _T:
        """Run ``write`` (one transaction), again after a conflict with a writer creating the same memory."""
        for attempt in range(attempts):
            outcome = self._attempt(operation, memory_id, write)
            if not isinstance(outcome, Conflict):
                return outcome
            if attempt == attempts - 1:
                if attempts == 1:
                    raise outcome
                raise StoreError(operation, memory_id, f"conflicted with other writers {attempts} times") from outcome
            time.sleep(random.uniform(0, 0.002 * 2**attempt))
        raise AssertionError("unreachable")

    def _attempt(self, operation: str, memory_id: str, write: Callable[[], _T]) -> _T | Conflict:
        with self._driver_errors(operation, memory_id):
            try:
                return write()
            except Conflict as lost:
                return lost
            except DBAPIError as exc:
                if not is_conflict(self._dialect, exc):
                    raise
                raced = Conflict()
                raced.__cause__ = exc
                return raced

    def _write_locked_once(
        self,
        memory_id: str,
        messages: tuple[ChatMessage, ...] | None,
        payloads: list[bytes],
        expected_version: int | None,
    ) -> int:
        now = self._now()
        with self._transaction() as connection:
            state = write_locked(
                connection,
                self._statements,
                memory_id=memory_id,
                messages=messages,
                payloads=payloads,
                expected_version=expected_version,
                cached=self._cache.get(memory_id),
                now=now,
                expires_at=self._expiry(now),
            )
        if messages is None:
            self._cache.forget(memory_id)
        else:
            self._cache.put(
                memory_id, CachedSnapshot(state.version, state.incarnation, state.next_seq, state.seqs, messages)
            )
        return state.version

    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._check_schema()
        self._retrying("delete", memory_id, _UNCONDITIONAL_ATTEMPTS, lambda: self._delete_once(memory_id))
        self._cache.forget(memory_id)

    def _delete_once(self, memory_id: str) -> None:
        with self._transaction() as connection:
            # The head row first: writers lock it before any message row, so this order cannot deadlock.
            connection.execute(self._statements.delete_head, {"p_id": memory_id})
            connection.execute(self._statements.delete_all, {"p_id": memory_id})

    # ------------------------------------------------------------------------------------ listing and TTL

    def memory_ids(self, *, order: Literal["id", "newest"] = "id", page_size: int = 500) -> Iterator[str]:
        """The ids of live memories, by id (code point order) or most recently written first.

        Pages of ``page_size`` ids are read lazily (keyset pagination), so listing a large store streams.
        By id, each page reads its ids from the primary key. Newest first, each page scans and sorts the
        head table (one short row per memory): the write time is deliberately not indexed, since every
        write changes it and the index would tax every turn; list by id to walk a very large store.
        """
        if order not in ("id", "newest"):
            raise ValueError("order must be 'id' or 'newest'")
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        self._check_schema()
        return self._pages(order, page_size)

    def _pages(self, order: str, page_size: int) -> Iterator[str]:
        after: tuple[Any, ...] | None = None
        while True:
            statement = self._statements.list_page(order, after is not None, page_size)
            parameters: dict[str, Any] = {"p_now": self._now()}
            if after is not None:
                parameters.update(zip(("p_after_id", "p_after_updated"), after, strict=True))
            with self._driver_errors("listing memory ids", None), self._engine.connect() as connection:
                rows = connection.execute(statement, parameters).all()
            for row in rows:
                yield row.memory_id
            if len(rows) < page_size:
                return
            last = rows[-1]
            after = (last.memory_id, last.updated_at)

    def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired memories in transactions of ``batch_size`` memories; return how many went.

        Each batch scans the head table for expired rows (expiry times are not indexed, for the same
        reason as write times: see :meth:`memory_ids`); run it now and then, not per request.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._check_schema()
        statements = self._statements
        purged = 0
        while True:
            with self._driver_errors("purging expired memories", None), self._transaction() as connection:
                now = self._now()
                ids = list(connection.execute(statements.lock_expired(batch_size), {"p_now": now}).scalars())
                if ids:
                    connection.execute(statements.delete_heads, {"p_ids": ids})
                    connection.execute(statements.delete_messages_of, {"p_ids": ids})
            self._cache.forget(*ids)
            purged += len(ids)
            if len(ids) < batch_size:
                return purged
