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
    """Hands out the memory of a user or session: ``provider(memory_id)`` is the memory the factory built.

    The factory is called once per id, under a lock, so concurrent callers share one memory object::

        provider = ChatMemoryProvider(
            lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=20, store=store)
        )
        await provider("user-42").add(UserMessage("hi"))

    :class:`chatmemory.ChatMemoryProvider` and its asyncio twin :class:`chatmemory.aio.ChatMemoryProvider`
    (which hands out asyncio memories, whose methods are awaited) behave alike. Getting a memory is a plain
    call in both: building one does no I/O, so the factory must return the memory itself (an ``async def``
    factory is refused at construction), and the lock is never held across an ``await``: no task waits on
    another.

    Memory objects are light (all state is in the store); ``forget`` drops one from the cache without
    touching the store. The provider is typed by what the factory returns: above,
    ``ChatMemoryProvider[MessageWindowChatMemory]``, so ``provider(id).history()`` type-checks (a bare
    ``ChatMemoryProvider`` is ``ChatMemoryProvider[ChatMemory]``).

    Args:
        factory: builds the memory of an id.
        max_memories: how many memory objects to keep, least recently used first out (``None``: all). A
            service with a memory per session should bound it; a memory dropped from the cache is simply
            built again, since its messages live in the store.
    """
