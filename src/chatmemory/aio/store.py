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
from chatmemory.core.store import Change, Snapshot, SupportsContentionHint, SupportsTTL

__all__ = [
    "Change",
    "ChatMemoryStore",
    "Snapshot",
    "SupportsHistory",
    "SupportsHistoryRestore",
    "SupportsListing",
    "SupportsContentionHint",
    "SupportsLockedUpdate",
    "SupportsRawRecords",
    "SupportsRecordedWrites",
    "SupportsSchema",
    "SupportsTTL",
    "SupportsVersioning",
]


@runtime_checkable
class ChatMemoryStore(Protocol):
    """Where async window memories keep their messages (the contract of :class:`chatmemory.ChatMemoryStore`).

    ``get_messages`` returns exactly what the last write stored (``[]`` for an unknown id);
    ``update_messages`` replaces the whole list atomically; ``delete_messages`` is idempotent. A task
    cancelled during a write leaves the old list or the new one, never a mix.
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
    """Optimistic concurrency (the contract of :class:`chatmemory.SupportsVersioning`), awaited."""

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
    """A read-modify-write under the store's lock (the contract of :class:`chatmemory.SupportsLockedUpdate`), awaited.

    ``change`` stays a plain function (pure CPU, called synchronously while the lock is held, possibly more
    than once); returning ``None`` leaves the memory as it is.
    """

    async def modify(self, memory_id: str, change: Change) -> int:
        """Apply ``change`` to ``memory_id`` under its lock; return the version the memory is at afterwards."""
        ...


@runtime_checkable
class SupportsListing(Protocol):
    """Enumerate the ids of stored memories, as an async iterator: ``async for memory_id in store.memory_ids()``."""

    def memory_ids(self) -> AsyncIterator[str]:
        """Every memory id that currently holds a memory."""
        ...


@runtime_checkable
class SupportsSchema(Protocol):
    """Tables or collections created and upgraded by explicit commands (see :class:`chatmemory.SupportsSchema`)."""

    async def create_schema(self) -> None:
        """Create or upgrade the schema to :attr:`required_schema_revision` (development and tests)."""
        ...

    async def schema_revision(self) -> str | None:
        """The schema revision the database is at, or ``None`` when it has none."""
        ...

    @property
    def required_schema_revision(self) -> str:
        """The schema revision this store reads and writes."""
        ...


@runtime_checkable
class SupportsRawRecords(Protocol):
    """The stored message records as bytes, undecoded (see :class:`chatmemory.SupportsRawRecords`)."""

    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` in window order, as stored; ``[]`` for an unknown id."""
        ...

    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read."""
        ...


@runtime_checkable
class SupportsHistory(Protocol):
    """The asyncio twin of :class:`chatmemory.SupportsHistory`: the same rules, awaited calls."""

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        ...

    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`)."""
        ...

    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than``; return how many were removed."""
        ...


@runtime_checkable
class SupportsHistoryRestore(Protocol):
    """The asyncio twin of :class:`chatmemory.core.history.SupportsHistoryRestore`: the same rules, awaited."""

    async def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the ``entries`` the history of ``memory_id`` lacks (by sequence), as they are; return how many."""
        ...


@runtime_checkable
class SupportsRecordedWrites(Protocol):
    """The asyncio twin of :class:`chatmemory.core.recorded_writes.SupportsRecordedWrites`, awaited."""

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
