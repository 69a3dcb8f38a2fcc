"""The SQL store (SQLAlchemy 2 Core), sync: it sends the commands of :mod:`chatmemory.stores.sql.operations`.

One row per message keyed by ``(memory_id, seq)`` and a head row per memory (see
:mod:`chatmemory.stores.sql.schema`). A write diffs by sequence: it deletes the evicted rows and inserts
only the new tail, so a steady-state turn costs the same whatever the window size (on PostgreSQL one
statement of data-modifying CTEs; elsewhere one short transaction). With ``history=True`` it deletes
nothing: the head row's window ranges move past the rows it evicts (:func:`~chatmemory.stores.sql.plan.cover_window`),
which stay as the history, and the rows it adds carry the write's time.

The operations are written once for this store and the asyncio one
(:mod:`~chatmemory.stores.sql.operations`); :mod:`~chatmemory.stores.sql.executor` sends their commands.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from chatmemory.core.optional import require
from chatmemory.serialization.records import Resealed

require("sqlalchemy", feature="SQLChatMemoryStore", extra="sql")

from sqlalchemy import Connection, Engine  # noqa: E402 - after the dependency check

from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryEntry, HistoryPage  # noqa: E402
from chatmemory.core.messages import ChatMessage  # noqa: E402
from chatmemory.core.store import (  # noqa: E402
    Snapshot,
    validate_memory_id,
)
from chatmemory.memory_times import MemoryTimes  # noqa: E402
from chatmemory.stored_memories import NewMemory, StoredMemory, create_one  # noqa: E402
from chatmemory.stores.base import Operation, StoreLifecycle  # noqa: E402
from chatmemory.stores.base.facade import StoreTelemetry  # noqa: E402
from chatmemory.stores.base.turns import LocalTurns  # noqa: E402
from chatmemory.stores.sql.base import SQLStoreBase  # noqa: E402
from chatmemory.stores.sql.engine import engine_from_url, writer_queue_for  # noqa: E402
from chatmemory.stores.sql.executor import Executor  # noqa: E402
from chatmemory.stores.sql.operations import Change  # noqa: E402
from chatmemory.stores.sql.plan import check_listing  # noqa: E402

__all__ = ["SQLChatMemoryStore"]


def _no_server_lock(token: bytes) -> None:
    """The row lock is the database's: a turn hands nothing on and gives nothing back."""


_traced = StoreTelemetry("sql", __name__)


