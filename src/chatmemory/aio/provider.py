"""One asyncio memory object per id, built on demand from a factory."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from chatmemory.aio.memory import ChatMemory
from chatmemory.core.provider import MemoryProvider

__all__ = ["ChatMemoryProvider"]

if TYPE_CHECKING:
    # The type parameter's default (PEP 696) is only read by type checkers, as for the sync provider.
    from typing_extensions import TypeVar as DefaultTypeVar

    Memory = DefaultTypeVar("Memory", bound=ChatMemory, default=ChatMemory, covariant=True)
else:
    Memory = TypeVar("Memory", bound=ChatMemory, covariant=True)


class ChatMemoryProvider(MemoryProvider[Memory]):
    """Hands out the asyncio memory of a user or session: ``provider(memory_id)`` is the memory the factory built.

    The twin of :class:`chatmemory.ChatMemoryProvider`. Getting a memory is a plain call (building one does
    no I/O); its methods are awaited::

        provider = ChatMemoryProvider(
            lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=20, store=store)
        )
        await provider("user-42").add(UserMessage("hi"))

    Typed by what the factory returns (``ChatMemoryProvider[MessageWindowChatMemory]`` above; a bare
    ``ChatMemoryProvider`` is ``ChatMemoryProvider[ChatMemory]``). The factory must return the memory itself,
    not a coroutine: an ``async def`` factory is refused at
    construction. Concurrent first callers of an id get one object; no lock is ever held across an
    ``await``, so no task waits on another.

    Args:
        factory: builds the memory of an id.
        max_memories: how many memory objects to keep, least recently used first out (``None``: all).
    """
