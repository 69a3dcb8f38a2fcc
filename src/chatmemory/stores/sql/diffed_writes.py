"""Diffed writes of the SQL store: a turn against the cached snapshot, conditioned on its version (pure).

:func:`plan_diff` turns a :class:`~chatmemory.stores.sql.write_requests.WriteRequest` and the cached
snapshot into a :class:`DiffWrite`: the rows to delete (or, with history, mark) and the rows to append.
On PostgreSQL it is one statement, on MariaDB one compound statement (which signals a miss); elsewhere
a short transaction whose head update must match one row (on MySQL sent as one multi-statement string
where the connection allows it). :func:`diff_outcome` reads whether it did. No driver, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chatmemory import telemetry
from chatmemory.core.sequence_diff import diff_messages, window_shift
from chatmemory.stores.sql.outcomes import CachedSnapshot, Conflict, Written
from chatmemory.stores.sql.window import WindowCover, cover_window
from chatmemory.stores.sql.write_requests import WriteRequest, message_rows, removed_seqs, write_entry

__all__ = [
    "JOINED_PAYLOAD_LIMIT",
    "RUN",
    "SCALAR_DIFF_LIMIT",
    "DiffWrite",
    "diff_outcome",
    "plan_diff",
    "removal_of",
]

SCALAR_DIFF_LIMIT = 8
"""The most rows a PostgreSQL turn deletes or inserts that still get one parameter each."""
JOINED_PAYLOAD_LIMIT = 512 * 1024
"""The most payload bytes a MySQL/MariaDB turn sends as one query, a multi-statement string or MariaDB's
compound statement (escaped, up to twice as many): larger turns go statement by statement, their rows in
inserts PyMySQL keeps under 1 MB."""
RUN = -1
"""The :attr:`DiffWrite.removal` of consecutive rows: one range, ``p_first`` to ``p_last``. A steady-state
turn evicts the oldest rows of its window, so it is almost always one; SQLite runs a range markedly faster
than ``IN`` (a list it first builds into a temporary index)."""


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
    flagged_seqs: tuple[int, ...]
    removed_seqs: tuple[int, ...]
    """The rows the write deletes (without history: :attr:`deleted_seqs`) or marks evicted (with history:
    :attr:`flagged_seqs`)."""
    removal: int
    """How :attr:`removed_seqs` are named: :data:`RUN` for consecutive rows, else their count (``p_d0``…)."""

    @property
    def shape(self) -> tuple[int, int]:
        """(rows deleted or marked, rows inserted)."""
        return len(self.deleted_seqs) + len(self.flagged_seqs), len(self.payloads)

    def joinable(self, max_packet: int | None) -> bool:
        """Whether the turn is small enough to go as one query (multi-statement, or MariaDB's compound statement).

        Args:
            max_packet: the server's ``max_allowed_packet``, if known: the query, its payloads escaped
                (at most twice their size) and its SQL, must fit in it.
        """
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

    def delete_parameters(self) -> dict[str, Any]:
        """Parameters of the delete (or the mark) of the evicted rows."""
        return {"p_id": self.request.memory_id, "p_seqs": list(self.removed_seqs)}

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

    A conditional write diffs only against a snapshot of its expected version; an unconditional one
    against any cached snapshot (conditioned on that snapshot's version: if it is stale, the write falls
    back to the locked path). Only the appended messages are encoded.
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
