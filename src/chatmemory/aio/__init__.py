"""chatmemory on asyncio: the same memories, provider and stores, with coroutine methods.

``from chatmemory.aio import MessageWindowChatMemory, open_store`` gives the twins of the sync names, with
the same arguments and behaviour: ``await memory.add(...)``, ``await memory.messages()``. The stores live
in :mod:`chatmemory.aio.stores` (``chatmemory.aio.stores.redis.RedisChatMemoryStore``, ...), each behind
the same extra as its sync sibling and executing the same plans; close them with ``await store.aclose()``
or ``async with store:``. Importing this package imports no driver.
"""

from __future__ import annotations

from chatmemory.aio.memory import ChatMemory, MessageWindowChatMemory, TokenWindowChatMemory
from chatmemory.aio.provider import ChatMemoryProvider
from chatmemory.aio.store import (
    ChatMemoryStore,
    Snapshot,
    SupportsContentionHint,
    SupportsExpiryPurge,
    SupportsHistory,
    SupportsListing,
    SupportsLockedUpdate,
    SupportsRawRecords,
    SupportsReseal,
    SupportsSchema,
    SupportsTTL,
    SupportsVersioning,
)
from chatmemory.aio.stores.memory import InMemoryChatMemoryStore
from chatmemory.aio.summarizing_memory import SummarizingChatMemory
from chatmemory.aio.url import open_store

__all__ = [
    "ChatMemory",
    "ChatMemoryProvider",
    "ChatMemoryStore",
    "InMemoryChatMemoryStore",
    "MessageWindowChatMemory",
    "Snapshot",
    "SummarizingChatMemory",
    "SupportsExpiryPurge",
    "SupportsHistory",
    "SupportsListing",
    "SupportsContentionHint",
    "SupportsLockedUpdate",
    "SupportsRawRecords",
    "SupportsReseal",
    "SupportsSchema",
    "SupportsTTL",
    "SupportsVersioning",
    "TokenWindowChatMemory",
    "open_store",
]
