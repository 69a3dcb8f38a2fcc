"""A memory shared with a LangChain4j service: one Redis string per memory holding LangChain4j's JSON.

:class:`LangChain4jRedisChatMemoryStore` (sync) and its asyncio twin of the same name in
:mod:`chatmemory.aio.stores.langchain4j_redis` run the same operations (:mod:`.operations`, commands of
:mod:`.commands`) on the same decisions (:mod:`.plan`, :mod:`.keys`, :mod:`.outcomes`), share one base
(:mod:`.base`) and send with :mod:`.executor` and :mod:`.aio`. Needs the ``redis`` extra.
``open_store("redis+langchain4j://host:6379/0?key_prefix=chat:")`` opens one by URL.

Importing this package imports no driver, so the plans can be used (and tested) without redis-py; the
store is imported on first use and says which extra to install when redis-py is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chatmemory.stores.langchain4j_redis.store import LangChain4jRedisChatMemoryStore

__all__ = ["LangChain4jRedisChatMemoryStore"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("chatmemory.stores.langchain4j_redis.store"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
