"""The MongoDB store's decisions, without I/O: what each read and write sends, and what a reply means.

A write is one ``findAndModify`` (``find_one_and_update``) whose update is an aggregation pipeline, so the
server computes the version and the expiry from its own clock (``$$NOW``). It is guarded by its filter (a
``save`` of a live memory at the version, and incarnation, it was planned against: no document back is a
:class:`Conflict`, or a :class:`Verify` if an earlier send may have lost its reply) or in the pipeline
(creating a memory, and the unconditional writes: an upsert whose first stage evaluates the condition).
Every write carries a write id and the document keeps the last :data:`WRITES_KEPT`, so a write sent again
(:class:`Resend`, after a lost reply or a duplicate key) is applied at most once. Dates are compared as
milliseconds (``$toLong``). Step by step: *How a write is guarded* in ``docs/store-mongodb.md``.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Sequence
from typing import Any, Final

from chatmemory import telemetry
from chatmemory.core.history import history_appends
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.base.versions import new_incarnation
from chatmemory.stores.mongodb.expressions import (
    IS_NEW,
    NOT_EXPIRED,
    NOW_MS,
    WRITE_IDS,
    WRITES_KEPT,
    check_size,
    expiry,
    live_filter,
    not_expired,
    read_filter,
    under,
    writes,
)
from chatmemory.stores.mongodb.history import (
    COPY_AT_BYTES,
    WRITE_PROJECTION,
    HistoryConfig,
    new_history_id,
)
from chatmemory.stores.mongodb.history_fields import created_fields, operators_allowed, pinned_fields
from chatmemory.stores.mongodb.layout import (
    MemoryState,
    MongoLayout,
    Record,
    encode_record,
    plan_head_trim,
    plan_layout,
)
from chatmemory.stores.mongodb.operators import operators_plan
from chatmemory.stores.mongodb.outcomes import (
    DUPLICATE_KEY,
    REPLY_PROJECTION,
    RESEND_CODES,
    Conflict,
    Document,
    Resend,
    Verify,
    WriteOutcome,
    WritePlan,
    WriteReply,
    Written,
    outcome_of,
    verified_outcome,
)
from chatmemory.stores.mongodb.times import memory_times_of, plan_expire_at

__all__ = [
    "DUPLICATE_KEY",
    "RESEND_CODES",
    "WRITES_KEPT",
    "Conflict",
    "Document",
    "Resend",
    "Verify",
    "WriteOutcome",
    "WritePlan",
    "WriteReply",
    "Written",
    "live_filter",
    "new_write_id",
    "outcome_of",
    "plan_raw_write",
    "plan_replace",
    "plan_save",
    "memory_times_of",
    "plan_expire_at",
    "read_filter",
    "verified_outcome",
]

STAGED_ROOM: Final = bytes(COPY_AT_BYTES)
"""Stands for the records a history store's document may hold staged, in a size check."""
_VERSION_ONLY: Final = {"_id": 0, "version": 1, "written_at": 1}

# ----------------------------------------------------------------------------------------- planning


def _whole_fields(
    layout: MongoLayout,
    records: Sequence[Record],
    incarnation: int | None,
    ttl: float | None,
    history: HistoryConfig | None = None,
) -> Document:
    array_end = len(layout.array) if layout.system is not None else len(records)
    fields: Document = {
        "incarnation": {"$literal": incarnation} if incarnation is not None else "$$REMOVE",
        "messages": {"$literal": list(records[:array_end])},
        "system": {"$literal": records[-1]} if layout.system is not None else "$$REMOVE",
        "system_at": {"$literal": layout.system_at} if layout.system is not None else "$$REMOVE",
    }
    if history is None:
        fields["expires_at"] = expiry(ttl)
    else:
        fields.update(history.expiry_fields())
    fields["written_at"] = "$$NOW"
    return fields


def _records(layout: MongoLayout, memory_id: str, codec: RecordCodec) -> tuple[Record, ...]:
    held = () if layout.system is None else (encode_record(layout.system, memory_id, codec),)
    return (*(encode_record(message, memory_id, codec) for message in layout.array), *held)


def _plan(
    memory_id: str,
    condition: Any,
    fields: Document,
    *,
    upsert: bool,
    write_id: int,
    conditional: bool,
    incarnation: int | None,
    layout: MongoLayout | None,
    records: tuple[Record, ...],
    history_id: int | None = None,
    keeps_history: bool = False,
) -> WritePlan:
    """A write guarded in the pipeline by ``condition``."""
    check_size(memory_id, records)
    fields["writes"] = writes(write_id, "$version")
    return WritePlan(
        memory_id,
        {"_id": memory_id},
        under(condition, **fields),
        dict(WRITE_PROJECTION if keeps_history else REPLY_PROJECTION),
        upsert,
        write_id,
        conditional,
        False,
        incarnation,
        layout,
        records,
        keeps_history=keeps_history,
        history_id=history_id,
    )


