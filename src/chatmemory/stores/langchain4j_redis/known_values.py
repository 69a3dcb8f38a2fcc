"""The messages of the values a LangChain4j-layout store last read or wrote, by memory, with their SHA-1.

The layout keeps a whole window in one JSON string, so decoding it is the dearest part of a read. A store
remembers, per memory, the hash of the last value it read or wrote and the messages that value holds: a
read whose value has that hash hands the messages back without decoding it (the value is the same bytes,
and the codec gives back exactly what it was given), and a save with history finds the window it
replaces without reading it again. A value of another hash is decoded and remembered in its place, so a
value written by anyone else is never taken for the one remembered. Pure: no driver, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatmemory.core.lru import LRU
from chatmemory.core.messages import ChatMessage

__all__ = ["KnownValues"]


class KnownValues:
    """The messages of the value each memory was last seen with, by the value's SHA-1 (least recent out first).

    Args:
        size: how many memories to remember (at least 1: the size of the store's version book).
    """

    def __init__(self, size: int) -> None:
        self._values: LRU[str, tuple[bytes, tuple[ChatMessage, ...]]] = LRU(size)  # thread-safe itself

    def put(self, memory_id: str, value_digest: bytes, messages: Sequence[ChatMessage]) -> None:
        """Remember that the value with ``value_digest`` holds ``messages``."""
        self._values.put(memory_id, (value_digest, tuple(messages)))

    def get(self, memory_id: str, value_digest: bytes) -> tuple[ChatMessage, ...] | None:
        """The messages of the value with ``value_digest``, if it is the one remembered."""
        known = self._values.get(memory_id)
        return known[1] if known is not None and known[0] == value_digest else None

    def forget(self, memory_id: str) -> None:
        """Forget ``memory_id``."""
        self._values.pop(memory_id)

    def clear(self) -> None:
        """Forget every memory."""
        self._values.clear()
