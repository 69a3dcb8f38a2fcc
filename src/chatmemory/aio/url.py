"""``chatmemory.aio.open_store(url)``: the asyncio store a URL names, importing only that store's module.

What it returns is typed :class:`UrlStore`, the asyncio twin of :class:`chatmemory.stores.url.UrlStore`:
what every asyncio store a URL can name shares, ``async with`` included.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Protocol, TypeVar, runtime_checkable

from chatmemory.aio.store import ChatMemoryStore, SupportsHistory, SupportsListing, SupportsVersioning
from chatmemory.core.store import SupportsTTL
from chatmemory.stores.url import STORE_SCHEMES, open_store_from

__all__ = ["ASYNC_STORE_SCHEMES", "UrlStore", "open_store"]

_Store = TypeVar("_Store", bound="UrlStore")


@runtime_checkable
class UrlStore(ChatMemoryStore, SupportsVersioning, SupportsListing, SupportsTTL, SupportsHistory, Protocol):
    """What every asyncio store :func:`open_store` builds can do, whatever the URL.

    The contract (:class:`chatmemory.aio.ChatMemoryStore`), versioning, listing, ``ttl``, history (which
    raises :class:`~chatmemory.HistoryNotEnabledError` on a store built without ``history=True``) and the
    lifecycle: ``await store.aclose()`` or ``async with store``. Capabilities only some stores have are
    checked with ``isinstance`` (which narrows the type for mypy too), as for the sync
    :class:`chatmemory.stores.url.UrlStore`: ``SupportsSchema`` (SQL), ``SupportsLockedUpdate`` (every store
    but ``memory://``), ``SupportsRawRecords`` (every store but ``redis+langchain4j://``).
    """

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        ...

    async def aclose(self) -> None:
        """Close the client or engine the store built from the URL; idempotent."""
        ...

    async def __aenter__(self: _Store) -> _Store: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None: ...


ASYNC_STORE_SCHEMES: dict[str, str] = {
    scheme: target.replace("chatmemory.stores.", "chatmemory.aio.stores.", 1)
    for scheme, target in STORE_SCHEMES.items()
}
"""The schemes of :data:`chatmemory.stores.url.STORE_SCHEMES`, each served by the asyncio store of the same
name in :mod:`chatmemory.aio.stores` (``redis`` → ``chatmemory.aio.stores.redis:RedisChatMemoryStore``)."""


def open_store(url: str, **options: Any) -> UrlStore:
    """Open the asyncio store a URL names, passing ``options`` to its constructor.

    The same URLs as :func:`chatmemory.open_store` (``postgresql+psycopg://`` runs psycopg in its async
    mode). Building the store does no I/O, so this is a plain function: call it at startup, and close the
    store with ``await store.aclose()`` (or ``async with``); it owns the client or engine it builds.

    Raises:
        ValueError: the URL has no scheme, or no store serves it.
        MissingDependencyError: the store's extra is not installed (the message names it).
    """
    store: UrlStore = open_store_from(ASYNC_STORE_SCHEMES, url, options)
    return store
