"""Putting history entries back into a SQL store with history (``restore_history``): statements and plans (pure).

A history entry is a message row with a write time (its sequence is the row's ``seq`` + 1). A restore runs
in one transaction under the head row's lock. A memory without a live window, given one whose messages
are restored entries, gets a head whose cover of those entries' rows (:func:`window_seqs`) makes the
window's rows history rows, as a write leaves them; the restored rows the cover encloses but the window
leaves out are marked ``evicted``. A window that is not among the entries is written as a raw write writes
records, its rows and head moved past the restored rows (:func:`shifted`). Into an existing memory the
missing entries' rows are inserted with their own write time, marked ``evicted``; an existing head takes
a new version and a ``next_seq`` past them, so a store that cached the memory reads it again first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import BigInteger, bindparam, case, insert, literal_column, select, update
from sqlalchemy.sql import Insert, Select, Update

from chatmemory.core.history import HistoryEntry
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.sql.locked_writes import LockedWrite
from chatmemory.stores.sql.schema import SchemaTables
from chatmemory.stores.sql.times import stamp_parameter
from chatmemory.stores.sql.window import WindowCover, cover_window

__all__ = ["RestoreStatements", "covered_head", "entry_rows", "shifted", "window_seqs"]


@dataclasses.dataclass(frozen=True, slots=True)
class RestoreStatements:
    """The statements of a restore, for one store's tables."""

    present: Select[Any]
    """The seqs among ``p_seqs`` that a memory's rows hold, with their write time (``NULL``: not an entry)."""
    insert_entries: Insert
    """Rows with their own write time (``written_at``, ``evicted``)."""
    bump_head: Update
    """A new version, and ``next_seq`` at least ``p_next_seq``."""

    @classmethod
    def of(cls, tables: SchemaTables) -> RestoreStatements:
        """The statements for ``tables``."""
        memories, messages = tables.memories, tables.messages
        present = select(messages.c.seq, messages.c.written_at).where(
            messages.c.memory_id == bindparam("p_id"), messages.c.seq.in_(bindparam("p_seqs", expanding=True))
        )
        floor = bindparam("p_next_seq", type_=BigInteger())
        bump = (
            update(memories)
            .where(memories.c.memory_id == bindparam("p_id"))
            .values(
                version=memories.c.version + literal_column("1"),
                next_seq=case((memories.c.next_seq < floor, floor), else_=memories.c.next_seq),
            )
        )
        return cls(present, insert(messages), bump)


def entry_rows(
    memory_id: str,
    entries: Sequence[HistoryEntry],
    payloads: Mapping[int, bytes],
    dialect: str,
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
            "written_at": stamp_parameter(entry.written_at, dialect),
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
