r"""History on the MongoDB store: what its writes stage, copy and refresh, its pages, trims and restores (pure).

A store built with ``history=True`` keeps ``<collection>_history``, one document per entry (``m`` memory
id, ``h`` history id, ``s`` sequence, ``r`` record, ``t`` time), unique on ``(m, h, s)``. The window
document is the history's head (:mod:`~chatmemory.stores.mongodb.layout`): the write of the window sets
``hid`` and ``hseq`` and stages its entries (``hlast``, earlier ones in ``hpend``); a writer copies the
staged groups once :data:`COPY_AT_GROUPS` groups or :data:`COPY_AT_BYTES` are staged (one unordered,
idempotent insert); readers merge what is staged. Entries expire by a TTL index on ``x``, set again in
steps (``hrefresh``). A restore moves ``hseq`` past the entries it inserts. Step by step: *History* in
``docs/store-mongodb.md``. No I/O here, and no driver import.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from chatmemory.core.errors import CorruptedMemoryError, Operation
from chatmemory.core.history import HistoryEntry, HistoryPage, HistoryQuery, UnrestorableHistoryError
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.mongodb.commands import Command, Result, Target, call
from chatmemory.stores.mongodb.layout import (
    COPY_AT_BYTES,
    COPY_AT_GROUPS,
    ENTRY_PROJECTION,
    HAS_HID,
    HAS_LAST,
    HEAD_PROJECTION,
    HISTORY_EXPIRY_INDEX,
    HISTORY_INDEX,
    HISTORY_KEY,
    PENDING,
    Document,
    HistoryConfig,
    HistoryGroup,
    HistoryHead,
    HistoryState,
    MemoryState,
    Record,
    encode_record,
    group_of,
    groups_of,
    is_int,
    not_expired,
    refreshed_of,
)

# ------------------------------------------------------------------------------------------ the head


def index_commands(config: HistoryConfig) -> list[Command]:
    """The commands creating the history collection's indexes: unique on ``(m, h, s)``, with a lifetime TTL on ``x``."""
    schema, target = Operation.SCHEMA, Target.HISTORY
    commands = [call(schema, None, target, "create_index", HISTORY_KEY, name=HISTORY_INDEX, unique=True)]
    if config.lifetime is not None:
        key = [("x", 1)]
        commands.append(
            call(schema, None, target, "create_index", key, name=HISTORY_EXPIRY_INDEX, expireAfterSeconds=0)
        )
    return commands


def with_history(state: MemoryState, document: Mapping[str, Any], previous: MemoryState | None) -> MemoryState:
    """``state`` (decoded from ``document``) with its history head.

    The groups the document holds are known to be copied only if ``previous`` (what the store cached)
    is the same version and knew it; else the next write keeps them and copies them again.
    """
    hid, hseq = document.get("hid"), document.get("hseq")
    if not is_int(hid):
        return replace(state, history=HistoryState(None, 0, True))
    before = previous.history if previous is not None and previous.version == state.version else None
    if before is None or before.hid != hid:
        return replace(state, history=HistoryState(hid, hseq if is_int(hseq) else 0, False, refreshed_of(document)))
    return replace(state, history=replace(before, refreshed=refreshed_of(document)))


def must_read(cached: MemoryState | None, expected_version: int) -> bool:
    """Whether a ``save`` at ``expected_version`` reads the stored state before it plans.

    The history records what the write appends to the stored window: it plans against that state.
    """
    return bool(expected_version) and (cached is None or cached.version != expected_version or cached.history is None)


def refresh_due(
    state: HistoryState | None, config: HistoryConfig, server_now: datetime.datetime
) -> datetime.datetime | None:
    """The time to set every entry's expiry from before a write (``None``: no need), and ``hrefresh`` with it."""
    lifetime = config.lifetime
    if lifetime is None or state is None or state.hid is None:
        return None
    if state.refreshed is not None and server_now <= state.refreshed + datetime.timedelta(seconds=lifetime):
        return None
    return server_now


