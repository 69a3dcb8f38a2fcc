"""A memory shared with a LangChain4j service: one Redis string per memory holding LangChain4j's JSON.

:class:`LangChain4jRedisChatMemoryStore` (sync) and its asyncio twin of the same name in
:mod:`chatmemory.aio.stores.langchain4j_redis` run the same operations (:mod:`.operations`, commands of
:mod:`.commands`) on the same decisions (:mod:`.plan`, :mod:`.history`) and share one base (:mod:`.base`);
:mod:`.value` is the stored value. Needs the ``redis`` extra. ``open_store("redis+langchain4j://host:6379/0?key_prefix=chat:")``
opens one by URL.
"""

from __future__ import annotations

from chatmemory.stores.langchain4j_redis.store import LangChain4jRedisChatMemoryStore

__all__ = ["LangChain4jRedisChatMemoryStore"]
