"""The Redis store: ``from chatmemory.stores.redis import RedisChatMemoryStore``.

* :mod:`.keys` — where a memory lives (two keys in one hash slot);
* :mod:`.plan` — script calls from state (no I/O, no driver), built on :mod:`.cached` (what a store
  remembers of a memory), :mod:`.commands` (what an executor sends), :mod:`.outcomes` (what a script's
  reply means), :mod:`.diff` (the turn shortcut) and :mod:`.history` (the history's reads and trims);
* :mod:`.steps` — each operation written once, as a generator of commands (no I/O, no driver);
* ``scripts/*.lua`` — the scripts, one atomic round trip each;
* :mod:`.base` — what both executors share (options, client, cache, planner), with :mod:`.client` and
  :mod:`.sending` (one command, ``EVALSHA`` with ``EVAL`` on ``NOSCRIPT``); the loop that runs an
  operation is every store's (:mod:`chatmemory.stores.base.driving`);
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
