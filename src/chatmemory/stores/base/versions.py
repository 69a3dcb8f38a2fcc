"""Versions: the rule every store's versions follow, and the snapshot cache a store keeps by version.

Versions are microsecond timestamps that never repeat for a memory id, even across a delete or an expiry
(every write starts at the clock, or one above the previous version); a backend with a clock reads it
in the write itself. The :class:`SnapshotCache` keeps the last state a store read or wrote per memory,
so that a turn sends only its diff; every diffed write is conditional on the version and the
incarnation (a token that changes when the memory is rewritten whole or created again), so a remembered
state that no longer describes the stored data is never acted on.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable
from typing import Protocol, TypeVar

from chatmemory.core.lru import LRU
from chatmemory.stores.base.options import validate_snapshot_cache_size

__all__ = ["CachedState", "SnapshotCache", "new_incarnation", "next_version", "version_clock"]


def version_clock() -> int:
    """The wall clock in microseconds."""
    return time.time_ns() // 1000


def next_version(previous: int = 0, *, clock: int | None = None) -> int:
    """The version to write after ``previous``: above it, and not below the clock (``clock`` µs if given)."""
    return max(previous + 1, version_clock() if clock is None else clock)


def new_incarnation() -> int:
    """A random 62-bit token naming one incarnation of a memory (checked by every diffed write)."""
    return random.getrandbits(62)


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


class SnapshotCache(LRU[str, S]):
    """A thread-safe, bounded (least recently used) map of memory id to a backend's cached state.

    Args:
        size: how many memories to remember (``0``: none; every write then sends the whole list).
    """

    def __init__(self, size: int) -> None:
        super().__init__(validate_snapshot_cache_size(size))

    def put(self, memory_id: str, state: S, *, unless: Callable[[S], bool] | None = None) -> None:
        """Remember ``state`` unless a newer state of the same incarnation is remembered already.

        Threads sharing a store race here after their writes; the newest state wins (``unless``, a
        further condition, as :meth:`LRU.put` takes it).
        """
        if self._size == 0:
            return
        entries = self._entries
        with self._lock:
            current = entries.get(memory_id)
            if current is not None and (
                (current.incarnation == state.incarnation and current.version > state.version)
                or (unless is not None and unless(current))
            ):
                return
            entries[memory_id] = state
            entries.move_to_end(memory_id)
            if self._size is not None and len(entries) > self._size:
                entries.popitem(last=False)

    def forget(self, *memory_ids: str) -> None:
        """Drop what is remembered of ``memory_ids``."""
        for memory_id in memory_ids:
            self.pop(memory_id)
