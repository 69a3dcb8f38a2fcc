"""The asyncio window memories: the same options and decisions as the sync ones, with awaited store calls.

Each operation runs the steps of :mod:`chatmemory.core.memory_steps` — the very code the sync memories
run — awaiting each store call. A task cancelled at any ``await`` of an operation leaves the memory at
its old or its new window (the one write is atomic in every store) and propagates the cancellation.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from chatmemory.aio.store import (
    ChatMemoryStore,
    SupportsHistory,
    SupportsLockedUpdate,
    SupportsRecordedWrites,
    SupportsVersioning,
)
from chatmemory.core.driving import drive_async
from chatmemory.core.errors import HistoryNotEnabledError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage, history_query
from chatmemory.core.memory_steps import (
    DeleteMessages,
    GetMessages,
    Load,
    Modify,
    Notify,
    Save,
    Step,
    Steps,
    Summarize,
    UpdateMessages,
    call_hook,
    clear_steps,
    hook_failed,
)
from chatmemory.core.messages import ChatMessage
from chatmemory.core.window_memory import MessageWindowBase, TokenWindowBase, WindowMemoryBase

__all__ = ["ChatMemory", "MessageWindowChatMemory", "TokenWindowChatMemory", "run_steps_async"]

T = TypeVar("T")


@runtime_checkable
class ChatMemory(Protocol):
    """A bounded memory of one conversation."""

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


async def _call(step: Notify | Summarize) -> Any:
    """Call the application function of ``step``, awaiting what it returns when that is awaitable."""
    result = call_hook(step)
    if inspect.isawaitable(result):
        try:
            result = await result
        except Exception as exc:
            hook_failed(exc, step)
            raise
    return result


async def _execute(store: ChatMemoryStore, step: Step) -> Any:
    if isinstance(step, (Notify, Summarize)):
        return await _call(step)
    # The memory yields Load, Save and Modify only for a store it found able to run them when it was
    # built: no isinstance against a runtime protocol here (microseconds per step, on every turn).
    if isinstance(step, Load):
        return await cast("SupportsVersioning", store).load(step.memory_id)
    if isinstance(step, Save):
        if step.also_recorded:
            return await cast("SupportsRecordedWrites", store).save_recorded(
                step.memory_id, step.messages, step.expected_version, step.also_recorded
            )
        return await cast("SupportsVersioning", store).save(step.memory_id, step.messages, step.expected_version)
    if isinstance(step, Modify):
        return await cast("SupportsLockedUpdate", store).modify(step.memory_id, step.change)
    if isinstance(step, GetMessages):
        return await store.get_messages(step.memory_id)
    if isinstance(step, UpdateMessages):
        return await store.update_messages(step.memory_id, step.messages)
    if isinstance(step, DeleteMessages):
        return await store.delete_messages(step.memory_id)
    await asyncio.sleep(step.seconds)
    return None


async def run_steps_async(steps: Steps[Step, T], store: ChatMemoryStore) -> T:
    """Run a memory operation against an asyncio store with :func:`~chatmemory.core.driving.drive_async`.

    The async twin of :func:`chatmemory.core.memory_steps.run_steps`: a store's error goes back into the
    steps, which retry a conflict as they decide; the steps are closed on every exit, a cancellation too.
    """
    try:
        return await drive_async(steps, functools.partial(_execute, store))
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

        ``on_evict``, if set, is then called once with what this add evicted (after the write succeeded,
        outside the memory object's turn, so it may add to this memory itself); an asyncio memory awaits what
        it returns when that is awaitable.

        Raises:
            ConcurrentUpdateError: the memory kept changing under concurrent writers for the whole retry
                budget (or ``max_attempts``); nothing was written (versioned stores only; with a locked
                update only when ``max_attempts=1``, as the locked attempt cannot conflict).
            MessageTooLargeError: ``on_oversized="raise"`` and one message alone outweighs the limit;
                nothing was written.
        """
        if not messages:
            return
        rules = self._rules()
        async with self._add_lock():
            steps = self._add_steps(rules, messages)
            update = await run_steps_async(steps, self._store)
        await run_steps_async(rules.notify(update), self._store)

    async def messages(self) -> list[ChatMessage]:
        """The current window, oldest first (one read, no write).

        The limit is read again, so a dynamic limit that shrank applies at once, like LangChain4j's; the
        store catches up on the next write.
        """
        return await run_steps_async(self._messages_steps(self._rules()), self._store)

    async def set(self, messages: Iterable[ChatMessage]) -> None:
        """Replace the whole window with ``messages``, evicted down to the limit (one write, no read).

        ``on_evict`` receives the messages given that did not fit, after the write.

        Raises:
            ValueError: ``messages`` holds more than one system message.
            MessageTooLargeError: ``on_oversized="raise"`` and one message alone outweighs the limit;
                nothing was written.
        """
        await run_steps_async(self._set_steps(self._rules(), messages), self._store)

    async def clear(self) -> None:
        """Delete the memory from the store."""
        await run_steps_async(clear_steps(self._id), self._store)

    async def pop(self) -> list[ChatMessage]:
        """Remove and return the newest message (undo): one read, one versioned write.

        The newest message that is not the system message is removed, wherever the system message sits
        (it is never popped). If it is a tool result, the whole tool exchange goes with it: the AI message
        that asked for it and everything after that message, so the window stays a valid prompt.

        Returns:
            The removed messages, oldest first: one message, or a tool exchange; ``[]`` (and nothing
            written) when the window holds nothing but the system message.

        Raises:
            ConcurrentUpdateError: another writer changed the memory between the read and the write; nothing
                was removed (not retried: the newest message might now be theirs).
        """
        async with self._add_lock():
            return await run_steps_async(self._pop_steps(self._rules()), self._store)

    async def history(
        self, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of everything ever added to this memory, evicted messages included.

        Delegates to the store's :meth:`~chatmemory.SupportsHistory.history`; see there for the arguments.

        Raises:
            HistoryNotEnabledError: the store keeps no history (build it with ``history=True``).
            TypeError, ValueError: an argument of the wrong kind or out of range.
        """
        history_query(after, limit, reverse)
        store = self._store
        if not isinstance(store, SupportsHistory):
            raise HistoryNotEnabledError(f"{type(store).__name__} (the store of memory {self._id!r})")
        return await store.history(self._id, after=after, limit=limit, reverse=reverse)


class MessageWindowChatMemory(_AsyncWindowMemory, MessageWindowBase[ChatMemoryStore]):
    """Keeps the last ``max_messages`` messages (the system message counts, and is never evicted).

    :class:`chatmemory.MessageWindowChatMemory` and its asyncio twin
    :class:`chatmemory.aio.MessageWindowChatMemory` take the same arguments and behave alike; the asyncio
    one's methods are coroutines (``await memory.add(...)``).

    Args:
        id: the memory id (``str``; an ``int`` or a ``uuid.UUID`` is used as its ``str()``).
        max_messages: the window size, or a callable returning it (read on every operation).
        store: where the messages live: a store object of the memory's kind, sync or asyncio (the
            ``open_store(url)`` of :mod:`chatmemory` or of :mod:`chatmemory.aio` opens one from a URL); a
            fresh in-memory store by default.
        always_keep_system_message_first: put a new system message at index 0 instead of the end.
        retry: how long to retry an ``add`` that conflicts with other writers (versioned stores); by
            default ``RetryPolicy()``: 30 seconds of jittered backoff (``asyncio.sleep`` between the
            attempts of an asyncio memory).
        max_attempts: also give up after this many attempts (``None``: the time budget alone).
        on_evict: ``on_evict(memory_id, evicted_messages)``, called once per write that evicted something,
            after that write succeeded (never for an attempt that lost a conflict and was retried). An
            exception it raises propagates from ``add``, whose write is done. An asyncio memory also takes
            a coroutine function, and awaits what it returns when that is awaitable.
        on_oversized: for a token window (a message window never meets one); accepted for symmetry.
        start_on: ``"user"`` evicts on until the first message after the system message is a user
            message (Anthropic and Gemini want a conversation to open with one; an assistant turn or a tool
            result never opens the window); ``"any"`` (the default) evicts only to fit the limit.

    Raises:
        TypeError: an argument of the wrong kind (a URL as ``store``, a store of the other kind: an asyncio
            store for a sync memory, a sync store for an asyncio one; a coroutine function as a sync
            memory's ``on_evict``, ...).
        ValueError: a limit or ``max_attempts`` below 1, an unknown ``on_oversized`` or ``start_on``.
    """


class TokenWindowChatMemory(_AsyncWindowMemory, TokenWindowBase[ChatMemoryStore]):
    """Keeps the most recent messages that fit in ``max_tokens`` (the system message counts, and stays).

    :class:`chatmemory.TokenWindowChatMemory` and its asyncio twin
    :class:`chatmemory.aio.TokenWindowChatMemory` take the same arguments and behave alike; the asyncio
    one's methods are coroutines (``await memory.add(...)``).

    Args:
        id: the memory id (``str``; an ``int`` or a ``uuid.UUID`` is used as its ``str()``).
        max_tokens: the token budget, or a callable returning it (read on every operation).
        token_count_estimator: counts a message's tokens; :class:`~chatmemory.SimpleTokenCountEstimator` by
            default. It is called once per distinct message (counts are cached by message value), and
            synchronously in an asyncio memory too: counting is CPU work. An estimator that also has
            ``estimate_messages`` (:class:`~chatmemory.core.window_memory.SupportsEstimateMessages`) counts
            whole windows.
        store: where the messages live: a store object of the memory's kind, sync or asyncio (the
            ``open_store(url)`` of :mod:`chatmemory` or of :mod:`chatmemory.aio` opens one from a URL); a
            fresh in-memory store by default.
        always_keep_system_message_first: put a new system message at index 0 instead of the end.
        retry: how long to retry an ``add`` that conflicts with other writers (versioned stores); by
            default ``RetryPolicy()``: 30 seconds of jittered backoff (``asyncio.sleep`` between the
            attempts of an asyncio memory).
        max_attempts: also give up after this many attempts (``None``: the time budget alone).
        cache_size: how many distinct messages' counts to keep.
        on_evict: ``on_evict(memory_id, evicted_messages)``, called once per write that evicted something,
            after that write succeeded (never for an attempt that lost a conflict). A message that alone
            outweighs ``max_tokens`` reaches it too. An exception it raises propagates from ``add``, whose
            write is done. An asyncio memory also takes a coroutine function, and awaits what it returns
            when that is awaitable.
        on_oversized: what ``add`` does with a message that alone outweighs ``max_tokens``: ``"evict"``
            (the default: a WARNING, the message is evicted at once and handed to ``on_evict``) or
            ``"raise"`` (:class:`~chatmemory.MessageTooLargeError`, nothing written).
        start_on: ``"user"`` evicts on until the first message after the system message is a user
            message (Anthropic and Gemini want a conversation to open with one; an assistant turn or a tool
            result never opens the window); ``"any"`` (the default) evicts only to fit the limit.

    Raises:
        TypeError: an argument of the wrong kind (a URL as ``store``, a store of the other kind: an asyncio
            store for a sync memory, a sync store for an asyncio one; a coroutine function as a sync
            memory's ``on_evict``, a model name as ``token_count_estimator``, ...).
        ValueError: a limit or ``max_attempts`` below 1, a negative ``cache_size``, an unknown
            ``on_oversized`` or ``start_on``.
    """
