"""Executing the SQL store's writes on an open connection: a diffed turn, or a locked write.

The store decides what to write (the sequence diff against its cached snapshot) and owns connections,
retries and the cache; these functions run the statements of one write and report the state they left.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from chatmemory.core.errors import CorruptedMemoryError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.sequence_diff import SequenceDiff, diff_messages
from chatmemory.stores.sql_snapshots import CachedSnapshot, fresh_version, new_incarnation
from chatmemory.stores.sql_statements import SCALAR_DIFF_LIMIT, Statements

__all__ = ["Conflict", "TurnWrite", "WrittenState", "write_locked"]


class Conflict(Exception):
    """Another writer got there first; raised inside a transaction to roll it back."""


@dataclass(frozen=True, slots=True)
class TurnWrite:
    """A diffed write against a cached snapshot: the conditional head update, deletes and the new tail."""

    memory_id: str
    cached: CachedSnapshot
    deleted_seqs: list[int]
    payloads: list[bytes]
    now: datetime.datetime
    expires_at: datetime.datetime | None

    @property
    def new_seqs(self) -> list[int]:
        """The sequence numbers of the appended messages."""
        return list(range(self.cached.next_seq, self.cached.next_seq + len(self.payloads)))

    def head_parameters(self) -> dict[str, Any]:
        """Parameters of the conditional head update (``Statements.bump_head``)."""
        return {
            "p_id": self.memory_id,
            "p_expected": self.cached.version,
            "p_incarnation": self.cached.incarnation,
            "p_now": self.now,
            "p_expires": self.expires_at,
            "p_next_seq": self.cached.next_seq + len(self.payloads),
        }

    def run_postgresql(self, connection: Connection, statements: Statements) -> bool:
        """The whole turn as one statement on an autocommit connection; ``False``: the version was stale."""
        deleted, payloads = self.deleted_seqs, self.payloads
        next_seq = self.cached.next_seq
        # The precompiled statement bypasses the column type's bind processing.
        parameters = self.head_parameters()
        parameters["p_id"] = self.memory_id.encode("utf-8", "surrogatepass")
        if max(len(deleted), len(payloads)) <= SCALAR_DIFF_LIMIT:
            for index, seq in enumerate(deleted):
                parameters[f"p_d{index}"] = seq
            for index, payload in enumerate(payloads):
                parameters[f"p_s{index}"] = next_seq + index
                parameters[f"p_b{index}"] = payload
        else:
            parameters["p_deleted"] = deleted
            parameters["p_seqs"] = self.new_seqs
            parameters["p_payloads"] = payloads
        statement = statements.diff_postgresql(len(deleted), len(payloads))
        return connection.exec_driver_sql(statement, parameters).first() is not None

    def run(self, connection: Connection, statements: Statements) -> None:
        """The turn as statements in the caller's transaction; raises :class:`Conflict` when stale."""
        if connection.execute(statements.bump_head, self.head_parameters()).rowcount != 1:
            raise Conflict
        if self.deleted_seqs:
            connection.execute(statements.delete_seqs, {"p_id": self.memory_id, "p_seqs": self.deleted_seqs})
        _insert(connection, statements, self.memory_id, self.new_seqs, self.payloads)


@dataclass(frozen=True, slots=True)
class WrittenState:
    """What a locked write left: the head's new values and the sequence numbers of the stored messages."""

    version: int
    incarnation: int
    next_seq: int
    seqs: tuple[int, ...]


def _insert(
    connection: Connection, statements: Statements, memory_id: str, seqs: list[int], payloads: Sequence[bytes]
) -> None:
    if payloads:
        connection.execute(
            statements.insert_messages,
            [
                {"memory_id": memory_id, "seq": seq, "payload": payload}
                for seq, payload in zip(seqs, payloads, strict=True)
            ],
        )


def write_locked(
    connection: Connection,
    statements: Statements,
    *,
    memory_id: str,
    messages: tuple[ChatMessage, ...] | None,
    payloads: list[bytes],
    expected_version: int | None,
    cached: CachedSnapshot | None,
    now: datetime.datetime,
    expires_at: datetime.datetime | None,
) -> WrittenState:
    """The general write, in the caller's transaction: lock the head row, check, then diff or rewrite.

    Args:
        messages: the new list (``None`` for raw records, which are always written whole).
        payloads: the encoded records of the whole new list.
        expected_version: the version the memory must be at (``0``: absent), or ``None`` for no check.
        cached: the store's snapshot of the memory; used only if it is of the locked head's version.

    Raises:
        Conflict: the memory is not at ``expected_version``.
        CorruptedMemoryError: a conditional write found message rows without a head row.
    """
    head = connection.execute(statements.lock_head, {"p_id": memory_id}).first()
    live = head is not None and (head.expires_at is None or head.expires_at > now)
    if expected_version is not None and (head.version if head is not None and live else 0) != expected_version:
        raise Conflict
    plan: SequenceDiff | None = None
    if (
        messages is not None
        and cached is not None
        and head is not None
        and live
        and (cached.version, cached.incarnation) == (head.version, head.incarnation)
    ):
        plan = diff_messages(cached.messages, messages)
        if plan.is_rewrite:
            plan = None
    kept_seqs: tuple[int, ...] = ()
    if head is None:
        version, incarnation, first_seq = fresh_version(), new_incarnation(), 0
        # The head goes in first: a writer creating the memory at the same time makes this insert fail
        # (unique key), which is a conflict, not damage.
        connection.execute(
            statements.insert_head,
            {
                "memory_id": memory_id,
                "version": version,
                "incarnation": incarnation,
                "next_seq": len(payloads),
                "created_at": now,
                "updated_at": now,
                "expires_at": expires_at,
            },
        )
        # Message rows without a head row are nothing this store leaves behind (deletes and purges are
        # transactions): they are damage. A conditional write (a window memory's add) must not silently
        # replace them; an unconditional one is the operator's way to do exactly that.
        stray = connection.execute(statements.delete_all, {"p_id": memory_id}).rowcount
        if stray and expected_version is not None:
            raise CorruptedMemoryError(
                memory_id, f"{stray} message rows exist without the memory's head row (the memory reads as empty)"
            )
    else:
        if live:
            version, incarnation = head.version + 1, head.incarnation
        else:
            version, incarnation = fresh_version(head.version), new_incarnation()
        first_seq = head.next_seq
        if plan is not None and cached is not None:
            payloads = payloads[len(plan.kept) :]
            kept_seqs = tuple(cached.seqs[index] for index in plan.kept)
            deleted_seqs = [cached.seqs[index] for index in plan.deleted]
            if deleted_seqs:
                connection.execute(statements.delete_seqs, {"p_id": memory_id, "p_seqs": deleted_seqs})
        else:
            # A rewrite takes new sequence numbers too: within an incarnation a number is never reused.
            connection.execute(statements.delete_all, {"p_id": memory_id})
        connection.execute(
            statements.rewrite_head,
            {
                "p_id": memory_id,
                "p_version": version,
                "p_incarnation": incarnation,
                "p_next_seq": first_seq + len(payloads),
                "p_now": now,
                "p_expires": expires_at,
                "p_created": None if live else now,
            },
        )
    new_seqs = list(range(first_seq, first_seq + len(payloads)))
    _insert(connection, statements, memory_id, new_seqs, payloads)
    return WrittenState(version, incarnation, first_seq + len(payloads), kept_seqs + tuple(new_seqs))
