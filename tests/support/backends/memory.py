"""The in-memory store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatmemory import ChatMemoryStore, InMemoryChatMemoryStore


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
