"""``ChatMemoryHistory``: a langchain-core ``BaseChatMessageHistory`` over any chatmemory store.

What ``RunnableWithMessageHistory`` (or any code written against LangChain's chat history) reads and appends
is kept in a chatmemory store, as chat messages converted by :mod:`.messages` (exactly: what is added comes
back equal). The history is the whole conversation, or a message or token window of it, or any window
memory of chatmemory (:meth:`ChatMemoryHistory.from_memory`). Sync stores serve the sync methods and the
async ones; asyncio stores serve the async ones.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from chatmemory.core.errors import ConcurrentUpdateError, SerializationError
from chatmemory.core.memory_steps import (
    DeleteMessages,
    GetMessages,
    Load,
    Modify,
    Save,
    Sleep,
    Step,
    Steps,
    UpdateMessages,
    run_steps,
)
from chatmemory.core.messages import ChatMessage
from chatmemory.core.retry import RetryPolicy
from chatmemory.core.store import MemoryId, SupportsLockedUpdate, SupportsVersioning, validate_memory_id
from chatmemory.core.token_estimators import TokenCountEstimator
from chatmemory.core.window_memory import Limit, check_store
from chatmemory.integrations.langchain.messages import from_langchain, to_langchain

__all__ = ["ChatMemoryHistory"]

_MEMORY_METHODS = ("add", "messages", "clear")


def _append_steps(
    memory_id: str,
    added: list[ChatMessage],
    *,
    versioned: bool,
    locked: bool,
    retry: RetryPolicy,
    max_attempts: int | None,
) -> Steps[Step, None]:
    """Append ``added`` to the whole stored list: one read and one write, conditional on a versioned store.

    A conflicting write is retried from a fresh read under ``retry``, or, on a store with a locked update,
    done once more under its lock (as a window memory's ``add``).
    """
    if not versioned:
        stored: list[ChatMessage] = yield GetMessages(memory_id)
        yield UpdateMessages(memory_id, [*stored, *added])
        return
    attempts = retry.start("history.add")
    while True:
        snapshot = yield Load(memory_id)
        try:
            yield Save(memory_id, [*snapshot.messages, *added], snapshot.version)
        except ConcurrentUpdateError:
            spent = max_attempts is not None and attempts.count >= max_attempts
            if locked and not spent:
                yield Modify(memory_id, lambda stored: [*stored, *added])
                return
            delay = None if spent else attempts.backoff()
            if delay is None:
                raise ConcurrentUpdateError(memory_id, attempts=attempts.count) from None
            yield Sleep(delay)
            continue
        return


def _is_async_store(store: object) -> bool:
    return inspect.iscoroutinefunction(getattr(store, "get_messages", None))


class ChatMemoryHistory(BaseChatMessageHistory):
    """A LangChain chat message history kept in a chatmemory store, under ``memory_id``.

    ``messages`` (``aget_messages()``) gives the history as LangChain messages, oldest first;
    ``add_messages`` (``aadd_messages``) appends, in one read and one write, conditional on the version read
    on a versioned store (all built-in ones) so concurrent writers lose nothing; ``clear`` (``aclear``)
    deletes the memory. Messages come back equal to those added, ids, metadata, usage and tool-call
    arguments included (see :mod:`chatmemory.integrations.langchain.messages`).

    With neither ``max_messages`` nor ``max_tokens`` the history is the whole conversation, kept as given
    (several system messages too). With one of them it is a chatmemory window (``MessageWindowChatMemory``
    or ``TokenWindowChatMemory`` rules: one system message, kept; the oldest messages evicted; a tool call
    leaves with its results). Any other window memory (a ``SummarizingChatMemory``, one with ``on_evict``)
    is passed whole with :meth:`from_memory`.

    A sync store (``chatmemory.open_store(url)``) serves the sync methods, and the async ones on LangChain's
    executor. An asyncio store (``chatmemory.aio.open_store(url)``) serves the async methods:
    ``RunnableWithMessageHistory.ainvoke`` / ``astream``; its sync methods raise ``TypeError``, as an
    asyncio store cannot be driven from sync code. The history does not own the store: close it yourself.

    Args:
        memory_id: the memory id (``str``; an ``int`` or a ``uuid.UUID`` is used as its ``str()``).
        store: a sync or an asyncio store object.
        max_messages: keep a window of this many messages (or a callable returning it).
        max_tokens: keep a window of what fits in this many tokens (or a callable returning it).
        token_count_estimator: counts a message's tokens for ``max_tokens``.
        skip_custom: leave the store's ``CustomMessage`` entries (written by other code) out of ``messages``
            instead of raising.
        retry: how long to retry a write that conflicts with other writers.
        max_attempts: also give up after this many attempts (``None``: the time budget alone).

    Raises:
        TypeError: a URL or no store as ``store``, an argument of the wrong kind.
        ValueError: both ``max_messages`` and ``max_tokens``, ``token_count_estimator`` without
            ``max_tokens``, a limit or ``max_attempts`` below 1.
    """

    def __init__(
        self,
        memory_id: MemoryId,
        *,
        store: Any,
        max_messages: Limit | None = None,
        max_tokens: Limit | None = None,
        token_count_estimator: TokenCountEstimator | None = None,
        skip_custom: bool = False,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
    ) -> None:
        super().__init__()
        memory_id = validate_memory_id(memory_id)
        is_async = _is_async_store(store)
        check_store(store, asyncio=is_async, memory_class=type(self).__name__)
        if max_messages is not None and max_tokens is not None:
            raise ValueError(f"history {memory_id!r}: pass max_messages or max_tokens, not both (one window)")
        if token_count_estimator is not None and max_tokens is None:
            raise ValueError(f"history {memory_id!r}: token_count_estimator is only used with max_tokens")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f"retry takes a RetryPolicy (e.g. RetryPolicy(budget=10.0)), not {type(retry).__name__}")
        if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)):
            raise TypeError(f"max_attempts must be an int or None, not {type(max_attempts).__name__}")
        if max_attempts is not None and max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 or None (retry for the whole budget), got {max_attempts}")
        memory: Any = None
        if max_messages is not None or max_tokens is not None:
            if is_async:
                from chatmemory.aio.memory import MessageWindowChatMemory, TokenWindowChatMemory
            else:
                from chatmemory.core.memory import MessageWindowChatMemory, TokenWindowChatMemory  # type: ignore[assignment]
            options: dict[str, Any] = {"store": store, "retry": retry, "max_attempts": max_attempts}
            if max_messages is not None:
                memory = MessageWindowChatMemory(memory_id, max_messages=max_messages, **options)
            elif max_tokens is not None:
                memory = TokenWindowChatMemory(
                    memory_id, max_tokens=max_tokens, token_count_estimator=token_count_estimator, **options
                )
        self._setup(memory_id, store, memory, is_async, skip_custom)
        self._retry = retry if retry is not None else RetryPolicy()
        self._max_attempts = max_attempts

    def _setup(self, memory_id: str, store: Any, memory: Any, is_async: bool, skip_custom: bool) -> None:
        if not isinstance(skip_custom, bool):
            raise TypeError(f"skip_custom must be a bool, not {type(skip_custom).__name__}")
        self._memory_id = memory_id
        self._store = store
        self._memory = memory
        self._asyncio = is_async
        self._skip_custom = skip_custom
        self._versioned = isinstance(store, SupportsVersioning)
        modify = getattr(store, "modify", None)
        self._locked = (
            self._versioned
            and isinstance(store, SupportsLockedUpdate)
            and inspect.iscoroutinefunction(modify) == is_async
        )

    @classmethod
    def from_memory(cls, memory: Any, *, skip_custom: bool = False) -> ChatMemoryHistory:
        """A history that reads and appends through ``memory``, a window memory, sync or asyncio.

        E.g. a ``SummarizingChatMemory``, or a window with ``on_evict``: the history is the memory's window
        and every add goes through the memory's rules. ``clear`` clears the memory.

        Raises:
            TypeError: ``memory`` is not a chatmemory memory (``id``, ``add``, ``messages``, ``clear``).
        """
        missing = [name for name in _MEMORY_METHODS if not callable(getattr(memory, name, None))]
        memory_id = getattr(memory, "id", None)
        if missing or not isinstance(memory_id, str):
            raise TypeError(
                "ChatMemoryHistory.from_memory takes a chatmemory memory (MessageWindowChatMemory, "
                f"TokenWindowChatMemory, SummarizingChatMemory, sync or asyncio), not {type(memory).__name__}"
            )
        history = cls.__new__(cls)
        BaseChatMessageHistory.__init__(history)
        history._setup(
            memory_id, getattr(memory, "store", None), memory, inspect.iscoroutinefunction(memory.messages), skip_custom
        )
        history._retry = RetryPolicy()
        history._max_attempts = None
        return history

    @property
    def memory_id(self) -> str:
        """The id of the memory the history is kept under."""
        return self._memory_id

    @property
    def store(self) -> Any:
        """The store the history reads and writes."""
        return self._store

    @property
    def memory(self) -> Any:
        """The window memory in front of the store, ``None`` when the history is the whole conversation."""
        return self._memory

    # ------------------------------------------------------------------------------------- conversion

    def _to_langchain(self, messages: list[ChatMessage]) -> list[BaseMessage]:
        try:
            return to_langchain(messages, skip_custom=self._skip_custom)
        except SerializationError as exc:
            hint = "" if self._skip_custom else " (pass skip_custom=True to leave custom messages out)"
            raise SerializationError(f"history {self._memory_id!r}: {exc}{hint}") from None

    def _from_langchain(self, messages: Sequence[BaseMessage]) -> list[ChatMessage]:
        if isinstance(messages, (str, BaseMessage)) or not isinstance(messages, Sequence):
            raise TypeError(
                f"history {self._memory_id!r}: add_messages takes a list of LangChain messages, "
                f"not {type(messages).__name__}"
            )
        try:
            return from_langchain(messages)
        except SerializationError as exc:
            raise SerializationError(f"history {self._memory_id!r}: {exc}; nothing was added") from None

    def _sync_only(self, method: str, instead: str) -> None:
        if self._asyncio:
            raise TypeError(
                f"history {self._memory_id!r} is kept in an asyncio store ({type(self._store).__name__}), which "
                f"sync code cannot drive: call {instead} instead of {method} (with RunnableWithMessageHistory: "
                "ainvoke / astream), or build the history over a sync store (chatmemory.open_store(url))"
            )

    # ------------------------------------------------------------------------------------------- sync

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a read of the store, not a list kept
        """The history as LangChain messages, oldest first (one read)."""
        self._sync_only("messages", "await aget_messages()")
        if self._memory is not None:
            return self._to_langchain(self._memory.messages())
        return self._to_langchain(self._store.get_messages(self._memory_id))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages``, in order, in one read and one write (a window then evicts the oldest).

        Raises:
            SerializationError: a message chatmemory cannot hold, named; nothing was added.
            ConcurrentUpdateError: other writers kept changing the memory for the whole retry budget.
        """
        self._sync_only("add_messages", "await aadd_messages(...)")
        added = self._from_langchain(messages)
        if not added:
            return
        if self._memory is not None:
            self._memory.add(*added)
            return
        run_steps(self._append(added), self._store)

    def clear(self) -> None:
        """Delete the memory."""
        self._sync_only("clear", "await aclear()")
        if self._memory is not None:
            self._memory.clear()
            return
        run_steps(self._delete(), self._store)

    # ------------------------------------------------------------------------------------------ async

    async def aget_messages(self) -> list[BaseMessage]:
        """The history as LangChain messages, oldest first (one read)."""
        if not self._asyncio:
            return await super().aget_messages()
        if self._memory is not None:
            return self._to_langchain(await self._memory.messages())
        return self._to_langchain(await self._store.get_messages(self._memory_id))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages``, as :meth:`add_messages` does."""
        if not self._asyncio:
            await super().aadd_messages(messages)
            return
        added = self._from_langchain(messages)
        if not added:
            return
        if self._memory is not None:
            await self._memory.add(*added)
            return
        from chatmemory.aio.memory import run_steps_async

        await run_steps_async(self._append(added), self._store)

    async def aclear(self) -> None:
        """Delete the memory."""
        if not self._asyncio:
            await super().aclear()
            return
        if self._memory is not None:
            await self._memory.clear()
            return
        from chatmemory.aio.memory import run_steps_async

        await run_steps_async(self._delete(), self._store)

    # ------------------------------------------------------------------------------------------ steps

    def _append(self, added: list[ChatMessage]) -> Steps[Step, None]:
        return _append_steps(
            self._memory_id,
            added,
            versioned=self._versioned,
            locked=self._locked,
            retry=self._retry,
            max_attempts=self._max_attempts,
        )

    def _delete(self) -> Steps[Step, None]:
        yield DeleteMessages(self._memory_id)

    def __repr__(self) -> str:
        window = f", memory={self._memory!r}" if self._memory is not None else ""
        return f"ChatMemoryHistory(memory_id={self._memory_id!r}, store={self._store!r}{window})"