def refresh_update(
    config: HistoryConfig, memory_id: str, hid: int, now: datetime.datetime
) -> tuple[Document, Document]:
    """The ``update_many`` that sets the expiry of every entry of a history to ``now + 2L``."""
    assert config.lifetime is not None
    return {"m": memory_id, "h": hid}, {"$set": {"x": now + datetime.timedelta(seconds=2 * config.lifetime)}}


def refresh_command(
    config: HistoryConfig, memory_id: str, head: HistoryState | None, now: datetime.datetime
) -> Command:
    """The command of :func:`refresh_update` for the history of ``head`` (one :func:`refresh_due` said is due)."""
    assert head is not None and head.hid is not None
    query, update = refresh_update(config, memory_id, head.hid, now)
    return call(Operation.WRITE, memory_id, Target.HISTORY, "update_many", query, update, result=Result.NOTHING)


def head_filter(memory_id: str, config: HistoryConfig) -> Document:
    """The query of a history read's head: the window document, if its history has not expired."""
    return {"_id": memory_id, "$expr": not_expired(config.history_field)}


def head_of(memory_id: str, document: Mapping[str, Any] | None) -> HistoryHead | None:
    """The history head of a window document read with :func:`head_filter` (``None``: no history).

    Raises:
        CorruptedMemoryError: a group is not one this store wrote.
    """
    if document is None or not is_int(document.get("hid")):
        return None
    return HistoryHead(document["hid"], groups_of(memory_id, document))


def should_copy(groups: Sequence[HistoryGroup]) -> bool:
    """Whether a write whose reply shows ``groups`` staged copies them now (see the module's notes)."""
    staged = sum(len(record) for group in groups for record in group.records)
    return len(groups) >= COPY_AT_GROUPS or staged >= COPY_AT_BYTES


def staged_filter(memory_id: str | None) -> Document:
    """The window documents that may hold staged groups (of ``memory_id``, or all)."""
    filter: Document = {"$or": [{"hlast": {"$type": "object"}}, {"hpend": {"$type": "array"}}]}
    return filter if memory_id is None else {"_id": memory_id, **filter}


STAGED_PROJECTION: Final = {"_id": 1, "hid": 1, "hpend": 1, "hlast": 1, "hrefresh": 1}


def staged_operations(documents: Iterable[Mapping[str, Any]], lifetime: float | None) -> list[Document]:
    """The entries that copy the groups staged in ``documents`` (read with :data:`STAGED_PROJECTION`).

    Raises:
        CorruptedMemoryError: a group is not one this store wrote.
    """
    operations = []
    for document in documents:
        memory_id, hid = document.get("_id"), document.get("hid")
        if isinstance(memory_id, str) and is_int(hid):
            groups = groups_of(memory_id, document)
            operations += entry_documents(memory_id, hid, groups, lifetime, refreshed_of(document))
    return operations


def entry_documents(
    memory_id: str,
    hid: int,
    groups: Iterable[HistoryGroup],
    lifetime: float | None = None,
    refreshed: datetime.datetime | None = None,
) -> list[Document]:
    """The entry documents that copy ``groups`` into the history collection.

    They are inserted unordered; a duplicate key means the entry is there already (its key is its
    history and sequence, and an entry never changes), so a copy is idempotent.

    With a ``lifetime`` each entry expires ``2 * lifetime`` after its write, or after ``refreshed`` (the
    head's ``hrefresh``) if that is later: a group staged while the entries' expiry slid gets the slid one.
    """
    operations = []
    for group in groups:
        fields: Document = {"t": group.written_at}
        if lifetime is not None:
            start = group.written_at if refreshed is None else max(group.written_at, refreshed)
            fields["x"] = start + datetime.timedelta(seconds=2 * lifetime)
        for offset, record in enumerate(group.records):
            operations.append({"m": memory_id, "h": hid, "s": group.first + offset, "r": record, **fields})
    return operations


