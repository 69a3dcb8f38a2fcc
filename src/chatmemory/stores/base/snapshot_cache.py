"""The last state a store read or wrote of each memory, so that a turn sends only its diff.

A window memory loads a memory and saves its next state at the version it loaded. A store that remembers
what it last read or wrote can then write only the difference, and answer a read whose version did not
move without decoding anything. Every diffed write is conditional on the version *and* the incarnation
(a token that changes whenever the memory is rewritten whole or created again), so a remembered state
that no longer describes the stored data can never be acted on: the write matches nothing and the
store falls back to a full read or write.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from chatmemory.core.lru import LRU
from chatmemory.stores.base.options import validate_snapshot_cache_size

__all__ = ["CachedState", "SnapshotCache"]


class CachedState(Protocol):
    """What a backend remembers of one memory: at least its version and incarnation."""

    @property
    def version(self) -> int:
        """The version the state was read or written at."""
        ...

    @property
    def incarnation(self) -> Hashable:
        """The token of the memory's incarnation the state belongs to."""
        ...


S = TypeVar("S", bound=CachedState)


class SnapshotCache(Generic[S]):
    """A thread-safe, bounded (least recently used) map of memory id to a backend's cached state.

    Args:
        size: how many memories to remember (``0``: none; every write then sends the whole list).
    """

    get: Callable[[str], S | None]
    """The remembered state of a memory id, if any (the LRU's own method: read on every operation)."""

    def __init__(self, size: int) -> None:
        self._entries: LRU[str, S] = LRU(validate_snapshot_cache_size(size))
        self.get = self._entries.get

    def put(self, memory_id: str, state: S) -> None:
        """Remember ``state`` unless a newer state of the same incarnation is remembered already.

        Threads sharing a store race here after their writes; the newest state wins.
        """
        self._entries.put(
            memory_id,
            state,
            unless=lambda current: current.incarnation == state.incarnation and current.version > state.version,
        )

    def forget(self, *memory_ids: str) -> None:
        """Drop what is remembered of ``memory_ids``."""
        for memory_id in memory_ids:
            self._entries.pop(memory_id)

    def clear(self) -> None:
        """Drop everything."""
        self._entries.clear()
