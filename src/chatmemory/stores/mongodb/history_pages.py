"""Reading a page of a MongoDB history and trimming it: the queries and how their replies read (pure).

The layout they read is described in :mod:`~chatmemory.stores.mongodb.history`.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from chatmemory.core.errors import CorruptedMemoryError
from chatmemory.core.history import HistoryEntry, HistoryPage, HistoryQuery
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.mongodb.history import HAS_LAST, Document, HistoryHead, is_int

__all__ = ["page_of", "read_entries_filter", "stale_filter", "trim_filter", "trim_head"]


def read_entries_filter(memory_id: str, hid: int, query: HistoryQuery) -> tuple[Document, list[tuple[str, int]]]:
    """The filter and sort of a page's entries read (read ``query.limit + 1`` of them)."""
    filter: Document = {"m": memory_id, "h": hid}
    if query.after is not None:
        filter["s"] = {"$lt" if query.reverse else "$gt": query.after}
    direction = -1 if query.reverse else 1
    return filter, [("s", direction)]


def _decode(memory_id: str, sequence: int, record: object, codec: RecordCodec) -> ChatMessage:
    if not isinstance(record, (str, bytes)):
        raise CorruptedMemoryError(memory_id, f"history entry {sequence} is a BSON {type(record).__name__}")
    return codec.loads(record, memory_id)


def page_of(
    memory_id: str,
    query: HistoryQuery,
    documents: Iterable[Mapping[str, Any]],
    head: HistoryHead,
    codec: RecordCodec = PLAIN,
) -> HistoryPage:
    """The page made of the entries read and the head's groups not copied yet (merged, deduplicated).

    Raises:
        CorruptedMemoryError: an entry is not one this store wrote.
    """
    found: dict[int, tuple[object, datetime.datetime]] = {}
    for document in documents:
        sequence, written = document.get("s"), document.get("t")
        if not is_int(sequence) or not isinstance(written, datetime.datetime):
            raise CorruptedMemoryError(memory_id, "a history entry lacks its sequence or time")
        assert isinstance(sequence, int)
        found[sequence] = (document.get("r"), written)
    for group in head.groups:
        for offset, record in enumerate(group.records):
            sequence = group.first + offset
            if query.includes(sequence):
                found.setdefault(sequence, (record, group.written_at))
    order = sorted(found, reverse=query.reverse)[: query.limit + 1]
    entries = [HistoryEntry(s, _decode(memory_id, s, found[s][0], codec), found[s][1]) for s in order]
    return query.page(entries)


def trim_filter(cutoff: datetime.datetime, memory_id: str | None) -> Document:
    """The entries ``trim_history`` removes: written before ``cutoff`` (of ``memory_id``, or all)."""
    filter: Document = {"t": {"$lt": cutoff}}
    if memory_id is not None:
        filter = {"m": memory_id, **filter}
    return filter


def trim_head(cutoff: datetime.datetime, memory_id: str | None) -> tuple[Document, list[Document]]:
    """The filter and update that drop, from window documents, the groups written before ``cutoff``.

    A trimmed entry must not come back through a reader's merge of the groups; the version is left
    as it is (the window does not change).
    """
    cutoff_ms = {"$toLong": {"$literal": cutoff}}
    older = {"$lt": [{"$toLong": "$$this.t"}, cutoff_ms]}
    filter: Document = {"$or": [{"hlast.t": {"$lt": cutoff}}, {"hpend.t": {"$lt": cutoff}}]}
    if memory_id is not None:
        filter = {"_id": memory_id, **filter}
    last = {"$let": {"vars": {"this": "$hlast"}, "in": {"$cond": [older, "$$REMOVE", "$hlast"]}}}
    pending = {"$filter": {"input": {"$cond": [{"$isArray": "$hpend"}, "$hpend", []]}, "cond": {"$not": [older]}}}
    return filter, [{"$set": {"hlast": {"$cond": [HAS_LAST, last, "$$REMOVE"]}, "hpend": pending}}]


def stale_filter(memory_id: str, hid: int) -> Document:
    """The entries of ``memory_id`` that belong to an earlier history (removed when a new one starts)."""
    return {"m": memory_id, "h": {"$ne": hid}}
