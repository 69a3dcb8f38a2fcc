"""What a Redis store remembers of a memory between operations: the state its snapshot cache keeps."""

from __future__ import annotations

from typing import NamedTuple

from chatmemory.core.messages import ChatMessage
from chatmemory.stores.redis.keys import MemoryKeys

__all__ = ["CachedMemory"]


class CachedMemory(NamedTuple):
    """What a store last read or wrote of one memory (the state its snapshot cache keeps).

    A named tuple (immutable and typed like a frozen dataclass, built several times faster: a turn makes
    one or two).

    Attributes:
        version: the version it was read or written at.
        incarnation: the memory's incarnation token then.
        messages: the list, decoded.
        keys: the memory's keys (computed once).
        version_arg: ``version`` as the scripts compare it, encoded once.
    """

    version: int
    incarnation: bytes
    messages: tuple[ChatMessage, ...]
    keys: MemoryKeys
    version_arg: bytes
