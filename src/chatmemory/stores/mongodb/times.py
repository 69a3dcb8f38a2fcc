"""A MongoDB memory's write and expiry times: reading them and setting the expiry (pure, no driver)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from chatmemory.memory_times import MemoryTimes
from chatmemory.stores.mongodb.expressions import read_filter
from chatmemory.stores.mongodb.history import HistoryConfig
from chatmemory.stores.mongodb.outcomes import Document

__all__ = ["memory_times_of", "plan_expire_at"]


def memory_times_of(document: Mapping[str, Any] | None, field: str = "expires_at") -> MemoryTimes | None:
    """The write and expiry times a document holds (``None``: no live memory; a time it lacks is ``None``).

    ``written_at`` is set from the server's clock by every write of this store; a document written by an
    earlier version of the store has none. ``field`` holds the window's expiry.
    """
    if document is None:
        return None
    written, expires = document.get("written_at"), document.get(field)
    return MemoryTimes(
        written if isinstance(written, datetime.datetime) else None,
        expires if isinstance(expires, datetime.datetime) else None,
    )


def plan_expire_at(
    memory_id: str, when: datetime.datetime | None, history: HistoryConfig | None = None
) -> tuple[Document, Document | list[Document]]:
    """The filter and update that set a live memory's expiry to ``when`` (``None``: never); nothing is created.

    With a ``history_ttl`` the window's expiry is ``window_expires_at``, and the document (whose TTL
    index is on ``expires_at``) is kept at least until ``when`` (``None``: for good).

    Raises:
        ValueError: ``when`` is a naive datetime.
    """
    field = "expires_at" if history is None else history.window_field
    query = read_filter(memory_id, field=field)
    if when is None:
        if field == "expires_at":
            return query, {"$unset": {"expires_at": ""}}
        return query, {"$unset": {field: "", "expires_at": ""}}
    if not isinstance(when, datetime.datetime) or when.tzinfo is None:
        raise ValueError(f"expire_at takes an aware datetime (e.g. in UTC) or None, not {when!r}")
    when = when.astimezone(datetime.timezone.utc)
    if field == "expires_at":
        return query, {"$set": {"expires_at": when}}
    return query, [{"$set": {field: when, "expires_at": {"$max": [when, "$hexp"]}}}]
