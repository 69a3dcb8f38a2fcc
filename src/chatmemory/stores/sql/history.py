"""A SQL store's histories, restores, batch reads and batch creates: the operations and their plans.

They run on the store's :class:`~chatmemory.stores.sql.operations.Operations`. A history entry is a
message row with a write time (its sequence is the row's ``seq`` + 1); a page is one query, a trim one
transaction of two statements. A restore runs in one transaction under the head row's lock: the missing
entries' rows go in with their own write time, marked ``evicted``; a memory without a live window, given
one whose messages are restored entries, gets a head whose cover of those rows makes them the window
(:func:`window_seqs`); any other window is written as a raw write writes records, moved past the restored
rows (:func:`shifted`). A batch read is one statement (a second for ids without a head row), a batch
create one transaction (memories it cannot create together go to ``save`` one by one).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from chatmemory.core.driving import Steps
from chatmemory.core.history import (
    HistoryEntry,
    HistoryPage,
    HistoryQuery,
    UnrestorableHistoryError,
    checked_restore,
    history_query,
    trim_cutoff,
)
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.store import validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stored_memories import NewMemory, StoredMemory
from chatmemory.stores.base import Operation
from chatmemory.stores.sql.commands import Batch, Command, Result, Statement
from chatmemory.stores.sql.outcomes import LockedHead, SQLFailure, aware, stray_detail
from chatmemory.stores.sql.plan import LockedWrite, WindowCover, WriteRequest, cover_window, plan_locked

if TYPE_CHECKING:
    from chatmemory.stores.sql.dialect import SQLDialect
    from chatmemory.stores.sql.operations import Operations

__all__ = [
    "HISTORY_OFFSET",
    "BatchCreate",
    "covered_head",
    "create_batch",
    "decode_history",
    "entry_rows",
    "history_page",
    "history_parameters",
    "read_batch",
    "restore_history",
    "shifted",
    "trim",
    "window_seqs",
]


# ------------------------------------------------------------------------------------------ history


class HistoryRow(Protocol):
    """A row of a history page statement."""

    seq: int
    payload: bytes
    written_at: Any


HISTORY_OFFSET = 1
"""A history entry's sequence is its row's ``seq`` plus this (rows number from 0, entries from 1)."""


def history_parameters(memory_id: str, query: HistoryQuery) -> dict[str, Any]:
    """Parameters of the history page statement of ``query`` (one row more than the page: see ``page``)."""
    parameters: dict[str, Any] = {"p_id": memory_id, "p_limit": query.limit + 1}
    if query.after is not None:
        parameters["p_after"] = query.after - HISTORY_OFFSET
    return parameters


def decode_history(
    memory_id: str, rows: Sequence[HistoryRow], query: HistoryQuery, codec: RecordCodec = PLAIN
) -> HistoryPage:
    """The page of the rows a history statement read, in the query's order.

    Raises:
        CorruptedMemoryError: a payload does not decode.
    """
    entries = []
    for row in rows:
        written_at = aware(row.written_at)
        if written_at is None:  # pragma: no cover - the statement reads rows with a write time only
            raise AssertionError("a history row without its write time")
        message = codec.loads(bytes(row.payload), memory_id, int(row.seq))
        entries.append(HistoryEntry(int(row.seq) + HISTORY_OFFSET, message, written_at))
    return query.page(entries)


def clock_time(micros: int) -> datetime.datetime:
    """The server clock's reading (microseconds since the epoch) as an aware UTC datetime."""
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=int(micros))


def history_page(
    ops: Operations, memory_id: str, after: int | None, limit: int, reverse: bool
) -> Steps[Command, HistoryPage]:
    """One page of the history of ``memory_id``: one query."""
    memory_id = validate_memory_id(memory_id)
    query = history_query(after, limit, reverse)
    ops.require_history()
    yield from ops.ready(Operation.READ, memory_id)
    statement = ops.statements.history_page(reverse, after is not None)
    try:
        parameters = history_parameters(memory_id, query)
        rows = yield Statement(statement, parameters, Result.ROWS, Operation.READ, memory_id)
    except SQLFailure as failure:
        raise failure.error() from failure.__cause__
    return decode_history(memory_id, rows, query, ops.codec)


