"""``chatmemory.aio.open_store(url)``: the asyncio store a URL names, importing only that store's module."""

from __future__ import annotations

from typing import Any

from chatmemory.aio.store import ChatMemoryStore
from chatmemory.stores.url import STORE_SCHEMES, open_store_from

__all__ = ["ASYNC_STORE_SCHEMES", "open_store"]

ASYNC_STORE_SCHEMES: dict[str, str] = {
    scheme: target.replace("chatmemory.stores.", "chatmemory.aio.stores.", 1)
    for scheme, target in STORE_SCHEMES.items()
}
"""The schemes of :data:`chatmemory.stores.url.STORE_SCHEMES`, each served by the asyncio store of the same
name in :mod:`chatmemory.aio.stores` (``redis`` → ``chatmemory.aio.stores.redis:RedisChatMemoryStore``)."""


def open_store(url: str, **options: Any) -> ChatMemoryStore:
    """Open the asyncio store a URL names, passing ``options`` to its constructor.

    The same URLs as :func:`chatmemory.open_store` (``postgresql+psycopg://`` runs psycopg in its async
    mode). Building the store does no I/O, so this is a plain function: call it at startup, and close the
    store with ``await store.aclose()`` (or ``async with``); it owns the client or engine it builds.

    Raises:
        ValueError: the URL has no scheme, or no store serves it.
        MissingDependencyError: the store's extra is not installed (the message names it).
    """
    store: ChatMemoryStore = open_store_from(ASYNC_STORE_SCHEMES, url, options)
    return store
