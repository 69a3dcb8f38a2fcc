"""One write of the SQL store, as both write paths take it: the request, its write id, its rows.

A :class:`WriteRequest` carries the new list (or raw records), the version it is conditioned on and a
write id that stays the same across the write's retries. The head row keeps the ids of the last
:data:`RECENT_WRITES` writes with the version each made (:func:`write_entry`, :func:`find_write`), so a
write resent after its reply was lost reports the version it made instead of applying the turn again.
Pure: no driver, no I/O.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.sql.window import WindowCover

__all__ = [
    "ENTRY_DIGITS",
    "RECENT_WRITES",
    "WriteRequest",
    "conflict_error",
    "find_write",
    "message_rows",
    "new_write_id",
    "removed_seqs",
    "write_entry",
]

RECENT_WRITES = 8
"""How many write ids a memory remembers (a resend comes right after its failure, a few writes later at most)."""
_WRITE_ID_DIGITS = 16
ENTRY_DIGITS = 32
"""Characters of one ``recent_writes`` entry: the write id, then the version it made."""


def conflict_error(request: WriteRequest) -> ConcurrentUpdateError:
    """The exception a conditional write that lost raises."""
    return ConcurrentUpdateError(request.memory_id, request.expected_version)


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
    """History-only messages (evicted within the add that wrote them): rows before the appended ones,
    outside the window."""
    codec: RecordCodec = PLAIN
    """How the messages become stored records (plain, or sealed by a ``Keyring``)."""

    def encode(self, message: ChatMessage, seq: int) -> bytes:
        """The stored record of ``message`` in this write's memory, in the row of sequence ``seq``."""
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
        """A write of ``messages`` (any iterable, consumed once; each checked to be a message).

        ``history``: keep what the write evicts and record what it adds; ``history_ttl``: seconds the
        history outlives this write (``None``: it expires with the window); ``also_recorded``: with
        history, messages recorded before what it adds (ignored without).
        """
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
    """(rows to delete, rows to mark evicted) of a write evicting ``evicted`` and leaving ``cover``.

    Without history the evicted rows are deleted; with history they stay, and only those the new
    cover still encloses are marked evicted.
    """
    if request.history:
        return (), tuple(seq for seq in evicted if cover.covers(seq))
    return evicted, ()
