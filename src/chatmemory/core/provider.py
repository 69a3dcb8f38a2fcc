"""One memory object per id, built on demand from a factory.

A provider is generic in the memory class its factory builds, so ``provider(id)`` is typed as that class
(a ``MessageWindowChatMemory`` has ``history()`` and ``pop()``); written without a parameter,
``ChatMemoryProvider`` means ``ChatMemoryProvider[ChatMemory]``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from chatmemory.core.lru import LRU
from chatmemory.core.memory import ChatMemory
from chatmemory.core.store import MemoryId, validate_memory_id

__all__ = ["ChatMemoryProvider", "MemoryProvider"]

M = TypeVar("M", covariant=True)

if TYPE_CHECKING:
    # A default for the type parameter (PEP 696) is only read by type checkers: typing_extensions is not a
    # dependency at run time.
    from typing_extensions import TypeVar as DefaultTypeVar

    Memory = DefaultTypeVar("Memory", bound=ChatMemory, default=ChatMemory, covariant=True)
else:
    Memory = TypeVar("Memory", bound=ChatMemory, covariant=True)


class MemoryProvider(Generic[M]):
    """A bounded cache of memory objects by id, built by a plain (not async) factory.

    The sync :class:`ChatMemoryProvider` and the async :class:`chatmemory.aio.ChatMemoryProvider` are this
    class with their memory type. Building a memory does no I/O (its messages are in the store), so the
    factory runs under the cache's lock: concurrent first callers of one id get one object, and since the
    lock is never held across an ``await``, an event loop is never blocked by another caller.
    """

    def __init__(self, factory: Callable[[str], M], *, max_memories: int | None = None) -> None:
        if inspect.iscoroutinefunction(factory):
            raise TypeError(
                "the provider's factory must build the memory without awaiting (a plain function or lambda): "
                "a memory object does no I/O when built; open stores once at startup and pass them in"
            )
        if max_memories is not None and (isinstance(max_memories, bool) or not isinstance(max_memories, int)):
            raise TypeError(f"max_memories must be an int or None, not {type(max_memories).__name__}")
        if max_memories is not None and max_memories < 1:
            raise ValueError(f"max_memories must be >= 1 or None, got {max_memories!r}")
        self._factory = factory
        self._memories: LRU[str, M] = LRU(max_memories)

    @property
    def max_memories(self) -> int | None:
        """How many memory objects are kept (``None``: all)."""
        return self._memories.size

    def _build(self, key: str) -> M:
        memory = self._factory(key)
        if inspect.isawaitable(memory):
            if inspect.iscoroutine(memory):
                memory.close()
            raise TypeError(
                "the provider's factory returned an awaitable; it must return the memory itself (a memory "
                "object does no I/O when built)"
            )
        return memory

    def __call__(self, memory_id: MemoryId) -> M:
        """The memory of ``memory_id``, built by the factory on first use."""
        key = validate_memory_id(memory_id)
        return self._memories.get_or_create(key, lambda: self._build(key))

    def get(self, memory_id: MemoryId) -> M:
        """The memory for ``memory_id`` (the same as calling the provider)."""
        return self(memory_id)

    def forget(self, memory_id: MemoryId) -> None:
        """Drop the cached memory object for ``memory_id``; its stored messages stay."""
        self._memories.pop(validate_memory_id(memory_id))


class ChatMemoryProvider(MemoryProvider[Memory]):
    """Hands out the memory of a user or session: ``provider(memory_id)`` is the memory the factory built.

    The factory is called once per id, under a lock, so concurrent callers share one memory object::

        provider = ChatMemoryProvider(
            lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=20, store=store)
        )
        provider("user-42").add(UserMessage("hi"))

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
