"""What the sync and the asyncio Redis stores share of the driver: its errors, mapped to the store's.

``redis.asyncio`` raises the same exception classes as the sync client, so one mapping serves both.
"""

from __future__ import annotations

from chatmemory.core.errors import ChatMemoryError, CorruptedMemoryError, StoreError
from chatmemory.stores._optional import require

require("redis", feature="RedisChatMemoryStore", extra="redis")

from redis.exceptions import (  # noqa: E402 - only once the extra is known to be installed
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
)

__all__ = ["DRIVER_ERRORS", "NoScriptError", "store_error"]

DRIVER_ERRORS = (RedisError, RedisClusterException)
"""What the driver raises (a cluster client's ``RedisClusterException`` is not a ``RedisError``)."""

DECODING_CLIENT = (
    "RedisChatMemoryStore needs a client with decode_responses=False: message records are bytes. "
    "Create a separate client for the store, without decode_responses=True"
)


def store_error(exc: BaseException, operation: str, memory_id: str | None = None) -> ChatMemoryError:
    """The store's error for the driver's ``exc`` (raise it ``from exc``).

    A ``WRONGTYPE`` reply means a key of the memory holds a value of a type this store never writes
    there: the memory is damaged, not the server.
    """
    if isinstance(exc, ResponseError) and str(exc).startswith("WRONGTYPE") and memory_id is not None:
        return CorruptedMemoryError(
            memory_id, f"a key of the memory holds another type of value than this store writes ({exc})"
        )
    return StoreError(operation, memory_id, str(exc))