def state_after(memory_id: str, document: Mapping[str, Any], copied: bool) -> HistoryState | None:
    """The head a write's reply ``document`` shows (``copied``: its groups are now in the history collection)."""
    hid, hseq = document.get("hid"), document.get("hseq")
    if not is_int(hid) or not is_int(hseq):
        return None
    last = group_of(memory_id, document["hlast"]) if isinstance(document.get("hlast"), Mapping) else None
    return HistoryState(hid, hseq, copied, refreshed_of(document), True, last)


# ------------------------------------------------------------------------------------ what a write adds


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


# ---------------------------------------------------------------------------------------- pages, trims


def head_read(memory_id: str, config: HistoryConfig) -> Command:
    """The read of a history page's head (hand its document to :func:`head_of`)."""
    return call(Operation.READ, memory_id, Target.WINDOW, "find_one", head_filter(memory_id, config), HEAD_PROJECTION)


def entries_read(memory_id: str, hid: int, query: HistoryQuery) -> Command:
    """The read of a history page's entries (hand them to :func:`page_of`)."""
    filter, sort = read_entries_filter(memory_id, hid, query)
    return call(
        Operation.READ, memory_id, Target.HISTORY, "find", filter, ENTRY_PROJECTION, sort=sort, limit=query.limit + 1,
        result=Result.LIST,
    )  # fmt: skip


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


def trim_commands(operation: str, cutoff: datetime.datetime, memory_id: str | None) -> tuple[Command, Command]:
    """The deletion of what :func:`trim_filter` selects (answers how many), then the update of :func:`trim_head`."""
    removal = call(
        operation, memory_id, Target.HISTORY, "delete_many", trim_filter(cutoff, memory_id), result=Result.DELETED
    )
    return removal, call(
        operation, memory_id, Target.WINDOW, "update_many", *trim_head(cutoff, memory_id), result=Result.NOTHING
    )


def staged_read(operation: str, memory_id: str | None) -> Command:
    """The read of the window documents that may hold staged groups (hand them to :func:`staged_operations`)."""
    filter = staged_filter(memory_id)
    return call(operation, memory_id, Target.WINDOW, "find", filter, STAGED_PROJECTION, result=Result.LIST)


def stale_delete(memory_id: str, hid: int) -> Command:
    """The deletion of the entries of ``memory_id`` that belong to an earlier history (when ``hid`` starts)."""
    stale = {"m": memory_id, "h": {"$ne": hid}}
    return call(Operation.WRITE, memory_id, Target.HISTORY, "delete_many", stale, result=Result.NOTHING)


# ----------------------------------------------------------------------------------------- re-sealing


def records_read(memory_id: str) -> Command:
    """The read of every entry's record of ``memory_id`` (its ``_id`` and ``r``), to re-seal them."""
    return call(
        Operation.WRITE, memory_id, Target.HISTORY, "find", {"m": memory_id}, {"_id": 1, "r": 1}, result=Result.LIST
    )


def reseal_commands(
    memory_id: str, window: Iterable[tuple[str, Record, Record]], entries: Iterable[tuple[Any, Record, Record]]
) -> list[Command]:
    """The updates re-sealing records, each only where it still holds what was read (they answer matched counts).

    ``window``: by field path in the window document (staged groups' too); ``entries``: by history entry ``_id``.
    """

    def update(target: Target, filter: Document, field: str, new: Record) -> Command:
        return call(
            Operation.WRITE, memory_id, target, "update_one", filter, {"$set": {field: new}}, result=Result.MATCHED
        )

    return [
        *(update(Target.WINDOW, {"_id": memory_id, path: old}, path, new) for path, old, new in window),
        *(update(Target.HISTORY, {"_id": entry, "r": old}, "r", new) for entry, old, new in entries),
    ]


# ------------------------------------------------------------------------------------------ restores

RESTORE_PROJECTION: Final = {"_id": 0, "version": 1, "hid": 1, "hseq": 1, "hpend": 1, "hlast": 1}
"""What a restore needs of the window document."""
RESTORE_ATTEMPTS: Final = 20
"""How many times a restore reads the head again after writers moved it between its read and its update."""


