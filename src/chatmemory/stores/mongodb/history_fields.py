"""What a write of a history store adds to its update: the history head and staged groups (pure, no driver).

The fields of a pipeline write (:func:`created_fields`, :func:`pinned_fields`) and the operators of a
fast-path turn (:func:`pinned_operators`); the layout they write is described in
:mod:`~chatmemory.stores.mongodb.history`.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from chatmemory.stores.mongodb.expressions import not_expired
from chatmemory.stores.mongodb.history import HAS_HID, PENDING, Document, HistoryConfig, HistoryState

__all__ = ["created_fields", "operators_allowed", "pinned_fields", "pinned_operators"]


def created_fields(config: HistoryConfig, records: Sequence[str | bytes], hid: int, is_new: Any) -> Document:
    """The history fields of a write that creates the window (the document is new, or its window expired).

    The history goes on if the document holds one that has not expired (``history_ttl`` longer than
    ``ttl``); else a new one starts with ``hid``.
    """
    live = {"$and": [{"$not": [is_new]}, HAS_HID, not_expired(config.history_field)]}
    base = {"$cond": [live, {"$toLong": {"$ifNull": ["$hseq", 0]}}, 0]}
    return {
        "hid": {"$cond": [live, "$hid", {"$literal": hid}]},
        "hrefresh": {"$cond": [live, "$hrefresh", "$$NOW"]},
        "hseq": {"$add": [base, len(records)]},
        "hpend": {"$cond": [live, PENDING, "$$REMOVE"]},
        "hlast": _last(records, {"$add": [base, 1]}),
    }


def _last(records: Sequence[str | bytes], first: Any) -> Any:
    if not records:
        return "$$REMOVE"
    return {"s": first, "r": {"$literal": list(records)}, "t": "$$NOW"}


def pinned_fields(
    state: HistoryState | None, records: Sequence[str | bytes], hid: int, refreshed: datetime.datetime | None = None
) -> Document:
    """The history fields of a write pinned to a version whose head ``state`` the store knows.

    ``refreshed``: the store set every entry's expiry from that time before this write.
    """
    if state is None or state.hid is None:
        return {
            "hid": {"$literal": hid}, "hrefresh": "$$NOW", "hseq": len(records), "hpend": "$$REMOVE",
            "hlast": _last(records, 1),
        }  # fmt: skip
    fields: Document = {
        "hseq": state.hseq + len(records),
        "hpend": "$$REMOVE" if state.copied else PENDING,
        "hlast": _last(records, state.hseq + 1),
    }
    if refreshed is not None:
        fields["hrefresh"] = {"$literal": refreshed}
    return fields


def pinned_operators(
    state: HistoryState, records: Sequence[str | bytes], refreshed: datetime.datetime | None = None
) -> tuple[Document, Document, Document, Document]:
    """The ``$set``, ``$unset``, ``$currentDate`` and ``$push`` of a pinned write sent as operators.

    Every group copied: they all go. Else (the store knows ``hlast``: it wrote it) the previous
    ``hlast`` is pushed onto ``hpend``, whose other groups stay.
    """
    assignments: Document = {"hseq": state.hseq + len(records)}
    if refreshed is not None:
        assignments["hrefresh"] = refreshed
    removals: Document = {}
    pushes: Document = {}
    if state.copied:
        removals["hpend"] = ""
    elif state.last is not None:
        last = state.last
        pushes["hpend"] = {"s": last.first, "r": list(last.records), "t": last.written_at}
    dates: Document = {}
    if records:
        assignments["hlast.s"] = state.hseq + 1
        assignments["hlast.r"] = list(records)
        dates["hlast.t"] = True
    else:
        removals["hlast"] = ""
    return assignments, removals, dates, pushes


def operators_allowed(state: HistoryState | None) -> bool:
    """Whether a pinned write over ``state`` may go as update operators (it knows what to do with the groups)."""
    return state is not None and state.hid is not None and (state.copied or state.last_known)
