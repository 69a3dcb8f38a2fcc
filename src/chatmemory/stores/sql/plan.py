"""What the SQL store decides before it sends: reads, diffed writes and locked writes as typed plans (pure).

A :class:`Planner` holds the store's write settings and makes each :class:`WriteRequest` (the new list,
the version it is conditioned on, and a write id that stays the same across retries: the head row keeps
the last :data:`RECENT_WRITES`, so a resent write is found). :func:`read_parameters` says what a read
leaves out; :func:`plan_diff` turns a request and the cached snapshot into a :class:`DiffWrite`, and any
other write is decided under the head row's lock by :func:`plan_locked` (a :class:`LockedWrite`). The
window is the rows its head row's ranges enclose (:func:`cover_window`). Step by step: *The window's
rows* in ``docs/store-sql.md``; where each part lives: *SQL* in ``docs/stores.md``. No driver, no I/O.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmemory import telemetry
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.window import diff_messages, window_shift
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.base.versions import new_incarnation, next_version
from chatmemory.stores.sql.outcomes import CachedSnapshot, Conflict, LockedHead, Written

__all__ = [
    "JOINED_PAYLOAD_LIMIT",
    "RECENT_WRITES",
    "RUN",
    "SCALAR_DIFF_LIMIT",
    "DiffWrite",
    "LockedWrite",
    "Planner",
    "WindowCover",
    "WriteRequest",
    "check_batch_size",
    "check_listing",
    "cover_window",
    "diff_outcome",
    "diffs_under_lock",
    "find_write",
    "message_rows",
    "new_write_id",
    "plan_diff",
    "plan_locked",
    "read_parameters",
    "window_needed",
    "write_entry",
]


class Planner:
    """The store's write settings, and the requests made with them (``history``: rows stay as history)."""

    __slots__ = ("codec", "history", "history_ttl", "ttl")

    def __init__(self, ttl: float | None, history: bool, history_ttl: float | None, codec: RecordCodec) -> None:
        self.ttl = ttl
        self.history = history
        self.history_ttl = history_ttl
        self.codec = codec

    def request(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int | None,
        also_recorded: Iterable[ChatMessage] = (),
    ) -> WriteRequest:
        """A write of ``messages`` (``expected_version``: ``None`` for an unconditional one)."""
        return WriteRequest.of_messages(
            memory_id,
            messages,
            expected_version,
            self.ttl,
            history=self.history,
            history_ttl=self.history_ttl,
            also_recorded=also_recorded,
            codec=self.codec,
        )

    def records_request(self, memory_id: str, records: Iterable[bytes]) -> WriteRequest:
        """An unconditional write of raw records."""
        return WriteRequest.of_records(memory_id, records, self.ttl, history=self.history, history_ttl=self.history_ttl)


# ------------------------------------------------------------------------------------------ reads


def read_parameters(memory_id: str, cached: CachedSnapshot | None) -> dict[str, Any]:
    """Parameters of the read statement: rows the cached snapshot holds are sent without their payload."""
    return {
        "p_id": memory_id,
        # -1 matches no incarnation (they are non-negative): every payload is sent.
        "p_known_incarnation": -1 if cached is None else cached.incarnation,
        "p_known_next": 0 if cached is None else cached.next_seq,
    }


# ----------------------------------------------------------------------------------------- writes


RECENT_WRITES = 8
"""How many write ids a memory remembers (a resend comes right after its failure, a few writes later at most)."""
_WRITE_ID_DIGITS = 16
ENTRY_DIGITS = 32
"""Characters of one ``recent_writes`` entry: the write id, then the version it made."""


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
    for start in range(0, len(recent_writes) - ENTRY_DIGITS + 1, ENTRY_DIGITS):
        if recent_writes[start : start + _WRITE_ID_DIGITS] == write_id:
            try:
                return int(recent_writes[start + _WRITE_ID_DIGITS : start + ENTRY_DIGITS], 16)
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
    also_recorded: tuple[ChatMessage, ...] = ()
    """History-only messages (evicted within the add that wrote them), outside the window before the rest."""
    codec: RecordCodec = PLAIN

    def encode(self, message: ChatMessage, seq: int) -> bytes:
        """The stored record of ``message`` in the row of sequence ``seq`` (plain, or sealed by a keyring)."""
        return self.codec.dumps(message, self.memory_id, seq)

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
        also_recorded: Iterable[ChatMessage] = (),
        codec: RecordCodec = PLAIN,
    ) -> WriteRequest:
        """A write of ``messages`` (each checked); with ``history``, ``also_recorded`` are recorded first."""
        extra = checked_messages(also_recorded) if history else ()
        return cls(
            memory_id,
            checked_messages(messages),
            None,
            expected_version,
            ttl,
            history=history,
            history_ttl=history_ttl,
            also_recorded=extra,
            codec=codec,
        )

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
        """An unconditional write of raw records, stored as they are (with history: recording nothing)."""
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


