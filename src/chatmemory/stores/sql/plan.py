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

    @classmethod
    def of_messages(
        cls, memory_id: str, messages: Iterable[ChatMessage], expected_version: int | None, ttl: float | None
    ) -> WriteRequest:
        """A write of ``messages`` (any iterable, consumed once; each checked to be a message)."""
        listed = tuple(messages)
        for message in listed:
            require_message(message)
        return cls(memory_id, listed, None, expected_version, ttl)

    @classmethod
    def of_records(cls, memory_id: str, records: Iterable[bytes], ttl: float | None) -> WriteRequest:
        """An unconditional write of raw ``dumps_message`` records, stored as they are."""
        return cls(memory_id, None, tuple(bytes(record) for record in records), None, ttl)

    @property
    def conditional(self) -> bool:
        """Whether the write must fail if the memory is not at :attr:`expected_version`."""
        return self.expected_version is not None

    def with_ttl(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """``parameters`` plus the store's ttl, which statements writing an expiry time read."""
        if self.ttl is not None:
            parameters["p_ttl"] = self.ttl
        return parameters


@dataclass(frozen=True, slots=True)
class DiffWrite:
    """A write that deletes and appends rows against a cached snapshot, conditioned on its version.

    On PostgreSQL it is one statement (:meth:`postgresql_parameters`); elsewhere the head update
    (:meth:`head_parameters`), which must match one row, then the deletes and inserts.
    """

    request: WriteRequest
    cached: CachedSnapshot
    deleted_seqs: tuple[int, ...]
    new_seqs: tuple[int, ...]
    payloads: tuple[bytes, ...]
    state: CachedSnapshot

    @property
    def shape(self) -> tuple[int, int]:
        """(rows deleted, rows inserted)."""
        return len(self.deleted_seqs), len(self.payloads)

    def head_parameters(self) -> dict[str, Any]:
        """Parameters of the conditional head update."""
        return self.request.with_ttl(
            {
                "p_id": self.request.memory_id,
                "p_expected": self.cached.version,
                "p_incarnation": self.cached.incarnation,
                "p_next_seq": self.state.next_seq,
                "p_entry": write_entry(self.request.write_id, self.state.version),
            }
        )

    def delete_parameters(self) -> dict[str, Any]:
        """Parameters of the delete of the evicted rows."""
        return {"p_id": self.request.memory_id, "p_seqs": list(self.deleted_seqs)}

    def rows(self) -> list[dict[str, Any]]:
        """The rows to insert."""
        return message_rows(self.request.memory_id, self.new_seqs, self.payloads)

    def postgresql_parameters(self) -> dict[str, Any]:
        """Parameters of the one-statement turn (the id as UTF-8 bytes: the statement is precompiled)."""
        parameters = self.head_parameters()
        parameters["p_id"] = self.request.memory_id.encode("utf-8", "surrogatepass")
        if max(self.shape) <= SCALAR_DIFF_LIMIT:
            for index, seq in enumerate(self.deleted_seqs):
                parameters[f"p_d{index}"] = seq
            for index, (seq, payload) in enumerate(zip(self.new_seqs, self.payloads, strict=True)):
                parameters[f"p_s{index}"] = seq
                parameters[f"p_b{index}"] = payload
        else:
            parameters["p_deleted"] = list(self.deleted_seqs)
            parameters["p_seqs"] = list(self.new_seqs)
            parameters["p_payloads"] = list(self.payloads)
        return parameters


def message_rows(memory_id: str, seqs: Sequence[int], payloads: Sequence[bytes]) -> list[dict[str, Any]]:
    """Insert parameters of message rows."""
    return [
        {"memory_id": memory_id, "seq": seq, "payload": payload} for seq, payload in zip(seqs, payloads, strict=True)
    ]


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
    deleted = tuple(cached.seqs[index] for index in diff.deleted)
    new_seqs = tuple(range(cached.next_seq, cached.next_seq + len(diff.appended)))
    payloads = tuple(dumps_message(message) for message in diff.appended)
    telemetry.note_write(appended=len(payloads), evicted=len(deleted), bytes=sum(map(len, payloads)))
    kept = tuple(cached.seqs[index] for index in diff.kept)
    state = CachedSnapshot(
        cached.version + 1, cached.incarnation, cached.next_seq + len(payloads), kept + new_seqs, request.messages
    )
    return DiffWrite(request, cached, deleted, new_seqs, payloads, state)


def diff_outcome(plan: DiffWrite, matched: bool) -> Written | Conflict:
    """The outcome of a diffed write whose head update did (or did not) match its row."""
    return Written(plan.state.version, plan.state) if matched else Conflict()


@dataclass(frozen=True, slots=True)
class LockedHead:
    """The head row as the locked write found it (``present=False``: there is none), and the server clock."""

    present: bool
    version: int
    incarnation: int
    next_seq: int
    live: bool
    recent_writes: str | None
    max_seq: int | None
    clock: int


class HeadRow(Protocol):
    """A row of the lock statement."""

    version: int
    incarnation: int
    next_seq: int
    live: int
    recent_writes: str | None
    max_seq: int | None
    clock: int


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
    )


