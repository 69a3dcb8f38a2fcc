"""Window memories: a bounded view of a conversation, kept in a store.

A memory holds no list of its own: every operation reads the store, so several processes sharing a
store see one memory. ``add`` is one read and at most one write; with a versioned store the write is
conditional and a conflicting write by someone else is retried from a fresh read.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.memory_id import MemoryId, validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import ChatMemoryStore, SupportsVersioning
from chatmemory.core.token_estimators import SimpleTokenCountEstimator, TokenCountEstimator
from chatmemory.core.window import MessageWeight, TotalWeight, WindowUpdate, add_messages, evict, fit_window

__all__ = ["ChatMemory", "MessageWindowChatMemory", "TokenWindowChatMemory"]

logger = logging.getLogger("chatmemory")

Limit = int | Callable[[], int]


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


def _resolve_limit(limit: Limit, name: str) -> int:
    value = limit() if callable(limit) else limit
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (or a callable returning one), not {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


class _WindowChatMemory:
    """What both window memories share: store traffic, retries, the system-message rules."""

    _limit_name = "limit"

    def __init__(
        self,
        id: MemoryId,
        store: ChatMemoryStore | None,
        limit: Limit,
        always_keep_system_message_first: bool,
        max_attempts: int,
    ) -> None:
        from chatmemory.stores.memory import InMemoryChatMemoryStore

        self._id = validate_memory_id(id)
        self._store: ChatMemoryStore = store if store is not None else InMemoryChatMemoryStore()
        if not callable(limit):
            _resolve_limit(limit, self._limit_name)
        self._limit = limit
        self.always_keep_system_message_first = always_keep_system_message_first
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.max_attempts = max_attempts

    @property
    def id(self) -> str:
        """The memory id."""
        return self._id

    @property
    def store(self) -> ChatMemoryStore:
        """The store this memory reads and writes."""
        return self._store

    def _weight(self) -> MessageWeight:
        raise NotImplementedError

    def _total(self) -> TotalWeight | None:
        return None

    def _report(self, update: WindowUpdate, limit: int) -> None:
        for message in update.oversized:
            logger.warning(
                "memory %r: a %s of %d exceeds the whole %s of %d on its own; %s",
                self._id,
                type(message).__name__,
                self._weight()(message),
                self._limit_name,
                limit,
                "it is kept (system message)" if message in update.messages else "it was evicted",
            )

    def add(self, *messages: ChatMessage) -> None:
        """Append ``messages`` (in order), then evict down to the limit: one read, at most one write.

        Raises:
            ConcurrentUpdateError: the memory kept changing under concurrent writers for
                ``max_attempts`` attempts (versioned stores only).
        """
        if not messages:
            return
        limit = _resolve_limit(self._limit, self._limit_name)
        weight, total = self._weight(), self._total()
        store = self._store
        if not isinstance(store, SupportsVersioning):
            update = add_messages(
                store.get_messages(self._id),
                messages,
                limit=limit,
                weight=weight,
                total=total,
                always_keep_system_message_first=self.always_keep_system_message_first,
            )
            if update.changed:
                store.update_messages(self._id, update.messages)
            self._report(update, limit)
            return
        for attempt in range(self.max_attempts):
            snapshot = store.load(self._id)
            update = add_messages(
                snapshot.messages,
                messages,
                limit=limit,
                weight=weight,
                total=total,
                always_keep_system_message_first=self.always_keep_system_message_first,
            )
            if not update.changed:
                # An oversized message can leave the window as it was; it still deserves the warning.
                self._report(update, limit)
                return
            try:
                store.save(self._id, update.messages, snapshot.version)
            except ConcurrentUpdateError:
                # Full jitter keeps competing writers from colliding again in lock step.
                time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
                continue
            self._report(update, limit)
            return
        raise ConcurrentUpdateError(self._id, attempts=self.max_attempts)

    def messages(self) -> list[ChatMessage]:
        """The current window, oldest first (one read, no write).

        The limit is read again, so a dynamic limit that shrank applies at once, like LangChain4j's; the
        store catches up on the next write.
        """
        limit = _resolve_limit(self._limit, self._limit_name)
        _, window = evict(self._store.get_messages(self._id), limit, self._weight(), self._total())
        return window

    def set(self, messages: Sequence[ChatMessage]) -> None:
        """Replace the whole window with ``messages``, evicted down to the limit (one write, no read).

        Raises:
            ValueError: ``messages`` holds more than one system message.
        """
        limit = _resolve_limit(self._limit, self._limit_name)
        update = fit_window(
            list(messages),
            limit=limit,
            weight=self._weight(),
            total=self._total(),
            always_keep_system_message_first=self.always_keep_system_message_first,
        )
        self._report(update, limit)
        self._store.update_messages(self._id, update.messages)

    def clear(self) -> None:
        """Delete the memory from the store."""
        self._store.delete_messages(self._id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._id!r}, {self._limit_name}={self._limit!r}, store={self._store!r})"


class MessageWindowChatMemory(_WindowChatMemory):
    """Keeps the last ``max_messages`` messages (the system message counts, and is never evicted).

    Args:
        id: the memory id (``str``, or ``int`` converted with ``str()``).
        max_messages: the window size, or a callable returning it (read on every operation).
        store: where the messages live; a fresh in-memory store by default.
        always_keep_system_message_first: put a new system message at index 0 instead of the end.
        max_attempts: tries of read-compute-write under concurrent writers (versioned stores).
    """

    _limit_name = "max_messages"

    def __init__(
        self,
        id: MemoryId = "default",
        *,
        max_messages: Limit,
        store: ChatMemoryStore | None = None,
        always_keep_system_message_first: bool = False,
        max_attempts: int = 24,
    ) -> None:
        super().__init__(id, store, max_messages, always_keep_system_message_first, max_attempts)

    def _weight(self) -> MessageWeight:
        return _count_one


def _count_one(message: ChatMessage) -> int:
    return 1


class TokenWindowChatMemory(_WindowChatMemory):
    """Keeps the most recent messages that fit in ``max_tokens`` (the system message counts, and stays).

    Args:
        id: the memory id.
        max_tokens: the token budget, or a callable returning it (read on every operation).
        token_count_estimator: counts a message's tokens; :class:`SimpleTokenCountEstimator` by default.
            It is called once per distinct message; counts are cached by message value.
        store: where the messages live; a fresh in-memory store by default.
        always_keep_system_message_first: put a new system message at index 0 instead of the end.
        max_attempts: tries of read-compute-write under concurrent writers (versioned stores).
        cache_size: how many distinct messages' counts to keep.
    """

    _limit_name = "max_tokens"

    def __init__(
        self,
        id: MemoryId = "default",
        *,
        max_tokens: Limit,
        token_count_estimator: TokenCountEstimator | None = None,
        store: ChatMemoryStore | None = None,
        always_keep_system_message_first: bool = False,
        max_attempts: int = 24,
        cache_size: int = 4096,
    ) -> None:
        super().__init__(id, store, max_tokens, always_keep_system_message_first, max_attempts)
        self.token_count_estimator: TokenCountEstimator = (
            token_count_estimator if token_count_estimator is not None else SimpleTokenCountEstimator()
        )
        self._cache: OrderedDict[ChatMessage, int] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()

    def _estimate(self, message: ChatMessage) -> int:
        with self._cache_lock:
            cached = self._cache.get(message)
            if cached is not None:
                self._cache.move_to_end(message)
                return cached
        tokens = self.token_count_estimator.estimate_message(message)
        with self._cache_lock:
            self._cache[message] = tokens
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return tokens

    def _weight(self) -> MessageWeight:
        return self._estimate

    def _total(self) -> TotalWeight | None:
        estimate_messages = getattr(self.token_count_estimator, "estimate_messages", None)
        return estimate_messages if callable(estimate_messages) else None
