"""The store contract and its optional capabilities.

A store persists the current window of each memory: a list of messages per memory id. Memories never
keep a list of their own; they read the store on every operation, so every process sharing a store sees
one memory. Optional behaviour is a separate protocol checked with ``isinstance``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from chatmemory.core.messages import ChatMessage

__all__ = [
    "ChatMemoryStore",
    "HistoryEntry",
    "Snapshot",
    "SupportsHistory",
    "SupportsListing",
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
      never a mix; a failure half-way leaves the old list. ``[]`` is a valid list.
    * ``delete_messages`` removes the memory; deleting an unknown id is not an error.
    * Ids are opaque literals (no glob, separator, SQL or operator meaning) and fully isolated.
    * Stored data that does not decode raises :class:`~chatmemory.CorruptedMemoryError` naming the id,
      data from a newer format raises :class:`~chatmemory.UnsupportedFormatVersionError`; neither is
      ever read as ``[]``. ``delete_messages`` and ``update_messages`` still work on such a memory.
    * Driver failures raise :class:`~chatmemory.StoreError` with the driver's exception as ``__cause__``.

    Memory ids arrive validated (see :func:`chatmemory.validate_memory_id`).
    """

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first; ``[]`` for an unknown id."""
        ...

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id`` with ``messages``, atomically."""
        ...

    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The messages of one memory and the version they were read at (``0``: the memory does not exist)."""

    messages: list[ChatMessage]
    version: int


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

    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version."""
        ...

    def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        ...


@runtime_checkable
class SupportsTTL(Protocol):
    """Memories expire ``ttl`` seconds after their last write; every write slides the expiry.

    An expired memory reads as empty. ``ttl`` is ``None`` when memories never expire.
    """

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        ...


@runtime_checkable
class SupportsListing(Protocol):
    """Enumerate the ids of stored memories (in no particular order unless the store says so)."""

    def memory_ids(self) -> Iterator[str]:
        """Every memory id that currently holds a memory."""
        ...


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One message as it was first written to a memory, with its position in the memory's history."""

    sequence: int
    message: ChatMessage


@runtime_checkable
class SupportsHistory(Protocol):
    """Keep every message ever written to a memory, not only the current window.

    Memory is what the model sees; history is everything that was said. A store that keeps history does
    so only when asked to at construction.
    """

    def history(self, memory_id: str) -> list[HistoryEntry]:
        """Every message written to ``memory_id``, oldest first, including evicted ones."""
        ...
