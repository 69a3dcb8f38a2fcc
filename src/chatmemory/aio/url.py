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
    """What every store :func:`open_store` builds can do, whatever the URL.

    The contract (:class:`chatmemory.aio.ChatMemoryStore`), versioning, listing, ``ttl``, history (which raises
    :class:`~chatmemory.HistoryNotEnabledError` on a store built without ``history=True``) and the
    lifecycle: ``aclose()`` or ``async with``, after which every call raises :class:`~chatmemory.StoreError`.
    :class:`chatmemory.stores.url.UrlStore` is the type of what :func:`chatmemory.open_store` returns, and
    its asyncio twin :class:`chatmemory.aio.url.UrlStore` that of what :func:`chatmemory.aio.open_store`
    returns.

    Capabilities only some stores have stay out of this type; check for them with ``isinstance``, which
    narrows the type for mypy too::

        store = open_store(url)
        if isinstance(store, SupportsSchema):  # sqlite://, postgresql://, mysql://, mariadb://
            await store.create_schema()

    :class:`chatmemory.aio.SupportsSchema` and :class:`chatmemory.aio.SupportsExpiryPurge`: the SQL store.
    :class:`chatmemory.aio.SupportsLockedUpdate`: every store but ``memory://``.
    :class:`chatmemory.aio.SupportsRawRecords`: every store but ``redis+langchain4j://``.
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
    """Open the store a URL names, passing ``options`` to its constructor.

    ``memory://``, ``redis://host/0``, ``unix:///run/redis.sock``, ``redis+cluster://host:7000``,
    ``sqlite:///file.db``, ``postgresql+psycopg://…``, ``mysql+pymysql://…``, ``mongodb://…``: the same URLs
    for :func:`chatmemory.open_store` and for its asyncio twin :func:`chatmemory.aio.open_store`, which opens
    the asyncio store (``postgresql+psycopg://`` runs psycopg in its async mode). An asyncio store does no I/O
    when built, so the asyncio twin is a plain function too: call it at startup. The store owns (and closes)
    the client or engine it builds from the URL. The store is typed :class:`UrlStore`, what every one of them
    can do; ``isinstance`` checks give the rest (``SupportsSchema``, ``SupportsLockedUpdate``, …).

    Raises:
        ValueError: the URL has no scheme, or no store serves it.
        MissingDependencyError: the store's extra is not installed (the message names it).
    """
    store: UrlStore = open_store_from(ASYNC_STORE_SCHEMES, url, options)
    return store
