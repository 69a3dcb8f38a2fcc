"""What every versioned store shares, whatever its database and I/O style.

* :mod:`~chatmemory.stores.base.snapshot_cache` — the last state a store read or wrote per memory;
* :mod:`~chatmemory.stores.base.versions` — the version rule (time-based, never repeating);
* :mod:`~chatmemory.stores.base.retry` — one retry policy with a time budget and jittered backoff;
* :mod:`~chatmemory.stores.base.options` — constructor options validated with one wording;
* :mod:`~chatmemory.stores.base.operations` — the operation names driver errors are reported under;
* :mod:`~chatmemory.stores.base.lifecycle` — closing, ``with`` / ``async with``, use after close;
* :mod:`~chatmemory.stores.base.telemetry` — one span and metric sample per public store call.

None of it does I/O: sync and async stores use the same pieces.
"""

from __future__ import annotations

from chatmemory.stores.base.lifecycle import AsyncStoreLifecycle, StoreLifecycle
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.base.options import (
    MAX_TTL_SECONDS,
    TTL,
    ttl_seconds,
    validate_prefix,
    validate_snapshot_cache_size,
)
from chatmemory.stores.base.retry import Attempts, RetryPolicy
from chatmemory.stores.base.snapshot_cache import CachedState, SnapshotCache
from chatmemory.stores.base.versions import new_incarnation, next_version, version_clock

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