def trim(
    ops: Operations, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None
) -> Steps[Command, int]:
    """Remove history entries written before ``older_than``: the server's clock, then one transaction.

    Tried again as a write is (once on a new connection after a lost one, and after conflicts); after
    a lost reply to its ``COMMIT`` the count is the answering attempt's, which finds them gone.
    """
    trim_cutoff(older_than, datetime.datetime.now(datetime.timezone.utc))  # check the argument first
    if memory_id is not None:
        memory_id = validate_memory_id(memory_id)
    ops.require_history()
    yield from ops.ready(Operation.TRIM, memory_id)
    delete, unrecord = ops.statements.trim(memory_id is not None)

    def attempt() -> Steps[Command, int]:
        now = clock_time((yield Statement(ops.statements.server_clock, None, Result.SCALAR, Operation.TRIM, memory_id)))
        parameters: dict[str, Any] = {"p_cutoff": ops.dialect.stamp(trim_cutoff(older_than, now))}
        if memory_id is not None:
            parameters["p_id"] = memory_id
        # One transaction: delete the entries outside their window, then unrecord those left in it.
        batch = (Statement(delete, parameters), Statement(unrecord, parameters))
        deleted, unrecorded = yield Batch(batch, ops.begin, None, Operation.TRIM, memory_id)
        return int(deleted) + int(unrecorded)

    return (yield from ops.retried(Operation.TRIM, memory_id, attempt))


# ------------------------------------------------------------------------------------------ restore


def restore_history(
    ops: Operations, memory_id: str, entries: Sequence[HistoryEntry], window: Sequence[ChatMessage] | None
) -> Steps[Command, int]:
    """Add the entries the history of ``memory_id`` lacks (and ``window`` where it has none), in one transaction."""
    memory_id = validate_memory_id(memory_id)
    restored = checked_restore(memory_id, entries)
    messages = None if window is None else checked_messages(window)
    ops.require_history()
    encode = ops.codec.dumps
    # Encoded before sending: an entry's row is sequence - 1; the window's rows are placed under the lock.
    payloads = {entry.sequence: encode(entry.message, memory_id, entry.sequence - 1) for entry in restored}
    records = None if messages is None else [encode(message, memory_id) for message in messages]
    ops.check_payloads(memory_id, [*payloads.values(), *(records or ())])
    yield from ops.ready(Operation.WRITE, memory_id)
    statements = ops.statements.restore

    def attempt() -> Steps[Command, int]:
        body = _restore_locked(ops, memory_id, restored, payloads, records, messages, statements)
        return (yield from ops.in_transaction(body))

    added = yield from ops.retried(Operation.WRITE, memory_id, attempt)
    ops.cache.forget(memory_id)
    return added


