"""Locked writes of the SQL store: what a write decides under its memory's head row lock (pure).

The executor locks the head row (or, when there is none, reads the server's clock) and hands the row
to :func:`locked_head`; :func:`plan_locked` then says whether the write landed already (its write id is
among the recent writes), conflicts, or which statements to run (:class:`LockedWrite`). A write of
messages to a live memory its cached snapshot does not describe first reads the window under the lock
(:func:`window_needed`, :func:`locked_read`), so that it writes only the rows that differ; a locked
update starts from the cached window when the head is at its version (:func:`cached_window`,
:func:`diffs_under_lock`). A write creating a memory that finds message rows without a head row asks
:func:`stray_rows` whether they stop it. No driver, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from chatmemory import telemetry
from chatmemory.core.messages import ChatMessage
from chatmemory.core.sequence_diff import diff_messages
from chatmemory.core.store import Snapshot
from chatmemory.serialization.records import RecordCodec
from chatmemory.stores.base.versions import new_incarnation, next_version
from chatmemory.stores.sql.outcomes import (
    CachedSnapshot,
    Conflict,
    Corrupted,
    Headless,
    ReadResult,
    StaleCache,
    Written,
    stray_detail,
)
from chatmemory.stores.sql.reads import ReadRow, decode_read
from chatmemory.stores.sql.window import cover_window
from chatmemory.stores.sql.write_requests import (
    ENTRY_DIGITS,
    RECENT_WRITES,
    WriteRequest,
    find_write,
    message_rows,
    removed_seqs,
    write_entry,
)

__all__ = [
    "HeadRow",
    "LockedHead",
    "LockedWrite",
    "cached_window",
    "diffs_under_lock",
    "locked_head",
    "locked_read",
    "plan_locked",
    "stray_rows",
    "window_needed",
]


@dataclass(frozen=True, slots=True)
class LockedHead:
    """The head row as the locked write found it (``present=False``: there is none), and the server clock.

    ``history_live``: the window expired but its history has not (a store with ``history_ttl``).
    """

    present: bool
    version: int
    incarnation: int
    next_seq: int
    live: bool
    recent_writes: str | None
    max_seq: int | None
    clock: int
    history_live: bool = False


class HeadRow(Protocol):
    """A row of the lock statement."""

    version: int
    incarnation: int
    next_seq: int
    live: int
    recent_writes: str | None
    max_seq: int | None
    clock: int
    history_live: int | None


def locked_head(row: HeadRow | None, clock: int | None) -> LockedHead:
    """The typed reply of the lock statement (``row``), or of the clock statement when there was no row."""
    if row is None:
        if clock is None:
            raise ValueError("a write creating a memory needs the server clock")
        return LockedHead(False, 0, 0, 0, False, None, None, int(clock))
    return LockedHead(
        True,
        row.version,
        row.incarnation,
        row.next_seq,
        bool(row.live),
        row.recent_writes,
        row.max_seq,
        int(row.clock),
        bool(row.history_live),
    )


@dataclass(frozen=True, slots=True)
class LockedWrite:
    """The statements of a write under the head row's lock, in order, and what they leave.

    * ``insert_head``: there was no head row: insert it first (a writer creating the memory at the same
      time then fails on the unique key: a conflict, not damage), then delete stray rows
      (:func:`stray_rows` decides whether they are damage), then insert the rows;
    * otherwise: delete all rows (``delete_all``: a rewrite or a new incarnation, without history) or
      only ``deleted_seqs``, mark ``flagged_seqs`` evicted (with history), update the head with
      :attr:`head`, then insert the rows (``recorded``: as history entries).
    """

    insert_head: bool
    delete_all: bool
    deleted_seqs: tuple[int, ...]
    head: dict[str, Any]
    rows: list[dict[str, Any]]
    version: int
    state: CachedSnapshot | None
    conditional: bool
    flagged_seqs: tuple[int, ...] = ()
    recorded: bool = False
    flagged_new: tuple[int, ...] = ()
    """Rows this write inserts already outside the window (history-only) that its ranges enclose: marked
    evicted once inserted."""

    def delete_parameters(self) -> dict[str, Any]:
        """Parameters of the delete of the evicted rows."""
        return {"p_id": self.head["p_id"], "p_seqs": list(self.deleted_seqs)}

    def flag_parameters(self) -> dict[str, Any]:
        """Parameters of the mark of the evicted rows the window's ranges still enclose."""
        return {"p_id": self.head["p_id"], "p_seqs": list(self.flagged_seqs)}

    def flag_new_parameters(self) -> dict[str, Any]:
        """Parameters of the mark of :attr:`flagged_new`, after the insert."""
        return {"p_id": self.head["p_id"], "p_seqs": list(self.flagged_new)}


