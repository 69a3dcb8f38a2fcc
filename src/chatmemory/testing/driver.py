"""How the contract cases reach a store: one async view, driven with plain calls or with an event loop.

The cases are written once, as coroutines against a :class:`ContractDriver`. The sync suite gives them a
:class:`SyncDriver`: every method calls the sync store and returns without ever suspending, so a case runs
to its end by :func:`drive` — no event loop, no async plugin — and its concurrent parts run on threads.
The async suite gives them an :class:`AsyncDriver` over the real asyncio store, awaited by pytest-asyncio,
with tasks for the concurrent parts.
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import pytest

from chatmemory import aio
from chatmemory.core import store as sync_store_protocols
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage, SupportsHistory
from chatmemory.core.memory import MessageWindowChatMemory, TokenWindowChatMemory
from chatmemory.core.messages import ChatMessage
from chatmemory.core.recorded_writes import SupportsRecordedWrites
from chatmemory.core.store import ChatMemoryStore, Snapshot
from chatmemory.core.summarizing_memory import SummarizingChatMemory

__all__ = [
    "AsyncDriver",
    "ContractDriver",
    "HistoryView",
    "MemoryView",
    "StoreView",
    "SyncDriver",
    "VersionedView",
    "drive",
]

T = TypeVar("T")

MemoryView = aio.ChatMemory
"""What the cases call a memory: ``await memory.add(...)`` (a sync memory behind a view, or an async one)."""
StoreView = aio.ChatMemoryStore
"""What the cases call a store: ``await store.get_messages(...)``."""
VersionedView = aio.SupportsVersioning
"""A store view with ``await load`` / ``await save``."""
HistoryView = Any
"""A store view with ``await history`` / ``await trim_history`` (and the plain contract's methods)."""


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a case under the :class:`SyncDriver`) to its end.

    Raises:
        RuntimeError: the coroutine suspended (it awaited something that needs an event loop).
    """
    try:
        coroutine.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    coroutine.close()
    raise RuntimeError("a contract case suspended under the sync driver: it awaited a real awaitable")


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _SyncStoreView:
    """A sync store behind coroutine methods that call it and return at once."""

    def __init__(self, store: Any) -> None:
        self.wrapped: ChatMemoryStore = store

    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        return self.wrapped.get_messages(memory_id)

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        self.wrapped.update_messages(memory_id, messages)

    async def delete_messages(self, memory_id: str) -> None:
        self.wrapped.delete_messages(memory_id)

    async def read_raw(self, memory_id: str) -> list[bytes]:
        assert isinstance(self.wrapped, sync_store_protocols.SupportsRawRecords)
        return self.wrapped.read_raw(memory_id)

    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(self.wrapped, sync_store_protocols.SupportsRawRecords)
        self.wrapped.write_raw(memory_id, records)

    async def reseal(self, memory_id: str) -> Any:
        assert isinstance(self.wrapped, sync_store_protocols.SupportsReseal)
        return self.wrapped.reseal(memory_id)

    @property
    def keeps_history(self) -> bool:
        return bool(getattr(self.wrapped, "keeps_history", False))

    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        assert isinstance(self.wrapped, SupportsHistory)
        return self.wrapped.history(memory_id, after=after, limit=limit, reverse=reverse)

    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        assert isinstance(self.wrapped, SupportsHistory)
        return self.wrapped.trim_history(older_than=older_than, memory_id=memory_id)


class _SyncVersionedView(_SyncStoreView):
    """A versioned sync store behind coroutine methods."""

    async def load(self, memory_id: str) -> Snapshot:
        assert isinstance(self.wrapped, sync_store_protocols.SupportsVersioning)
        return self.wrapped.load(memory_id)

    async def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        assert isinstance(self.wrapped, sync_store_protocols.SupportsVersioning)
        return self.wrapped.save(memory_id, messages, expected_version)


class _SyncRecordedView(_SyncVersionedView):
    """A sync store that records writes' extra messages (``save_recorded``) behind coroutine methods."""

    async def save_recorded(
        self,
        memory_id: str,
        messages: Sequence[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        assert isinstance(self.wrapped, SupportsRecordedWrites)
        return self.wrapped.save_recorded(memory_id, messages, expected_version, also_recorded)


class _SyncMemoryView:
    """A sync window memory behind coroutine methods."""

    def __init__(self, memory: MessageWindowChatMemory | TokenWindowChatMemory | SummarizingChatMemory) -> None:
        self._memory = memory

    @property
    def id(self) -> str:
        return self._memory.id

    async def add(self, *messages: ChatMessage) -> None:
        self._memory.add(*messages)

    async def messages(self) -> list[ChatMessage]:
        return self._memory.messages()

    async def set(self, messages: Sequence[ChatMessage]) -> None:
        self._memory.set(messages)

    async def clear(self) -> None:
        self._memory.clear()


class ContractDriver:
    """What a case uses: the store (as an async view), its capabilities, memories, time and concurrency.

    Args:
        store: the store under test (sync for :class:`SyncDriver`, asyncio for :class:`AsyncDriver`).
        write_raw: the ``write_raw`` hook (may return an awaitable), or ``None``.
        make_ttl_store: the ``make_ttl_store`` hook (may return an awaitable), or ``None``.
        make_history_store: the ``make_history_store`` hook (may return an awaitable), or ``None``.
        make_encrypted_store: the ``make_encrypted_store`` hook (may return an awaitable), or ``None``.
    """

    def __init__(
        self,
        store: Any,
        write_raw: Callable[..., Any] | None,
        make_ttl_store: Callable[..., Any] | None,
        make_history_store: Callable[..., Any] | None = None,
        make_encrypted_store: Callable[..., Any] | None = None,
    ):
        self._store = store
        self._make_encrypted_store = make_encrypted_store
        self._write_raw = write_raw
        self._make_ttl_store = make_ttl_store
        self._make_history_store = make_history_store
        self.store: StoreView = self._view(store)
        """The store under test, awaited by the cases."""

    def _view(self, store: Any) -> StoreView:
        raise NotImplementedError

    def versioned_store(self) -> VersionedView | None:
        """The store with ``load``/``save`` when it supports versioning, else ``None``."""
        return self.store if isinstance(self.store, aio.SupportsVersioning) else None

    def versioned(self) -> VersionedView:
        """The store with ``load``/``save``; skips the case when the store has no versioning."""
        versioned = self.versioned_store()
        if versioned is None:
            pytest.skip("the store does not support versioning")
        return versioned

    async def memory_ids(self) -> list[str]:
        """Every id the store lists; skips the case when the store cannot list."""
        raise NotImplementedError

    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Plant ``records`` as the stored records of ``memory_id``; skips without a ``write_raw`` hook."""
        if self._write_raw is None:
            pytest.skip("no write_raw hook: corruption cases need one")
        await _maybe_await(self._write_raw(memory_id, records))

    async def ttl_store(self, seconds: float) -> StoreView:
        """A store of the same backend whose memories expire; skips without a ``make_ttl_store`` hook."""
        if self._make_ttl_store is None:
            pytest.skip("no make_ttl_store fixture: TTL cases need one")
        return self._view(await _maybe_await(self._make_ttl_store(seconds)))

    async def history_store(self, *, ttl: float | None = None, history_ttl: float | None = None) -> HistoryView:
        """A store of the same backend built with ``history=True``; skips without a ``make_history_store`` hook."""
        if self._make_history_store is None:
            pytest.skip("no make_history_store fixture: history cases need one")
        made = self._view(await _maybe_await(self._make_history_store(ttl=ttl, history_ttl=history_ttl)))
        assert isinstance(made, aio.SupportsHistory), "make_history_store must return a store with history"
        return made

    async def encrypted_store(self, encryption: Any, *, history: bool = False) -> StoreView:
        """A store of the same backend built with ``encryption=`` (``None``: plain) and ``history=``.

        Every store one test makes this way shares one namespace, so each reads what the others wrote.
        Skips without a ``make_encrypted_store`` hook.
        """
        if self._make_encrypted_store is None:
            pytest.skip("no make_encrypted_store fixture: encryption cases need one")
        return self._view(await _maybe_await(self._make_encrypted_store(encryption, history=history)))

    def memory(self, memory_id: str, *, store: StoreView | None = None, **options: Any) -> MemoryView:
        """A ``MessageWindowChatMemory`` of the suite's I/O style over ``store`` (the store under test)."""
        raise NotImplementedError

    def token_memory(self, memory_id: str, *, store: StoreView | None = None, **options: Any) -> MemoryView:
        """A ``TokenWindowChatMemory`` of the suite's I/O style over ``store`` (the store under test)."""
        raise NotImplementedError

    def summarizing_memory(self, memory_id: str, **options: Any) -> MemoryView:
        """A ``SummarizingChatMemory`` of the suite's I/O style over the store under test.

        ``options`` must hold a plain (not async) ``summarizer``: both styles call it.
        """
        raise NotImplementedError

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        raise NotImplementedError

    async def pause(self) -> None:
        """Let the other concurrent parts of a case run (a no-op on threads)."""
        raise NotImplementedError

    async def together(self, *parts: Coroutine[Any, Any, Any]) -> None:
        """Run ``parts`` concurrently (threads or tasks) until all end; re-raise the first failure."""
        raise NotImplementedError


class SyncDriver(ContractDriver):
    """Drives the cases against a sync store: plain calls, threads for concurrency, ``time.sleep``."""

    def _view(self, store: Any) -> StoreView:
        if isinstance(store, SupportsRecordedWrites):
            return _SyncRecordedView(store)
        if isinstance(store, sync_store_protocols.SupportsVersioning):
            return _SyncVersionedView(store)
        return _SyncStoreView(store)

    async def memory_ids(self) -> list[str]:
        """Every id the store lists; skips the case when the store cannot list."""
        if not isinstance(self._store, sync_store_protocols.SupportsListing):
            pytest.skip("the store does not list memory ids")
        return list(self._store.memory_ids())

    def _unwrap(self, store: StoreView | None) -> Any:
        return self._store if store is None else getattr(store, "wrapped", store)

    def memory(self, memory_id: str, *, store: StoreView | None = None, **options: Any) -> MemoryView:
        """A sync ``MessageWindowChatMemory`` behind coroutine methods."""
        return _SyncMemoryView(MessageWindowChatMemory(memory_id, store=self._unwrap(store), **options))

    def token_memory(self, memory_id: str, *, store: StoreView | None = None, **options: Any) -> MemoryView:
        """A sync ``TokenWindowChatMemory`` behind coroutine methods."""
        return _SyncMemoryView(TokenWindowChatMemory(memory_id, store=self._unwrap(store), **options))

    def summarizing_memory(self, memory_id: str, **options: Any) -> MemoryView:
        """A sync ``SummarizingChatMemory`` behind coroutine methods."""
        return _SyncMemoryView(SummarizingChatMemory(memory_id, store=self._store, **options))

    async def sleep(self, seconds: float) -> None:
        """``time.sleep``."""
        time.sleep(seconds)

    async def pause(self) -> None:
        """Nothing: threads are preempted anyway."""

    async def together(self, *parts: Coroutine[Any, Any, Any]) -> None:
        """Each part on its own thread."""
        errors: list[BaseException] = []

        def run(part: Coroutine[Any, Any, Any]) -> None:
            try:
                drive(part)
            except BaseException as exc:  # re-raised below, in the case's thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(part,)) for part in parts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]


class AsyncDriver(ContractDriver):
    """Drives the cases against an asyncio store: awaited calls, tasks for concurrency, ``asyncio.sleep``."""

    def _view(self, store: Any) -> StoreView:
        view: StoreView = store
        return view

    async def memory_ids(self) -> list[str]:
        """Every id the store lists (``async for``); skips the case when the store cannot list."""
        if not isinstance(self._store, aio.SupportsListing):
            pytest.skip("the store does not list memory ids")
        return [memory_id async for memory_id in self._store.memory_ids()]

    def memory(self, memory_id: str, *, store: StoreView | None = None, **options: Any) -> MemoryView:
        """A ``chatmemory.aio.MessageWindowChatMemory``."""
        return aio.MessageWindowChatMemory(memory_id, store=self.store if store is None else store, **options)

    def token_memory(self, memory_id: str, *, store: StoreView | None = None, **options: Any) -> MemoryView:
        """A ``chatmemory.aio.TokenWindowChatMemory``."""
        return aio.TokenWindowChatMemory(memory_id, store=self.store if store is None else store, **options)

    def summarizing_memory(self, memory_id: str, **options: Any) -> MemoryView:
        """A ``chatmemory.aio.SummarizingChatMemory``."""
        return aio.SummarizingChatMemory(memory_id, store=self.store, **options)

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(seconds)

    async def pause(self) -> None:
        """One trip around the event loop."""
        await asyncio.sleep(0)

    async def together(self, *parts: Coroutine[Any, Any, Any]) -> None:
        """Each part as a task."""
        results = await asyncio.gather(*parts, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