class SQLChatMemoryStore(StoreLifecycle, SQLStoreBase[Engine]):
    """A store in SQL tables; supports versioning, listing, TTL, schema commands and raw records.

    Create the tables with ``chatmemory migrate URL`` (or :func:`chatmemory.migrations.upgrade`), or with
    :meth:`create_schema` during development. A store on a schema that is behind raises
    :class:`~chatmemory.SchemaVersionError` naming the command to run.

    :class:`chatmemory.stores.sql.SQLChatMemoryStore` and its asyncio twin
    :class:`chatmemory.aio.stores.sql.SQLChatMemoryStore` take the same arguments and send the same
    operations on the same tables: a memory written by one is read and extended by the other. The asyncio
    store works from any event loop: built from a URL, it makes an engine per loop when that loop first
    uses it (on SQLite its operations run the ``sqlite3`` engine on worker threads of the store instead);
    an ``AsyncEngine`` passed in serves the loop it first ran on only (on another the store raises
    :class:`~chatmemory.StoreError`). A cancelled asyncio call leaves the memory at its old or its new list.

    Args:
        url_or_engine: a SQLAlchemy URL, or an engine the caller owns and closes (every connection goes
            back to its pool): an :class:`~sqlalchemy.Engine` for the sync store, an
            :class:`~sqlalchemy.ext.asyncio.AsyncEngine` for the asyncio one. From a URL the store makes
            the engine and disposes of it in :meth:`close`; ``postgresql://`` means psycopg 3 (in its
            async mode on asyncio), ``mysql://`` PyMySQL (asyncmy on asyncio: sync driver names are
            mapped to their async twins), ``sqlite://`` ``sqlite3`` (aiosqlite for the asyncio store's
            :attr:`engine`); between calls the store keeps the connection the last one ended with, sparing
            the next the pool's checkout and return. Any engine works, one in autocommit included: the
            store opens its transactions itself. An engine that is not in autocommit has its connections
            switched to it at each checkout (a round trip on some drivers); build yours with
            ``isolation_level="AUTOCOMMIT"`` to spare that.
        table_prefix: prefix of the store's tables (``<prefix>memories``, ``<prefix>messages``).
        ttl: seconds (or a ``timedelta``) a memory lives after its last write, by the database's clock;
            ``None``: forever.
        snapshot_cache_size: how many memories' last state to keep for diffing writes without a read
            (``0``: always rewrite whole windows).
        engine_options: keyword arguments for the engine the store makes from a URL: passed to
            :func:`sqlalchemy.create_engine` by the sync store, to
            :func:`~sqlalchemy.ext.asyncio.create_async_engine` by the asyncio one (on SQLite to
            ``create_engine`` too, for the engine of its worker threads). Defaults: autocommit
            connections, a connect timeout of 10 s, a SQLite busy timeout of 30 s. With ``pool_pre_ping``
            or ``pool_recycle`` every call checks its connection out of the pool.
        retry: how long writers creating or replacing one memory at once retry their collisions.
        history: keep every message ever added to a memory (see :meth:`history`): evicted rows stay in
            the message table, outside the window's ranges, instead of being deleted.
        history_ttl: seconds (or a ``timedelta``) a memory's history lives after its last write, at least
            ``ttl`` (``None``: it expires with the window). The head row then keeps the history's expiry
            and outlives the window until it passes: :meth:`purge_expired` leaves it until then, and a
            write after the window expired starts a new window but continues the history.
        partitions: PostgreSQL only, an int from 1 to 1024: :meth:`create_schema` creates the message
            table ``PARTITION BY HASH (memory_id)`` in that many partitions, and existing tables must be
            partitioned so (they are never converted). Reads and writes are the same either way (see
            ``docs/scaling.md``). ``None``: not partitioned.
        encryption: a :class:`chatmemory.encryption.Keyring`: every message row's payload (window and
            history) is sealed with AES-256-GCM, bound to its memory id and to the row's sequence number,
            so a payload moved to another row does not open (see ``docs/encryption.md``).

    Raises:
        TypeError: ``url_or_engine`` is neither a URL nor an engine of the store's kind (sync or asyncio).
        ValueError: a URL that is not a SQL database URL, or a driver or database the store does not use
            (the message says what to use); ``engine_options`` with an engine; ``history_ttl`` without
            ``history``, or shorter than ``ttl``; ``partitions`` that is not an int from 1 to 1024, or on
            a database other than PostgreSQL.
    """

    _repr_name = "SQLChatMemoryStore"
    _turns_type = LocalTurns
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

    @property
    def engine(self) -> Engine:
        """The engine the store uses: a SQLAlchemy ``Engine`` (sync store) or ``AsyncEngine`` (asyncio store).

        Made from a URL, its connections are in autocommit (unless ``engine_options`` set an
        ``isolation_level``), and the asyncio store's serves the first event loop the store runs on
        (another loop gets an engine of its own); on SQLite, for the schema commands only.
        """
        return self._engine

    def _release(self) -> None:
        if "_executor" in self.__dict__:
            self._executor.hand_back()
        self._engine.pool.dispose()  # its connections closed (the engine itself goes with the store)

    # -------------------------------------------------------------------------------------------- schema

    def schema_revision(self) -> str | None:
        """The revision the store's tables are at (``None``: no tables yet)."""
        self._check_open(Operation.SCHEMA)
        return self._schema.revision()

    def create_schema(self) -> None:
        """Create the tables at the required revision where there are none (development and tests).

        Raises:
            SchemaVersionError: the tables are at another revision (``chatmemory migrate URL`` upgrades
                ones behind; ones ahead need a newer chatmemory).
            StoreError: with ``partitions``, the existing message table is not partitioned so.
        """
        self._check_open(Operation.SCHEMA)
        self._schema.create()

    def drop_schema(self) -> None:
        """Drop the store's tables and its version table (for tests and teardown: the data is gone)."""
        self._check_open(Operation.SCHEMA)
        self._schema.drop()
        self._cache.clear()

    # -------------------------------------------------------------------------------------- the executor

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

    @functools.cached_property
    def _executor(self) -> Executor:
        return Executor(
            self._engine,
            self._autocommit,
            self._schema.check,
            self._failure,
            keeps_connection=self._keeps_connection,
            writers=writer_queue_for(self._engine, self._engine_options),
        )

    # ---------------------------------------------------------------------------------------------- reads

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one query)."""
        return self._executor.run(self._operations.load(memory_id))

    @_traced("get")
    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    @_traced("read_raw")
    def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id``, undecoded (also those of message rows without a head row)."""
        return self._executor.run(self._operations.read_raw(memory_id))

    @_traced("reseal")
    def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` under the primary key (see :class:`~chatmemory.SupportsReseal`)."""
        return self._executor.run(self._operations.reseal(memory_id))

    @_traced("memory_times")
    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires (the database's clock); ``None`` if absent."""
        return self._executor.run(self._operations.memory_times(memory_id))

    @_traced("read_batch")
    def read_batch(self, memory_ids: Sequence[str]) -> list[StoredMemory | None]:
        """``memory_ids`` as stored (records, version, times) in one statement; ``None`` for an absent one.

        See :class:`chatmemory.stored_memories.SupportsBatchReads`; ids without a head row take a second
        statement, which shows their stray rows as damage.
        """
        return self._executor.run(self._operations.read_batch(memory_ids))

    # --------------------------------------------------------------------------------------------- writes

    @_traced("create_batch")
    def create_batch(self, memories: Sequence[NewMemory]) -> list[int | None]:
        """Create the ``memories`` that do not exist, with their expiries, in one transaction.

        See :class:`chatmemory.stored_memories.SupportsBatchCreates`: each create is conditional on the
        memory being absent, as ``save(id, messages, 0)`` is; ``None`` for one that exists (or is
        damaged). An expired memory, one with stray rows, every memory of a store with history, and the
        whole batch after another writer created one of them meanwhile, go through :meth:`save` one by one.
        """
        self._check_open(Operation.WRITE)
        memories = list(memories)
        if self._history:
            return [create_one(self, memory) for memory in memories]
        planner = self._operations.planner
        requests = [planner.request(validate_memory_id(memory.memory_id), memory.messages, 0) for memory in memories]
        if not requests:
            return []
        done = self._executor.run(self._operations.create_batch(requests, memories))
        self._cache.forget(*(request.memory_id for request in requests))
        versions = done.versions
        for index in done.one_by_one:
            versions[index] = create_one(self, memories[index])
        return versions

    @_traced("save")
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        return self._executor.run(self._operations.save(memory_id, messages, expected_version))

    @_traced("save")
    def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        return self._executor.run(self._operations.save(memory_id, messages, expected_version, also_recorded))

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        self._executor.run(self._operations.update(memory_id, messages))

    @_traced("write_raw")
    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        This imports data from another store without decoding it twice, and is how the contract suite
        plants corrupted data. With history it records nothing (the records are not history entries) and
        keeps the history the memory had.
        """
        self._executor.run(self._operations.write_raw(memory_id, records))

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

        Writers of this process sharing the store (threads, or tasks of an asyncio store) queue in the
        process first (one at a time asks the database for the row lock), and a memory queued for lately
        is :meth:`contended`.
        """
        memory_id = validate_memory_id(memory_id)  # one turn for UUID(x) and str(UUID(x))
        with self._turns.hold(memory_id, _no_server_lock):
            return self._executor.run(self._operations.modify(memory_id, change))

    def contended(self, memory_id: str) -> bool:
        """Whether writers of this process queued for ``memory_id`` lately (see ``SupportsContentionHint``)."""
        return bool(self._turns.contended(memory_id))

    @_traced("delete")
    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        self._executor.run(self._operations.delete(memory_id))

    @_traced("expire_at")
    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent.

        One statement on the head row; reads judge expiry by the database's clock on every query, so a
        cached snapshot never serves a memory this expired (the snapshot is forgotten all the same).

        Raises:
            ValueError: ``when`` is not an aware datetime.
        """
        self._executor.run(self._operations.expire_at(memory_id, when))

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
        return self._executor.run(self._operations.history_page(memory_id, after, limit, reverse))

    @_traced("restore_history")
    def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the entries the history lacks, as they are (see :class:`chatmemory.core.history.SupportsHistoryRestore`).

        One transaction under the head row's lock: the missing entries' rows, with their own write
        times, and ``window`` for a memory without one (on the entries' rows that hold it). The memory
        takes a new version.

        Raises:
            HistoryNotEnabledError: the store was built without history.
            UnrestorableHistoryError: a memory without a head row and no ``window``.
        """
        return self._executor.run(self._operations.restore_history(memory_id, entries, window))

    @_traced("trim_history")
    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        Rows outside the window are deleted; rows still in the window stay (the window never changes) but
        are no longer history entries. A ``timedelta`` is counted back from the database's clock. One
        transaction of two statements; returns how many entries went.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        return self._executor.run(self._operations.trim(older_than, memory_id))

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
        self._executor.run(self._operations.ready(Operation.LIST))
        return self._executor.iterate(self._operations.pages(order, page_size))

    @_traced("purge_expired")
    def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired memories in transactions of ``batch_size`` memories; return how many went.

        Each batch scans the head table for expired rows (expiry times are not indexed, for the same
        reason as write times: see :meth:`memory_ids`); run it now and then, not per request.
        """
        return self._executor.run(self._operations.purge(batch_size))