def window_needed(request: WriteRequest, cached: CachedSnapshot | None, head: LockedHead) -> bool:
    """Whether a locked write reads the stored window first (under the lock), to write only what changed.

    For a write of messages to a live memory the cached snapshot does not describe (none cached, or
    another writer's since): with the window read, the write deletes and inserts only the rows that
    differ, as a diffed turn does, instead of replacing every row (and, with history, it records only
    what it adds). Rows that cannot be decoded leave it to replace them whole. Not for a write that
    landed already or conflicts (:func:`plan_locked` says so before it looks at any row).
    """
    if not (request.messages is not None and head.present and head.live):
        return False
    if not request.messages and not request.history:  # nothing to keep: every row goes
        return False
    if request.conditional and head.version != request.expected_version:
        return False
    if find_write(head.recent_writes, request.write_id) is not None:
        return False
    return cached is None or (cached.version, cached.incarnation) != (head.version, head.incarnation)


def plan_locked(
    request: WriteRequest, cached: CachedSnapshot | None, head: LockedHead
) -> LockedWrite | Written | Conflict:
    """Decide a write under the head row's lock: already written, a conflict, or the statements to run."""
    if head.present:
        landed = find_write(head.recent_writes, request.write_id)
        if landed is not None:
            return Written(landed, None)
    live = head.present and head.live
    if request.conditional and (head.version if live else 0) != request.expected_version:
        return Conflict()
    # With history the rows stay while the memory is live or its history outlives the window; a write
    # then continues the numbering, and its cover leaves the old rows out.
    keep_rows = request.history and head.present and (live or head.history_live)
    first_seq = max(head.next_seq, head.max_seq + 1 if head.max_seq is not None else 0) if live or keep_rows else 0
    if live:
        version, incarnation = head.version + 1, head.incarnation
    else:
        version, incarnation = next_version(head.version, clock=head.clock), new_incarnation()
    kept_seqs: tuple[int, ...] = ()
    evicted: tuple[int, ...] = ()
    delete_all = head.present and not keep_rows
    old_start = first_seq
    diffed = False
    if request.messages is not None:
        appended: tuple[ChatMessage, ...] = request.messages
        if live and cached is not None and (cached.version, cached.incarnation) == (head.version, head.incarnation):
            diff = diff_messages(cached.messages, request.messages)
            if not diff.is_rewrite:
                appended = diff.appended
                kept_seqs = tuple(cached.seqs[index] for index in diff.kept)
                evicted = tuple(cached.seqs[index] for index in diff.deleted)
                delete_all = False
                old_start = cached.window_start
                diffed = True
        # Encoded under the lock, only what is new; an unencodable message rolls the transaction back.
        # History-only rows come first, outside the window (marked evicted where its ranges enclose them).
        extra = len(request.also_recorded)
        said = (*request.also_recorded, *appended)
        payloads = tuple(request.encode(message, first_seq + index) for index, message in enumerate(said))
    else:
        extra = 0
        payloads = request.records or ()
    telemetry.note_write(
        appended=len(payloads), evicted=len(evicted) if diffed or not live else None, bytes=sum(map(len, payloads))
    )
    row_seqs = tuple(range(first_seq, first_seq + len(payloads)))
    new_seqs = row_seqs[extra:]
    cover = cover_window(kept_seqs + new_seqs, old_start, first_seq + len(payloads))
    deleted_seqs, flagged_seqs = removed_seqs(request, evicted, cover)
    _, flagged_new = removed_seqs(request, row_seqs[:extra], cover)
    recent = write_entry(request.write_id, version)
    if head.present and head.recent_writes:
        recent += head.recent_writes[: (RECENT_WRITES - 1) * ENTRY_DIGITS]
    head_parameters = request.with_ttl(
        {
            "p_id": request.memory_id,
            "p_version": version,
            "p_incarnation": incarnation,
            "p_next_seq": first_seq + len(payloads),
            "p_recent": recent,
            "p_fresh": 0 if live else 1,
            **cover.parameters(),
        }
    )
    state = (
        CachedSnapshot(
            version, incarnation, first_seq + len(payloads), kept_seqs + new_seqs, request.messages, cover.start
        )
        if request.messages is not None
        else None
    )
    return LockedWrite(
        insert_head=not head.present,
        delete_all=delete_all,
        deleted_seqs=deleted_seqs,
        head=head_parameters,
        rows=message_rows(request.memory_id, row_seqs, payloads, recorded=request.recorded),
        version=version,
        state=state,
        conditional=request.conditional,
        flagged_seqs=flagged_seqs,
        recorded=request.recorded,
        flagged_new=flagged_new,
    )


