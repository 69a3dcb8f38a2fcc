"""The MongoDB store's decisions, without I/O: :class:`MongoPlanner` turns a request into what to send.

A write is one ``findAndModify`` whose update is an aggregation pipeline, so the server computes the
version and the expiry from its own clock (``$$NOW``), or, for a turn whose cached state and server clock
are known, update operators in an ``update_one``. It is guarded by its filter (a ``save`` of a live
memory at the version, and incarnation, it was planned against) or in the pipeline (creating a memory,
and the unconditional writes). Every write carries a write id and the document keeps the last
:data:`~chatmemory.stores.mongodb.layout.WRITES_KEPT`, so a write sent again is applied at most once.
What a reply means is :mod:`~chatmemory.stores.mongodb.outcomes`'. Step by step: *How a write is
guarded* in ``docs/store-mongodb.md``.
"""

from __future__ import annotations

import datetime
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from chatmemory import telemetry
from chatmemory.core.errors import Operation
from chatmemory.core.history import history_appends
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.store import validate_memory_id
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stored_memories import NewMemory
from chatmemory.stores.base.turns import LockOptions
from chatmemory.stores.base.versions import new_incarnation, next_version
from chatmemory.stores.mongodb.commands import Command, Result, Target, call
from chatmemory.stores.mongodb.history import created_fields, operators_allowed, pinned_fields, pinned_operators
from chatmemory.stores.mongodb.layout import (
    COPY_AT_BYTES,
    IS_NEW,
    NOT_EXPIRED,
    NOW_MS,
    WRITE_IDS,
    WRITE_PROJECTION,
    WRITES_KEPT,
    Document,
    HeadTrim,
    HistoryConfig,
    HistoryState,
    MemoryState,
    MongoLayout,
    Record,
    check_size,
    encode_record,
    expiry,
    live_filter,
    new_history_id,
    not_expired,
    plan_head_trim,
    plan_layout,
    read_filter,
    under,
    writes,
)
from chatmemory.stores.mongodb.outcomes import REPLY_PROJECTION, WritePlan

__all__ = ["MAX_AGE", "MongoPlanner", "ServerClock", "expired", "new_write_id", "records_in_order"]

STAGED_ROOM: Final = bytes(COPY_AT_BYTES)
"""Stands for the records a history store's document may hold staged, in a size check."""
_VERSION_ONLY: Final = {"_id": 0, "version": 1, "written_at": 1}
_WRITE: Final = Operation.WRITE
MAX_AGE: Final = 60.0
"""Seconds an offset of the server's clock learned from a reply is used for."""


def new_write_id() -> int:
    """A random 62-bit write id (fits a BSON int64; unpredictable across processes and forks)."""
    return secrets.randbits(62)


class _Turn(NamedTuple):
    """A ``save`` pinned to a version, as planned so far (what the guarded forms of it share)."""

    memory_id: str
    expected_version: int
    write_id: int
    incarnation: Any
    layout: MongoLayout
    records: tuple[Record, ...]
    history_state: HistoryState | None = None
    history_records: tuple[Record, ...] = ()
    refreshed: datetime.datetime | None = None
    history_id: int | None = None