def removed_seqs(
    request: WriteRequest, evicted: tuple[int, ...], cover: WindowCover
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(rows to delete, rows to mark evicted): with history those ``cover`` still encloses are marked instead."""
    if request.history:
        return (), tuple(seq for seq in evicted if cover.covers(seq))
    return evicted, ()


@dataclass(frozen=True, slots=True)
class WindowCover:
    """The ranges of sequence numbers holding a window: ``pin`` (both inclusive, if any) and ``[start, ∞)``."""

    start: int
    pin: tuple[int, int] | None = None

    def covers(self, seq: int) -> bool:
        """Whether ``seq`` lies in one of the ranges (a row there is in the window unless marked evicted)."""
        if seq >= self.start:
            return True
        return self.pin is not None and self.pin[0] <= seq <= self.pin[1]

    def parameters(self) -> dict[str, Any]:
        """The head row's ``window_start``, ``pin_start`` and ``pin_end`` as statement parameters."""
        pin_start, pin_end = self.pin if self.pin is not None else (None, None)
        return {"p_window_start": self.start, "p_pin_start": pin_start, "p_pin_end": pin_end}


def cover_window(seqs: Sequence[int], old_start: int, next_seq: int) -> WindowCover:
    """The ranges inside the old ones that hold the window's rows ``seqs`` (ascending) and the fewest others.

    ``old_start``: the ``window_start`` before the write (rows below it lie in the old pin; a rewrite's
    first new sequence number); ``next_seq``: past every row. Why: *The window's rows* in ``docs/store-sql.md``.
    """
    count = len(seqs)
    if not count:
        return WindowCover(next_seq)
    first, last = seqs[0], seqs[-1]
    pinned = bisect_left(seqs, old_start) if first < old_start else 0
    if pinned:
        # Rows below the old start were the old pin: they stay the pin, and the rest is the open range
        # (it must not reach down into the gap between the old pin and the old start).
        if pinned == count:
            return WindowCover(next_seq, (first, last))
        return WindowCover(seqs[pinned], (first, seqs[pinned - 1]))
    if last - first + 1 == count:
        return WindowCover(first)  # contiguous: the steady state
    # Both ranges lie in the old open range: split at the widest gap, which then is scanned by no read.
    split = max(range(1, count), key=lambda index: seqs[index] - seqs[index - 1])
    return WindowCover(seqs[split], (first, seqs[split - 1]))


SCALAR_DIFF_LIMIT = 8
"""The most rows a PostgreSQL turn deletes or inserts that still get one parameter each."""
JOINED_PAYLOAD_LIMIT = 512 * 1024
"""The most payload bytes a MySQL/MariaDB turn sends as one query (larger ones go statement by statement)."""
RUN = -1
"""The :attr:`DiffWrite.removal` of consecutive rows (a steady turn's): one range, ``p_first`` to ``p_last``,
which SQLite runs markedly faster than ``IN`` (a list it first builds into a temporary index)."""


@dataclass(frozen=True, slots=True)
class DiffWrite:
    """A write that deletes (or, with history, marks) and appends rows against a cached snapshot, at its version.

    On PostgreSQL one statement (:meth:`postgresql_parameters`); elsewhere the head update, which must
    match one row (:meth:`head_parameters`), the removal and the insert.
    """

    request: WriteRequest
    cached: CachedSnapshot
    deleted_seqs: tuple[int, ...]
    new_seqs: tuple[int, ...]
    payloads: tuple[bytes, ...]
    state: CachedSnapshot
    cover: WindowCover
    flagged_seqs: tuple[int, ...]
    removed_seqs: tuple[int, ...]
    """The rows it deletes (:attr:`deleted_seqs`) or, with history, marks evicted (:attr:`flagged_seqs`)."""
    removal: int
    """How :attr:`removed_seqs` are named: :data:`RUN` for consecutive rows, else their count (``p_d0``…)."""

    @property
    def shape(self) -> tuple[int, int]:
        """(rows deleted or marked, rows inserted)."""
        return len(self.deleted_seqs) + len(self.flagged_seqs), len(self.payloads)

    def joinable(self, max_packet: int | None) -> bool:
        """Whether the turn is small enough to go as one query (its payloads escaped within ``max_packet``)."""
        size = sum(map(len, self.payloads))
        return size <= JOINED_PAYLOAD_LIMIT and (max_packet is None or 2 * size + 65536 <= max_packet)

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

    def removal_parameters(self) -> dict[str, Any]:
        """Parameters of the delete (or mark) of :attr:`removed_seqs`, named as :attr:`removal` says."""
        return self._with_removal({"p_id": self.request.memory_id})

    def _with_removal(self, parameters: dict[str, Any]) -> dict[str, Any]:
        removed = self.removed_seqs
        if self.removal == RUN:
            parameters["p_first"] = removed[0]
            parameters["p_last"] = removed[-1]
        else:
            for index, seq in enumerate(removed):
                parameters[f"p_d{index}"] = seq
        return parameters

    def rows(self) -> list[dict[str, Any]]:
        """The rows to insert."""
        return message_rows(self.request.memory_id, self.new_seqs, self.payloads, recorded=self.request.recorded)

    def joined_parameters(self) -> dict[str, Any]:
        """Values of the turn as one string (:meth:`~chatmemory.stores.sql.statements.Statements.joined_turn`)."""
        parameters = self._with_removal(self.head_parameters())
        for index, (seq, payload) in enumerate(zip(self.new_seqs, self.payloads, strict=True)):
            parameters[f"p_s{index}"] = seq
            parameters[f"p_b{index}"] = payload
        return parameters

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


def plan_diff(request: WriteRequest, cached: CachedSnapshot | None) -> DiffWrite | None:
    """The diffed write of ``request`` against ``cached``, or ``None`` when the locked path must write.

    A conditional write diffs only against a snapshot of its expected version; an unconditional one against
    any (conditioned on its version: if stale, the write falls back). Only appended messages are encoded.
    """
    if request.messages is None or cached is None or request.also_recorded:
        return None  # history-only rows take the locked path (rare: an add evicting its own messages)
    if request.conditional and cached.version != request.expected_version:
        return None
    seqs = cached.seqs
    shift = window_shift(cached.messages, request.messages)
    if shift is not None:  # the common turn: the oldest rows go, the rest stay in place
        span, kept = shift
        evicted, stays, appended = seqs[:span], seqs[span:], request.messages[kept:]
    else:
        diff = diff_messages(cached.messages, request.messages)
        if diff.is_rewrite:
            return None
        evicted, stays, appended = (
            tuple(map(seqs.__getitem__, diff.deleted)),
            _kept_seqs(seqs, diff.kept),
            diff.appended,
        )
    next_seq = cached.next_seq + len(appended)
    new_seqs = tuple(range(cached.next_seq, next_seq))
    payloads = tuple(map(request.encode, appended, new_seqs))
    telemetry.note_write(appended=len(payloads), evicted=len(evicted), bytes=sum(map(len, payloads)))
    window = stays + new_seqs
    cover = cover_window(window, cached.window_start, next_seq)
    deleted, flagged = removed_seqs(request, evicted, cover)
    removed = flagged if request.history else deleted
    state = CachedSnapshot(cached.version + 1, cached.incarnation, next_seq, window, request.messages, cover.start)
    return DiffWrite(request, cached, deleted, new_seqs, payloads, state, cover, flagged, removed, removal_of(removed))


def removal_of(removed: tuple[int, ...]) -> int:
    """How rows ``removed`` (ascending) are named in a statement: :data:`RUN` if consecutive, else their count."""
    count = len(removed)
    return RUN if count > 1 and removed == tuple(range(removed[0], removed[0] + count)) else count


def _kept_seqs(seqs: tuple[int, ...], kept: tuple[int, ...]) -> tuple[int, ...]:
    """The sequence numbers of the kept messages: a slice when they are one run (the steady state)."""
    if kept and kept[-1] - kept[0] + 1 == len(kept):
        return seqs[kept[0] : kept[-1] + 1]
    return tuple(map(seqs.__getitem__, kept))


def diff_outcome(plan: DiffWrite, matched: bool) -> Written | Conflict:
    """The outcome of a diffed write whose head update did (or did not) match its row."""
    return Written(plan.state.version, plan.state) if matched else Conflict()


@dataclass(frozen=True, slots=True)
class LockedWrite:
    """The statements of a write under the head row's lock, in order, and what they leave.

    ``insert_head`` (no head row): insert it (a writer creating the memory meanwhile then fails on the
    key: a conflict), delete stray rows (damage?), insert the rows. Otherwise: delete all rows
    (``delete_all``) or ``deleted_seqs``, mark ``flagged_seqs``, update the head, insert the rows.
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

    def seqs_parameters(self, seqs: tuple[int, ...]) -> dict[str, Any]:
        """Parameters of the delete or mark of rows ``seqs`` (:attr:`deleted_seqs`, :attr:`flagged_seqs` ...)."""
        return {"p_id": self.head["p_id"], "p_seqs": list(seqs)}


def window_needed(request: WriteRequest, cached: CachedSnapshot | None, head: LockedHead) -> bool:
    """Whether a locked write reads the stored window first (under the lock), to write only what changed.

    For a write of messages to a live memory the cached snapshot does not describe, that neither landed
    already nor conflicts: it then changes only the rows that differ, as a diffed turn does.
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


# ------------------------------------------------------------------------------------- arguments


def check_listing(order: str, page_size: int) -> None:
    """Refuse a listing order or page size the store does not take (``ValueError`` naming the argument)."""
    if order not in ("id", "newest"):
        raise ValueError("order must be 'id' or 'newest'")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ValueError("page_size must be an int >= 1")


def check_batch_size(batch_size: int) -> None:
    """Refuse a purge batch size that is not a positive int (``ValueError`` naming the argument)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError("batch_size must be an int >= 1")
