"""The MongoDB store's decisions, without I/O: what each read and write sends, and what a reply means.

A write is one ``findAndModify`` (``find_one_and_update``) whose update is an aggregation pipeline, so that
the server computes the version and the expiry from its own clock (``$$NOW``): a client whose clock is wrong
can neither see a live memory as expired nor lower a version (``version = max(previous + 1, now in µs)``,
``expires_at = now + ttl``). The reply is the document after the update, projected to a few small fields.
Every write carries a write id, and the document remembers the last :data:`WRITES_KEPT` of them with the
versions they made, so that a write resent after a lost reply is applied at most once and reported as
written. Two kinds of write:

* **guarded by the filter** — a ``save`` of a memory that exists: the filter names the version (and, for a
  diff, the incarnation) the plan was made against, and the memory must be live. A turn is then one small
  stage. No document back means another writer got there first (:class:`Conflict`), unless an earlier send
  of the same plan lost its reply: then the store reads the write ids (:class:`Verify`).
* **guarded in the pipeline** — creating a memory, and the unconditional writes (``update_messages``,
  ``write_raw``): the filter is the ``_id`` alone (an upsert), and the pipeline's first stage evaluates the
  condition (absent or expired; this write id not applied yet) into a temporary field that every later
  stage obeys. The reply's write ids say whether it was applied.

A duplicate-key error (two upserts creating one document at once) or a lost reply means :class:`Resend`:
send the same plan again, which its write id makes safe.

Dates are compared as milliseconds (``$toLong``): SecantusDB, the CI server, compares a stored date with
``$$NOW`` wrongly, and the conversion means the same on MongoDB 7.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from chatmemory import telemetry
from chatmemory.core.history import history_appends
from chatmemory.core.messages import ChatMessage
from chatmemory.memory_times import MemoryTimes
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
    HistoryState,
    created_fields,
    new_history_id,
    operators_allowed,
    pinned_fields,
    pinned_operators,
)
from chatmemory.stores.mongodb.layout import (
    HeadTrim,
    MemoryState,
    MongoLayout,
    Record,
    encode_record,
    plan_head_trim,
    plan_layout,
)

__all__ = [
    "DUPLICATE_KEY",
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

Document = dict[str, Any]

DUPLICATE_KEY: Final = 11000
"""Another upsert created the document first; resending the plan now finds it."""
WRITE_CONFLICT: Final = 112
"""Two operations touched the document at once (inside a caller's transaction); nothing was applied."""
NO_SUCH_TRANSACTION: Final = 251
"""A transaction the server aborted under us (only inside a caller's session); nothing was applied."""
RESEND_CODES: Final = frozenset({DUPLICATE_KEY, WRITE_CONFLICT, NO_SUCH_TRANSACTION})


_PROJECTION: Final = {"_id": 0, "version": 1, "writes": 1, "written_at": 1}
STAGED_ROOM: Final = bytes(COPY_AT_BYTES)
"""Stands for the records a history store's document may hold staged, in a size check."""
_VERSION_ONLY: Final = {"_id": 0, "version": 1, "written_at": 1}


@dataclass(frozen=True, slots=True)
class WritePlan:
    """One ``find_one_and_update`` and what the store caches once it lands.

    Attributes:
        memory_id: the memory written.
        filter: the query: the ``_id``, and for a write guarded by the filter its condition.
        update: the update: a pipeline, or update operators for a turn of a memory whose cached state
            and server clock are known (the fast path: see :func:`plan_save`).
        projection: the fields the reply carries.
        upsert: whether the write may create the document.
        write_id: the id the document remembers this write by.
        conditional: whether the write depends on the version it was planned against (``save``).
        guarded_by_filter: whether the condition is in the filter (a matched document means written)
            rather than in the pipeline (the reply's write ids say whether it was written).
        returns_document: whether the plan is sent as ``find_one_and_update`` (the reply is the projected
            document) or as ``update_one`` (the reply is the matched count; see ``next_version``).
        incarnation: the incarnation the document has once written; ``None`` for records written raw.
        layout: the messages written, laid out (``None`` for records written raw).
        records: the records of ``layout`` (array, then the held message).
        next_version: the version an ``update_one`` plan writes when it matches.
    """

    memory_id: str
    filter: Document
    update: list[Document] | Document
    projection: Document
    upsert: bool
    write_id: int
    conditional: bool
    guarded_by_filter: bool
    incarnation: int | None
    layout: MongoLayout | None
    records: tuple[Record, ...]
    returns_document: bool = True
    next_version: int | None = None
    """The version an ``update_one`` plan writes when it matches (its filter pins the previous one)."""
    keeps_history: bool = False
    """Whether the write records history: once it lands, the groups in the reply are copied."""
    history_id: int | None = None
    """The history id the write gives a history it starts (``None``: it starts none)."""

    @property
    def verify_filter(self) -> Document:
        """The query of a :class:`Verify` read."""
        return {"_id": self.memory_id}

    @property
    def verify_projection(self) -> Document:
        """The fields a :class:`Verify` read needs."""
        return dict(WRITE_PROJECTION if self.keeps_history else _PROJECTION)

    def state_at(self, version: int) -> MemoryState | None:
        """What a snapshot cache keeps once this write landed at ``version`` (``None``: nothing)."""
        if self.layout is None or self.incarnation is None:
            return None
        return MemoryState(version, self.incarnation, self.layout, self.records)


@dataclass(frozen=True, slots=True)
class WriteReply:
    """What the driver answered to a :class:`WritePlan`.

    Attributes:
        document: the document after the update, projected (``None``: no document matched).
        error_code: the server's error code when the write failed with one the plan knows how to
            handle (see :data:`RESEND_CODES`).
        lost: the connection failed after the command was sent: it may or may not have been applied.
        matched: how many documents an ``update_one`` plan matched.
    """

    document: Mapping[str, Any] | None = None
    error_code: int | None = None
    lost: bool = False
    matched: int | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """The write landed at ``version``; ``state`` is what to cache (``None``: forget the memory).

    ``server_time`` is the server's clock when it applied the write, if the reply told it.
    """

    version: int
    state: MemoryState | None
    server_time: datetime.datetime | None = None


@dataclass(frozen=True, slots=True)
class Conflict:
    """The memory was not at the expected version (or is gone); nothing was written."""


@dataclass(frozen=True, slots=True)
class Resend:
    """Whether the write landed is unknown or it raced an upsert: send the same plan again."""


@dataclass(frozen=True, slots=True)
class Verify:
    """The filter matched nothing after an earlier send lost its reply: check the write ids.

    Read the write ids (see :attr:`WritePlan.verify_filter`) and hand the document to :func:`verified_outcome`.
    """


WriteOutcome = Written | Conflict | Resend | Verify


def _written_version(document: Mapping[str, Any], write_id: int) -> int | None:
    writes = document.get("writes")
    if not isinstance(writes, list):
        return None
    for entry in reversed(writes):
        if isinstance(entry, Mapping) and entry.get("w") == write_id:
            version = entry.get("v")
            if isinstance(version, int) and not isinstance(version, bool):
                return version
    return None


def _server_time(document: Mapping[str, Any]) -> datetime.datetime | None:
    written = document.get("written_at")
    return written if isinstance(written, datetime.datetime) else None


def _by_write_id(plan: WritePlan, document: Mapping[str, Any]) -> Written | None:
    version = _written_version(document, plan.write_id)
    if version is None:
        return None
    # Cache the state only if nobody wrote after this write (a resend may find later writes on top).
    if document.get("version") != version:
        return Written(version, None)
    return Written(version, plan.state_at(version), _server_time(document))


def outcome_of(plan: WritePlan, reply: WriteReply, *, resent: bool = False) -> WriteOutcome:
    """What ``reply`` means for ``plan``; ``resent``: an earlier send of the same plan got no answer."""
    outcome = _outcome_of(plan, reply, resent)
    if isinstance(outcome, Written):
        telemetry.note(version=outcome.version)
    return outcome


def _outcome_of(plan: WritePlan, reply: WriteReply, resent: bool) -> WriteOutcome:
    if reply.lost or reply.error_code in RESEND_CODES:
        return Resend()
    document = reply.document
    if not plan.returns_document:
        if reply.matched and plan.next_version is not None:
            return Written(plan.next_version, plan.state_at(plan.next_version))
        return Verify() if resent else Conflict()
    if plan.guarded_by_filter:
        if document is None:
            return Verify() if resent else Conflict()
        version = document.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            return Conflict()  # pragma: no cover - the write always sets an int
        return Written(version, plan.state_at(version), _server_time(document))
    if document is None:
        return Resend()  # an upsert always returns a document
    written = _by_write_id(plan, document)
    if written is not None:
        return written
    # An unconditional write always applies unless it already did: its id is missing only if the
    # document was replaced between the two, so it goes again.
    return Conflict() if plan.conditional else Resend()


def verified_outcome(plan: WritePlan, document: Mapping[str, Any] | None) -> Written | Conflict:
    """What the write ids read for a :class:`Verify` say: an earlier send landed, or another writer won."""
    written = None if document is None else _by_write_id(plan, document)
    if written is None:
        return Conflict()
    telemetry.note(version=written.version)
    return written


def _note_whole(records: Sequence[Record]) -> None:
    """Report a write of the whole list (text records counted in characters)."""
    telemetry.note_write(appended=len(records), evicted=None, bytes=sum(map(len, records)))


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


def _records(layout: MongoLayout) -> tuple[Record, ...]:
    held = () if layout.system is None else (encode_record(layout.system),)
    return (*(encode_record(message) for message in layout.array), *held)


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
        dict(WRITE_PROJECTION if keeps_history else _PROJECTION),
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


def _operators_plan(
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
        history_records = tuple(encode_record(message) for message in history_appends(old, messages))
        # The document holds the window, this write's group and what may be staged before it.
        check_size(memory_id, (*_records(layout), *history_records, STAGED_ROOM))
    if expected_version == 0:
        records = _records(layout)
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
        records = _records(layout)
        _note_whole(records)
        incarnation = new_incarnation()
        fields = _whole_fields(layout, records, incarnation, ttl, history)
        if history is not None:
            fields.update(pinned_fields(history_state, history_records, hid or 0, refreshed))
        return _guarded_plan(
            memory_id, expected_version, {}, fields, write_id=write_id,
            incarnation=incarnation, layout=layout, records=records, history=history, history_id=hid,
        )  # fmt: skip
    records = cached.after(trim, layout)
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
        return _operators_plan(
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
    memory_id: str, messages: Sequence[ChatMessage], ttl: float | None, history: HistoryConfig | None = None
) -> WritePlan:
    """The write of ``messages`` whatever version the memory is at (``update_messages``).

    A store with ``history`` sends it only over a window it cannot read (to repair it): every message
    is recorded, as for a rewrite; the history goes on if it is live. Over a window it can read, it
    saves against what it read instead, so the history records only what was appended.
    """
    layout = plan_layout(messages)
    records = _records(layout)
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


# ----------------------------------------------------------------------------------- operators' times


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
