"""The SQL store's statements that page and scan: listing, purging, history pages and trims.

Built per call (their shape depends on the arguments) from the store's tables and the predicates
:class:`~chatmemory.stores.sql.statements.Statements` holds; SQLAlchemy caches their compiled form.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Delete,
    Integer,
    Select,
    Update,
    and_,
    bindparam,
    delete,
    literal_column,
    null,
    or_,
    select,
    update,
)

from chatmemory.stores.sql.schema import MemoryIdType, SchemaTables

__all__ = ["history_page", "list_page", "lock_expired", "trim"]


def list_page(tables: SchemaTables, live: ColumnElement[bool], order: str, after: bool, page_size: int) -> Select[Any]:
    """One page of live ids by id, or newest first, after the last id (and time) of the previous page."""
    memories = tables.memories
    statement = select(memories.c.memory_id, memories.c.updated_at).where(live)
    after_id = bindparam("p_after_id", type_=MemoryIdType())
    if order == "id":
        if after:
            statement = statement.where(memories.c.memory_id > after_id)
        return statement.order_by(memories.c.memory_id).limit(page_size)
    if after:
        after_updated = bindparam("p_after_updated", type_=memories.c.updated_at.type)
        older: ColumnElement[bool] = or_(
            memories.c.updated_at < after_updated,
            and_(memories.c.updated_at == after_updated, memories.c.memory_id < after_id),
        )
        statement = statement.where(older)
    return statement.order_by(memories.c.updated_at.desc(), memories.c.memory_id.desc()).limit(page_size)


def lock_expired(tables: SchemaTables, now: ColumnElement[Any], batch_size: int) -> Select[Any]:
    """Up to ``batch_size`` expired ids, locked (skipping rows a writer holds) until the purge commits.

    Unordered: without an index on ``expires_at`` (see the schema) the scan stops at the batch's last id.
    """
    memories = tables.memories
    # A memory whose history outlives its window (history_ttl) stays until the history expires too.
    history_gone = or_(memories.c.history_expires_at.is_(None), memories.c.history_expires_at <= now)
    return (
        select(memories.c.memory_id)
        .where(memories.c.expires_at <= now, history_gone)
        .limit(batch_size)
        .with_for_update(skip_locked=True)
    )


def history_page(tables: SchemaTables, history_live: ColumnElement[bool], reverse: bool, after: bool) -> Select[Any]:
    """One page of a memory's history entries by sequence (``p_limit`` rows, after ``p_after``).

    The entries are the rows with a write time, while the window is live or its history outlives it.
    """
    memories, messages = tables.memories, tables.messages
    statement = (
        select(messages.c.seq, messages.c.payload, messages.c.written_at)
        .select_from(memories.join(messages, messages.c.memory_id == memories.c.memory_id))
        .where(
            memories.c.memory_id == bindparam("p_id"),
            messages.c.written_at.is_not(None),
            history_live,
        )
    )
    if after:
        bound = bindparam("p_after", type_=BigInteger())
        statement = statement.where(messages.c.seq < bound if reverse else messages.c.seq > bound)
    order = messages.c.seq.desc() if reverse else messages.c.seq
    return statement.order_by(order).limit(bindparam("p_limit", type_=Integer()))


def trim(tables: SchemaTables, in_window_rows: ColumnElement[bool], one_memory: bool) -> tuple[Delete, Update]:
    """Trim history entries written before ``p_cutoff`` (of ``p_id``, or of all memories).

    Two statements, run in this order in one transaction: delete the rows outside their window, then
    take the write time off the (window) rows left, which are then no longer history entries.
    """
    memories, messages = tables.memories, tables.messages
    in_window = (
        select(literal_column("1"))
        .select_from(memories)
        .where(memories.c.memory_id == messages.c.memory_id, in_window_rows)
        .exists()
    )
    statement = delete(messages).where(
        messages.c.written_at < bindparam("p_cutoff", type_=messages.c.written_at.type), ~in_window
    )
    unrecord = (
        update(messages)
        .where(messages.c.written_at < bindparam("p_cutoff", type_=messages.c.written_at.type))
        .values(written_at=null())
    )
    if one_memory:
        statement = statement.where(messages.c.memory_id == bindparam("p_id", type_=MemoryIdType()))
        unrecord = unrecord.where(messages.c.memory_id == bindparam("p_id", type_=MemoryIdType()))
    return statement, unrecord
