"""What the SQL store decides, without a database: reads, diffed writes and locked writes as typed plans.

No I/O and no driver here. An executor (the sync store, or the asyncio one) asks this module for a plan,
runs its statements with its own driver, hands the typed reply back and acts on the outcome (the outcomes
live in :mod:`~chatmemory.stores.sql.outcomes`, the read plan in :mod:`~chatmemory.stores.sql.reads`; this
module re-exports both):

* a read: :func:`read_parameters` → the read statement's rows → :func:`decode_read` →
  :class:`ReadResult` / :class:`StaleCache` (read again without the cache) / :class:`Corrupted`;
* a write whose list differs from the cached snapshot by a diff: :func:`plan_diff` → :class:`DiffWrite`
  (one conditional statement on PostgreSQL, a short transaction elsewhere) → matched or not →
  :func:`diff_outcome` → :class:`Written` / :class:`Conflict`;
* any other write: lock the head row → :func:`locked_head` → :func:`plan_locked` → :class:`LockedWrite`
  (its statements) / :class:`Written` (this write had landed already) / :class:`Conflict` /
  :class:`Corrupted`.

With history (:class:`WriteRequest` ``history=True``) nothing a write evicts is deleted: the head row's
window ranges move past it, or it is marked evicted (see :mod:`~chatmemory.stores.sql.window`), and the
rows the write adds carry their write time. A locked write diffs against the window it reads under the
lock, so a write whose cached snapshot was stale records only what it adds.

Every write carries a write id (:class:`WriteRequest`); the head row keeps the ids of the last
:data:`RECENT_WRITES` writes with the version each made. A write resent after its reply was lost (the
connection died under COMMIT) finds its id and reports the version it made instead of applying the turn
again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chatmemory import telemetry
from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.messages import ChatMessage, require_message
from chatmemory.core.sequence_diff import diff_messages
from chatmemory.core.store import Snapshot
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.base.versions import new_incarnation, next_version
from chatmemory.stores.sql.outcomes import (
    CachedSnapshot,
    Conflict,
    Corrupted,
    ReadResult,
    StaleCache,
    Unchanged,
    Written,
    stray_detail,
)
from chatmemory.stores.sql.reads import ReadRow, decode_read, raw_records, read_parameters
from chatmemory.stores.sql.window import WindowCover, cover_window

__all__ = [
    "RECENT_WRITES",
    "SCALAR_DIFF_LIMIT",
    "CachedSnapshot",
    "Conflict",
    "Corrupted",
    "DiffWrite",
    "LockedHead",
    "LockedWrite",
    "ReadResult",
    "StaleCache",
    "Unchanged",
    "WriteRequest",
    "Written",
    "conflict_error",
    "decode_read",
    "diff_outcome",
    "find_write",
    "locked_head",
    "plan_diff",
    "plan_locked",
    "raw_records",
    "read_parameters",
    "stray_detail",
    "stray_rows",
    "window_needed",
]

SCALAR_DIFF_LIMIT = 8
"""The most rows a PostgreSQL turn deletes or inserts that still get one parameter each."""
RECENT_WRITES = 8
"""How many write ids a memory remembers (a resend comes right after its failure, a few writes later at most)."""
_WRITE_ID_DIGITS = 16
_ENTRY_DIGITS = 32


def conflict_error(request: WriteRequest) -> ConcurrentUpdateError:
    """The exception a conditional write that lost raises."""
    return ConcurrentUpdateError(request.memory_id, request.expected_version)


# ----------------------------------------------------------------------------------------- writes


def new_write_id() -> str:
    """A random id naming one write (16 hexadecimal digits)."""
    return os.urandom(_WRITE_ID_DIGITS // 2).hex()


def write_entry(write_id: str, version: int) -> str:
    """A ``recent_writes`` entry: the write id, then the version it made (16 hexadecimal digits each)."""
    return f"{write_id}{version:016x}"


def find_write(recent_writes: str | None, write_id: str) -> int | None:
    """The version ``write_id`` made, if it is among a head row's recent writes."""
    if not recent_writes:
        return None
    for start in range(0, len(recent_writes) - _ENTRY_DIGITS + 1, _ENTRY_DIGITS):
        if recent_writes[start : start + _WRITE_ID_DIGITS] == write_id:
            try:
                return int(recent_writes[start + _WRITE_ID_DIGITS : start + _ENTRY_DIGITS], 16)
            except ValueError:
                return None
    return None


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """One write: the new list (or raw records), the version it is conditioned on, and its write id.

    Build it with :meth:`of_messages` or :meth:`of_records`; the write id stays the same across the
    write's retries, which is what makes a resend after a lost reply harmless.
    """

    memory_id: str
    messages: tuple[ChatMessage, ...] | None
    records: tuple[bytes, ...] | None
    expected_version: int | None
    ttl: float | None
    write_id: str = field(default_factory=new_write_id)
    history: bool = False
    history_ttl: float | None = None

    @classmethod
    def of_messages(
        cls,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int | None,
        ttl: float | None,
        *,
        history: bool = False,
        history_ttl: float | None = None,
    ) -> WriteRequest:
        """A write of ``messages`` (any iterable, consumed once; each checked to be a message).

        ``history``: keep what the write evicts and record what it adds; ``history_ttl``: seconds the
        history outlives this write (``None``: it expires with the window).
        """
        listed = tuple(messages)
        for message in listed:
            require_message(message)
        return cls(memory_id, listed, None, expected_version, ttl, history=history, history_ttl=history_ttl)

    @classmethod
    def of_records(
        cls,
        memory_id: str,
        records: Iterable[bytes],
        ttl: float | None,
        *,
        history: bool = False,
        history_ttl: float | None = None,
    ) -> WriteRequest:
        """An unconditional write of raw ``dumps_message`` records, stored as they are.

        With history the window's old rows are kept, but the records are not history entries (a raw
        write imports or plants data; it records nothing).
        """
        return cls(
            memory_id,
            None,
            tuple(bytes(record) for record in records),
            None,
            ttl,
            history=history,
            history_ttl=history_ttl,
        )

    @property
    def conditional(self) -> bool:
        """Whether the write must fail if the memory is not at :attr:`expected_version`."""
        return self.expected_version is not None

    def with_ttl(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """``parameters`` plus the store's ttl, which statements writing an expiry time read."""
        if self.ttl is not None:
            parameters["p_ttl"] = self.ttl
        if self.history_ttl is not None:
            parameters["p_history_ttl"] = self.history_ttl
        return parameters

    @property
    def recorded(self) -> bool:
        """Whether the rows this write adds are history entries (a write of messages, with history)."""
        return self.history and self.messages is not None


@dataclass(frozen=True, slots=True)
class DiffWrite:
    """A write that deletes (or marks) and appends rows against a cached snapshot, conditioned on its version.

    On PostgreSQL it is one statement (:meth:`postgresql_parameters`); elsewhere the head update
    (:meth:`head_parameters`), which must match one row, then the deletes (without history) or marks
    (with history: ``flagged_seqs``, evicted rows the new cover still encloses) and inserts.
    """

    request: WriteRequest
    cached: CachedSnapshot
    deleted_seqs: tuple[int, ...]
    new_seqs: tuple[int, ...]
    payloads: tuple[bytes, ...]
    state: CachedSnapshot
    cover: WindowCover
    flagged_seqs: tuple[int, ...] = ()

    @property
    def shape(self) -> tuple[int, int]:
        """(rows deleted or marked, rows inserted)."""
        return len(self.deleted_seqs) + len(self.flagged_seqs), len(self.payloads)

    @property
    def removed_seqs(self) -> tuple[int, ...]:
        """The rows the write deletes (without history) or marks evicted (with history)."""
        return self.flagged_seqs if self.request.history else self.deleted_seqs

    def head_parameters(self) -> dict[str, Any]:
        """Parameters of the conditional head update."""
        parameters = {
            "p_id": self.request.memory_id,
            "p_expected": self.cached.version,
            "p_incarnation": self.cached.incarnation,
            "p_next_seq": self.state.next_seq,
            "p_entry": write_entry(self.request.write_id, self.state.version),
        }
        parameters.update(self.cover.parameters())
        return self.request.with_ttl(parameters)

    def delete_parameters(self) -> dict[str, Any]:
        """Parameters of the delete (or the mark) of the evicted rows."""
        return {"p_id": self.request.memory_id, "p_seqs": list(self.removed_seqs)}

    def removal_parameters(self) -> dict[str, Any]:
        """Parameters of the delete (or mark) of :attr:`removed_seqs` as scalars ``p_d0``, ``p_d1``…."""
        parameters: dict[str, Any] = {"p_id": self.request.memory_id}
        for index, seq in enumerate(self.removed_seqs):
            parameters[f"p_d{index}"] = seq
        return parameters

    def rows(self) -> list[dict[str, Any]]:
        """The rows to insert."""
        return message_rows(self.request.memory_id, self.new_seqs, self.payloads, recorded=self.request.recorded)

    def postgresql_parameters(self) -> dict[str, Any]:
        """Parameters of the one-statement turn (the id as UTF-8 bytes: the statement is precompiled)."""
        parameters = self.head_parameters()
        parameters["p_id"] = self.request.memory_id.encode("utf-8", "surrogatepass")
        if max(self.shape) <= SCALAR_DIFF_LIMIT:
            for index, seq in enumerate(self.removed_seqs):
                parameters[f"p_d{index}"] = seq
            for index, (seq, payload) in enumerate(zip(self.new_seqs, self.payloads, strict=True)):
                parameters[f"p_s{index}"] = seq
                parameters[f"p_b{index}"] = payload
        else:
            parameters["p_deleted"] = list(self.removed_seqs)
            parameters["p_seqs"] = list(self.new_seqs)
            parameters["p_payloads"] = list(self.payloads)
        return parameters


def message_rows(
    memory_id: str, seqs: Sequence[int], payloads: Sequence[bytes], *, recorded: bool = False
) -> list[dict[str, Any]]:
    """Insert parameters of message rows (``recorded``: history entries, stamped with the head's write time)."""
    if recorded:
        return [
            {"memory_id": memory_id, "seq": seq, "payload": payload, "p_head": memory_id}
            for seq, payload in zip(seqs, payloads, strict=True)
        ]
    return [
        {"memory_id": memory_id, "seq": seq, "payload": payload} for seq, payload in zip(seqs, payloads, strict=True)
    ]


def _removed(
    request: WriteRequest, evicted: tuple[int, ...], cover: WindowCover
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(rows to delete, rows to mark evicted) of a write evicting ``evicted`` and leaving ``cover``."""
    if request.history:
        return (), tuple(seq for seq in evicted if cover.covers(seq))
    return evicted, ()


def plan_diff(request: WriteRequest, cached: CachedSnapshot | None) -> DiffWrite | None:
    """The diffed write of ``request`` against ``cached``, or ``None`` when the locked path must write.

    A conditional write diffs only against a snapshot of its expected version; an unconditional one
    against any cached snapshot (conditioned on that snapshot's version: if it is stale, the write falls
    back to the locked path). Only the appended messages are encoded.
    """
    if request.messages is None or cached is None:
        return None
    if request.conditional and cached.version != request.expected_version:
        return None
    diff = diff_messages(cached.messages, request.messages)
    if diff.is_rewrite:
        return None
    evicted = tuple(cached.seqs[index] for index in diff.deleted)
    next_seq = cached.next_seq + len(diff.appended)
    new_seqs = tuple(range(cached.next_seq, next_seq))
    payloads = tuple(dumps_message(message) for message in diff.appended)
    telemetry.note_write(appended=len(payloads), evicted=len(evicted), bytes=sum(map(len, payloads)))
    window = tuple(cached.seqs[index] for index in diff.kept) + new_seqs
    cover = cover_window(window, cached.window_start, next_seq)
    deleted, flagged = _removed(request, evicted, cover)
    state = CachedSnapshot(cached.version + 1, cached.incarnation, next_seq, window, request.messages, cover.start)
    return DiffWrite(request, cached, deleted, new_seqs, payloads, state, cover, flagged)


def diff_outcome(plan: DiffWrite, matched: bool) -> Written | Conflict:
    """The outcome of a diffed write whose head update did (or did not) match its row."""
    return Written(plan.state.version, plan.state) if matched else Conflict()


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

    def delete_parameters(self) -> dict[str, Any]:
        """Parameters of the delete of the evicted rows."""
        return {"p_id": self.head["p_id"], "p_seqs": list(self.deleted_seqs)}

    def flag_parameters(self) -> dict[str, Any]:
        """Parameters of the mark of the evicted rows the window's ranges still enclose."""
        return {"p_id": self.head["p_id"], "p_seqs": list(self.flagged_seqs)}


def window_needed(request: WriteRequest, cached: CachedSnapshot | None, head: LockedHead) -> bool:
    """Whether a locked write must read the stored window first (under the lock) to know what it adds.

    Only with history, for a write of messages to a live memory the cached snapshot does not describe:
    without history a write that cannot diff replaces the rows whole, and what it adds does not matter.
    """
    if not (request.history and request.messages is not None and head.present and head.live):
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
        payloads = tuple(dumps_message(message) for message in appended)
    else:
        payloads = request.records or ()
    telemetry.note_write(
        appended=len(payloads), evicted=len(evicted) if diffed or not live else None, bytes=sum(map(len, payloads))
    )
    new_seqs = tuple(range(first_seq, first_seq + len(payloads)))
    cover = cover_window(kept_seqs + new_seqs, old_start, first_seq + len(payloads))
    deleted_seqs, flagged_seqs = _removed(request, evicted, cover)
    recent = write_entry(request.write_id, version)
    if head.present and head.recent_writes:
        recent += head.recent_writes[: (RECENT_WRITES - 1) * _ENTRY_DIGITS]
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
        rows=message_rows(request.memory_id, new_seqs, payloads, recorded=request.recorded),
        version=version,
        state=state,
        conditional=request.conditional,
        flagged_seqs=flagged_seqs,
        recorded=request.recorded,
    )


def locked_read(
    memory_id: str, head: LockedHead, cached: CachedSnapshot | None, rows: Sequence[ReadRow]
) -> ReadResult | StaleCache | Corrupted:
    """What a locked read-modify-write starts from: the rows read under the head row's lock.

    No rows were read when the head is absent or expired: the memory is empty at version 0. A stale
    cache asks the executor to read again without it, still under the lock.
    """
    if not (head.present and head.live) or not rows:
        return ReadResult(Snapshot([], 0), None)
    return decode_read(memory_id, rows, cached)


def stray_rows(plan: LockedWrite, deleted: int) -> Corrupted | None:
    """Whether the rows a write creating a memory found without a head row stop it.

    Message rows without a head row are nothing this store leaves behind (deletes and purges are
    transactions): they are damage. A conditional write (a window memory's add) must not silently
    replace them; an unconditional one is the operator's way to do exactly that.
    """
    if plan.insert_head and deleted and plan.conditional:
        return Corrupted(stray_detail(deleted))
    return None
