"""The Redis store: ``from chatmemory.stores.redis import RedisChatMemoryStore``.

Each memory lives in a few keys of one hash slot (:mod:`.keys`) and is read or written by one Lua script
per operation (``scripts/*.lua``), one atomic round trip each. What a write sends is decided without I/O
(:mod:`.plan`), each operation is written once as a generator of commands (:mod:`.steps`), and the
executors only send them: :mod:`.store` (blocking) and ``chatmemory.aio.stores.redis`` (asyncio).

Importing this package imports no driver, so the plans can be used (and tested) without redis-py; the
store's names are imported on first use and say which extra to install when redis-py is missing.

Guide: ``docs/store-redis.md`` (and ``docs/store-redis-cluster.md``); where each part lives: *Redis* in
``docs/stores.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chatmemory.stores.redis.store import Redis, RedisChatMemoryStore, RedisCluster

__all__ = ["Redis", "RedisChatMemoryStore", "RedisCluster"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("chatmemory.stores.redis.store"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