def _guarded_plan(
    memory_id: str,
    expected_version: int,
    filter: Document,
    fields: Document,
    *,
    write_id: int,
    incarnation: int | None,
    layout: MongoLayout,
    records: tuple[Record, ...],
    history: HistoryConfig | None = None,
    history_id: int | None = None,
) -> WritePlan:
    """A ``save`` guarded by ``filter``: one stage, which only runs on the document planned against."""
    check_size(memory_id, records)
    # The filter pins the version, so the next one needs no look at the stored value.
    version = {"$max": [expected_version + 1, {"$multiply": [NOW_MS, 1000]}]}
    stage = {"version": version, **fields, "writes": writes(write_id, version)}
    live = NOT_EXPIRED if history is None else not_expired(history.window_field)
    return WritePlan(
        memory_id,
        {"_id": memory_id, "version": expected_version, **filter, "$expr": live},
        [{"$set": stage}],
        dict(_VERSION_ONLY if history is None else WRITE_PROJECTION),
        False,
        write_id,
        True,
        True,
        incarnation,
        layout,
        records,
        keeps_history=history is not None,
        history_id=history_id,
    )


def new_write_id() -> int:
    """A random 62-bit write id (fits a BSON int64; unpredictable across processes and forks)."""
    return secrets.randbits(62)


def plan_save(
    memory_id: str,
    messages: Sequence[ChatMessage],
    expected_version: int,
    cached: MemoryState | None,
    ttl: float | None,
    *,
    server_now: datetime.datetime | None = None,
    history: HistoryConfig | None = None,
    refreshed: datetime.datetime | None = None,
    also_recorded: Sequence[ChatMessage] = (),
    codec: RecordCodec = PLAIN,
) -> WritePlan:
    """The write of ``messages`` if the memory is still at ``expected_version`` (``0``: absent or expired).

    With ``cached`` at ``expected_version``, a turn that only evicts from the head and appends sends the
    appended records and the array's new length; otherwise the document is written whole, under a new
    incarnation. Such a turn is sent as update operators in an ``update_one`` (``$push`` with
    ``$each``/``$slice``, ``$inc``) when ``server_now`` (the server's clock, as
    :class:`~chatmemory.stores.mongodb.clock.ServerClock` estimates it) is known: operators cost a server
    less than a pipeline, and the version the filter pins needs no clock (``expected + 1`` stays below the
    clock in µs, so a memory created again later still starts above it). The decision whether the memory
    is live stays the server's.

    A store with ``history`` must pass ``cached`` at ``expected_version`` (read it first if it has none):
    the messages the write appends to the history are the sequence diff of that window and ``messages``
    (see :mod:`chatmemory.stores.mongodb.history`). ``refreshed``: the store set the expiry of every
    entry from that time before this write (:func:`~chatmemory.stores.mongodb.history.refresh_due`).
    ``also_recorded``: with ``history``, messages recorded before what the write appends (evicted within
    the add that wrote them); ignored without.

    Raises:
        ValueError: ``history`` is given without a ``cached`` state at ``expected_version``.
    """
    layout = plan_layout(messages)
    write_id = new_write_id()
    if history is not None and expected_version != 0 and (cached is None or cached.version != expected_version):
        raise ValueError("a history store plans a save against the state it read at the expected version")
    history_records: tuple[Record, ...] = ()
    if history is not None:
        old = cached.layout.messages() if cached is not None and expected_version != 0 else []
        said = (*also_recorded, *history_appends(old, messages))
        history_records = tuple(encode_record(message, memory_id, codec) for message in said)
        # The document holds the window, this write's group and what may be staged before it.
        check_size(memory_id, (*_records(layout, memory_id, codec), *history_records, STAGED_ROOM))
    if expected_version == 0:
        records = _records(layout, memory_id, codec)
        _note_whole(records)
        incarnation = new_incarnation()
        if history is None:
            condition: Any = {"$or": [IS_NEW, {"$not": [NOT_EXPIRED]}]}
            fields = _whole_fields(layout, records, incarnation, ttl)
            return _plan(
                memory_id, condition, fields, upsert=True, write_id=write_id, conditional=True,
                incarnation=incarnation, layout=layout, records=records,
            )  # fmt: skip
        started = new_history_id()
        condition = {"$or": [IS_NEW, {"$not": [not_expired(history.window_field)]}]}
        fields = _whole_fields(layout, records, incarnation, ttl, history)
        fields.update(created_fields(history, history_records, started, IS_NEW))
        return _plan(
            memory_id, condition, fields, upsert=True, write_id=write_id, conditional=True,
            incarnation=incarnation, layout=layout, records=records, history_id=started, keeps_history=True,
        )  # fmt: skip
    trim = None
    if cached is not None and cached.version == expected_version and cached.incarnation is not None:
        trim = plan_head_trim(cached.layout, layout)
    history_state = cached.history if cached is not None else None
    hid = new_history_id() if history is not None and (history_state is None or history_state.hid is None) else None
    if trim is None or cached is None or cached.incarnation is None:
        records = _records(layout, memory_id, codec)
        _note_whole(records)
        incarnation = new_incarnation()
        fields = _whole_fields(layout, records, incarnation, ttl, history)
        if history is not None:
            fields.update(pinned_fields(history_state, history_records, hid or 0, refreshed))
        return _guarded_plan(
            memory_id, expected_version, {}, fields, write_id=write_id,
            incarnation=incarnation, layout=layout, records=records, history=history, history_id=hid,
        )  # fmt: skip
    records = cached.after(trim, layout, memory_id, codec)
    incarnation = cached.incarnation  # type: ignore[assignment]  # an int or an earlier store's token
    array_end = len(records) - (layout.system is not None)
    appended = list(records[array_end - len(trim.appended) : array_end])
    telemetry.note_write(appended=len(appended), evicted=trim.head_trim, bytes=sum(map(len, appended)))
    # The incarnation pins the exact document the cached layout came from, so a memory deleted and
    # created again can never receive a diff computed against its predecessor.
    pinned = {"incarnation": {"$eq": incarnation}, "messages": {"$type": "array"}}
    operators = server_now is not None and (history is None or operators_allowed(history_state))
    if operators:
        assert server_now is not None
        return operators_plan(
            memory_id, expected_version, pinned, trim, appended, layout, records, ttl, server_now,
            write_id=write_id, incarnation=incarnation, history=history, history_state=history_state,
            history_records=history_records, refreshed=refreshed,
        )  # fmt: skip
    fields = {}
    if trim.head_trim or appended:
        grown = {"$concatArrays": ["$messages", {"$literal": appended}]}
        fields["messages"] = {"$slice": [grown, -trim.array_length]} if trim.array_length else []
    if layout.system is None:
        if trim.system_changed:
            fields.update(system="$$REMOVE", system_at="$$REMOVE")
    else:
        if trim.system_changed:
            fields["system"] = {"$literal": records[-1]}
        fields["system_at"] = {"$literal": layout.system_at}
    if history is None:
        fields["expires_at"] = expiry(ttl)
    else:
        fields.update(history.expiry_fields())
        fields.update(pinned_fields(history_state, history_records, hid or 0, refreshed))
    fields["written_at"] = "$$NOW"
    return _guarded_plan(
        memory_id, expected_version, pinned, fields, write_id=write_id,
        incarnation=incarnation, layout=layout, records=records, history=history, history_id=hid,
    )  # fmt: skip


