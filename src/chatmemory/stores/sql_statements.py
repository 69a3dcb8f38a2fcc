"""The statements of the SQL store, built once per store so SQLAlchemy compiles each only once.

Parameters are named ``p_*`` (SQLAlchemy reserves column names for the SET and VALUES clauses).
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Delete,
    Dialect,
    Insert,
    LargeBinary,
    Select,
    Update,
    and_,
    any_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql

from chatmemory.stores.sql_schema import MemoryIdType, SchemaTables

__all__ = ["SCALAR_DIFF_LIMIT", "Statements"]

SCALAR_DIFF_LIMIT = 8
"""The most rows a turn deletes or inserts that still get one parameter each (see ``diff_postgresql``)."""


class Statements:
    """Every statement the store runs, for one table prefix and dialect."""

    def __init__(self, tables: SchemaTables, dialect: Dialect) -> None:
        self._tables = tables
        memories, messages = tables.memories, tables.messages
        memory_id = memories.c.memory_id == bindparam("p_id")
        self._live = or_(memories.c.expires_at.is_(None), memories.c.expires_at > bindparam("p_now"))

        # Rows this store already decoded are sent without their payload: within one incarnation every
        # row below the next sequence number the store saw was in that snapshot (see SQLChatMemoryStore.load).
        known = and_(
            memories.c.incarnation == bindparam("p_known_incarnation"), messages.c.seq < bindparam("p_known_next")
        )
        payload = case((known, null()), else_=messages.c.payload).label("payload")
        self.read: Select[Any] = (
            select(memories.c.version, memories.c.incarnation, memories.c.next_seq, messages.c.seq, payload)
            .select_from(memories.outerjoin(messages, messages.c.memory_id == memories.c.memory_id))
            .where(memory_id, self._live)
            .order_by(messages.c.seq)
        )
        """All of a memory in one query: head and messages (no row when absent or expired)."""

        self.bump_head: Update = (
            update(memories)
            .where(
                memory_id,
                memories.c.version == bindparam("p_expected"),
                memories.c.incarnation == bindparam("p_incarnation"),
                self._live,
            )
            .values(
                version=memories.c.version + 1,
                next_seq=bindparam("p_next_seq"),
                updated_at=bindparam("p_now"),
                expires_at=bindparam("p_expires"),
            )
        )
        """The conditional write of a diff: matches one row only at the expected version and incarnation."""

        self.lock_head: Select[Any] = (
            select(memories.c.version, memories.c.incarnation, memories.c.next_seq, memories.c.expires_at)
            .where(memory_id)
            .with_for_update()
        )
        self.insert_head: Insert = insert(memories)
        self.rewrite_head: Update = (
            update(memories)
            .where(memory_id)
            .values(
                version=bindparam("p_version"),
                incarnation=bindparam("p_incarnation"),
                next_seq=bindparam("p_next_seq"),
                updated_at=bindparam("p_now"),
                expires_at=bindparam("p_expires"),
                created_at=func.coalesce(
                    bindparam("p_created", type_=memories.c.created_at.type), memories.c.created_at
                ),
            )
        )
        self.delete_head: Delete = delete(memories).where(memory_id)
        self.delete_all: Delete = delete(messages).where(messages.c.memory_id == bindparam("p_id"))
        self.delete_seqs: Delete = delete(messages).where(
            messages.c.memory_id == bindparam("p_id"), messages.c.seq.in_(bindparam("p_seqs", expanding=True))
        )
        self.insert_messages: Insert = insert(messages)
        self.delete_heads: Delete = delete(memories).where(memories.c.memory_id.in_(bindparam("p_ids", expanding=True)))
        self.delete_messages_of: Delete = delete(messages).where(
            messages.c.memory_id.in_(bindparam("p_ids", expanding=True))
        )
        self._dialect = dialect
        self._diffs: dict[tuple[int, int], str] = {}
        self._diffs_lock = threading.Lock()

    @property
    def has_diff_statement(self) -> bool:
        """Whether a diffed turn runs as one statement (:meth:`diff_postgresql`)."""
        return self._dialect.name == "postgresql"

    def diff_postgresql(self, deleted: int, appended: int) -> str:
        """The one-statement turn deleting ``deleted`` rows and inserting ``appended``, in the driver's SQL.

        Compiled once per shape: the hottest statement skips SQLAlchemy's per-execution compile-cache
        lookup and bind processing (the caller passes the id as UTF-8 bytes). Turns of up to
        :data:`SCALAR_DIFF_LIMIT` rows each way take one scalar parameter per row; PostgreSQL runs them
        markedly faster than ``= ANY(array)`` and ``unnest(array, array)``, which larger turns use.
        """
        shape = (deleted, appended) if max(deleted, appended) <= SCALAR_DIFF_LIMIT else (-1, -1)
        statement = self._diffs.get(shape)
        if statement is None:
            compiled = self._diff_postgresql(*shape).compile(
                dialect=self._dialect, compile_kwargs={"render_postcompile": True}
            )
            statement = str(compiled)
            with self._diffs_lock:
                self._diffs[shape] = statement
        return statement

    def _diff_postgresql(self, deleted: int, appended: int) -> Select[Any]:
        """A whole steady-state turn as one statement: bump the head, delete the evicted, insert the tail.

        The deletes and inserts run only if the head row matched (they read the UPDATE's RETURNING), so a
        stale version changes nothing and returns no row. ``deleted == appended == -1``: any number of
        rows, passed as arrays; otherwise rows are parameters ``p_d<i>`` (sequence numbers to delete) and
        ``p_s<i>``/``p_b<i>`` (sequence number and payload to insert).
        """
        memories, messages = self._tables.memories, self._tables.messages
        head = (
            update(memories)
            .where(
                memories.c.memory_id == bindparam("p_id"),
                memories.c.version == bindparam("p_expected"),
                memories.c.incarnation == bindparam("p_incarnation"),
                self._live,
            )
            .values(
                version=memories.c.version + literal_column("1"),
                next_seq=bindparam("p_next_seq"),
                updated_at=bindparam("p_now"),
                expires_at=bindparam("p_expires"),
            )
            .returning(memories.c.version)
            .cte("head")
        )
        matched = select(literal_column("1")).select_from(head).exists()
        ctes = []
        if deleted:
            seqs: ColumnElement[bool] = (
                messages.c.seq == any_(bindparam("p_deleted", type_=postgresql.ARRAY(BigInteger)))
                if deleted < 0
                else messages.c.seq.in_([bindparam(f"p_d{index}", type_=BigInteger) for index in range(deleted)])
            )
            ctes.append(delete(messages).where(messages.c.memory_id == bindparam("p_id"), seqs, matched).cte("deleted"))
        if appended:
            memory_id = bindparam("p_id", type_=MemoryIdType())
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
                rows = select(memory_id, new_rows.c.seq, new_rows.c.payload).where(matched)
            else:
                rows = (
                    union_all(
                        *(
                            select(
                                memory_id,
                                bindparam(f"p_s{index}", type_=BigInteger),
                                bindparam(f"p_b{index}", type_=LargeBinary),
                            ).where(matched)
                            for index in range(appended)
                        )
                    )
                    if appended > 1
                    else select(
                        memory_id, bindparam("p_s0", type_=BigInteger), bindparam("p_b0", type_=LargeBinary)
                    ).where(matched)
                )
            ctes.append(insert(messages).from_select(["memory_id", "seq", "payload"], rows).cte("inserted"))
        return select(head.c.version).add_cte(*ctes)

    def list_page(self, order: str, after: bool, page_size: int) -> Select[Any]:
        """One page of live ids by id, or newest first, after the last id (and time) of the previous page."""
        memories = self._tables.memories
        statement = select(memories.c.memory_id, memories.c.updated_at).where(self._live)
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

    def lock_expired(self, batch_size: int) -> Select[Any]:
        """Up to ``batch_size`` expired ids, locked (skipping rows a writer holds) until the purge commits.

        Unordered: without an index on ``expires_at`` (see the schema) the scan stops at the batch's last id.
        """
        memories = self._tables.memories
        return (
            select(memories.c.memory_id)
            .where(memories.c.expires_at <= bindparam("p_now"))
            .limit(batch_size)
            .with_for_update(skip_locked=True)
        )
