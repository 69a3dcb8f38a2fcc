"""The Redis store: ``from chatmemory.stores.redis import RedisChatMemoryStore``.

Each memory lives in a few keys of one hash slot (:mod:`.keys`) and is read or written by one Lua script
per operation (``scripts/*.lua``), one atomic round trip each. What a write sends is decided without I/O
(:mod:`.plan`, :mod:`.commands`, :mod:`.outcomes`), each operation is written once as a generator of
commands (:mod:`.operations`), and the executors only send them: :mod:`.executor` (blocking, behind the
:mod:`.store` facade) and :mod:`.aio` (asyncio, behind ``chatmemory.aio.stores.redis``).

Importing this package imports no driver: the plans work (and are tested) without redis-py; the store's
names are imported on first use and name the extra to install when redis-py is missing.

Guide: ``docs/store-redis.md``, ``docs/store-redis-cluster.md``; the parts: *Redis* in ``docs/stores.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chatmemory.stores.redis.outcomes import ReplicationError
    from chatmemory.stores.redis.store import Redis, RedisChatMemoryStore, RedisCluster

__all__ = ["Redis", "RedisChatMemoryStore", "RedisCluster", "ReplicationError"]

_MODULES = {"ReplicationError": "chatmemory.stores.redis.outcomes"}


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(_MODULES.get(name, "chatmemory.stores.redis.store")), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