def _restore_locked(
    ops: Operations,
    memory_id: str,
    entries: tuple[HistoryEntry, ...],
    payloads: dict[int, bytes],
    records: list[bytes] | None,
    messages: tuple[ChatMessage, ...] | None,
    statements: Any,
) -> Steps[Command, int]:
    head = yield from ops.lock_head(memory_id)
    first_free = entries[-1].sequence if entries else 0  # rows are sequence - 1: those from here are free
    cover = None
    if records is not None and not (head.present and head.live):
        assert messages is not None
        window = window_seqs(list(messages), entries)
        if window is not None:  # the window's rows are restored entries' rows, as a write leaves them
            empty = plan_locked(ops.planner.records_request(memory_id, []), None, head)
            assert isinstance(empty, LockedWrite)  # an unconditional write
            past_rows = head.max_seq + 1 if head.max_seq is not None else 0
            created, ranges = covered_head(empty, window, max(first_free, past_rows))
            cover = (ranges, frozenset(window))
            yield from ops.apply(memory_id, created)
        else:
            written = plan_locked(ops.planner.records_request(memory_id, records), None, head)
            assert isinstance(written, LockedWrite)
            assert messages is not None
            moved = shifted(written, first_free)
            # Each row sealed where it lands (a keyring binds a record to its row's sequence).
            rows = [
                {**row, "payload": ops.codec.dumps(message, memory_id, int(row["seq"]))}
                for row, message in zip(moved.rows, messages, strict=True)
            ]
            yield from ops.apply(memory_id, dataclasses.replace(moved, rows=rows))
    elif not head.present:
        raise UnrestorableHistoryError(
            memory_id, "a SQL history lives beside its memory's head row: restore it with its window"
        )
    present: dict[int, bool] = {}
    if entries:
        parameters = {"p_id": memory_id, "p_seqs": [entry.sequence - 1 for entry in entries]}
        found = yield Statement(statements.present, parameters, Result.ROWS)
        present = {int(row[0]): row[1] is not None for row in found}
    taken = [seq + 1 for seq, is_entry in present.items() if not is_entry]
    if taken:
        raise UnrestorableHistoryError(
            memory_id,
            f"its rows at sequences {sorted(taken)[:5]} hold messages written without history (a window "
            "imported without it); delete the memory and import it again with its history",
        )
    missing = [entry for entry in entries if entry.sequence - 1 not in present]
    if not missing:
        return 0
    if cover is None:
        yield Statement(statements.bump_head, {"p_id": memory_id, "p_next_seq": first_free})
    rows = entry_rows(memory_id, missing, payloads, ops.dialect, cover)
    yield Statement(statements.insert_entries, rows)
    return len(missing)


def entry_rows(
    memory_id: str,
    entries: Sequence[HistoryEntry],
    payloads: Mapping[int, bytes],
    dialect: SQLDialect,
    cover: tuple[WindowCover, frozenset[int]] | None = None,
) -> list[dict[str, Any]]:
    """The insert parameters of the rows of ``entries`` (their encoded ``payloads`` by sequence).

    Without ``cover`` every row is marked evicted; with ``(cover, window rows)`` only the rows the cover
    encloses that are not the window's.
    """

    def evicted(seq: int) -> int | None:
        if cover is None:
            return 1
        ranges, window = cover
        return 1 if ranges.covers(seq) and seq not in window else None

    return [
        {
            "memory_id": memory_id,
            "seq": entry.sequence - 1,
            "payload": payloads[entry.sequence],
            "written_at": dialect.stamp(entry.written_at),
            "evicted": evicted(entry.sequence - 1),
        }
        for entry in entries
    ]


def window_seqs(window: Sequence[ChatMessage], entries: Sequence[HistoryEntry]) -> tuple[int, ...] | None:
    """The rows of ``entries`` holding ``window`` in order (the latest that do); ``None``: a message is not there.

    Every message of a window was recorded when it was written, so a window read from a store with
    history is among its history's entries, in order.
    """
    rows: list[int] = []
    position = len(entries) - 1
    for message in reversed(window):
        while position >= 0 and entries[position].message != message:
            position -= 1
        if position < 0:
            return None
        rows.append(entries[position].sequence - 1)
        position -= 1
    return tuple(reversed(rows))


def covered_head(decision: LockedWrite, seqs: Sequence[int], next_seq: int) -> tuple[LockedWrite, WindowCover]:
    """An empty window's ``decision`` made the head of a window on the rows ``seqs`` (``next_seq``: past every row)."""
    cover = cover_window(seqs, seqs[0], next_seq) if seqs else WindowCover(next_seq)
    head = {**decision.head, "p_next_seq": next_seq, **cover.parameters()}
    return dataclasses.replace(decision, head=head, rows=[], state=None), cover