class MongoPlanner:
    """What a MongoDB store sends, from its configuration and a request (plus what the store cached).

    Args:
        ttl: seconds a memory lives after its last write (``None``: for good).
        history: the history's expiry options (``None``: a store without history).
        codec: how a message becomes a stored record.
        collection: the memories collection's name (named in advice).
        lock: the writers' lease of ``modify``.
    """

    __slots__ = ("codec", "collection", "history", "lock", "ttl", "window_field")

    def __init__(
        self,
        ttl: float | None = None,
        history: HistoryConfig | None = None,
        codec: RecordCodec = PLAIN,
        *,
        collection: str = "memories",
        lock: LockOptions | None = None,
    ) -> None:
        self.ttl = ttl
        self.history = history
        self.codec = codec
        self.collection = collection
        self.lock = lock if lock is not None else LockOptions()
        self.window_field = history.window_field if history is not None else "expires_at"
        """The field holding the window's expiry."""

    # ------------------------------------------------------------------------------------------- reads

    def read_filter(self, memory_id: str, server_now_known: bool = False) -> Document:
        """The filter of a read of ``memory_id`` (see :func:`~chatmemory.stores.mongodb.layout.read_filter`)."""
        return read_filter(memory_id, server_now_known, self.window_field)

    def live_filter(self, ids: list[str] | None = None) -> Document:
        """The filter of a listing: every memory (of ``ids``, if given) not expired by the server's clock."""
        live = live_filter(self.window_field)
        return live if ids is None else {**live, "_id": {"$in": ids}}

    # ------------------------------------------------------------------------------------------ writes

    def save(
        self,
        memory_id: str,
        messages: Sequence[ChatMessage],
        expected_version: int,
        cached: MemoryState | None,
        *,
        server_now: datetime.datetime | None = None,
        refreshed: datetime.datetime | None = None,
        also_recorded: Sequence[ChatMessage] = (),
    ) -> WritePlan:
        """The write of ``messages`` if the memory is still at ``expected_version`` (``0``: absent or expired).

        With ``cached`` at ``expected_version``, a turn that only evicts from the head and appends sends the
        appended records and the array's new length; otherwise the document is written whole, under a new
        incarnation. Such a turn goes as update operators in an ``update_one`` (``$push`` with
        ``$each``/``$slice``, ``$inc``) when ``server_now`` (the server's clock, as :class:`ServerClock`
        estimates it) is known: operators cost a server less than a pipeline, and the version the filter
        pins needs no clock. The decision whether the memory is live stays the server's.

        With history, ``cached`` must be the state at ``expected_version`` (read it first if there is none):
        the history records the sequence diff of that window and ``messages``. ``refreshed``: the store
        set every entry's expiry from that time before this write. ``also_recorded``: messages recorded
        before what the write appends (evicted within the add that wrote them); ignored without history.

        Raises:
            ValueError: a history store plans without a ``cached`` state at ``expected_version``.
        """
        history, codec = self.history, self.codec
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
            check_size(memory_id, (*self._records(layout, memory_id), *history_records, STAGED_ROOM))
        if expected_version == 0:
            records = self._records(layout, memory_id)
            _note_whole(records)
            incarnation = new_incarnation()
            fields = self._whole_fields(layout, records, incarnation)
            if history is None:
                condition: Any = {"$or": [IS_NEW, {"$not": [NOT_EXPIRED]}]}
                return _plan(memory_id, condition, fields, True, write_id, True, incarnation, layout, records)
            started = new_history_id()
            condition = {"$or": [IS_NEW, {"$not": [not_expired(history.window_field)]}]}
            fields.update(created_fields(history, history_records, started, IS_NEW))
            return _plan(
                memory_id, condition, fields, True, write_id, True, incarnation, layout, records, started, True
            )
        trim = None
        if cached is not None and cached.version == expected_version and cached.incarnation is not None:
            trim = plan_head_trim(cached.layout, layout)
        history_state = cached.history if cached is not None else None
        hid = new_history_id() if history is not None and (history_state is None or history_state.hid is None) else None
        if trim is None or cached is None or cached.incarnation is None:
            records = self._records(layout, memory_id)
            _note_whole(records)
            turn = _Turn(
                memory_id, expected_version, write_id, new_incarnation(), layout, records,
                history_state, history_records, refreshed, hid,
            )  # fmt: skip
            fields = self._whole_fields(layout, records, turn.incarnation)
            if history is not None:
                fields.update(self._pinned(turn))
            return self._guarded(turn, {}, fields)
        records = cached.after(trim, layout, memory_id, codec)
        # The incarnation (an int, or an earlier store's token) pins the exact document the cached layout
        # came from, so a memory deleted and created again never receives a diff against its predecessor.
        turn = _Turn(
            memory_id, expected_version, write_id, cached.incarnation, layout, records,
            history_state, history_records, refreshed, hid,
        )  # fmt: skip
        array_end = len(records) - (layout.system is not None)
        appended = list(records[array_end - len(trim.appended) : array_end])
        telemetry.note_write(appended=len(appended), evicted=trim.head_trim, bytes=sum(map(len, appended)))
        pinned = {"incarnation": {"$eq": turn.incarnation}, "messages": {"$type": "array"}}
        if server_now is not None and (history is None or operators_allowed(history_state)):
            return self._operators(turn, pinned, trim, appended, server_now)
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
            fields["expires_at"] = expiry(self.ttl)
        else:
            fields.update(history.expiry_fields())
            fields.update(self._pinned(turn))
        fields["written_at"] = "$$NOW"
        return self._guarded(turn, pinned, fields)

    def replace(self, memory_id: str, messages: Sequence[ChatMessage]) -> WritePlan:
        """The write of ``messages`` whatever version the memory is at (``update_messages``).

        A store with history sends it only over a window it cannot read (to repair it): every message
        is recorded, as for a rewrite; the history goes on if it is live. Over a window it can read, it
        saves against what it read instead, so the history records only what was appended.
        """
        layout = plan_layout(messages)
        records = self._records(layout, memory_id)
        if self.history is None:
            return self._unconditional(memory_id, layout, records, new_incarnation())
        started = new_history_id()
        extra = created_fields(self.history, records_in_order(layout, records), started, IS_NEW)
        return self._unconditional(memory_id, layout, records, new_incarnation(), extra, started)

    def raw_write(self, memory_id: str, records: Sequence[bytes]) -> WritePlan:
        """The write of raw ``records`` as the memory's array, whatever version it is at (``write_raw``).

        Records that are UTF-8 are stored as text, as the store stores its own; others as binary. A store
        with history records nothing in the history for them (a raw write plants a window; it is no
        conversation turn) and leaves the history head as it is.
        """
        stored: list[Record] = []
        for record in records:
            data = bytes(record)
            try:
                stored.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                stored.append(data)
        return self._unconditional(memory_id, MongoLayout(()), tuple(stored), None)

    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> tuple[Document, Document | list[Document]]:
        """The filter and update that set a live memory's expiry to ``when`` (``None``: never); nothing is created.

        With a ``history_ttl`` the window's expiry is ``window_expires_at``, and the document (whose TTL
        index is on ``expires_at``) is kept at least until ``when`` (``None``: for good).

        Raises:
            ValueError: ``when`` is a naive datetime.
        """
        field = self.window_field
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

    def new_document(self, memory: NewMemory, server_now: datetime.datetime) -> Document:
        """The document ``save(id, messages, 0)`` creates for ``memory`` at ``server_now``, with its expiry.

        Its expiry is the one the memory asks for, else the store's ttl from ``server_now``.

        Raises:
            StoreError: the document would be past MongoDB's size limit.
        """
        codec = self.codec
        memory_id = validate_memory_id(memory.memory_id)
        layout = plan_layout(checked_messages(memory.messages))
        array = [encode_record(message, memory_id, codec) for message in layout.array]
        held = () if layout.system is None else (encode_record(layout.system, memory_id, codec),)
        check_size(memory_id, (*array, *held))
        now_ms = int(server_now.timestamp() * 1000)
        version = next_version(0, clock=now_ms * 1000)  # what a pipeline write makes: $$NOW in µs
        written_at = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.timezone.utc)
        document: Document = {
            "_id": memory_id,
            "version": version,
            "incarnation": new_incarnation(),
            "messages": array,
            "written_at": written_at,
            "writes": [{"w": new_write_id(), "v": version}],
        }
        if held:
            document["system"] = held[0]
            document["system_at"] = layout.system_at
        if memory.sets_expiry:
            if memory.expires_at is not None:
                document["expires_at"] = memory.expires_at
        elif self.ttl is not None:
            document["expires_at"] = written_at + datetime.timedelta(milliseconds=round(self.ttl * 1000))
        return document

    def new_head_document(
        self, memory_id: str, window: Sequence[ChatMessage], hid: int, top: int, server_now: datetime.datetime
    ) -> Document:
        """The document of a memory restored with ``window`` and a new history ``hid`` numbered up to ``top``.

        Raises:
            StoreError: the document would be past MongoDB's size limit.
        """
        assert self.history is not None
        memory = NewMemory(memory_id, list(window), False, None)
        document = MongoPlanner(None, None, self.codec).new_document(memory, server_now)
        assignments, _ = self.history.expiry_operators(server_now)
        document.update(assignments)
        document.update(hid=hid, hseq=top, hrefresh=server_now)
        return document

    # --------------------------------------------------------------------------------- writers' lease

    def acquire(self, memory_id: str, token: bytes) -> Command:
        """The upsert leasing the lock to ``token``: over an expired lease, or this holder's own (a resend)."""
        query = {"_id": memory_id, "$expr": {"$or": [{"$eq": ["$token", token]}, _LEASE_EXPIRED]}}
        update = [{"$set": {"token": token, "expires_at": {"$add": ["$$NOW", self.lock.lease_ms]}}}]
        return call(_WRITE, memory_id, Target.LOCKS, "update_one", query, update, upsert=True, result=Result.NOTHING)

    @staticmethod
    def release(memory_id: str, token: bytes) -> Command:
        """The delete giving the lock back: only while it is still this holder's."""
        return call(
            _WRITE, memory_id, Target.LOCKS, "delete_one", {"_id": memory_id, "token": token}, result=Result.NOTHING
        )

    def expiry_index_conflict(self) -> str:
        """What to do when an index on ``expires_at`` exists with other options."""
        return (
            "an index on 'expires_at' or named 'chatmemory_expires_at' exists with other options; "
            f"drop it (db.{self.collection}.dropIndex(...)) so the store can create its TTL index with "
            "expireAfterSeconds: 0"
        )

    # ---------------------------------------------------------------------------------------- helpers

    def _records(self, layout: MongoLayout, memory_id: str) -> tuple[Record, ...]:
        held = () if layout.system is None else (encode_record(layout.system, memory_id, self.codec),)
        return (*(encode_record(message, memory_id, self.codec) for message in layout.array), *held)

    def _whole_fields(self, layout: MongoLayout, records: Sequence[Record], incarnation: int | None) -> Document:
        array_end = len(layout.array) if layout.system is not None else len(records)
        fields: Document = {
            "incarnation": {"$literal": incarnation} if incarnation is not None else "$$REMOVE",
            "messages": {"$literal": list(records[:array_end])},
            "system": {"$literal": records[-1]} if layout.system is not None else "$$REMOVE",
            "system_at": {"$literal": layout.system_at} if layout.system is not None else "$$REMOVE",
        }
        if self.history is None:
            fields["expires_at"] = expiry(self.ttl)
        else:
            fields.update(self.history.expiry_fields())
        fields["written_at"] = "$$NOW"
        return fields

    @staticmethod
    def _pinned(turn: _Turn) -> Document:
        return pinned_fields(turn.history_state, turn.history_records, turn.history_id or 0, turn.refreshed)

    def _guarded(self, turn: _Turn, filter: Document, fields: Document) -> WritePlan:
        """A ``save`` guarded by ``filter``: one stage, which only runs on the document planned against."""
        history = self.history
        check_size(turn.memory_id, turn.records)
        # The filter pins the version, so the next one needs no look at the stored value.
        version = {"$max": [turn.expected_version + 1, {"$multiply": [NOW_MS, 1000]}]}
        stage = {"version": version, **fields, "writes": writes(turn.write_id, version)}
        live = NOT_EXPIRED if history is None else not_expired(history.window_field)
        return WritePlan(
            turn.memory_id,
            {"_id": turn.memory_id, "version": turn.expected_version, **filter, "$expr": live},
            [{"$set": stage}],
            dict(_VERSION_ONLY if history is None else WRITE_PROJECTION),
            False,
            turn.write_id,
            True,
            True,
            turn.incarnation,
            turn.layout,
            turn.records,
            keeps_history=history is not None,
            history_id=turn.history_id,
        )

    def _operators(
        self, turn: _Turn, pinned: Document, trim: HeadTrim, appended: list[Record], server_now: datetime.datetime
    ) -> WritePlan:
        """A diff turn as update operators, guarded by the filter like :meth:`_guarded`.

        A history store sends it as ``find_one_and_update`` (its reply tells the write's server time,
        which the history entries carry) and only when every group the document holds is copied.
        """
        history, layout, records = self.history, turn.layout, turn.records
        check_size(turn.memory_id, records)
        version = turn.expected_version + 1
        assignments: Document = {}
        removals: Document = {}
        pushes: Document = {"writes": {"$each": [{"w": turn.write_id, "v": version}], "$slice": -WRITES_KEPT}}
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
            if self.ttl is None:
                removals["expires_at"] = ""
            else:
                assignments["expires_at"] = server_now + datetime.timedelta(seconds=self.ttl)
        else:
            assert turn.history_state is not None
            expiry_set, expiry_unset = history.expiry_operators(server_now)
            history_set, history_unset, history_dates, history_pushes = pinned_operators(
                turn.history_state, turn.history_records, turn.refreshed
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
            turn.memory_id,
            {"_id": turn.memory_id, "version": turn.expected_version, **pinned, "$expr": live},
            update,
            {} if history is None else dict(WRITE_PROJECTION),
            False,
            turn.write_id,
            True,
            True,
            turn.incarnation,
            layout,
            records,
            returns_document=history is not None,
            next_version=version,
            keeps_history=history is not None,
        )

    def _unconditional(
        self,
        memory_id: str,
        layout: MongoLayout,
        records: tuple[Record, ...],
        incarnation: int | None,
        history_fields: Document | None = None,
        history_id: int | None = None,
    ) -> WritePlan:
        write_id = new_write_id()
        _note_whole(records)
        fields = self._whole_fields(layout, records, incarnation)
        fields.update(history_fields or {})
        # Applies once: a resend after a lost reply finds its write id and changes nothing.
        condition = {"$not": [{"$in": [{"$literal": write_id}, WRITE_IDS]}]}
        return _plan(
            memory_id, condition, fields, True, write_id, False, incarnation,
            layout if incarnation is not None else None, records, history_id, history_fields is not None,
        )  # fmt: skip


