"""The Redis store: ``from chatmemory.stores.redis import RedisChatMemoryStore``.

* :mod:`.keys` — where a memory lives (two keys in one hash slot);
* :mod:`.plan` — script calls from state, outcomes from replies (no I/O, no driver);
* :mod:`.steps` — each operation as a sequence of plans (no I/O, no driver);
* ``scripts/*.lua`` — the scripts, one atomic round trip each;
* :mod:`.store` — the blocking executor (``chatmemory.aio.stores.redis`` is the asyncio one).

Importing this package imports no driver, so the plans can be used (and tested) without redis-py; the
store's names are imported on first use and say which extra to install when redis-py is missing.
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