def restore_read(memory_id: str) -> Command:
    """The read of the window document a restore goes into (hand it to :func:`restore_head`)."""
    return call(Operation.WRITE, memory_id, Target.WINDOW, "find_one", {"_id": memory_id}, RESTORE_PROJECTION)


def restore_head(
    memory_id: str, document: Mapping[str, Any] | None, with_window: bool
) -> tuple[int, int, set[int]] | None:
    """The history id, version and staged sequences of the head a restore goes into (``None``: create it).

    Raises:
        UnrestorableHistoryError: there is no document and no window to create it with, or the
            document was written without history.
        CorruptedMemoryError: a group is not one this store wrote.
    """
    if document is None:
        if not with_window:
            raise UnrestorableHistoryError(
                memory_id, "a MongoDB history lives in its memory's document: restore it with its window"
            )
        return None
    hid, version = document.get("hid"), version_of(document)
    if not isinstance(hid, int) or version is None:
        raise UnrestorableHistoryError(
            memory_id, "the memory was written without history (its document has no history id)"
        )
    return hid, version, staged_sequences(memory_id, document)


def present_read(memory_id: str, hid: int, entries: Sequence[HistoryEntry]) -> Command:
    """The read of the sequences of history ``hid`` among those to restore."""
    present = {"m": memory_id, "h": hid, "s": {"$in": [entry.sequence for entry in entries]}}
    return call(Operation.WRITE, memory_id, Target.HISTORY, "find", present, {"_id": 0, "s": 1}, result=Result.LIST)


def staged_sequences(memory_id: str, document: Mapping[str, Any]) -> set[int]:
    """The sequences of the groups the window document stages (readers merge them: they are entries too).

    Raises:
        CorruptedMemoryError: a group is not one this store wrote.
    """
    return {group.first + offset for group in groups_of(memory_id, document) for offset in range(len(group.records))}


def entry_records(memory_id: str, entries: Sequence[HistoryEntry], codec: RecordCodec = PLAIN) -> dict[int, Record]:
    """Each entry's stored record by sequence, encoded before anything is sent.

    Raises:
        SerializationError: a message does not encode.
    """
    return {entry.sequence: encode_record(entry.message, memory_id, codec) for entry in entries}


def entry_documents_of(
    memory_id: str,
    hid: int,
    entries: Sequence[HistoryEntry],
    records: Mapping[int, Record],
    config: HistoryConfig,
    server_now: datetime.datetime,
) -> list[Document]:
    """The entry documents of ``entries`` (their ``records``) in history ``hid``, each with its own time.

    With a lifetime, an entry expires ``2 * lifetime`` after ``server_now`` (not after its old write time,
    which would let the TTL monitor take it at once); the head's ``hrefresh`` is at most ``server_now``.
    """
    expiry: Document = {}
    if config.lifetime is not None:
        expiry["x"] = server_now + datetime.timedelta(seconds=2 * config.lifetime)
    return [
        {"m": memory_id, "h": hid, "s": entry.sequence, "r": records[entry.sequence], "t": entry.written_at, **expiry}
        for entry in entries
    ]


def head_update(memory_id: str, version: int, hid: int, top: int, server_now: datetime.datetime) -> Command:
    """The conditional update of the head before entries up to ``top`` are inserted (answers if it matched).

    It matches only the version and history read; ``hseq`` becomes at least ``top``; the version moves
    on (to the clock in µs, or one more), so writers that cached the head read it again.
    """
    filter: Document = {"_id": memory_id, "version": version, "hid": hid}
    clock_micros = int(server_now.timestamp() * 1_000_000)
    next_version = {"$max": [{"$add": ["$version", 1]}, {"$literal": clock_micros}]}
    update = [{"$set": {"version": next_version, "hseq": {"$max": [{"$ifNull": ["$hseq", 0]}, {"$literal": top}]}}}]
    return call(Operation.WRITE, memory_id, Target.WINDOW, "update_one", filter, update, result=Result.MATCHED)


def version_of(document: Mapping[str, Any]) -> int | None:
    """The window document's version, if it holds one this store wrote."""
    version = document.get("version")
    return version if is_int(version) else None
