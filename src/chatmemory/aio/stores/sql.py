"""The SQL store on asyncio (SQLAlchemy's asyncio engine): the same tables, statements and operations.

Drivers, each behind the same extra as the sync store's: psycopg 3 in its async mode for PostgreSQL (the
same ``postgresql+psycopg://`` URL); asyncmy for MySQL/MariaDB (``mysql://`` and ``mysql+pymysql://`` are
mapped to ``mysql+asyncmy://``); for SQLite from a URL, the sync store's ``sqlite3`` engine on a worker
thread of the store, with aiosqlite for ``engine`` and the schema commands. Every operation is the sync
store's (:mod:`chatmemory.stores.sql.operations`), sent by the executors of
:mod:`chatmemory.stores.sql.aio`, so a memory written by one store is read and extended by the other. A
cancelled call leaves the memory at its old or its new list. Why these drivers, and what a cancellation
leaves: *The asyncio store* in ``docs/store-sql.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Literal, TypeVar

from chatmemory.core.optional import require
from chatmemory.serialization.records import Resealed

require("sqlalchemy", feature="chatmemory.aio.stores.sql.SQLChatMemoryStore", extra="sql")

from sqlalchemy import Engine  # noqa: E402 - after the dependency check
from sqlalchemy.exc import SQLAlchemyError  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine  # noqa: E402
from sqlalchemy.util import greenlet_spawn  # noqa: E402

from chatmemory.core.driving import Steps  # noqa: E402
from chatmemory.core.errors import ChatMemoryError, StoreError  # noqa: E402
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryEntry, HistoryPage  # noqa: E402
from chatmemory.core.messages import ChatMessage  # noqa: E402
from chatmemory.core.store import (  # noqa: E402
    Snapshot,
    validate_memory_id,
)
from chatmemory.memory_times import MemoryTimes  # noqa: E402
from chatmemory.stored_memories import NewMemory, StoredMemory, create_one_async  # noqa: E402
from chatmemory.stores.base import AsyncStoreLifecycle, Operation  # noqa: E402
from chatmemory.stores.base.aio import PerLoop  # noqa: E402
from chatmemory.stores.base.facade import StoreTelemetry  # noqa: E402
from chatmemory.stores.base.turns import AsyncLocalTurns  # noqa: E402
from chatmemory.stores.sql.aio import AsyncExecutor, OnLoop, ThreadExecutor  # noqa: E402
from chatmemory.stores.sql.base import SQLStoreBase  # noqa: E402
from chatmemory.stores.sql.commands import Command  # noqa: E402
from chatmemory.stores.sql.dialect import dialect_family, lost_connection  # noqa: E402
from chatmemory.stores.sql.engine import (  # noqa: E402
    autocommit_options,
    driver_options,
    engine_from_url,
    engine_isolation_level,
    install_connect_hooks,
    missing_driver,
    normalize_url,
    writer_queue_for,
)
from chatmemory.stores.sql.operations import Change  # noqa: E402
from chatmemory.stores.sql.plan import check_listing  # noqa: E402
from chatmemory.stores.sql.schema import check_with, connect, revision_on  # noqa: E402

__all__ = ["SQLChatMemoryStore"]

_traced = StoreTelemetry("sql", __name__)


async def _no_server_lock(token: bytes) -> None:
    """The row lock is the database's: a turn hands nothing on and gives nothing back."""


_T = TypeVar("_T")


