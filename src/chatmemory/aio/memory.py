"""The asyncio window memories: the same options and decisions as the sync ones, with awaited store calls.

Each operation runs the steps of :mod:`chatmemory.core.memory_steps` — the very code the sync memories
run — awaiting each store call. A task cancelled at any ``await`` of an operation leaves the memory at
its old or its new window (the one write is atomic in every store) and propagates the cancellation.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from chatmemory.aio.store import ChatMemoryStore, SupportsLockedUpdate, SupportsVersioning
from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.memory_steps import (
    DeleteMessages,
    GetMessages,
    Load,
    Modify,
    Save,
    Step,
    Steps,
    UpdateMessages,
    add_steps,
    clear_steps,
    messages_steps,
    set_steps,
)
from chatmemory.core.messages import ChatMessage
from chatmemory.core.window_memory import MessageWindowBase, TokenWindowBase, WindowMemoryBase

__all__ = ["ChatMemory", "MessageWindowChatMemory", "TokenWindowChatMemory", "run_steps_async"]

T = TypeVar("T")


@runtime_checkable
class ChatMemory(Protocol):
    """A bounded memory of one conversation, with coroutine methods."""

    @property
    def id(self) -> str:
        """The memory id."""
        ...

    async def add(self, *messages: ChatMessage) -> None:
        """Append messages, then evict down to the limit."""
        ...

    async def messages(self) -> list[ChatMessage]:
        """The current window, oldest first."""
        ...

    async def set(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the whole window."""
        ...

    async def clear(self) -> None:
        """Forget everything."""
        ...


async def _execute(store: ChatMemoryStore, step: Step) -> Any:
    if isinstance(step, Load):
        assert isinstance(store, SupportsVersioning)
        return await store.load(step.memory_id)
    if isinstance(step, Save):
        assert isinstance(store, SupportsVersioning)
        return await store.save(step.memory_id, step.messages, step.expected_version)
    if isinstance(step, Modify):
        assert isinstance(store, SupportsLockedUpdate)
        return await store.modify(step.memory_id, step.change)
    if isinstance(step, GetMessages):
        return await store.get_messages(step.memory_id)
    if isinstance(step, UpdateMessages):
        return await store.update_messages(step.memory_id, step.messages)
    if isinstance(step, DeleteMessages):
        return await store.delete_messages(step.memory_id)
    await asyncio.sleep(step.seconds)
    return None


async def run_steps_async(steps: Steps[T], store: ChatMemoryStore) -> T:
    """Run a memory operation against an asyncio store; return its result.

    The async twin of :func:`chatmemory.core.memory_steps.run_steps`: a conflict goes back into the steps,
    anything else (a cancellation too) ends them and propagates.
    """
    reply: Any = None
    conflict: ConcurrentUpdateError | None = None
    try:
        while True:
            try:
                step = steps.send(reply) if conflict is None else steps.throw(conflict)
            except StopIteration as stop:
                result: T = stop.value
                return result
            conflict = reply = None
            try:
                reply = await _execute(store, step)
            except ConcurrentUpdateError as exc:
                conflict = exc
    finally:
        steps.close()


class _AsyncWindowMemory(WindowMemoryBase[ChatMemoryStore]):
    """The asyncio I/O of a window memory: each operation's steps run against an asyncio store.

    Tasks sharing one memory object (as a provider hands it out) take turns for ``add``: one lock per
    memory object and event loop, waited on without blocking the loop, so they never conflict with each
    other and retry only against writers elsewhere. A lock is bound to the first loop that waits on it,
    hence one per loop.
    """

    _asyncio = True
    _add_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]

    def _init_io(self) -> None:
        self._add_locks = weakref.WeakKeyDictionary()

    def _add_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._add_locks.get(loop)
        if lock is None:
            lock = self._add_locks[loop] = asyncio.Lock()
        return lock

    def _default_store(self) -> ChatMemoryStore:
        from chatmemory.aio.stores.memory import InMemoryChatMemoryStore

        return InMemoryChatMemoryStore()

    async def add(self, *messages: ChatMessage) -> None:
        """Append ``messages`` (in order), then evict down to the limit: one read, at most one write.

        Raises:
            ConcurrentUpdateError: the memory kept changing under concurrent writers for the whole retry
                budget (or ``max_attempts``); nothing was written (versioned stores only; with a locked
                update only when ``max_attempts=1``, as the locked attempt cannot conflict).
        """
        if not messages:
            return
        async with self._add_lock():
            steps = add_steps(
                self._rules(),
                messages,
                versioned=self._versioned,
                retry=self.retry,
                max_attempts=self.max_attempts,
                locked=self._locked,
            )
            await run_steps_async(steps, self._store)

    async def messages(self) -> list[ChatMessage]:
        """The current window, oldest first (one read, no write; a shrunk dynamic limit applies at once)."""
        return await run_steps_async(messages_steps(self._rules()), self._store)

    async def set(self, messages: Iterable[ChatMessage]) -> None:
        """Replace the whole window with ``messages``, evicted down to the limit (one write, no read).

        Raises:
            ValueError: ``messages`` holds more than one system message.
        """
        await run_steps_async(set_steps(self._rules(), messages), self._store)

    async def clear(self) -> None:
        """Delete the memory from the store."""
        await run_steps_async(clear_steps(self._id), self._store)


class MessageWindowChatMemory(_AsyncWindowMemory, MessageWindowBase[ChatMemoryStore]):
    """Keeps the last ``max_messages`` messages; the asyncio twin of :class:`chatmemory.MessageWindowChatMemory`.

    Same arguments and behaviour; the methods are coroutines (``await memory.add(...)``).

    Args:
        id: the memory id (``str``; an ``int`` or a ``uuid.UUID`` is used as its ``str()``).
        max_messages: the window size, or a callable returning it (read on every operation).
        store: an asyncio store (``chatmemory.aio.open_store(url)``); a fresh in-memory one by default.
        always_keep_system_message_first: put a new system message at index 0 instead of the end.
        retry: how long to retry an ``add`` that conflicts with other writers (``asyncio.sleep`` between).
        max_attempts: also give up after this many attempts (``None``: the time budget alone).

    Raises:
        TypeError: an argument of the wrong kind (a URL or a sync store as ``store``, ...).
        ValueError: a limit or ``max_attempts`` below 1.
    """


class TokenWindowChatMemory(_AsyncWindowMemory, TokenWindowBase[ChatMemoryStore]):
    """Keeps what fits in ``max_tokens``; the asyncio twin of :class:`chatmemory.TokenWindowChatMemory`.

    Same arguments and behaviour; the methods are coroutines. Token counting stays synchronous (it is CPU
    work): each distinct message is counted once, then read from the cache.

    Args:
        id: the memory id.
        max_tokens: the token budget, or a callable returning it (read on every operation).
        token_count_estimator: counts a message's tokens; :class:`~chatmemory.SimpleTokenCountEstimator`
            by default.
        store: an asyncio store; a fresh in-memory one by default.
        always_keep_system_message_first: put a new system message at index 0 instead of the end.
        retry: how long to retry an ``add`` that conflicts with other writers.
        max_attempts: also give up after this many attempts (``None``: the time budget alone).
        cache_size: how many distinct messages' counts to keep.

    Raises:
        TypeError: an argument of the wrong kind (a model name as ``token_count_estimator``, ...).
        ValueError: a limit or ``max_attempts`` below 1, a negative ``cache_size``.
    """
