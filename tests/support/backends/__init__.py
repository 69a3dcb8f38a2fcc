"""One module per store backend. Each exposes ``open_backend() -> Backend`` (session-wide).

A backend with an asyncio store also exposes ``open_async_backend() -> AsyncBackend``. Adding a backend is
one module here and one line in ``BACKENDS`` (and ``ASYNC_BACKENDS``) in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from chatmemory import ChatMemoryStore, InMemoryChatMemoryStore, aio


class Backend(Protocol):
    """What the test suite needs from a backend."""

    name: str

    def make_store(self, **options: Any) -> ChatMemoryStore:
        """A store in a fresh namespace (key prefix, table prefix, collection) on the backend's server.

        ``options`` are passed to the store's constructor (e.g. ``ttl=2``).
        """
        ...

    def write_raw(self, store: ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        """Make ``records`` the stored message records of ``memory_id``, bypassing all encoding.

        Each record is what the store persists for one message (``dumps_message`` form), possibly broken.
        """
        ...

    def close_store(self, store: ChatMemoryStore) -> None:
        """Drop the store's namespace and release its connections."""
        ...

    def close(self) -> None:
        """Release session-wide resources."""
        ...


class AsyncBackend(Protocol):
    """What the test suite needs from a backend's asyncio store.

    pytest-asyncio gives each test its own event loop, so an async backend builds a client per store
    (never one per session: a client is bound to the loop it was made on).
    """

    name: str

    async def make_store(self, **options: Any) -> aio.ChatMemoryStore:
        """An asyncio store in a fresh namespace, with its own client; ``options`` go to its constructor."""
        ...

    async def write_raw(self, store: aio.ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        """Make ``records`` the stored message records of ``memory_id``, bypassing all encoding."""
        ...

    async def close_store(self, store: aio.ChatMemoryStore) -> None:
        """Drop the store's namespace and close it."""
        ...

    def close(self) -> None:
        """Release session-wide resources."""
        ...


WITHOUT_ENCRYPTION = frozenset({"langchain4j_redis"})
"""Backends whose store has no ``encryption=`` (the LangChain4j layout is read by a JVM peer as it is)."""


def same_namespace(store: Any) -> dict[str, Any]:
    """The constructor option that puts another store on ``store``'s data."""
    if isinstance(store, (aio.InMemoryChatMemoryStore, InMemoryChatMemoryStore)):
        return {"shares_with": store}
    for option in ("key_prefix", "table_prefix"):
        if hasattr(store, option):
            return {option: getattr(store, option)}
    return {"collection": store.collection.name}
