"""Many memories read, or created, at once: what operators' tools do when they walk a whole store.

A store that conforms to :class:`SupportsBatchReads` answers a batch of ids in one round trip or a few,
where one read per memory would be one round trip per memory (``chatmemory ls``, ``stats``, a re-run
``import`` or ``copy``); a store that does not is read one memory at a time. The records come back
undecoded (as :class:`~chatmemory.core.store.SupportsRawRecords` has them), so a memory that does not
decode is still shown, never skipped; the caller decodes them. A store that conforms to
:class:`SupportsBatchCreates` creates a batch of absent memories (and sets their expiries) in a round trip
or two, each create still conditional on the memory being absent, as ``save(id, messages, 0)`` is.

How the commands use them: docs/cli.md#how-import-and-copy-write-a-memory.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError
from chatmemory.core.messages import ChatMessage
from chatmemory.memory_times import MemoryTimes

__all__ = ["NewMemory", "StoredMemory", "SupportsBatchCreates", "SupportsBatchReads"]


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """One memory as stored, read in a batch.

    Attributes:
        memory_id: the id.
        records: its message records in window order, undecoded (as ``read_raw`` gives them).
        version: its version (``0`` when the store cannot tell it, e.g. for damage without a head).
        times: its last write time and expiry, ``None`` when the store keeps none for it.
        damage: why the store cannot read it as a memory at all (a damaged head or document), else
            ``None``; ``records`` then holds what is left of it, as ``read_raw`` shows it.
    """

    memory_id: str
    records: list[bytes]
    version: int
    times: MemoryTimes | None
    damage: str | None = None


@runtime_checkable
class SupportsBatchReads(Protocol):
    """A store that reads many memories, records and times, in one round trip (or a few).

    * ``read_batch(ids)`` returns one entry per id, in order: the :class:`StoredMemory`, or ``None`` for a
      memory that does not exist (or has expired). It reads what ``read_raw``, ``load`` and
      ``memory_times`` would, without the snapshot cache and without sliding an expiry.
    * Memories are read one by one inside the batch: each entry is one memory's state, the batch is not
      one snapshot of the store.
    * Driver failures raise :class:`~chatmemory.StoreError`; damage is reported in ``damage``, not raised.
    """

    def read_batch(self, memory_ids: Sequence[str]) -> list[StoredMemory | None]:
        """``memory_ids`` as stored, ``None`` for those that do not exist."""
        ...


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory to create in a batch.

    Attributes:
        memory_id: the id.
        messages: its messages, oldest first.
        sets_expiry: whether to set its expiry once created (else the store's ``ttl`` applies, as to any write).
        expires_at: the expiry to set (``None``: never), when ``sets_expiry``.
    """

    memory_id: str
    messages: Sequence[ChatMessage]
    sets_expiry: bool = False
    expires_at: datetime.datetime | None = None


class _SavesAndExpires(Protocol):
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int, /) -> int: ...

    def expire_at(self, memory_id: str, when: datetime.datetime | None, /) -> None: ...


class _SavesAndExpiresAsync(Protocol):
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int, /) -> int: ...

    async def expire_at(self, memory_id: str, when: datetime.datetime | None, /) -> None: ...


def _skipped(skips_damaged: bool) -> tuple[type[Exception], ...]:
    return (ConcurrentUpdateError, CorruptedMemoryError) if skips_damaged else (ConcurrentUpdateError,)


def create_one(store: _SavesAndExpires, memory: NewMemory, *, skips_damaged: bool = True) -> int | None:
    """Create ``memory`` through ``store``'s own writes: ``save(id, messages, 0)``, then ``expire_at``.

    ``None`` (nothing written) when the memory exists, or is damaged if ``skips_damaged``; a store whose
    ``save`` reports damage otherwise passes ``False`` and the :class:`CorruptedMemoryError` propagates.
    """
    try:
        version = store.save(memory.memory_id, memory.messages, 0)
    except _skipped(skips_damaged):
        return None
    if memory.sets_expiry:
        store.expire_at(memory.memory_id, memory.expires_at)
    return version


async def create_one_async(
    store: _SavesAndExpiresAsync, memory: NewMemory, *, skips_damaged: bool = True
) -> int | None:
    """:func:`create_one` with an asyncio store."""
    try:
        version = await store.save(memory.memory_id, memory.messages, 0)
    except _skipped(skips_damaged):
        return None
    if memory.sets_expiry:
        await store.expire_at(memory.memory_id, memory.expires_at)
    return version


@runtime_checkable
class SupportsBatchCreates(Protocol):
    """A store that creates many memories, and sets their expiries, in a round trip or two.

    * ``create_batch(memories)`` creates each memory that does not exist, as ``save(id, messages, 0)``
      would, then sets the expiry of each one it created that asks for it, as ``expire_at`` would. It
      returns one entry per memory, in order: the new version, or ``None`` for a memory that exists (or
      is damaged): nothing was written to that one.
    * The batch is not one transaction: a failure may leave some memories created (and some of those
      without their expiry yet); a caller that runs it again finds them there.
    * Driver failures raise :class:`~chatmemory.StoreError`.
    """

    def create_batch(self, memories: Sequence[NewMemory]) -> list[int | None]:
        """Create the ``memories`` that do not exist; their new versions, ``None`` for those that do."""
        ...
