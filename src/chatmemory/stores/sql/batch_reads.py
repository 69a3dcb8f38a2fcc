"""Reading many memories of a SQL store in a few statements, for operators' tools (pure: no I/O).

:func:`read_batch` is an operation like those of :mod:`.operations`: for a batch of ids it sends one
``SELECT`` of their head rows and one of their window's message rows (the rows the window read
:func:`~chatmemory.stores.sql.statements.window_read` returns, for every id of the batch at once), and,
only when some ids have no head row, one of their stray rows (damage, shown as ``read_raw`` shows it).
Each memory becomes a :class:`~chatmemory.stored_memories.StoredMemory`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import BindParameter, Select, and_, bindparam, case, literal_column, select
from sqlalchemy.exc import SQLAlchemyError

from chatmemory.core.memory_id import validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.stored_memories import StoredMemory
from chatmemory.stores.sql.clock import live
from chatmemory.stores.sql.commands import CHECK_SCHEMA, Result, Statement, Steps
from chatmemory.stores.sql.outcomes import stray_detail
from chatmemory.stores.sql.schema import SchemaTables
from chatmemory.stores.sql.times import aware

__all__ = ["BatchStatements", "read_batch"]


class BatchStatements:
    """The statements of a batch read on one store's tables (ids bound as the expanding ``p_ids``)."""

    def __init__(self, tables: SchemaTables) -> None:
        memories, messages = tables.memories, tables.messages
        ids: BindParameter[Any] = bindparam("p_ids", expanding=True)
        is_live = live(memories.c.expires_at, memories.c.updated_at.type)
        self.heads: Select[Any] = select(
            memories.c.memory_id,
            memories.c.version,
            memories.c.updated_at,
            memories.c.expires_at,
            case((is_live, literal_column("1")), else_=literal_column("0")).label("live"),
        ).where(memories.c.memory_id.in_(ids))
        """Every head row of the batch, live or not (one that is not is an absent memory, not damage)."""

        def rows_in(cover: Any) -> Select[Any]:
            return (
                select(messages.c.memory_id, messages.c.seq, messages.c.payload)
                .select_from(memories.join(messages, and_(messages.c.memory_id == memories.c.memory_id, cover)))
                .where(memories.c.memory_id.in_(ids), is_live, messages.c.evicted.is_(None))
            )

        window = rows_in(messages.c.seq >= memories.c.window_start)
        pinned = rows_in(
            and_(
                messages.c.seq.between(memories.c.pin_start, memories.c.pin_end),
                messages.c.seq < memories.c.window_start,
            )
        )
        self.rows = window.union_all(pinned)
        """The window's message rows of every live memory of the batch, in any order."""
        head: Select[Any] = (
            select(literal_column("1")).select_from(memories).where(memories.c.memory_id == messages.c.memory_id)
        )
        self.strays: Select[Any] = select(messages.c.memory_id, messages.c.seq, messages.c.payload).where(
            messages.c.memory_id.in_(ids), ~head.exists()
        )
        """The message rows of ids without a head row (damage)."""


def read_batch(
    statements: BatchStatements,
    memory_ids: Sequence[str],
    *,
    checked: bool,
    store_error: Callable[[SQLAlchemyError], Exception],
) -> Steps[list[StoredMemory | None]]:
    """Read ``memory_ids``: a :class:`StoredMemory` per id, ``None`` for an absent (or expired) one.

    ``checked``: whether the store has checked its schema already (else that comes first);
    ``store_error``: the store's error for a driver failure.

    Raises:
        StoreError: the database failed.
    """
    ids = [validate_memory_id(memory_id) for memory_id in memory_ids]
    if not checked:
        yield CHECK_SCHEMA
    records: defaultdict[str, list[tuple[int, bytes]]] = defaultdict(list)
    strays: defaultdict[str, list[tuple[int, bytes]]] = defaultdict(list)
    try:
        heads = yield Statement(statements.heads, {"p_ids": ids}, Result.ROWS)
        live_heads = {row[0]: row for row in heads if row[4] == 1}
        headless = sorted(set(ids) - {row[0] for row in heads})
        if live_heads:
            rows = yield Statement(statements.rows, {"p_ids": list(live_heads)}, Result.ROWS)
            for memory_id, seq, payload in rows:
                records[memory_id].append((seq, bytes(payload)))
        if headless:
            rows = yield Statement(statements.strays, {"p_ids": headless}, Result.ROWS)
            for memory_id, seq, payload in rows:
                strays[memory_id].append((seq, bytes(payload)))
    except SQLAlchemyError as exc:
        raise store_error(exc) from exc
    found: list[StoredMemory | None] = []
    for memory_id in ids:
        if (head := live_heads.get(memory_id)) is not None:
            window = [payload for _, payload in sorted(records.get(memory_id, ()))]
            found.append(StoredMemory(memory_id, window, head[1], MemoryTimes(aware(head[2]), aware(head[3]))))
        elif memory_id in strays:
            stray = [payload for _, payload in sorted(strays[memory_id])]
            found.append(StoredMemory(memory_id, stray, 0, None, damage=stray_detail(len(stray))))
        else:
            found.append(None)
    return found
