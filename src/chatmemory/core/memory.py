"""Window memories: a bounded view of a conversation, kept in a store.

A memory holds no list of its own: every operation reads the store, so several processes sharing a
store see one memory. ``add`` is one read and at most one write; with a versioned store the write is
conditional and a conflicting write by someone else is retried from a fresh read, or, when the store
offers a locked update (:class:`~chatmemory.SupportsLockedUpdate`), done once more under its lock. What
each operation decides is written once in :mod:`chatmemory.core.memory_steps`; this module runs it with
plain calls.
The asyncio twins are in :mod:`chatmemory.aio`; what both promise is *Window memories* in
docs/semantics.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from chatmemory.core.errors import HistoryNotEnabledError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage, SupportsHistory, history_query
from chatmemory.core.memory_steps import (
    clear_steps,
    run_steps,
)
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import ChatMemoryStore
from chatmemory.core.window_memory import Limit, MessageWindowBase, TokenWindowBase, WindowMemoryBase

__all__ = ["ChatMemory", "Limit", "MessageWindowChatMemory", "TokenWindowChatMemory"]


@runtime_checkable
class ChatMemory(Protocol):
    """A bounded memory of one conversation."""

    @property
    def id(self) -> str:
        """The memory id."""
        ...

    def add(self, *messages: ChatMessage) -> None:
        """Append messages, then evict down to the limit."""
        ...

    def messages(self) -> list[ChatMessage]:
        """The current window, oldest first."""
        ...

    def set(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the whole window."""
        ...

    def clear(self) -> None:
        """Forget everything."""
        ...


_default_store_factory: Callable[[], ChatMemoryStore] | None = None


def use_default_store(factory: Callable[[], ChatMemoryStore]) -> None:
    """Make ``factory`` build the store of a window memory created without ``store=`` (the in-memory store).

    :mod:`chatmemory.stores.memory` registers itself when imported, so core needs no import of a store.
    """
    global _default_store_factory
    _default_store_factory = factory


class _SyncWindowMemory(WindowMemoryBase[ChatMemoryStore]):
    """The sync I/O of a window memory: each operation's steps run against a sync store.

    Threads sharing one memory object (as a provider hands it out) take turns for ``add``, so they never
    conflict with each other and retry only against writers elsewhere.
    """

    _add_lock: threading.Lock

    def _init_io(self) -> None:
        self._add_lock = threading.Lock()

    def _default_store(self) -> ChatMemoryStore:
        if _default_store_factory is None:  # pragma: no cover - importing chatmemory registers one
            raise RuntimeError("no default store: pass store=, or import chatmemory (its in-memory store)")
        return _default_store_factory()

    def add(self, *messages: ChatMessage) -> None:
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
        with self._add_lock:
            steps = self._add_steps(rules, messages)
            update = run_steps(steps, self._store)
        run_steps(rules.notify(update), self._store)

    def messages(self) -> list[ChatMessage]:
        """The current window, oldest first (one read, no write).

        The limit is read again, so a dynamic limit that shrank applies at once, like LangChain4j's; the
        store catches up on the next write.
        """
        return run_steps(self._messages_steps(self._rules()), self._store)

    def set(self, messages: Iterable[ChatMessage]) -> None:
        """Replace the whole window with ``messages``, evicted down to the limit (one write, no read).

        ``on_evict`` receives the messages given that did not fit, after the write.

        Raises:
            ValueError: ``messages`` holds more than one system message.
            MessageTooLargeError: ``on_oversized="raise"`` and one message alone outweighs the limit;
                nothing was written.
        """
        run_steps(self._set_steps(self._rules(), messages), self._store)

    def clear(self) -> None:
        """Delete the memory from the store."""
        run_steps(clear_steps(self._id), self._store)

    def pop(self) -> list[ChatMessage]:
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
        with self._add_lock:
            return run_steps(self._pop_steps(self._rules()), self._store)

    def history(
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
        return store.history(self._id, after=after, limit=limit, reverse=reverse)


class MessageWindowChatMemory(_SyncWindowMemory, MessageWindowBase[ChatMemoryStore]):
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


class TokenWindowChatMemory(_SyncWindowMemory, TokenWindowBase[ChatMemoryStore]):
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
