"""``ChatMemorySession``: the OpenAI Agents SDK ``Session`` protocol on any chatmemory asyncio store."""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Iterable
from typing import Any

from chatmemory.aio.memory import MessageWindowChatMemory, TokenWindowChatMemory, run_steps_async
from chatmemory.aio.store import ChatMemoryStore, SupportsLockedUpdate, SupportsVersioning
from chatmemory.core.memory_steps import WindowRules
from chatmemory.core.optional import require
from chatmemory.core.retry import RetryPolicy
from chatmemory.core.store import validate_memory_id
from chatmemory.core.token_estimators import TokenCountEstimator
from chatmemory.core.window_memory import check_store
from chatmemory.integrations.openai_agents.item_cache import ItemCache
from chatmemory.integrations.openai_agents.items import item_list
from chatmemory.integrations.openai_agents.shared_state import state_for
from chatmemory.integrations.openai_agents.steps import (
    Known,
    add_items_steps,
    clear_steps,
    get_items_steps,
    pop_item_steps,
)

_session_settings = require("agents.memory.session_settings", feature="ChatMemorySession", extra="openai-agents")
SessionSettings = _session_settings.SessionSettings

__all__ = ["ChatMemorySession"]

_SYSTEM_ROLES = ("system", "developer")


class ChatMemorySession:
    """An OpenAI Agents SDK session kept in a chatmemory store: ``Runner.run(agent, input, session=...)``.

    Implements the SDK's ``Session`` protocol with ``SQLiteSession``'s semantics: ``get_items(limit)`` gives
    the latest ``limit`` items in chronological order (all of them with ``None``, none with ``0`` or
    less; ``session_settings.limit`` applies when no limit is passed); ``add_items`` appends;
    ``pop_item`` removes and returns the most recent item, ``None`` when the session is empty;
    ``clear_session`` deletes the memory.

    Items are stored as chat messages through :func:`chatmemory.serialization.from_responses`, which keeps
    what messages have no field for (item ids, statuses, reasoning ``encrypted_content``, provider data)
    in their attributes, so ``get_items()`` returns items equal to those added, in order — also when an
    assistant turn (reasoning, then function calls) arrives in several ``add_items`` calls: it is stored as
    one ``AiMessage``, the same as if it had come in one call. Items no message holds (hosted tool calls,
    ...) are kept whole. ``limit`` and ``pop_item`` count items, not messages: an ``AiMessage`` holding N
    function calls is N items and gives them back one by one.

    With neither ``max_messages`` nor ``max_tokens`` the session keeps everything, exactly. With one of
    them it is a window: after each ``add_items`` the oldest messages are evicted as a chatmemory window
    evicts them — the one system message (``system_role``) is never evicted, a function call leaves with
    its outputs, and no ``function_call_output`` stays without its call. ``max_messages`` counts messages:
    a user message, an assistant turn with its calls, a tool output are one each.

    Every operation is one read and at most one write, conditional on the version read on a versioned
    store (all built-in ones), so concurrent runs on one session lose no item. A write usually needs no
    read of its own: the session objects of one store remember, per session id, the state they last read
    or wrote (the turn's ``get_items``, the previous ``add_items``), and the write is conditional on its
    version; if the memory moved since, it reads and tries again. The items of each stored message are
    converted once and kept as JSON (for the 256 session ids used last on each store), so ``get_items``
    converts only the messages it has not seen and still hands out new dicts each time. Tasks sharing one
    session object take turns for ``add_items`` and ``pop_item`` (one lock per session object and event
    loop, as the window memories of :mod:`chatmemory.aio` do), so they never conflict with each other; a
    write that conflicts with another writer of the same id (another session object, process or service)
    queues on the store's lock where the store has one (``SupportsLockedUpdate``), else retries under
    ``retry``.
    The session works from any event loop (``Runner.run_sync`` several times) as far as its store does.
    The session does not own the store: close the store yourself.

    Args:
        session_id: the session id, used as the memory id.
        store: an asyncio store (``chatmemory.aio.open_store(url)``, a class of :mod:`chatmemory.aio.stores`).
        max_messages: keep at most this many messages (``None``: no message limit).
        max_tokens: keep what fits in this many tokens (``None``: no token limit).
        token_count_estimator: counts a message's tokens for ``max_tokens``.
        system_role: the role of the message kept as the system message, ``"system"`` or ``"developer"``;
            a message in the other role is an ordinary item.
        session_settings: the SDK's ``SessionSettings`` (or a dict of them); ``limit`` is the default of
            ``get_items``.
        retry: how long to retry a write that conflicts with other writers.
        max_attempts: also give up after this many attempts (``None``: the time budget alone).

    Raises:
        TypeError: a URL or a sync store as ``store``, an argument of the wrong kind.
        ValueError: both ``max_messages`` and ``max_tokens``, a limit below 1, an unknown ``system_role``.
    """

    session_settings: Any
    _turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]

    def __init__(
        self,
        session_id: str,
        *,
        store: ChatMemoryStore,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        token_count_estimator: TokenCountEstimator | None = None,
        system_role: str = "system",
        session_settings: Any = None,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
    ) -> None:
        self.session_id = validate_memory_id(session_id)
        if system_role not in _SYSTEM_ROLES:
            raise ValueError(f"system_role must be 'system' or 'developer', not {system_role!r}")
        if max_messages is not None and max_tokens is not None:
            raise ValueError(
                f"session {self.session_id!r}: pass max_messages or max_tokens, not both (one window per session)"
            )
        if token_count_estimator is not None and max_tokens is None:
            raise ValueError(f"session {self.session_id!r}: token_count_estimator is only used with max_tokens")
        self._window: MessageWindowChatMemory | TokenWindowChatMemory | None = None
        if max_messages is not None:
            self._window = MessageWindowChatMemory(
                self.session_id, max_messages=max_messages, store=store, retry=retry, max_attempts=max_attempts
            )
        elif max_tokens is not None:
            self._window = TokenWindowChatMemory(
                self.session_id,
                max_tokens=max_tokens,
                token_count_estimator=token_count_estimator,
                store=store,
                retry=retry,
                max_attempts=max_attempts,
            )
        else:
            check_store(store, asyncio=True, memory_class=type(self).__name__)
            # The window memory validates these when there is one; without one they are checked here.
            MessageWindowChatMemory(
                self.session_id, max_messages=1, store=store, retry=retry, max_attempts=max_attempts
            )
        self._store = store
        self._versioned = isinstance(store, SupportsVersioning)
        # A conflicting write queues on the store's lock when it has an asyncio one (as window memories do).
        self._locked = (
            self._versioned and isinstance(store, SupportsLockedUpdate) and inspect.iscoroutinefunction(store.modify)
        )
        # An asyncio.Lock is bound to the first loop that waits on it: one per loop, gone with the loop.
        self._turns = weakref.WeakKeyDictionary()
        self._retry = retry if retry is not None else RetryPolicy()
        self._max_attempts = max_attempts
        self._system_role = system_role
        # What the session objects of this store last read or wrote of this id (a write starts from it,
        # conditionally on its version), and the items of the messages they read, converted once.
        shared = state_for(store, self.session_id, system_role)
        self._known: Known | None = shared.known if self._versioned else None
        self._items: ItemCache = shared.items
        self.session_settings = (
            _session_settings.coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )

    @property
    def store(self) -> ChatMemoryStore:
        """The store the session reads and writes."""
        return self._store

    def _turn(self) -> asyncio.Lock:
        """The lock the tasks of the running loop take turns on to write through this session object."""
        loop = asyncio.get_running_loop()
        lock = self._turns.get(loop)
        if lock is None:
            lock = self._turns[loop] = asyncio.Lock()
        return lock

    def _rules(self) -> WindowRules | None:
        return self._window._rules() if self._window is not None else None

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest ``limit`` items (``session_settings.limit`` when ``None``), in chronological order."""
        effective = _session_settings.resolve_session_limit(limit, self.session_settings)
        steps = get_items_steps(self.session_id, effective, rules=self._rules(), items=self._items, known=self._known)
        return await run_steps_async(steps, self._store)

    async def add_items(self, items: Iterable[Any]) -> None:
        """Append ``items`` (Responses input items as dicts); a window then evicts the oldest messages.

        Raises:
            TypeError: ``items`` is not a list of dicts.
            UnencodableValueError: an item holds a value JSON cannot hold (a set, bytes, NaN, an object):
                a ``TypeError`` too, as the SDK's own sessions raise; nothing was written.
            SerializationError: an entry is not a Responses item (no ``type`` and no ``role``).
            ConcurrentUpdateError: other writers kept changing the session for the whole retry budget
                (a store with a locked update queues instead, so only with ``max_attempts``).
        """
        listed = item_list(items, self.session_id)
        if not listed:
            return
        steps = add_items_steps(
            self.session_id,
            listed,
            rules=self._rules(),
            system_role=self._system_role,
            versioned=self._versioned,
            locked=self._locked,
            retry=self._retry,
            max_attempts=self._max_attempts,
            known=self._known,
        )
        async with self._turn():
            await run_steps_async(steps, self._store)

    async def pop_item(self) -> Any:
        """Remove and return the most recent item, or ``None`` when the session is empty."""
        steps = pop_item_steps(
            self.session_id,
            system_role=self._system_role,
            versioned=self._versioned,
            locked=self._locked,
            retry=self._retry,
            max_attempts=self._max_attempts,
            known=self._known,
        )
        async with self._turn():
            return await run_steps_async(steps, self._store)

    async def clear_session(self) -> None:
        """Delete every item of the session."""
        if self._known is not None:
            self._known.forget()
        self._items.clear()
        await run_steps_async(clear_steps(self.session_id), self._store)

    def __repr__(self) -> str:
        window = f", window={self._window!r}" if self._window is not None else ""
        return f"ChatMemorySession(session_id={self.session_id!r}, store={self._store!r}{window})"
