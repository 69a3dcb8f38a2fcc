"""The PostgreSQL turn as one statement: bump the head row, delete (or mark) the evicted, insert the tail.

Data-modifying CTEs that run only if the head row matched, so a stale version changes nothing; compiled
once per shape by :meth:`~chatmemory.stores.sql.statements.Statements.diff_postgresql`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    LargeBinary,
    Select,
    Update,
    any_,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql

from chatmemory.stores.sql.clock import ServerNow
from chatmemory.stores.sql.schema import MemoryIdType, SchemaTables

__all__ = ["diff_turn"]


def diff_turn(tables: SchemaTables, bump_head: Update, history: bool, deleted: int, appended: int) -> Select[Any]:
    """A whole steady-state turn as one statement: bump the head, delete the evicted, insert the tail.

    The deletes and inserts run only if the head row matched (they read the UPDATE's RETURNING), so a
    stale version changes nothing and returns no row. ``deleted == appended == -1``: any number of
    rows, passed as arrays; otherwise rows are parameters ``p_d<i>`` (sequence numbers to delete) and
    ``p_s<i>``/``p_b<i>`` (sequence number and payload to insert).
    """
    memories, messages = tables.memories, tables.messages
    head = bump_head.returning(memories.c.version).cte("head")
    matched = select(literal_column("1")).select_from(head).exists()
    ctes = []
    if deleted:
        seqs: ColumnElement[bool] = (
            messages.c.seq == any_(bindparam("p_deleted", type_=postgresql.ARRAY(BigInteger)))
            if deleted < 0
            else messages.c.seq.in_([bindparam(f"p_d{index}", type_=BigInteger) for index in range(deleted)])
        )
        if history:
            # With history the evicted rows stay, marked (only those the window's ranges still enclose).
            flag = update(messages).where(messages.c.memory_id == bindparam("p_id"), seqs, matched)
            ctes.append(flag.values(evicted=literal_column("1")).cte("flagged"))
        else:
            ctes.append(delete(messages).where(messages.c.memory_id == bindparam("p_id"), seqs, matched).cte("deleted"))
    if appended:
        memory_id = bindparam("p_id", type_=MemoryIdType())
        # History entries are stamped now(): the transaction's start, the head row's updated_at.
        stamp: list[Any] = [ServerNow(messages.c.written_at.type)] if history else []
        columns = ["memory_id", "seq", "payload", "written_at"] if history else ["memory_id", "seq", "payload"]
        rows: Any
        if appended < 0:
            new_rows = (
                func.unnest(
                    bindparam("p_seqs", type_=postgresql.ARRAY(BigInteger)),
                    bindparam("p_payloads", type_=postgresql.ARRAY(LargeBinary)),
                )
                .table_valued("seq", "payload")
                .render_derived(name="new_rows")
            )
            rows = select(memory_id, new_rows.c.seq, new_rows.c.payload, *stamp).where(matched)
        else:
            selects = [
                select(
                    memory_id,
                    bindparam(f"p_s{index}", type_=BigInteger),
                    bindparam(f"p_b{index}", type_=LargeBinary),
                    *stamp,
                ).where(matched)
                for index in range(appended)
            ]
            rows = union_all(*selects) if appended > 1 else selects[0]
        ctes.append(insert(messages).from_select(columns, rows).cte("inserted"))
    return select(head.c.version).add_cte(*ctes)
