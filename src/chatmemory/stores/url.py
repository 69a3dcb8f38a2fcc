"""``open_store(url)``: pick a store class by URL scheme, importing only that store's module.

What it returns is typed :class:`UrlStore`: the contract, the capabilities and the lifecycle that every
store a URL can name shares, so typed code can use the store (``with``, ``history``, ``memory_ids``…)
without knowing its class; the capabilities only some have are checked with ``isinstance``.
"""

from __future__ import annotations

import importlib
from types import TracebackType
from typing import Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit

from chatmemory.core.history import SupportsHistory
from chatmemory.core.store import ChatMemoryStore, SupportsListing, SupportsTTL, SupportsVersioning

__all__ = ["STORE_SCHEMES", "UrlStore", "open_store", "open_store_from"]

_Store = TypeVar("_Store", bound="UrlStore")


@runtime_checkable
class UrlStore(ChatMemoryStore, SupportsVersioning, SupportsListing, SupportsTTL, SupportsHistory, Protocol):
    """What every store :func:`open_store` builds can do, whatever the URL.

    The contract (:class:`~chatmemory.ChatMemoryStore`), versioning, listing, ``ttl``, history (which raises
    :class:`~chatmemory.HistoryNotEnabledError` on a store built without ``history=True``) and the
    lifecycle: ``close()`` or ``with``, after which every call raises :class:`~chatmemory.StoreError`.
    :class:`chatmemory.stores.url.UrlStore` is the type of what :func:`chatmemory.open_store` returns, and
    its asyncio twin :class:`chatmemory.aio.url.UrlStore` that of what :func:`chatmemory.aio.open_store`
    returns.

    Capabilities only some stores have stay out of this type; check for them with ``isinstance``, which
    narrows the type for mypy too::

        store = open_store(url)
        if isinstance(store, SupportsSchema):  # sqlite://, postgresql://, mysql://, mariadb://
            store.create_schema()

    :class:`~chatmemory.SupportsSchema` and :class:`~chatmemory.SupportsExpiryPurge`: the SQL store.
    :class:`~chatmemory.SupportsLockedUpdate`: every store but ``memory://``.
    :class:`~chatmemory.SupportsRawRecords`: every store but ``redis+langchain4j://``.
    """

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        ...

    def close(self) -> None:
        """Close the client or engine the store built from the URL; idempotent."""
        ...

    def __enter__(self: _Store) -> _Store: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None: ...


STORE_SCHEMES: dict[str, str] = {
    "memory": "chatmemory.stores.memory:InMemoryChatMemoryStore",
    "redis": "chatmemory.stores.redis:RedisChatMemoryStore",
    "rediss": "chatmemory.stores.redis:RedisChatMemoryStore",
    "redis+cluster": "chatmemory.stores.redis:RedisChatMemoryStore",
    "rediss+cluster": "chatmemory.stores.redis:RedisChatMemoryStore",
    "unix": "chatmemory.stores.redis:RedisChatMemoryStore",
    "redis+langchain4j": "chatmemory.stores.langchain4j_redis:LangChain4jRedisChatMemoryStore",
    "rediss+langchain4j": "chatmemory.stores.langchain4j_redis:LangChain4jRedisChatMemoryStore",
    "sqlite": "chatmemory.stores.sql:SQLChatMemoryStore",
    "postgresql": "chatmemory.stores.sql:SQLChatMemoryStore",
    "postgres": "chatmemory.stores.sql:SQLChatMemoryStore",
    "mysql": "chatmemory.stores.sql:SQLChatMemoryStore",
    "mariadb": "chatmemory.stores.sql:SQLChatMemoryStore",
    "mongodb": "chatmemory.stores.mongodb:MongoChatMemoryStore",
    "mongodb+srv": "chatmemory.stores.mongodb:MongoChatMemoryStore",
}
"""URL scheme (the part before any ``+driver`` suffix, except where listed whole) → ``module:Class``."""


def _target(scheme: str, schemes: dict[str, str]) -> str:
    scheme = scheme.lower()
    if scheme in schemes:
        return schemes[scheme]
    base = scheme.split("+", 1)[0]
    if base in schemes:
        return schemes[base]
    known = ", ".join(sorted(schemes))
    raise ValueError(f"no chatmemory store for URL scheme {scheme!r}; known schemes: {known}")


def open_store_from(schemes: dict[str, str], url: str, options: dict[str, Any]) -> Any:
    """Open the store ``schemes`` maps the URL's scheme to (``module:Class``), importing only that module.

    The one implementation behind :func:`open_store` and :func:`chatmemory.aio.open_store`.
    """
    scheme = urlsplit(url).scheme if isinstance(url, str) else ""
    if not scheme:
        raise ValueError(f"{url!r} is not a store URL (it has no scheme, e.g. redis://localhost:6379/0)")
    module_name, class_name = _target(scheme, schemes).split(":")
    # Schemes are case-insensitive (RFC 3986); the drivers behind the stores only know lower case.
    url = scheme.lower() + url[len(scheme) :]
    store_class = getattr(importlib.import_module(module_name), class_name)
    from_url = getattr(store_class, "from_url", None)
    return from_url(url, **options) if from_url is not None else store_class(url, **options)


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
    store: UrlStore = open_store_from(STORE_SCHEMES, url, options)
    return store
