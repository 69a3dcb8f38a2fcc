"""One memory object per id, built on demand from a factory."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from chatmemory.core.memory import ChatMemory
from chatmemory.core.memory_id import MemoryId, validate_memory_id

__all__ = ["ChatMemoryProvider"]


class ChatMemoryProvider:
    """Hands out the memory of a user or session: ``provider(memory_id) -> ChatMemory``.

    The factory is called once per id, under a lock, so concurrent callers share one memory object::

        provider = ChatMemoryProvider(
            lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=20, store=store)
        )
        provider("user-42").add(UserMessage("hi"))

    Memory objects are light (all state is in the store); ``forget`` drops one from the cache without
    touching the store.

    Args:
        factory: builds the memory of an id.
        max_memories: how many memory objects to keep, least recently used first out (``None``: all). A
            service with a memory per session should bound it; a memory dropped from the cache is simply
            built again, since its messages live in the store.
    """

    def __init__(self, factory: Callable[[str], ChatMemory], *, max_memories: int | None = None) -> None:
        if max_memories is not None and max_memories < 1:
            raise ValueError(f"max_memories must be >= 1 or None, got {max_memories!r}")
        self._factory = factory
        self._max_memories = max_memories
        self._memories: OrderedDict[str, ChatMemory] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, memory_id: MemoryId) -> ChatMemory:
        key = validate_memory_id(memory_id)
        with self._lock:
            memory = self._memories.get(key)
            if memory is None:
                memory = self._factory(key)
                self._memories[key] = memory
                if self._max_memories is not None and len(self._memories) > self._max_memories:
                    self._memories.popitem(last=False)
            else:
                self._memories.move_to_end(key)
            return memory

    def get(self, memory_id: MemoryId) -> ChatMemory:
        """The memory for ``memory_id`` (the same as calling the provider)."""
        return self(memory_id)

    def forget(self, memory_id: MemoryId) -> None:
        """Drop the cached memory object for ``memory_id``; its stored messages stay."""
        with self._lock:
            self._memories.pop(validate_memory_id(memory_id), None)
