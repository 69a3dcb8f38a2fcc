"""The in-memory store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatmemory import ChatMemoryStore, InMemoryChatMemoryStore, aio


class MemoryBackend:
    name = "memory"

    def make_store(self, **options: Any) -> ChatMemoryStore:
        return InMemoryChatMemoryStore(**options)

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
        return aio.InMemoryChatMemoryStore(**options)

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
