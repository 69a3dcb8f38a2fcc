"""The writers' lock of a MongoDB memory: a lease document beside the memories (pure, no driver).

``modify`` queues the writers of one memory: first in the process (:mod:`chatmemory.stores.base.turns`,
which also hands the lock on between them), then on a document in ``<collection>_locks`` whose ``_id``
is the memory id, holding the holder's random token and the time its lease ends by the server's clock.
Taking the lock is one upsert that matches only an expired lease (or the taker's own, resent after a lost
reply): a live lease makes the upsert hit a duplicate key, and the taker sleeps a jittered backoff and
tries again. Giving it back deletes the document only while it still holds the taker's token.

A holder that died or hangs blocks the memory for at most its lease; one whose lease ran out while it
worked can no longer overwrite anything, because its write stays conditional on the version it read.
Listing, export and ``memory_ids`` read the memories collection only, never this one.
"""

from __future__ import annotations

from typing import Any, Final

from chatmemory.stores.base.turns import LockOptions
from chatmemory.stores.mongodb.expressions import NOW_MS

__all__ = ["LOCKS_SUFFIX", "acquire_filter", "acquire_update", "lock_collection_name", "release_filter"]

Document = dict[str, Any]

LOCKS_SUFFIX: Final = "_locks"


def lock_collection_name(collection: str) -> str:
    """The collection holding the writers' locks of the memories in ``collection``."""
    return f"{collection}{LOCKS_SUFFIX}"


_EXPIRED: Final = {
    # Dates are compared as milliseconds, as in expressions.py. A lease that is not a date (damaged, or
    # written by hand) counts as expired: such a document never blocks a memory.
    "$cond": [
        {"$eq": [{"$type": "$expires_at"}, "date"]},
        {"$lte": [{"$toLong": "$expires_at"}, NOW_MS]},
        True,
    ]
}


def acquire_filter(memory_id: str, token: bytes) -> Document:
    """The query of the upsert taking the lock: an expired lease, or this holder's own (a resend)."""
    return {"_id": memory_id, "$expr": {"$or": [{"$eq": ["$token", token]}, _EXPIRED]}}


def acquire_update(token: bytes, options: LockOptions) -> list[Document]:
    """The pipeline of the upsert taking the lock: this token, until the server's now plus the lease."""
    return [{"$set": {"token": token, "expires_at": {"$add": ["$$NOW", options.lease_ms]}}}]


def release_filter(memory_id: str, token: bytes) -> Document:
    """The query of the delete giving the lock back: only while it is still this holder's."""
    return {"_id": memory_id, "token": token}
