"""The aggregation expressions the MongoDB store's plans are built from (pure: no I/O, no driver).

Dates are compared as milliseconds (``$toLong``): SecantusDB, the CI server, compares a stored date with
``$$NOW`` wrongly, and the conversion means the same on MongoDB 7. A sub-document's field is read with
``$map`` rather than a dotted path over an array (``"$writes.w"``), which SecantusDB does not resolve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from chatmemory.core.errors import StoreError
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.mongodb.layout import Record

__all__ = [
    "IS_NEW",
    "MAX_DOCUMENT_BYTES",
    "NEXT_VERSION",
    "NOT_EXPIRED",
    "NOW_MS",
    "TOO_LARGE_ADVICE",
    "WRITES_KEPT",
    "WRITE_IDS",
    "check_size",
    "expiry",
    "live_filter",
    "not_expired",
    "read_filter",
    "under",
    "writes",
]

Document = dict[str, Any]

WRITES_KEPT: Final = 8
"""How many write ids a document remembers: a resend finds its own among them unless 8 writes came between."""

MAX_DOCUMENT_BYTES: Final = 16 * 1024 * 1024
"""MongoDB's document size limit."""
TOO_LARGE_ADVICE: Final = (
    "A memory is one document, which MongoDB limits to 16 MiB; keep the window smaller (max_messages / "
    "max_tokens) or the messages shorter. Nothing was changed"
)
_ELEMENT_OVERHEAD: Final = 16
"""BSON bytes around each array element (type, index key, length, terminator), rounded up."""
_FIELDS_OVERHEAD: Final = 4096
"""Room for every field but the records (version, incarnation, expiry, write ids, names)."""

OK_FIELD: Final = "_chatmemory_ok"
"""The temporary field holding a write's condition between the pipeline's stages."""

NOW_MS: Final = {"$toLong": "$$NOW"}


def not_expired(field: str = "expires_at") -> Document:
    """The expression: the date in ``field`` is still ahead (no date, or not a date: never expires)."""
    return {
        "$cond": [
            {"$eq": [{"$type": f"${field}"}, "date"]},
            {"$gt": [{"$toLong": f"${field}"}, NOW_MS]},
            True,
        ]
    }


NOT_EXPIRED: Final = not_expired()
IS_NEW: Final = {"$eq": [{"$size": {"$objectToArray": "$$ROOT"}}, 1]}
"""The document holds nothing but its ``_id``: the upsert is creating it."""
WRITES: Final = {"$cond": [{"$isArray": "$writes"}, "$writes", []]}
WRITE_IDS: Final = {"$map": {"input": WRITES, "in": "$$this.w"}}
NEXT_VERSION: Final = {
    "$max": [
        {"$add": [{"$cond": [{"$isNumber": "$version"}, {"$toLong": "$version"}, 0]}, 1]},
        {"$multiply": [NOW_MS, 1000]},
    ]
}


def read_filter(memory_id: str, server_now_known: bool = False, field: str = "expires_at") -> Document:
    """The filter of a read: the memory, if it has not expired by the server's clock.

    With the server's clock known to the client (``server_now_known``), the filter is the ``_id`` alone
    and the client judges expiry (:func:`~chatmemory.stores.mongodb.clock.expired`), sparing the server
    an expression per read. ``field`` holds the window's expiry.
    """
    if server_now_known:
        return {"_id": memory_id}
    return {"_id": memory_id, "$expr": NOT_EXPIRED if field == "expires_at" else not_expired(field)}


def live_filter(field: str = "expires_at") -> Document:
    """The filter of a listing: every memory that has not expired by the server's clock."""
    return {"$expr": NOT_EXPIRED if field == "expires_at" else not_expired(field)}


def under(condition: Any, **fields: Any) -> list[Document]:
    """The pipeline: evaluate ``condition``, then set each field to its new value only if it holds."""
    kept = {name: {"$cond": [f"${OK_FIELD}", value, f"${name}"]} for name, value in fields.items()}
    return [
        {"$set": {OK_FIELD: condition}},
        {"$set": {"version": {"$cond": [f"${OK_FIELD}", NEXT_VERSION, "$version"]}}},
        {"$set": kept},
        {"$unset": OK_FIELD},
    ]


def expiry(ttl: float | None) -> Any:
    """The expression of a memory's expiry time: ``ttl`` seconds after the server's now, or no field."""
    return "$$REMOVE" if ttl is None else {"$add": ["$$NOW", round(ttl * 1000)]}


def writes(write_id: int, version: Any) -> Document:
    """The expression of the recent write ids after this write (``version``: the version it makes)."""
    entry = {"w": {"$literal": write_id}, "v": version}
    return {"$slice": [{"$concatArrays": [WRITES, [entry]]}, -WRITES_KEPT]}


def check_size(memory_id: str, records: Sequence[Record]) -> None:
    """Refuse a document past MongoDB's limit before sending it (a server may not say why it failed)."""
    # Characters count at most 4 bytes each: only a window near the limit is measured exactly.
    if sum(map(len, records)) * 4 + (_ELEMENT_OVERHEAD * len(records)) + _FIELDS_OVERHEAD <= MAX_DOCUMENT_BYTES:
        return
    size = sum(len(r.encode("utf-8", "surrogatepass")) if isinstance(r, str) else len(r) for r in records)
    size += _ELEMENT_OVERHEAD * len(records) + _FIELDS_OVERHEAD
    if size > MAX_DOCUMENT_BYTES:
        raise StoreError(
            Operation.WRITE, memory_id, f"the document would hold about {size} bytes of messages. {TOO_LARGE_ADVICE}"
        )