def plan_replace(
    memory_id: str,
    messages: Sequence[ChatMessage],
    ttl: float | None,
    history: HistoryConfig | None = None,
    codec: RecordCodec = PLAIN,
) -> WritePlan:
    """The write of ``messages`` whatever version the memory is at (``update_messages``).

    A store with ``history`` sends it only over a window it cannot read (to repair it): every message
    is recorded, as for a rewrite; the history goes on if it is live. Over a window it can read, it
    saves against what it read instead, so the history records only what was appended.
    """
    layout = plan_layout(messages)
    records = _records(layout, memory_id, codec)
    if history is None:
        return _unconditional(memory_id, layout, records, new_incarnation(), ttl)
    started = new_history_id()
    extra = created_fields(history, records_in_order(layout, records), started, IS_NEW)
    return _unconditional(memory_id, layout, records, new_incarnation(), ttl, history, extra, started)


def records_in_order(layout: MongoLayout, records: Sequence[Record]) -> tuple[Record, ...]:
    """``records`` (the array's, then the held message's) in window order."""
    if layout.system is None:
        return tuple(records)
    ordered = list(records[:-1])
    ordered.insert(layout.system_at, records[-1])
    return tuple(ordered)


def plan_raw_write(
    memory_id: str, records: Sequence[bytes], ttl: float | None, history: HistoryConfig | None = None
) -> WritePlan:
    """The write of raw ``records`` as the memory's array, whatever version it is at (``write_raw``).

    Records that are UTF-8 are stored as text, as the store stores its own; others as binary. A store
    with ``history`` records nothing in the history for them (a raw write plants a window; it is no
    conversation turn) and leaves the history head as it is.
    """
    stored: list[Record] = []
    for record in records:
        data = bytes(record)
        try:
            stored.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            stored.append(data)
    return _unconditional(memory_id, MongoLayout(()), tuple(stored), None, ttl, history)


def _note_whole(records: Sequence[Record]) -> None:
    """Report a write of the whole list (text records counted in characters)."""
    telemetry.note_write(appended=len(records), evicted=None, bytes=sum(map(len, records)))


def _unconditional(
    memory_id: str,
    layout: MongoLayout,
    records: tuple[Record, ...],
    incarnation: int | None,
    ttl: float | None,
    history: HistoryConfig | None = None,
    history_fields: Document | None = None,
    history_id: int | None = None,
) -> WritePlan:
    write_id = new_write_id()
    _note_whole(records)
    fields = _whole_fields(layout, records, incarnation, ttl, history)
    fields.update(history_fields or {})
    # Applies once: a resend after a lost reply finds its write id and changes nothing.
    condition = {"$not": [{"$in": [{"$literal": write_id}, WRITE_IDS]}]}
    return _plan(
        memory_id, condition, fields, upsert=True, write_id=write_id, conditional=False,
        incarnation=incarnation, layout=layout if incarnation is not None else None, records=records,
        history_id=history_id, keeps_history=history_fields is not None,
    )  # fmt: skip
