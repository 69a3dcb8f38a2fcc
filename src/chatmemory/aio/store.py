"""The asyncio store contract and its optional capabilities.

The same contract as :mod:`chatmemory.core.store`, with coroutine methods: what the sync protocols'
docstrings say (and ``docs/semantics.md`` spells out) holds here word for word; only the calls are
awaited. A memory written by a sync store is read and extended by the async store of the same backend,
and the other way round. Stores close with ``await store.aclose()`` or ``async with store:``.

``isinstance`` checks of these protocols only look for the method names, like any runtime protocol; the
async memories also check that the methods are coroutine functions.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryEntry, HistoryPage
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Change, Resealed, Snapshot, SupportsContentionHint, SupportsTTL
from chatmemory.memory_times import MemoryTimes

__all__ = [
    "Change",
    "ChatMemoryStore",
    "Snapshot",
    "SupportsHistory",
    "SupportsHistoryRestore",
    "SupportsListing",
    "SupportsContentionHint",
    "SupportsExpiryAt",
    "SupportsExpiryPurge",
    "SupportsLockedUpdate",
    "SupportsMemoryTimes",
    "SupportsRawRecords",
    "SupportsReseal",
    "SupportsRecordedWrites",
    "SupportsSchema",
    "SupportsTTL",
    "SupportsVersioning",
]


@runtime_checkable
class ChatMemoryStore(Protocol):
    """Where window memories keep their messages.

    Semantics every implementation holds (the contract suite in :mod:`chatmemory.testing` checks them):

    * ``get_messages`` returns exactly what the last ``update_messages`` wrote for that id: same order,
      equal messages, tool-call argument strings byte for byte. An unknown id reads as ``[]``.
    * ``update_messages`` replaces the whole list atomically: a reader sees the old list or the new one,
      never a mix; a failure half-way leaves the old list, and an asyncio task cancelled during a write
      leaves the old list or the new one. ``[]`` is a valid list.
    * ``delete_messages`` removes the memory; deleting an unknown id is not an error.
    * Ids are opaque literals (no glob, separator, SQL or operator meaning) and fully isolated.
    * Stored data that does not decode raises :class:`~chatmemory.CorruptedMemoryError` naming the id,
      data from a newer format raises :class:`~chatmemory.UnsupportedFormatVersionError`; neither is
      ever read as ``[]``. ``delete_messages`` and ``update_messages`` still work on such a memory.
    * Driver failures raise :class:`~chatmemory.StoreError` with the driver's exception as ``__cause__``.

    Memory ids arrive validated (see :func:`chatmemory.validate_memory_id`). :class:`chatmemory.ChatMemoryStore`
    and its asyncio twin :class:`chatmemory.aio.ChatMemoryStore` hold the same semantics; the asyncio one's
    methods are coroutines.
    """

    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first; ``[]`` for an unknown id."""
        ...

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id`` with ``messages``, atomically."""
        ...

    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        ...


@runtime_checkable
class SupportsVersioning(Protocol):
    """Optimistic concurrency: read a version, write only if nobody wrote since.

    * ``load`` returns the messages and their version; an unknown id is ``Snapshot([], 0)``.
    * ``save`` writes ``messages`` only if the memory is still at ``expected_version`` (``0``: it must not
      exist) and returns the new version, which is greater than any version the memory had. Otherwise it
      raises :class:`~chatmemory.ConcurrentUpdateError` and changes nothing.
    * ``update_messages`` and ``delete_messages`` also move the version on, so a ``save`` based on a read
      from before them fails.
    """

    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (``Snapshot([], 0)`` for an unknown id)."""
        ...

    async def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version.

        Raises:
            ConcurrentUpdateError: the memory is at another version; nothing was written.
        """
        ...


@runtime_checkable
class SupportsLockedUpdate(Protocol):
    """A read-modify-write of one memory under a lock the store holds: writers queue instead of conflicting.

    * ``modify(id, change)`` reads the memory under a lock that every other writer of the same id waits
      for, calls ``change`` with a fresh list of the stored messages (``[]`` for an unknown or
      expired id), and writes what it returns, atomically, before the lock is released. ``change``
      returning ``None`` means "no write": the memory, its version and its expiry stay as they are.
    * It returns the version the memory is at afterwards: the new one after a write (greater than any
      version the memory had), the one read after a ``None`` (``0`` when the memory does not exist).
    * ``change`` must be a pure, short CPU function: it runs while the lock is held, and it may be called
      more than once (the store may start over, e.g. when two writers create the memory at once); only
      the list returned by the last call is written. An async store calls it synchronously too.
    * A memory that does not decode raises :class:`~chatmemory.CorruptedMemoryError` without calling
      ``change``; driver failures raise :class:`~chatmemory.StoreError`. It raises
      :class:`~chatmemory.ConcurrentUpdateError` only where the lock is the store's own lease lock (Redis,
      MongoDB) and could not be had within the store's ``lock_wait``; nothing is written then.

    Window memories take this path for an ``add`` after its optimistic write has conflicted once.
    """

    async def modify(self, memory_id: str, change: Change) -> int:
        """Apply ``change`` to ``memory_id`` under its lock; return the version the memory is at afterwards."""
        ...


@runtime_checkable
class SupportsListing(Protocol):
    """Enumerate the ids of stored memories (in no particular order unless the store says so).

    An asyncio store's ``memory_ids()`` is an async iterator: ``async for memory_id in store.memory_ids()``.
    """

    def memory_ids(self) -> AsyncIterator[str]:
        """Every memory id that currently holds a memory."""
        ...


@runtime_checkable
class SupportsSchema(Protocol):
    """A store whose tables or collections are created and upgraded by explicit commands.

    * ``create_schema`` creates the schema at the revision this version of the library needs where there
      is none (idempotent); it is for development databases and tests. It upgrades nothing: on a schema
      at another revision it raises :class:`~chatmemory.SchemaVersionError`; ``chatmemory migrate URL``
      (what production deploys run) upgrades one that is behind.
    * ``schema_revision`` is the revision the database is at, ``None`` before any schema exists.
    * ``required_schema_revision`` is the revision this store needs; a store whose database is behind raises
      :class:`~chatmemory.SchemaVersionError` on its first read or write, naming the command to run.
    """

    async def create_schema(self) -> None:
        """Create the schema at :attr:`required_schema_revision` where there is none (development and tests).

        Raises:
            SchemaVersionError: the schema is at another revision (``chatmemory migrate URL`` upgrades one behind).
        """
        ...

    async def schema_revision(self) -> str | None:
        """The schema revision the database is at, or ``None`` when it has none."""
        ...

    @property
    def required_schema_revision(self) -> str:
        """The schema revision this store reads and writes."""
        ...


@runtime_checkable
class SupportsReseal(Protocol):
    """A store built with ``encryption=`` that re-seals what it holds under its keyring's primary key.

    ``chatmemory rekey`` calls it for every memory after a key rotation (or to seal a plain store being
    migrated). Records are replaced in place, each only where it still holds what was read, so it is
    safe beside live writers, idempotent and resumable; see docs/encryption.md.
    """

    async def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` (window and history) under the keyring's primary key.

        A record is replaced only where it still holds what was read; one a writer moved meanwhile is
        counted in ``moved`` and left for a re-run.

        Raises:
            ValueError: the store was built without ``encryption=``.
            EncryptionKeyError: a record is sealed under a key the ring lacks (nothing is changed).
            CorruptedMemoryError: a record does not open (nothing is changed).
        """
        ...


