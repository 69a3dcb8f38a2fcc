"""The MongoDB store (pymongo): one document per memory, each write one ``find_one_and_update``.

The public sync class: each method drives an operation of :mod:`chatmemory.stores.mongodb.operations`
(what each write sends is decided in :mod:`chatmemory.stores.mongodb.plan`) with the blocking executor
(:mod:`chatmemory.stores.mongodb.executor`, on ``MongoClient``); the layout is in
:mod:`chatmemory.stores.mongodb.layout`. Everything runs on MongoDB 7
and newer: no multi-document transactions (history included: see :mod:`chatmemory.stores.mongodb.history`),
no 8.0-only commands or options, errors recognised by code.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from chatmemory.core.driving import Steps, drive
from chatmemory.core.errors import StoreError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryEntry, HistoryPage
from chatmemory.core.messages import ChatMessage
from chatmemory.core.optional import require
from chatmemory.core.store import Change, Snapshot, validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import Resealed
from chatmemory.stored_memories import NewMemory, StoredMemory, create_one
from chatmemory.stores.base import Operation, StoreLifecycle
from chatmemory.stores.base.facade import StoreTelemetry
from chatmemory.stores.base.turns import LocalTurns, modify_in_turn

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from pymongo import MongoClient  # noqa: E402 - imported once the driver is known

from chatmemory.stores.mongodb.base import MongoStoreBase  # noqa: E402
from chatmemory.stores.mongodb.commands import Step  # noqa: E402
from chatmemory.stores.mongodb.executor import DRIVER_ERRORS, Executor, MongoClients, describe  # noqa: E402
from chatmemory.stores.mongodb.layout import EXPIRY_INDEX, Document, MemoryState  # noqa: E402

if TYPE_CHECKING:
    from pymongo.collection import Collection

__all__ = ["EXPIRY_INDEX", "MongoChatMemoryStore"]

_traced = StoreTelemetry("mongodb", __name__)

_T = TypeVar("_T")


class MongoChatMemoryStore(MongoClients, StoreLifecycle, MongoStoreBase[MongoClient[Any]]):
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
            in :meth:`close`), or a client the caller owns and closes: a :class:`pymongo.MongoClient` for
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

    _client_type = MongoClient
    _turns_type = LocalTurns

    @property
    def collection(self) -> Collection[Document]:
        """The collection holding the memories (for inspection and administration).

        An asyncio store's is the one on the running event loop's client.
        """
        return self._collection  # type: ignore[no-any-return]

    @property
    def history_collection(self) -> Collection[Document] | None:
        """The collection holding the histories (``None``: the store keeps none).

        An asyncio store's is the one on the running event loop's client.
        """
        return self._history_collection  # type: ignore[no-any-return]

    def _release(self) -> None:
        self._client.close()

    # ---------------------------------------------------------------------------------------- the driver

    _perform: Callable[[Step], Any]
    """The executor's ``perform``: sends one command (a driver failure raised as the store's error)."""

    def _started(self) -> None:
        self._executor = Executor(self._on)
        self._perform = self._executor.perform

    def _run(self, steps: Steps[Step, _T]) -> _T:
        """Send each command ``steps`` yields; a failure goes back in where it was yielded."""
        return drive(steps, self._perform)

    # ---------------------------------------------------------------------------------------------- read

    def _load_state(self, memory_id: str) -> MemoryState | None:
        return self._run(self._ops.load_state(memory_id))

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one ``find_one``)."""
        return self._run(self._ops.load(memory_id))

    @_traced("get")
    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    @_traced("read_raw")
    def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` in window order, undecoded; ``[]`` for an unknown id."""
        return self._run(self._ops.read_raw(memory_id))

    @_traced("reseal")
    def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` under the primary key (see :class:`~chatmemory.SupportsReseal`)."""
        return self._run(self._ops.reseal(memory_id))

    @_traced.iterator("list")
    def memory_ids(self) -> Iterator[str]:
        """The ids of the memories that have not expired, streamed from a cursor."""
        self._check_open(Operation.LIST)
        try:
            for document in self._collection.find(self._ops.planner.live_filter(), {"_id": 1}):
                yield document["_id"]
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.LIST, detail=describe(exc)) from exc

    @_traced("memory_times")
    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written (by the server's clock) and when it expires; ``None`` if absent."""
        return self._run(self._ops.memory_times(memory_id))

    @_traced("read_batch")
    def read_batch(self, memory_ids: Sequence[str]) -> list[StoredMemory | None]:
        """``memory_ids`` as stored (records, version, times) in one ``find``; ``None`` for an absent one.

        See :class:`chatmemory.stored_memories.SupportsBatchReads`.
        """
        return self._run(self._ops.read_batch(memory_ids))

    # --------------------------------------------------------------------------------------------- write

    @_traced("create_batch")
    def create_batch(self, memories: Sequence[NewMemory]) -> list[int | None]:
        """Create the ``memories`` that do not exist, with their expiries, in one unordered ``insert_many``.

        See :class:`chatmemory.stored_memories.SupportsBatchCreates`: each create is conditional on the
        memory being absent, as ``save(id, messages, 0)`` is (the unique ``_id``); ``None`` for one that
        exists. An expired memory, and every memory of a store with history, go through :meth:`save`.
        """
        self._check_open(Operation.WRITE)
        memories = list(memories)
        if self._history is not None:
            return [create_one(self, memory) for memory in memories]
        done = self._run(self._ops.create_batch(memories))
        versions = done.versions
        for index in done.one_by_one:
            versions[index] = create_one(self, memories[index])
        return versions

    @_traced("save")
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        return self._run(self._ops.save(memory_id, messages, expected_version))

    @_traced("save")
    def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        return self._run(self._ops.save(memory_id, messages, expected_version, also_recorded))

    def contended(self, memory_id: str) -> bool:
        """Whether writers of this process queued for ``memory_id`` lately (see ``SupportsContentionHint``).

        The writers are threads sharing a sync store, or tasks sharing an asyncio one.
        """
        return self._turns.contended(memory_id)  # type: ignore[no-any-return]

    @_traced("modify")
    def modify(self, memory_id: str, change: Change) -> int:
        """Apply ``change`` to ``memory_id`` in its writers' turn; return the version it is at afterwards.

        See :class:`chatmemory.SupportsLockedUpdate`. Alone, it costs four commands (take the lock, read,
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
        return modify_in_turn(
            self._turns,
            memory_id,
            self._lock.lease,
            lock=lambda token: self._run(self._ops.take_lease(memory_id, token)),
            unlock=lambda token: self._run(self._ops.give_lease_back(memory_id, token)),
            change=lambda: self._run(self._ops.change_locked(memory_id, change)),
        )

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``, whatever version it is at.

        One write: the diff against the cached snapshot, pinned to its version (a second write, the
        whole window, if another writer got there first), or the whole window if none is cached.
        A store with history reads the window first and saves against it (again if another writer got
        there first), so that the history records what this write appended to the window it replaced.
        """
        self._run(self._ops.update(memory_id, messages))

    @_traced("write_raw")
    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read.

        A store with history records nothing in it for them.
        """
        self._run(self._ops.write_raw(memory_id, records))

    @_traced("expire_at")
    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent."""
        self._run(self._ops.expire_at(memory_id, when))

    @_traced("delete")
    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` (its history too); idempotent."""
        self._run(self._ops.delete(memory_id))

    # ------------------------------------------------------------------------------------------- history

    @_traced("history")
    def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Two reads: the history head in the window document, then the entries (an indexed range).

        Raises:
            HistoryNotEnabledError: the store was built without history.
        """
        return self._run(self._ops.history_page(memory_id, after, limit, reverse))

    @_traced("restore_history")
    def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the entries the history lacks, as they are (see :class:`chatmemory.core.history.SupportsHistoryRestore`).

        Entries go into the history collection after the head's ``hseq`` moves past them (and the
        memory's version with it); an absent memory is created with ``window``. Not one atomic step
        (MongoDB has none over two collections): a restore cut short is completed by the next one,
        never doubling or changing an entry.

        Raises:
            HistoryNotEnabledError: the store was built without history.
            UnrestorableHistoryError: an absent memory without ``window``, or one written without history.
        """
        return self._run(self._ops.restore_history(memory_id, entries, window))

    @_traced("trim_history")
    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        ``older_than`` is an aware datetime, or a ``timedelta`` back from the server's clock. The window is
        never changed. Returns how many entries were removed.

        Raises:
            HistoryNotEnabledError: the store was built without history.
        """
        return self._run(self._ops.trim(older_than, memory_id))
