"""What the SQL store remembers of each memory to diff the next write without reading it again.

A window memory loads a memory and then saves its next state at the version it loaded. The store keeps
the last state it read or wrote per memory id (version, incarnation, sequence numbers, messages), so the
save deletes and inserts only the difference. The conditional write matches the version *and* the
incarnation token, so a cached state that no longer describes the rows can never be acted on: the write
then matches no row and fails as a concurrent update.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from chatmemory.core.messages import ChatMessage

__all__ = ["CachedSnapshot", "SnapshotCache", "fresh_version", "new_incarnation"]


@dataclass(frozen=True, slots=True)
class CachedSnapshot:
    """The stored state of one memory at one version: message ``i`` is the row with sequence ``seqs[i]``."""

    version: int
    incarnation: int
    next_seq: int
    seqs: tuple[int, ...]
    messages: tuple[ChatMessage, ...]


class SnapshotCache:
    """A thread-safe, bounded (least recently used) map of memory id to :class:`CachedSnapshot`."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("snapshot_cache_size must be >= 0")
        self._size = size
        self._entries: OrderedDict[str, CachedSnapshot] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, memory_id: str) -> CachedSnapshot | None:
        """The remembered state of ``memory_id``, if any."""
        with self._lock:
            return self._entries.get(memory_id)

    def put(self, memory_id: str, snapshot: CachedSnapshot) -> None:
        """Remember ``snapshot`` unless a newer state of the same incarnation is already remembered."""
        if self._size == 0:
            return
        with self._lock:
            current = self._entries.get(memory_id)
            # Threads sharing the store race here after their writes; keep the newest state.
            newer = current is not None and current.incarnation == snapshot.incarnation
            if newer and current is not None and current.version > snapshot.version:
                return
            self._entries[memory_id] = snapshot
            self._entries.move_to_end(memory_id)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, *memory_ids: str) -> None:
        """Drop what is remembered of ``memory_ids``."""
        with self._lock:
            for memory_id in memory_ids:
                self._entries.pop(memory_id, None)

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._entries.clear()


def fresh_version(previous: int = 0) -> int:
    """The first version of a new incarnation of a memory: above ``previous`` and the wall clock in µs.

    A memory created again after a delete or expiry must never repeat a version it had, yet its old head
    row is gone; starting each incarnation at the clock keeps versions increasing (a memory would need a
    million writes a second, sustained, to catch up with the clock).
    """
    return max(previous + 1, time.time_ns() // 1000)


def new_incarnation() -> int:
    """A random token naming one incarnation of a memory (checked by every diffed write)."""
    return random.getrandbits(62)
