"""Stores: where memories keep their messages. Each adapter module imports its driver on import only."""

from __future__ import annotations

from chatmemory.stores.memory import InMemoryChatMemoryStore
from chatmemory.stores.url import open_store

__all__ = ["InMemoryChatMemoryStore", "open_store"]