@dataclass(frozen=True, slots=True)
class LockedWrite:
    """The statements of a write under the head row's lock, in order, and what they leave.

    * ``insert_head``: there was no head row: insert it first (a writer creating the memory at the same
      time then fails on the unique key: a conflict, not damage), then delete stray rows
      (:func:`stray_rows` decides whether they are damage), then insert the rows;
    * otherwise: delete all rows (``delete_all``: a rewrite or a new incarnation) or only
      ``deleted_seqs``, update the head with :attr:`head`, then insert the rows.
    """

    insert_head: bool
    delete_all: bool
    deleted_seqs: tuple[int, ...]
    head: dict[str, Any]
    rows: list[dict[str, Any]]
    version: int
    state: CachedSnapshot | None
    conditional: bool

    def delete_parameters(self) -> dict[str, Any]:
        """Parameters of the delete of the evicted rows."""
        return {"p_id": self.head["p_id"], "p_seqs": list(self.deleted_seqs)}


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
    if live:
        version, incarnation = head.version + 1, head.incarnation
        first_seq = max(head.next_seq, head.max_seq + 1 if head.max_seq is not None else 0)
    else:
        version, incarnation = next_version(head.version, clock=head.clock), new_incarnation()
        first_seq = 0
    kept_seqs: tuple[int, ...] = ()
    deleted_seqs: tuple[int, ...] = ()
    delete_all = head.present
    if request.messages is not None:
        appended: tuple[ChatMessage, ...] = request.messages
        if live and cached is not None and (cached.version, cached.incarnation) == (head.version, head.incarnation):
            diff = diff_messages(cached.messages, request.messages)
            if not diff.is_rewrite:
                appended = diff.appended
                kept_seqs = tuple(cached.seqs[index] for index in diff.kept)
                deleted_seqs = tuple(cached.seqs[index] for index in diff.deleted)
                delete_all = False
        # Encoded under the lock, only what is new; an unencodable message rolls the transaction back.
        payloads = tuple(dumps_message(message) for message in appended)
    else:
        payloads = request.records or ()
    telemetry.note_write(
        appended=len(payloads), evicted=None if delete_all else len(deleted_seqs), bytes=sum(map(len, payloads))
    )
    new_seqs = tuple(range(first_seq, first_seq + len(payloads)))
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
        }
    )
    state = (
        CachedSnapshot(version, incarnation, first_seq + len(payloads), kept_seqs + new_seqs, request.messages)
        if request.messages is not None
        else None
    )
    return LockedWrite(
        insert_head=not head.present,
        delete_all=delete_all,
        deleted_seqs=deleted_seqs,
        head=head_parameters,
        rows=message_rows(request.memory_id, new_seqs, payloads),
        version=version,
        state=state,
        conditional=request.conditional,
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
