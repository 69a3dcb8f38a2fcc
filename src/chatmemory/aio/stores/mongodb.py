"""The MongoDB store on asyncio: PyMongo's native ``AsyncMongoClient``, running the sync store's operations.

Same constructor arguments, same document layout, same operations (:mod:`chatmemory.stores.mongodb.operations`)
and decisions (:mod:`chatmemory.stores.mongodb.plan`) as :class:`chatmemory.stores.mongodb.MongoChatMemoryStore`:
a memory written by one is read and extended by the other. Every write is one ``find_one_and_update``,
which the server applies whole or not at all, so a task cancelled at any ``await`` leaves the memory at
its old or its new list. The commands are sent by :mod:`chatmemory.stores.mongodb.aio` (admitted in
turn, a client per event loop); this module is the public class.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from chatmemory.core.driving import Steps, drive_async
from chatmemory.core.errors import StoreError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryEntry, HistoryPage
from chatmemory.core.messages import ChatMessage
from chatmemory.core.optional import require
from chatmemory.core.store import Change, Snapshot, validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import Resealed
from chatmemory.stored_memories import NewMemory, StoredMemory, create_one_async
from chatmemory.stores.base import AsyncStoreLifecycle, Operation
from chatmemory.stores.base.facade import StoreTelemetry
from chatmemory.stores.base.turns import AsyncLocalTurns, modify_in_turn_async

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from pymongo import AsyncMongoClient  # noqa: E402 - the driver is known

from chatmemory.core.driving import Sleep  # noqa: E402
from chatmemory.stores.mongodb.aio import OTHER_LOOP, AsyncExecutor, other_loop_advice  # noqa: E402
from chatmemory.stores.mongodb.base import MongoStoreBase  # noqa: E402
from chatmemory.stores.mongodb.commands import Step  # noqa: E402
from chatmemory.stores.mongodb.executor import DRIVER_ERRORS, MongoClients, describe  # noqa: E402
from chatmemory.stores.mongodb.layout import EXPIRY_INDEX, Document, MemoryState  # noqa: E402

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

__all__ = ["EXPIRY_INDEX", "MongoChatMemoryStore"]

_traced = StoreTelemetry("mongodb", __name__)

_T = TypeVar("_T")


class MongoChatMemoryStore(MongoClients, AsyncStoreLifecycle, MongoStoreBase[AsyncMongoClient[Any]]):
    """A store in a MongoDB collection; supports versioning, locked updates, listing, TTL and raw records.

    Writers of one memory that conflict take turns in :meth:`modify`: threads (or, for the asyncio store,
    tasks on one event loop) sharing the store queue in the process, writers elsewhere on a lease lock, a
    document in ``<collection>_locks`` (see :mod:`~chatmemory.stores.mongodb.layout`) that listing and
    ``memory_ids`` never see. A memory queued for lately is :meth:`contended`: window memories then queue
    for it at once.

    :class:`chatmemory.stores.mongodb.MongoChatMemoryStore` and its asyncio twin
    :class:`chatmemory.aio.stores.mongodb.MongoChatMemoryStore` take the same arguments and share the
    memories, histories and locks. Any event loop may use the asyncio store: ``asyncio.run`` twice, or
    several threads each running a loop. An ``AsyncMongoClient`` belongs to the loop it first ran on, so an
    asyncio store built from a URL makes a client per event loop when that loop first uses it, and closes
    it when the loop shuts down (``asyncio.run`` does) or in :meth:`aclose` (all of them). A client passed in
    serves the loop it first ran on only: on another loop the store raises :class:`~chatmemory.StoreError`
    at once; build the store from a URL, or one store per loop.

    Args:
        url_or_client: a ``mongodb://`` / ``mongodb+srv://`` URL (the store builds the client and closes it
            in :meth:`aclose`), or a client the caller owns and closes: a :class:`pymongo.MongoClient` for
            the sync store, a :class:`pymongo.AsyncMongoClient` for the asyncio one.
        database: the database name; ``None``: the one the URL names (``mongodb://host/NAME``, for a client
            passed in the URL it was built with), else ``"chatmemory"``.
        collection: the collection name; it holds nothing but memories.
        ttl: seconds (or a ``timedelta``) a memory lives after its last write, by the server's clock;
            ``None``: forever. With a ttl the store creates a TTL index on ``expires_at`` (once,
            idempotently) so the server removes expired documents; until it does (its TTL monitor runs
            about once a minute) they read as empty.
        snapshot_cache_size: how many memories' last snapshots to keep, so that a turn writes a diff and a
            read decodes only new records (0: none).
        retry: how long a write whose reply was lost (or that raced another writer creating the memory)
            is resent; its write id makes a resend apply at most once.
        client_options: keyword arguments for the client the store builds from a URL. Unless these or the
            URL set them, the store uses ``serverSelectionTimeoutMS=5000``, ``connectTimeoutMS=5000`` and
            ``socketTimeoutMS=30000`` (see :data:`~chatmemory.stores.mongodb.executor.DEFAULT_TIMEOUTS_MS`).
        history: keep every message ever added to a memory in ``<collection>_history`` (see
            :mod:`chatmemory.stores.mongodb.history`); read it with :meth:`history`.
        history_ttl: seconds (or a ``timedelta``) a history lives after the memory's last write (at least
            ``ttl``); ``None``: as long as the window. Needs ``history=True``.
        lock_lease: seconds (or a ``timedelta``) after which the lock of :meth:`modify` is free again when
            its holder died or hung (default 5, by the server's clock): the longest a dead writer keeps the
            others waiting.
        lock_wait: seconds (or a ``timedelta``) :meth:`modify` waits for that lock before it raises
            :class:`~chatmemory.ConcurrentUpdateError` (default 30).
        write_concern: ``"majority"``, a number of members, or a pymongo ``WriteConcern``, carried by every
            write to the memories, history and lock collections; ``None`` keeps the client's (its URL's
            ``w=``). With ``"majority"`` an acknowledged write survives the failover of its primary (see
            ``docs/scaling.md``).
        encryption: a :class:`chatmemory.encryption.Keyring`: every message record (window and history) is
            sealed with AES-256-GCM, bound to its memory id, and kept as BSON binary (see
            ``docs/encryption.md``).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a client of the store's kind (``MongoClient`` or
            ``AsyncMongoClient``); ``history`` is not a bool; ``lock_lease`` or ``lock_wait`` is neither a
            number nor a ``timedelta``; ``write_concern`` is neither a tag, a number of members nor a
            ``WriteConcern``.
        ValueError: an invalid ttl, history_ttl, cache size, lock_lease, lock_wait, database or collection
            name; an unacknowledged ``write_concern``.
        StoreError: the URL cannot be parsed.
    """

    _repr_name = "aio.MongoChatMemoryStore"
    _client_type = AsyncMongoClient
    _turns_type = AsyncLocalTurns

    @property
    def collection(self) -> AsyncCollection[Document]:
        """The collection holding the memories (for inspection and administration).

        An asyncio store's is the one on the running event loop's client.
        """
        return self._executor.here().window  # type: ignore[no-any-return]

    @property
    def history_collection(self) -> AsyncCollection[Document] | None:
        """The collection holding the histories (``None``: the store keeps none).

        An asyncio store's is the one on the running event loop's client.
        """
        return self._executor.here().history  # type: ignore[no-any-return]

    async def _release(self) -> None:
        await self._executor.aclose()

    # ---------------------------------------------------------------------------------------- the driver

    def _started(self) -> None:
        self._executor = AsyncExecutor(self._on, self._owns_client, self._another_client, self._repr_name)
        self._perform = self._executor.perform

    async def _run(self, steps: Steps[Step, _T]) -> _T:
        """Send each command ``steps`` yields; a failure goes back in where it was yielded."""
        return await drive_async(steps, self._perform)

    # ---------------------------------------------------------------------------------------------- read

    async def _load_state(self, memory_id: str) -> MemoryState | None:
        return await self._run(self._ops.load_state(memory_id))

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one ``find_one``)."""
        return await self._run(self._ops.load(memory_id))

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (await self.load(memory_id)).messages

    @_traced.coroutine("read_raw")
    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` in window order, undecoded; ``[]`` for an unknown id."""
        return await self._run(self._ops.read_raw(memory_id))

    @_traced.coroutine("reseal")
    async def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` under the primary key (see :class:`~chatmemory.SupportsReseal`)."""
        return await self._run(self._ops.reseal(memory_id))

    @_traced.async_iterator("list")
    async def memory_ids(self) -> AsyncIterator[str]:
        """The ids of the memories that have not expired, streamed from a cursor."""
        self._check_open(Operation.LIST)
        on = await self._executor.clients.ready()
        try:
            async for document in on.collections.window.find(self._ops.planner.live_filter(), {"_id": 1}):
                yield document["_id"]
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.LIST, detail=describe(exc)) from exc
        except RuntimeError as exc:
            if str(exc).startswith(OTHER_LOOP):
                raise StoreError(Operation.LIST, detail=other_loop_advice(self._repr_name)) from exc
            raise

    @_traced.coroutine("memory_times")
    async def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written (by the server's clock) and when it expires; ``None`` if absent."""
        return await self._run(self._ops.memory_times(memory_id))

    @_traced.coroutine("read_batch")
    async def read_batch(self, memory_ids: Sequence[str]) -> list[StoredMemory | None]:
        """``memory_ids`` as stored (records, version, times) in one ``find``; ``None`` for an absent one.

        See :class:`chatmemory.stored_memories.SupportsBatchReads`.
        """
        return await self._run(self._ops.read_batch(memory_ids))

    # --------------------------------------------------------------------------------------------- write

    @_traced.coroutine("create_batch")
    async def create_batch(self, memories: Sequence[NewMemory]) -> list[int | None]:
        """Create the ``memories`` that do not exist, with their expiries, in one unordered ``insert_many``.

        See :class:`chatmemory.stored_memories.SupportsBatchCreates`: each create is conditional on the
        memory being absent, as ``save(id, messages, 0)`` is (the unique ``_id``); ``None`` for one that
        exists. An expired memory, and every memory of a store with history, go through :meth:`save`.
        """
        self._check_open(Operation.WRITE)
        memories = list(memories)
        if self._history is not None:
            return [await create_one_async(self, memory) for memory in memories]
        done = await self._run(self._ops.create_batch(memories))
        versions = done.versions
        for index in done.one_by_one:
            versions[index] = await create_one_async(self, memories[index])
        return versions

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        return await self._run(self._ops.save(memory_id, messages, expected_version))

    @_traced.coroutine("save")
    async def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        return await self._run(self._ops.save(memory_id, messages, expected_version, also_recorded))

    def contended(self, memory_id: str) -> bool:
        """Whether writers of this process queued for ``memory_id`` lately (see ``SupportsContentionHint``).

        The writers are threads sharing a sync store, or tasks sharing an asyncio one.
        """
        return self._turns.contended(memory_id)  # type: ignore[no-any-return]

    @_traced.coroutine("modify")
    async def modify(self, memory_id: str, change: Change) -> int:
        """Apply ``change`` to ``memory_id`` in its writers' turn; return the version it is at afterwards.

        See :class:`chatmemory.aio.SupportsLockedUpdate`. Alone, it costs four commands (take the lock, read,
        write, give the lock back); a writer that finishes while others of this process wait hands them
        the lock, which then costs them none (see :mod:`chatmemory.stores.base.turns`).

        In the asyncio store, a task cancelled at any ``await`` gives the lock back all the same: an upsert
        taking it runs to its end, shielded from the cancellation, and the delete giving it back follows it
        (sent at once, it could reach the server before the upsert and leave the lock taken for its whole
        lease).

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``lock_wait`` seconds; nothing was written.
            CorruptedMemoryError: the stored memory does not decode (``change`` is not called).
            StoreError: the server failed (giving the lock back failed: it frees itself within ``lock_lease``).
        """
        memory_id = validate_memory_id(memory_id)  # one turn for UUID(x) and str(UUID(x))
        taking: list[asyncio.Future[Any]] = []

        async def shielded(command: Step) -> Any:
            if isinstance(command, Sleep):
                return await self._perform(command)
            taking.append(asyncio.ensure_future(self._perform(command)))
            return await asyncio.shield(taking[-1])

        async def lock(token: bytes) -> None:
            await drive_async(self._ops.take_lease(memory_id, token), shielded)

        async def unlock(token: bytes) -> None:
            await asyncio.gather(*taking, return_exceptions=True)
            await self._run(self._ops.give_lease_back(memory_id, token))

        return await modify_in_turn_async(
            self._turns,
            memory_id,
            self._lock.lease,
            lock=lock,
            unlock=unlock,
            change=lambda: self._run(self._ops.change_locked(memory_id, change)),
        )

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``, whatever version it is at.

        One write: the diff against the cached snapshot, pinned to its version (a second write, the
        whole window, if another writer got there first), or the whole window if none is cached.
        A store with history reads the window first and saves against it (again if another writer got
        there first), so that the history records what this write appended to the window it replaced.
        """
        await self._run(self._ops.update(memory_id, messages))

    @_traced.coroutine("write_raw")
    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read.

        A store with history records nothing in it for them.
        """
        await self._run(self._ops.write_raw(memory_id, records))

    @_traced.coroutine("expire_at")
    async def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent."""
        await self._run(self._ops.expire_at(memory_id, when))

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` (its history too); idempotent."""
        await self._run(self._ops.delete(memory_id))

    # ------------------------------------------------------------------------------------------- history

    @_traced.coroutine("history")
    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Two reads: the history head in the window document, then the entries (an indexed range).

        Raises:
            HistoryNotEnabledError: the store was built without history.
        """
        return await self._run(self._ops.history_page(memory_id, after, limit, reverse))

    @_traced.coroutine("restore_history")
    async def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the entries the history lacks, as they are (see :class:`chatmemory.aio.store.SupportsHistoryRestore`).

        Entries go into the history collection after the head's ``hseq`` moves past them (and the
        memory's version with it); an absent memory is created with ``window``. Not one atomic step
        (MongoDB has none over two collections): a restore cut short is completed by the next one,
        never doubling or changing an entry.

        Raises:
            HistoryNotEnabledError: the store was built without history.
            UnrestorableHistoryError: an absent memory without ``window``, or one written without history.
        """
        return await self._run(self._ops.restore_history(memory_id, entries, window))

    @_traced.coroutine("trim_history")
    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        ``older_than`` is an aware datetime, or a ``timedelta`` back from the server's clock. The window is
        never changed. Returns how many entries were removed.

        Raises:
            HistoryNotEnabledError: the store was built without history.
        """
        return await self._run(self._ops.trim(older_than, memory_id))
