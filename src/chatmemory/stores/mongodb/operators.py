"""The fast path of a MongoDB turn: a diff written as update operators (pure, no driver).

When the cached state and the server's clock are known, :func:`~chatmemory.stores.mongodb.plan.plan_save`
sends a turn as ``$push``/``$slice``, ``$inc`` and ``$currentDate`` instead of a pipeline: operators
cost a server less. This module builds that update.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from chatmemory.stores.mongodb.expressions import NOT_EXPIRED, WRITES_KEPT, check_size, not_expired
from chatmemory.stores.mongodb.history import WRITE_PROJECTION, HistoryConfig, HistoryState
from chatmemory.stores.mongodb.history_fields import pinned_operators
from chatmemory.stores.mongodb.layout import HeadTrim, MongoLayout, Record
from chatmemory.stores.mongodb.outcomes import Document, WritePlan

__all__ = ["operators_plan"]


def operators_plan(
    memory_id: str,
    expected_version: int,
    pinned: Document,
    trim: HeadTrim,
    appended: list[Record],
    layout: MongoLayout,
    records: tuple[Record, ...],
    ttl: float | None,
    server_now: datetime.datetime,
    *,
    write_id: int,
    incarnation: int,
    history: HistoryConfig | None = None,
    history_state: HistoryState | None = None,
    history_records: Sequence[Record] = (),
    refreshed: datetime.datetime | None = None,
) -> WritePlan:
    """A diff turn as update operators, guarded by the filter like :func:`_guarded_plan`.

    A history store sends it as ``find_one_and_update`` (its reply tells the write's server time,
    which the history entries carry) and only when every group the document holds is copied.
    """
    check_size(memory_id, records)
    version = expected_version + 1
    assignments: Document = {}
    removals: Document = {}
    pushes: Document = {"writes": {"$each": [{"w": write_id, "v": version}], "$slice": -WRITES_KEPT}}
    if not trim.array_length:
        assignments["messages"] = []
    elif trim.head_trim or appended:
        # A negative $slice keeps the last n elements: exactly the evicted head goes.
        pushes["messages"] = {"$each": appended, "$slice": -trim.array_length}
    if layout.system is None:
        if trim.system_changed:
            removals.update(system="", system_at="")
    else:
        if trim.system_changed:
            assignments["system"] = records[-1]
        assignments["system_at"] = layout.system_at
    dates: Document = {"written_at": True}
    if history is None:
        if ttl is None:
            removals["expires_at"] = ""
        else:
            assignments["expires_at"] = server_now + datetime.timedelta(seconds=ttl)
    else:
        assert history_state is not None
        expiry_set, expiry_unset = history.expiry_operators(server_now)
        history_set, history_unset, history_dates, history_pushes = pinned_operators(
            history_state, history_records, refreshed
        )
        assignments.update(expiry_set, **history_set)
        removals.update(expiry_unset, **history_unset)
        dates.update(history_dates)
        pushes.update(history_pushes)
    update: Document = {"$inc": {"version": 1}, "$currentDate": dates, "$push": pushes}
    if assignments:
        update["$set"] = assignments
    if removals:
        update["$unset"] = removals
    live = NOT_EXPIRED if history is None else not_expired(history.window_field)
    return WritePlan(
        memory_id,
        {"_id": memory_id, "version": expected_version, **pinned, "$expr": live},
        update,
        {} if history is None else dict(WRITE_PROJECTION),
        False,
        write_id,
        True,
        True,
        incarnation,
        layout,
        records,
        returns_document=history is not None,
        next_version=version,
        keeps_history=history is not None,
    )