@runtime_checkable
class SupportsRawRecords(Protocol):
    """Access to the stored message records as bytes, without decoding them.

    Operators use it to inspect a memory that raises :class:`~chatmemory.CorruptedMemoryError`, and to copy
    memories between stores without decoding them twice; the contract suite uses it to plant damaged data.
    A record is what :func:`chatmemory.serialization.native.dumps_message` makes of one message.
    """

    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` in window order, as stored; ``[]`` for an unknown id."""
        ...

    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read."""
        ...


@runtime_checkable
class SupportsHistory(Protocol):
    """A store that keeps every message ever added to a memory (built with ``history=True``).

    See :mod:`chatmemory.core.history` for what is recorded. A store built without history raises
    :class:`~chatmemory.HistoryNotEnabledError` from these methods. :class:`chatmemory.SupportsHistory` and
    its asyncio twin :class:`chatmemory.aio.SupportsHistory` hold the same rules; the asyncio one's calls are
    awaited.
    """

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        ...

    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id``.

        Args:
            memory_id: the memory.
            after: an exclusive bound: only entries with a greater sequence (a smaller one with
                ``reverse=True``); ``None`` starts at the oldest (newest) entry.
            limit: the most entries to return (1 to :data:`MAX_HISTORY_PAGE`).
            reverse: newest first.

        Returns:
            The page; an unknown memory, or one whose history expired, gives an empty page.
        """
        ...

    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        The window is never changed. Entries of messages still in the window may be kept (a store may
        share their storage with the window); every other entry written before the cutoff is removed.
        Returns how many entries were removed.
        """
        ...


@runtime_checkable
class SupportsHistoryRestore(Protocol):
    """A store with history that can put history entries back as they were (what ``chatmemory import`` uses).

    :class:`chatmemory.core.history.SupportsHistoryRestore` and its asyncio twin
    :class:`chatmemory.aio.store.SupportsHistoryRestore` hold the same rules; the asyncio one's calls are
    awaited.
    """

    async def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the ``entries`` whose sequence number the history of ``memory_id`` lacks, as they are.

        Each entry keeps its sequence number, ``written_at`` and message. An entry whose sequence the
        history holds already is left as it is (never changed, never doubled), so a call repeated after
        an interrupted import adds only what is missing. One call is atomic: all its missing entries are
        added, or none. Writes after it number their entries after the greatest sequence restored.

        Args:
            memory_id: the memory.
            entries: the entries, in strictly increasing sequence order.
            window: when given and ``memory_id`` has no window, the window is written in the same atomic
                step, recording nothing in the history (its messages are among the restored entries); a
                memory that has a window keeps it (write windows with ``save``). Without ``ttl`` the
                window lives as any memory of the store does.

        Returns:
            How many entries were added.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            TypeError, ValueError: an entry is not a :class:`HistoryEntry`, or sequences do not strictly increase.
        """
        ...


@runtime_checkable
class SupportsRecordedWrites(Protocol):
    """A store with history that records messages a write evicts before they reach the window.

    * ``save_recorded(id, messages, expected_version, also_recorded)`` is ``save`` that records
      ``also_recorded`` in the history, oldest first, right before the messages the write appends to the
      window, with consecutive sequence numbers and the write's ``written_at``; all in the write's atomic
      step (a conflict records nothing). It writes even when ``messages`` equals the stored window. A
      store built without history writes the window only.
    * ``modify`` (where the store has it) honours a change that returns a :class:`RecordedWindow` the same way.

    :class:`chatmemory.core.recorded_writes.SupportsRecordedWrites` and its asyncio twin
    :class:`chatmemory.aio.store.SupportsRecordedWrites` hold the same rules; the asyncio one's calls are
    awaited.
    """

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        ...

    async def save_recorded(
        self,
        memory_id: str,
        messages: Sequence[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` that records ``also_recorded`` before what the write appends; return the new version."""
        ...


@runtime_checkable
class SupportsExpiryPurge(Protocol):
    """A store that deletes expired memories when asked (where the database does not do it by itself)."""

    async def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired memories in batches of ``batch_size``; return how many were deleted."""
        ...


@runtime_checkable
class SupportsMemoryTimes(Protocol):
    """A store that tells one memory's last write time and expiry.

    * ``memory_times`` returns ``None`` for a memory that does not exist (or has expired).
    * Both times are timezone-aware UTC; the database's clock is used where it has one.
    """

    async def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """The last write time and the expiry of ``memory_id``; ``None`` when it does not exist."""
        ...


@runtime_checkable
class SupportsExpiryAt(Protocol):
    """A store that can set one memory's expiry to a given time (``import`` and ``copy`` keep expiries).

    * ``expire_at(memory_id, None)`` makes the memory never expire; a time in the past expires it at once.
    * The next write of the memory slides its expiry by the store's ``ttl`` as usual.
    * An unknown id is not an error and nothing is created.
    """

    async def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make ``memory_id`` expire at ``when`` (an aware datetime), or never with ``None``."""
        ...