def shifted(decision: LockedWrite, first_free: int) -> LockedWrite:
    """A raw write's ``decision`` with its new rows and its head's ranges moved to start at ``first_free`` or later.

    Only the rows the write inserts move (a raw write keeps no old row in its window); the old rows it
    deletes or flags are left as they are.
    """
    if not decision.rows:
        start = int(decision.head["p_next_seq"])
    else:
        start = min(int(row["seq"]) for row in decision.rows)
    shift = max(0, first_free - start)
    if shift == 0:
        return decision
    head = dict(decision.head)
    for name in ("p_next_seq", "p_window_start", "p_pin_start", "p_pin_end"):
        if head.get(name) is not None:
            head[name] = int(head[name]) + shift
    rows = [{**row, "seq": int(row["seq"]) + shift} for row in decision.rows]
    return dataclasses.replace(decision, head=head, rows=rows, state=None)


# ------------------------------------------------------------------------------------------ batches


_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)


def read_batch(ops: Operations, memory_ids: Sequence[str]) -> Steps[Command, list[StoredMemory | None]]:
    """Read ``memory_ids``: a :class:`StoredMemory` per id, ``None`` for an absent (or expired) one.

    One ``SELECT`` of their head rows and their window's rows together (so each memory is read as one
    state; the ids as one array on PostgreSQL, ``IN`` elsewhere); only ids without a head row take a
    second, of their stray rows (damage).
    """
    ops.check_open(Operation.READ)
    ids = [validate_memory_id(memory_id) for memory_id in memory_ids]
    if not ids:
        return []
    statements = ops.statements.batch
    stamp = statements.stamp
    yield from ops.ready(Operation.READ)
    stored_ids = {memory_id.encode("utf-8", "surrogatepass"): memory_id for memory_id in ids}
    strays: defaultdict[str, list[tuple[int, bytes]]] = defaultdict(list)
    records: dict[bytes, list[Any]] = {}
    try:
        rows = yield Statement(*statements.read.bind(ids), Result.RECORDS, Operation.READ)
        for raw_id, run in groupby(rows, _FIRST):  # a memory's rows mostly come together
            records.setdefault(bytes(raw_id), []).extend(run)
        for run_of_id in records.values():
            run_of_id.sort(key=_SECOND)  # by seq, the head row (seq -1) first
        headed = {stored_ids[raw_id]: window for raw_id, window in records.items()}
        headless = sorted(set(ids) - headed.keys())
        if headless:
            found_strays = yield Statement(statements.strays, {"p_ids": headless}, Result.ROWS, Operation.READ)
            for memory_id, seq, payload in found_strays:
                strays[memory_id].append((seq, bytes(payload)))
    except SQLFailure as failure:
        raise failure.error() from failure.__cause__
    found: list[StoredMemory | None] = []
    for memory_id in ids:
        window = headed.get(memory_id)
        if window is not None and window[0][6] == 1:  # the head row (seqs start at 0), live
            head = window[0]
            written, expires = (head[4], head[5]) if stamp is None else (stamp(head[4]), stamp(head[5]))
            times = MemoryTimes(aware(written), aware(expires))
            found.append(StoredMemory(memory_id, list(map(_THIRD, window[1:])), head[3], times))
        elif memory_id in strays:
            stray = [payload for _, payload in sorted(strays[memory_id])]
            found.append(StoredMemory(memory_id, stray, 0, None, damage=stray_detail(len(stray))))
        else:
            found.append(None)
    return found


@dataclass(frozen=True, slots=True)
class BatchCreate:
    """What a batch create did: a version (or ``None``) per memory, and those left to ``save``.

    Attributes:
        versions: one entry per memory of the batch, in order; ``None`` for one that exists (or is a
            later copy of an id earlier in the batch) and for those in :attr:`one_by_one`.
        one_by_one: indexes of the memories the store creates with its own ``save(id, messages, 0)``
            (an expired memory, stray rows, or the whole batch after another writer won a create).
    """

    versions: list[int | None]
    one_by_one: tuple[int, ...] = field(default=())


