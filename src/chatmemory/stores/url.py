"""``open_store(url)``: pick a store class by URL scheme, importing only that store's module."""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit

from chatmemory.core.store import ChatMemoryStore

__all__ = ["STORE_SCHEMES", "open_store", "open_store_from"]

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


def open_store(url: str, **options: Any) -> ChatMemoryStore:
    """Open the store a URL names, passing ``options`` to its constructor.

    ``memory://``, ``redis://host/0``, ``unix:///run/redis.sock``, ``redis+cluster://host:7000``,
    ``sqlite:///file.db``,
    ``postgresql+psycopg://…``, ``mysql+pymysql://…``, ``mongodb://…``. The store owns (and closes) the
    client or engine it builds from the URL.

    Raises:
        ValueError: the URL has no scheme, or no store serves it.
        MissingDependencyError: the store's extra is not installed (the message names it).
    """
    store: ChatMemoryStore = open_store_from(STORE_SCHEMES, url, options)
    return store
