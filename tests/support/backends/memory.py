"""The in-memory store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatmemory import ChatMemoryStore, InMemoryChatMemoryStore, aio


class MemoryBackend:
    name = "memory"

    def make_store(self, **options: Any) -> ChatMemoryStore:
        shares_with = options.pop("shares_with", None)
        store = InMemoryChatMemoryStore(**options)
        if shares_with is not None:  # another view of the same memories (what another process sees elsewhere)
            share_state(store, shares_with)
        return store

    def write_raw(self, store: ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(store, InMemoryChatMemoryStore)
        store.write_raw(memory_id, records)

    def close_store(self, store: ChatMemoryStore) -> None:
        pass

    def close(self) -> None:
        pass


def open_backend() -> MemoryBackend:
    return MemoryBackend()


class AsyncMemoryBackend:
    name = "memory"

    async def make_store(self, **options: Any) -> aio.ChatMemoryStore:
        shares_with = options.pop("shares_with", None)
        store = aio.InMemoryChatMemoryStore(**options)
        if shares_with is not None:
            share_state(store._sync, shares_with._sync)
        return store

    async def write_raw(self, store: aio.ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(store, aio.InMemoryChatMemoryStore)
        await store.write_raw(memory_id, records)

    async def close_store(self, store: aio.ChatMemoryStore) -> None:
        assert isinstance(store, aio.InMemoryChatMemoryStore)
        await store.aclose()

    def close(self) -> None:
        pass


def open_async_backend() -> AsyncMemoryBackend:
    return AsyncMemoryBackend()


def share_state(store: InMemoryChatMemoryStore, source: InMemoryChatMemoryStore) -> None:
    """Make ``store`` hold the very memories (and histories, counters, lock) of ``source``."""
    for name in ("_entries", "_histories", "_sequences", "_versions", "_lock"):
        setattr(store, name, getattr(source, name))
