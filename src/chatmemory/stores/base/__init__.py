"""What every store shares, whatever its database and I/O style.

* :mod:`~chatmemory.stores.base.versions` — the version rule and the snapshot cache kept by version;
* :mod:`~chatmemory.stores.base.options` — constructor options validated with one wording;
* :mod:`~chatmemory.stores.base.facade` — closing, ``with`` / ``async with``, and one span per public call;
* :mod:`~chatmemory.stores.base.turns` — how writers of one memory take turns in the process;
* :mod:`~chatmemory.stores.base.aio` — a driver client per event loop, and admission in arrival order.

The retry policy (:mod:`chatmemory.core.retry`), the operation names of ``StoreError``
(:class:`chatmemory.core.errors.Operation`) and the seam (:mod:`chatmemory.core.driving`) live in core.
None of it does I/O: sync and async stores use the same pieces.
"""

from __future__ import annotations

from chatmemory.core.errors import Operation
from chatmemory.core.retry import Attempts, RetryPolicy
from chatmemory.stores.base.facade import AsyncStoreLifecycle, StoreLifecycle
from chatmemory.stores.base.options import (
    MAX_TTL_SECONDS,
    TTL,
    ttl_seconds,
    validate_prefix,
    validate_snapshot_cache_size,
)
from chatmemory.stores.base.versions import CachedState, SnapshotCache, new_incarnation, next_version, version_clock

__all__ = [
    "MAX_TTL_SECONDS",
    "TTL",
    "AsyncStoreLifecycle",
    "Attempts",
    "CachedState",
    "Operation",
    "RetryPolicy",
    "SnapshotCache",
    "StoreLifecycle",
    "new_incarnation",
    "next_version",
    "ttl_seconds",
    "validate_prefix",
    "validate_snapshot_cache_size",
    "version_clock",
]