def _plan(
    memory_id: str,
    condition: Any,
    fields: Document,
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


def records_in_order(layout: MongoLayout, records: Sequence[Record]) -> tuple[Record, ...]:
    """``records`` (the array's, then the held message's) in window order."""
    if layout.system is None:
        return tuple(records)
    ordered = list(records[:-1])
    ordered.insert(layout.system_at, records[-1])
    return tuple(ordered)


def _note_whole(records: Sequence[Record]) -> None:
    """Report a write of the whole list (text records counted in characters)."""
    telemetry.note_write(appended=len(records), evicted=None, bytes=sum(map(len, records)))


_LEASE_EXPIRED: Final = {
    # A lease that is not a date (damaged, or written by hand) counts as expired: it never blocks a memory.
    "$cond": [
        {"$eq": [{"$type": "$expires_at"}, "date"]},
        {"$lte": [{"$toLong": "$expires_at"}, NOW_MS]},
        True,
    ]
}

# --------------------------------------------------------------------------------- the server's clock


class ServerClock:
    """The offset between the server's clock and the local one, from the last write reply that told it.

    Every pipeline write's reply carries ``written_at``; the offset to the local clock (taken at the
    middle of the round trip) gives the server's time within a round trip. An estimate older than
    :data:`MAX_AGE` is not used: the next write goes as a pipeline, whose reply renews it.
    """

    def __init__(self) -> None:
        self._offset: datetime.timedelta | None = None
        self._learned = 0.0

    @staticmethod
    def local() -> datetime.datetime:
        """The local wall clock (aware UTC)."""
        return datetime.datetime.now(datetime.timezone.utc)

    def observe(
        self, sent: datetime.datetime, received: datetime.datetime, server_time: datetime.datetime | None
    ) -> None:
        """Learn from a write sent at ``sent`` and answered at ``received`` (local times) at ``server_time``."""
        if server_time is not None:
            self._offset = server_time - (sent + (received - sent) / 2)
            self._learned = time.monotonic()

    def now(self) -> datetime.datetime | None:
        """The server's time now, or ``None`` when no reply told it in the last :data:`MAX_AGE` seconds."""
        if self._offset is None or time.monotonic() - self._learned > MAX_AGE:
            return None
        return self.local() + self._offset


def expired(document: Mapping[str, Any], server_now: datetime.datetime, field: str = "expires_at") -> bool:
    """Whether ``document`` has expired at ``server_now`` (a ``field`` that is not a date never does)."""
    expires_at = document.get(field)
    return isinstance(expires_at, datetime.datetime) and expires_at <= server_now