def create_batch(
    ops: Operations, requests: Sequence[WriteRequest], memories: Sequence[NewMemory]
) -> Steps[Command, BatchCreate]:
    """Create the absent ``memories`` (``requests``: their writes at version 0) in one transaction.

    In it: which ids have a head row or message rows, and the server's clock; then one ``executemany`` of
    the absent memories' head rows (each with its expiry: its own, else the store's ttl, as
    ``save(id, messages, 0)`` creates one) and one of their rows. A live memory is ``None`` and not
    touched; an expired one, or ids with stray rows, are left to ``save`` (:attr:`BatchCreate.one_by_one`),
    as is the whole batch when another writer created one of its memories meanwhile.
    """
    yield from ops.ready(Operation.WRITE)
    try:
        return (yield from ops.in_transaction(_create_together(ops, requests, memories)))
    except SQLFailure as failure:
        if not failure.retryable:
            raise failure.error(Operation.WRITE, None) from failure.__cause__
        # Another writer created one of the memories since the read: each goes through save, which says.
        return BatchCreate([None] * len(requests), _first_copies(requests))


def _first_copies(requests: Sequence[WriteRequest]) -> tuple[int, ...]:
    seen: set[str] = set()
    first: list[int] = []
    for index, request in enumerate(requests):
        if request.memory_id not in seen:
            seen.add(request.memory_id)
            first.append(index)
    return tuple(first)


def _create_together(
    ops: Operations, requests: Sequence[WriteRequest], memories: Sequence[NewMemory]
) -> Steps[Command, BatchCreate]:
    statements = ops.statements.batch
    ids = sorted({request.memory_id for request in requests})
    expiries = [ops.dialect.expiry(memory.expires_at) if memory.sets_expiry else None for memory in memories]
    heads = yield Statement(statements.create_heads, {"p_ids": ids}, Result.ROWS, Operation.WRITE)
    present = {row[0]: bool(row[1]) for row in heads}
    headless = [memory_id for memory_id in ids if memory_id not in present]
    strays: set[str] = set()
    if headless:
        strays = set((yield Statement(statements.create_strays, {"p_ids": headless}, Result.SCALARS, Operation.WRITE)))
    clock = yield Statement(ops.statements.server_clock, None, Result.SCALAR, Operation.WRITE)
    absent = LockedHead(False, 0, 0, 0, False, None, None, int(clock))
    versions: list[int | None] = []
    one_by_one: list[int] = []
    planned: list[tuple[int, LockedWrite]] = []
    seen: set[str] = set()
    for index, request in enumerate(requests):
        memory_id = request.memory_id
        versions.append(None)
        if memory_id in seen:
            continue  # created (or found) by its first copy: save(id, messages, 0) would conflict
        seen.add(memory_id)
        if present.get(memory_id) is True:
            continue
        if memory_id in present or memory_id in strays:
            one_by_one.append(index)
            continue
        decision = plan_locked(request, None, absent)
        assert isinstance(decision, LockedWrite)
        ops.check_payloads(memory_id, (row["payload"] for row in decision.rows))
        planned.append((index, decision))
    if planned:
        head_rows = [
            {
                **decision.head,
                "p_sets_expiry": 1 if memories[index].sets_expiry else 0,
                "p_expires_at": expiries[index],
            }
            for index, decision in planned
        ]
        yield Statement(statements.insert_heads, head_rows, operation=Operation.WRITE, many=True)
        rows = [row for _, decision in planned for row in decision.rows]
        if rows:
            yield Statement(statements.insert_messages, rows, operation=Operation.WRITE, many=True)
        for index, decision in planned:
            versions[index] = decision.version
    return BatchCreate(versions, tuple(one_by_one))