class SQLChatMemoryStore(AsyncStoreLifecycle, SQLStoreBase[AsyncEngine]):
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
            the engine and disposes of it in :meth:`aclose`; ``postgresql://`` means psycopg 3 (in its
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

    _repr_name = "aio.SQLChatMemoryStore"
    _turns_type = AsyncLocalTurns
    _engine_type = AsyncEngine
    _wrong_engine = (
        "the asyncio SQLChatMemoryStore takes a URL or an AsyncEngine, not {kind} "
        "(for a sync Engine use chatmemory.stores.sql.SQLChatMemoryStore)"
    )
    _wrong_dialect = "the SQL store supports PostgreSQL, SQLite and MySQL/MariaDB, not {name!r}"

    _thread_engine: Engine | None = None
    """SQLite from a URL: the sync engine its operations run on worker threads (see the module)."""

    def _engine_from_url(self, url: str, options: dict[str, Any]) -> AsyncEngine:
        self._url = url
        parsed = normalize_url(url, asynchronous=True)
        try:
            engine = create_async_engine(parsed, **driver_options(parsed, options))
        except ImportError as exc:
            raise missing_driver(parsed, exc, "chatmemory.aio.stores.sql.SQLChatMemoryStore") from exc
        install_connect_hooks(engine.sync_engine)
        if dialect_family(parsed.get_backend_name()) == "sqlite":
            self._thread_engine = engine_from_url(url, options)
        return engine

    @property
    def engine(self) -> AsyncEngine:
        """The engine the store uses: a SQLAlchemy ``Engine`` (sync store) or ``AsyncEngine`` (asyncio store).

        Made from a URL, its connections are in autocommit (unless ``engine_options`` set an
        ``isolation_level``), and the asyncio store's serves the first event loop the store runs on
        (another loop gets an engine of its own); on SQLite, for the schema commands only.
        """
        return self._engine

    async def _release(self) -> None:
        executor = self.__dict__.get("_thread_executor")
        if executor is not None:
            await asyncio.to_thread(executor.shutdown)
        if self._thread_engine is not None:
            self._thread_engine.dispose()
        await self._per_loop.aclose()
        await self._engine.dispose()

    # ------------------------------------------------------------------------------------------ schema

    @contextlib.asynccontextmanager
    async def _connect(self, operation: str) -> AsyncIterator[AsyncConnection]:
        """A pooled autocommit connection for a schema command; driver errors become StoreErrors.

        Taken as the sync store takes its own (:func:`~chatmemory.stores.sql.schema.connect`), so
        that a driver error while autocommit is set is wrapped, and its connection handed back.
        """
        try:
            autocommit = (await self._per_loop.ready()).autocommit
            connection = AsyncConnection(autocommit, await greenlet_spawn(connect, autocommit.sync_engine))
            try:
                yield connection
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                # Interrupted mid-protocol: never reuse it; closing it rolls back any transaction.
                await asyncio.shield(connection.invalidate())
                raise
            finally:
                await asyncio.shield(connection.close())
        except ChatMemoryError:
            raise
        except SQLAlchemyError as exc:
            raise self._schema.store_error(operation, exc) from exc

    async def schema_revision(self) -> str | None:
        """The revision the store's tables are at (``None``: no tables yet)."""
        self._check_open(Operation.SCHEMA)
        prefix = self._tables.prefix
        async with self._connect(Operation.SCHEMA) as connection:
            return await connection.run_sync(lambda sync: revision_on(sync, prefix))

    async def create_schema(self) -> None:
        """Create the tables at the required revision where there are none (development and tests).

        Raises:
            SchemaVersionError: the tables are at another revision (``chatmemory migrate URL`` upgrades
                ones behind; ones ahead need a newer chatmemory).
            StoreError: with ``partitions``, the existing message table is not partitioned so.
        """
        self._check_open(Operation.SCHEMA)
        async with self._connect(Operation.SCHEMA) as connection:
            await connection.run_sync(self._schema.create_on)

    async def drop_schema(self) -> None:
        """Drop the store's tables and its version table (for tests and teardown: the data is gone)."""
        self._check_open(Operation.SCHEMA)
        async with self._connect(Operation.SCHEMA) as connection:
            await connection.run_sync(self._schema.drop_on)
        self._cache.clear()

    async def _check_schema(self) -> None:
        """Check the revision once per store, once more on a new connection after a lost one (as the sync store)."""
        async with (await self._per_loop.ready()).schema_lock:
            if not self._schema.checked:
                try:
                    await self._check_schema_once()
                except StoreError as exc:
                    if not lost_connection(exc.__cause__):
                        raise
                    await self._check_schema_once()

    async def _check_schema_once(self) -> None:
        async with self._connect(Operation.SCHEMA) as connection:
            await connection.run_sync(self._schema.check_on)

    @functools.cached_property
    def _thread_schema_lock(self) -> threading.Lock:
        return threading.Lock()

    def _check_schema_on_thread(self, _rows_of: Callable[[str], list[Any] | None] | None = None) -> None:
        """:meth:`_check_schema` on a worker thread, with the sync engine (SQLite from a URL)."""
        engine = self._thread_engine
        assert engine is not None, "only a store with worker threads checks its schema on them"
        with self._thread_schema_lock:
            if self._schema.checked:
                return
            try:
                check_with(engine, self._schema.check_on)
            except ChatMemoryError:
                raise
            except SQLAlchemyError as exc:
                raise self._schema.store_error(Operation.SCHEMA, exc) from exc

    # ------------------------------------------------------------------------------------ the executor

    @functools.cached_property
    def _thread_executor(self) -> ThreadExecutor:
        engine = self._thread_engine
        assert engine is not None, "only SQLite from a URL runs on worker threads"
        autocommit = engine.execution_options(**autocommit_options(engine_isolation_level(engine)))
        return ThreadExecutor(
            engine,
            autocommit,
            self._check_schema_on_thread,
            self._failure,
            keeps_connection=self._keeps_connection,
            writers=writer_queue_for(engine, self._engine_options),
        )

    @functools.cached_property
    def _per_loop(self) -> PerLoop[OnLoop]:
        return PerLoop(self._for_loop, OnLoop.close, closes_with_loop=self._owns_client)

    def _for_loop(self, first: bool) -> OnLoop:
        """The engine of a loop that first uses the store: the store's own on the first loop, a new one after."""
        if first:
            engine, autocommit = self._engine, self._autocommit
        elif self._owns_client:
            parsed = normalize_url(self._url, asynchronous=True)
            engine = create_async_engine(parsed, **driver_options(parsed, self._engine_options or {}))
            install_connect_hooks(engine.sync_engine)
            autocommit = engine.execution_options(**autocommit_options(engine_isolation_level(engine)))
        else:
            raise StoreError(
                Operation.CONNECT,
                detail=(
                    "the AsyncEngine given to the asyncio SQLChatMemoryStore belongs to the event loop it first ran "
                    "on (its pooled connections do), and this is another one; build the store from a URL (it then "
                    "keeps an engine per event loop), or build one store per event loop"
                ),
            )
        executor = AsyncExecutor(
            engine, autocommit, self._check_schema, self._failure, keeps_connection=self._keeps_connection
        )
        return OnLoop(engine, autocommit, executor)

    @property
    def _executor(self) -> AsyncExecutor | ThreadExecutor:
        """What sends the operations: the worker threads (SQLite from a URL), else the running loop's engine."""
        if self._thread_engine is not None:
            return self._thread_executor
        return self._per_loop.get().executor

    async def _ready_executor(self) -> AsyncExecutor | ThreadExecutor:
        """:attr:`_executor`, its loop's engine set to close when the loop shuts down."""
        if self._thread_engine is not None:
            return self._thread_executor
        return (await self._per_loop.ready()).executor

    async def _run(self, steps: Steps[Command, _T]) -> _T:
        return await (await self._ready_executor()).run(steps)

    # ------------------------------------------------------------------------------------------- reads

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one query)."""
        return await self._run(self._operations.load(memory_id))

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (await self.load(memory_id)).messages

    @_traced.coroutine("read_raw")
    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id``, undecoded (also those of message rows without a head row)."""
        return await self._run(self._operations.read_raw(memory_id))

    @_traced.coroutine("reseal")
    async def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` under the primary key (see :class:`~chatmemory.SupportsReseal`)."""
        return await self._run(self._operations.reseal(memory_id))

    @_traced.coroutine("memory_times")
    async def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires (the database's clock); ``None`` if absent."""
        return await self._run(self._operations.memory_times(memory_id))

    @_traced.coroutine("read_batch")
    async def read_batch(self, memory_ids: Sequence[str]) -> list[StoredMemory | None]:
        """``memory_ids`` as stored (records, version, times) in one statement; ``None`` for an absent one.

        See :class:`chatmemory.stored_memories.SupportsBatchReads`; ids without a head row take a second
        statement, which shows their stray rows as damage.
        """
        return await self._run(self._operations.read_batch(memory_ids))

    # ------------------------------------------------------------------------------------------ writes

    @_traced.coroutine("create_batch")
    async def create_batch(self, memories: Sequence[NewMemory]) -> list[int | None]:
        """Create the ``memories`` that do not exist, with their expiries, in one transaction.

        See :class:`chatmemory.stored_memories.SupportsBatchCreates`: each create is conditional on the
        memory being absent, as ``save(id, messages, 0)`` is; ``None`` for one that exists (or is
        damaged). An expired memory, one with stray rows, every memory of a store with history, and the
        whole batch after another writer created one of them meanwhile, go through :meth:`save` one by one.
        """
        self._check_open(Operation.WRITE)
        memories = list(memories)
        if self._history:
            return [await create_one_async(self, memory) for memory in memories]
        planner = self._operations.planner
        requests = [planner.request(validate_memory_id(memory.memory_id), memory.messages, 0) for memory in memories]
        if not requests:
            return []
        done = await self._run(self._operations.create_batch(requests, memories))
        self._cache.forget(*(request.memory_id for request in requests))
        versions = done.versions
        for index in done.one_by_one:
            versions[index] = await create_one_async(self, memories[index])
        return versions

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        return await self._run(self._operations.save(memory_id, messages, expected_version))

    @_traced.coroutine("save")
    async def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        return await self._run(self._operations.save(memory_id, messages, expected_version, also_recorded))

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        await self._run(self._operations.update(memory_id, messages))

    @_traced.coroutine("write_raw")
    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        This imports data from another store without decoding it twice, and is how the contract suite
        plants corrupted data. With history it records nothing (the records are not history entries) and
        keeps the history the memory had.
        """
        await self._run(self._operations.write_raw(memory_id, records))

    @_traced.coroutine("modify")
    async def modify(self, memory_id: str, change: Change) -> int:
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
        async with self._turns.hold(memory_id, _no_server_lock):
            return await self._run(self._operations.modify(memory_id, change))

    def contended(self, memory_id: str) -> bool:
        """Whether writers of this process queued for ``memory_id`` lately (see ``SupportsContentionHint``)."""
        return bool(self._turns.contended(memory_id))

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        await self._run(self._operations.delete(memory_id))

    @_traced.coroutine("expire_at")
    async def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent.

        One statement on the head row; reads judge expiry by the database's clock on every query, so a
        cached snapshot never serves a memory this expired (the snapshot is forgotten all the same).

        Raises:
            ValueError: ``when`` is not an aware datetime.
        """
        await self._run(self._operations.expire_at(memory_id, when))

    # ----------------------------------------------------------------------------------------- history

    @_traced.coroutine("history")
    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :class:`chatmemory.aio.SupportsHistory`); one query.

        The entries are the message rows written with history, evicted or not, by sequence number.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            CorruptedMemoryError: an entry does not decode.
        """
        return await self._run(self._operations.history_page(memory_id, after, limit, reverse))

    @_traced.coroutine("restore_history")
    async def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the entries the history lacks, as they are (see :class:`chatmemory.aio.store.SupportsHistoryRestore`).

        One transaction under the head row's lock: the missing entries' rows, with their own write
        times, and ``window`` for a memory without one (on the entries' rows that hold it). The memory
        takes a new version.

        Raises:
            HistoryNotEnabledError: the store was built without history.
            UnrestorableHistoryError: a memory without a head row and no ``window``.
        """
        return await self._run(self._operations.restore_history(memory_id, entries, window))

    @_traced.coroutine("trim_history")
    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        Rows outside the window are deleted; rows still in the window stay (the window never changes) but
        are no longer history entries. A ``timedelta`` is counted back from the database's clock. One
        transaction of two statements; returns how many entries went.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        return await self._run(self._operations.trim(older_than, memory_id))

    # --------------------------------------------------------------------------------- listing and TTL

    @_traced.async_iterator("list")
    async def memory_ids(self, *, order: Literal["id", "newest"] = "id", page_size: int = 500) -> AsyncIterator[str]:
        """The ids of live memories, by id (code point order) or most recently written first.

        Pages of ``page_size`` ids are read lazily (keyset pagination), so listing a large store streams.
        By id, each page reads its ids from the primary key. Newest first, the pages are read in one
        snapshot (a read transaction held until the listing ends, so a memory written meanwhile is
        neither missed nor listed twice) and each scans and sorts the head table (one short row per
        memory): the write time is deliberately not indexed, since every write changes it and the index
        would tax every turn; list by id to walk a very large store.
        """
        check_listing(order, page_size)
        await self._run(self._operations.ready(Operation.LIST))
        pages = (await self._ready_executor()).iterate(self._operations.pages(order, page_size))
        try:
            async for memory_id in pages:
                yield memory_id
        finally:
            await pages.aclose()

    @_traced.coroutine("purge_expired")
    async def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired memories in transactions of ``batch_size`` memories; return how many went.

        Each batch scans the head table for expired rows (expiry times are not indexed, for the same
        reason as write times: see :meth:`memory_ids`); run it now and then, not per request.
        """
        return await self._run(self._operations.purge(batch_size))