def locked_read(
    memory_id: str, head: LockedHead, cached: CachedSnapshot | None, rows: Sequence[ReadRow], codec: RecordCodec
) -> ReadResult | StaleCache | Corrupted:
    """What a locked read-modify-write starts from: the rows read under the head row's lock.

    No rows were read when the head is absent or expired: the memory is empty at version 0. A stale
    cache asks the executor to read again without it, still under the lock.
    """
    if not (head.present and head.live) or not rows:
        return ReadResult(Snapshot([], 0), None)
    result = decode_read(memory_id, rows, cached, codec)
    if isinstance(result, Headless):  # pragma: no cover - the head row is locked, and read with the rows
        raise AssertionError("a locked read without its head row")
    return result


def cached_window(head: LockedHead, cached: CachedSnapshot | None) -> ReadResult | None:
    """The window a locked read-modify-write starts from without reading it: the cached one, if it is the head's.

    The head row, locked, is at the cached version and incarnation (and sequence): every write bumps the
    version, a new incarnation replaces every row, so the rows are those the cache describes, as a diffed
    turn takes them to be. ``None``: the head is absent, expired or elsewhere; read the window.
    """
    if cached is None or not (head.present and head.live):
        return None
    if (cached.version, cached.incarnation, cached.next_seq) != (head.version, head.incarnation, head.next_seq):
        return None
    return ReadResult(Snapshot(list(cached.messages), cached.version), cached)


def diffs_under_lock(head: LockedHead, state: CachedSnapshot | None) -> bool:
    """Whether a write under the head row's lock may go as a diffed turn against ``state`` (the window it read).

    Only for a live head that ``state`` describes, with no row at or past its next sequence (history
    entries restored past it): the diffed turn then writes what :func:`plan_locked` would, its head
    update conditioned on the version the lock holds.
    """
    if state is None or not (head.present and head.live):
        return False
    if (state.version, state.incarnation, state.next_seq) != (head.version, head.incarnation, head.next_seq):
        return False
    return head.max_seq is None or head.max_seq < head.next_seq


def stray_rows(plan: LockedWrite, deleted: int) -> Corrupted | None:
    """Whether the rows a write creating a memory found without a head row stop it.

    Message rows without a head row are nothing this store leaves behind (deletes and purges are
    transactions): they are damage. A conditional write (a window memory's add) must not silently
    replace them; an unconditional one is the operator's way to do exactly that.
    """
    if plan.insert_head and deleted and plan.conditional:
        return Corrupted(stray_detail(deleted))
    return None
