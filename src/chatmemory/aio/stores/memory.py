"""The asyncio twin of the in-memory store: the sync store's dict, behind coroutine methods.

Every operation is a few dictionary steps under a lock held for microseconds, so the coroutines call the
sync :class:`chatmemory.stores.memory.InMemoryChatMemoryStore` directly: the same code, the same rules,
no thread hop and nothing that can block the event loop.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

from chatmemory.core.errors import Operation
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryEntry, HistoryPage
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import RecordCodec, Resealed
from chatmemory.stores.base.facade import AsyncStoreLifecycle
from chatmemory.stores.base.options import TTL
from chatmemory.stores.memory import InMemoryChatMemoryStore as SyncInMemoryChatMemoryStore

__all__ = ["InMemoryChatMemoryStore"]


class InMemoryChatMemoryStore(AsyncStoreLifecycle):
    """A thread-safe store in a dict; supports versioning, listing, TTL, raw records and per-memory times.

    It keeps its own tuple of the (immutable) messages, never the caller's list. Versions come from one
    counter per store, so a memory deleted and written again never repeats a version. ``aclose()`` forgets
    every memory; a closed store raises :class:`~chatmemory.StoreError`, like the others. Expiries are kept
    on the monotonic ``clock`` (a wall clock stepping does not expire memories); ``memory_times`` and
    ``expire_at`` translate them to and from UTC datetimes at the moment of the call.
    With ``history=True`` it keeps every message written beside the window (see
    :mod:`chatmemory.core.history`); sequence numbers come from one counter per store.
    :class:`chatmemory.stores.memory.InMemoryChatMemoryStore` and its asyncio twin
    :class:`chatmemory.aio.InMemoryChatMemoryStore` share that code: the asyncio store's coroutines call a sync
    store directly (each call is a few dictionary steps under a lock held for microseconds, so nothing blocks
    the event loop).

    Args:
        ttl: seconds (or a ``timedelta``) a memory lives after its last write (``None``: forever).
        clock: the time source for ``ttl`` (monotonic seconds).
        history: keep the history of every memory.
        history_ttl: how long a history lives after the memory's last write (``None``: as the window).
        encryption: a :class:`chatmemory.encryption.Keyring`: the window is then kept as sealed records,
            opened on every read, as a persistent store keeps it (the history stays as message objects).
    """

    def __init__(
        self,
        *,
        ttl: TTL = None,
        clock: Callable[[], float] = time.monotonic,
        history: bool = False,
        history_ttl: TTL = None,
        encryption: RecordCodec | None = None,
    ) -> None:
        self._sync = SyncInMemoryChatMemoryStore(
            ttl=ttl, clock=clock, history=history, history_ttl=history_ttl, encryption=encryption
        )
        self._owns_client = True

    @classmethod
    def from_url(cls, url: str, **options: object) -> InMemoryChatMemoryStore:
        """Build from ``memory://`` (options are passed to the constructor)."""
        if not url.lower().startswith("memory:"):
            raise ValueError(f"InMemoryChatMemoryStore takes memory:// URLs, not {url!r}")
        return cls(**options)  # type: ignore[arg-type]

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        return self._sync.ttl

    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version."""
        self._check_open(Operation.READ, memory_id)
        return self._sync.load(memory_id)

    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``."""
        self._check_open(Operation.WRITE, memory_id)
        return self._sync.save(memory_id, messages, expected_version)

    async def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        self._check_open(Operation.WRITE, memory_id)
        return self._sync.save_recorded(memory_id, messages, expected_version, also_recorded)

    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        self._check_open(Operation.READ, memory_id)
        return self._sync.get_messages(memory_id)

    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        self._check_open(Operation.WRITE, memory_id)
        self._sync.update_messages(memory_id, messages)

    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id``; idempotent."""
        self._check_open(Operation.DELETE, memory_id)
        self._sync.delete_messages(memory_id)

    @property
    def keeps_history(self) -> bool:
        """Whether this store keeps the history of its memories (``history=True``)."""
        return self._sync.keeps_history

    @property
    def encryption(self) -> RecordCodec | None:
        """The keyring this store seals records with (``None``: records are plain)."""
        return self._sync._codec if self._sync._codec.sealed else None

    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        self._check_open(Operation.READ, memory_id)
        return self._sync.history(memory_id, after=after, limit=limit, reverse=reverse)

    async def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the entries the history lacks, as they are (see :class:`chatmemory.aio.store.SupportsHistoryRestore`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        self._check_open(Operation.WRITE, memory_id)
        return self._sync.restore_history(memory_id, entries, window=window)

    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than``; the windows stay as they are.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        self._check_open(Operation.WRITE, memory_id)
        return self._sync.trim_history(older_than=older_than, memory_id=memory_id)

    async def memory_ids(self) -> AsyncIterator[str]:
        """The ids of the live memories, in insertion order."""
        self._check_open(Operation.LIST)
        for memory_id in self._sync.memory_ids():
            yield memory_id

    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` (``dumps_message`` payloads), undecoded; ``[]`` if unknown."""
        self._check_open(Operation.READ, memory_id)
        return self._sync.read_raw(memory_id)

    async def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` under the primary key (see :class:`~chatmemory.SupportsReseal`)."""
        self._check_open(Operation.WRITE, memory_id)
        return self._sync.reseal(memory_id)

    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        This imports data from another store without decoding it twice, and is how the contract suite
        plants corrupted data.
        """
        self._check_open(Operation.WRITE, memory_id)
        self._sync.write_raw(memory_id, records)

    async def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires (UTC); ``None`` if absent or expired."""
        self._check_open(Operation.READ, memory_id)
        return self._sync.memory_times(memory_id)

    async def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent.

        A time in the past expires the memory at once, as its ``ttl`` running out would; the next write
        slides the expiry by the ``ttl`` again.

        Raises:
            ValueError: ``when`` is not an aware datetime.
        """
        self._check_open(Operation.WRITE, memory_id)
        self._sync.expire_at(memory_id, when)

    async def _release(self) -> None:
        self._sync.close()

    def __repr__(self) -> str:
        return f"chatmemory.aio.{self._sync!r}"
