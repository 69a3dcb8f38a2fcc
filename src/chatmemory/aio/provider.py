"""One asyncio memory object per id, built on demand from a factory."""

from __future__ import annotations

from chatmemory.aio.memory import ChatMemory
from chatmemory.core.provider import MemoryProvider

__all__ = ["ChatMemoryProvider"]


class ChatMemoryProvider(MemoryProvider[ChatMemory]):
    """Hands out the asyncio memory of a user or session: ``provider(memory_id) -> ChatMemory``.

    The twin of :class:`chatmemory.ChatMemoryProvider`. Getting a memory is a plain call (building one does
    no I/O); its methods are awaited::

        provider = ChatMemoryProvider(
            lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=20, store=store)
        )
        await provider("user-42").add(UserMessage("hi"))

    The factory must return the memory itself, not a coroutine: an ``async def`` factory is refused at
    construction. Concurrent first callers of an id get one object; no lock is ever held across an
    ``await``, so no task waits on another.

    Args:
        factory: builds the memory of an id.
        max_memories: how many memory objects to keep, least recently used first out (``None``: all).
    """
