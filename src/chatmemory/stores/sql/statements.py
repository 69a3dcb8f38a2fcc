"""The statements of the SQL store, built once per store so SQLAlchemy compiles each only once.

Parameters are named ``p_*`` (SQLAlchemy reserves column names for the SET and VALUES clauses). Times
come from the server's clock (:mod:`chatmemory.stores.sql.clock`); a store with a ``ttl`` passes it as
``p_ttl``.
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
    Integer,
    LargeBinary,
    Select,
    String,
    TextClause,
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
    text,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql

from chatmemory.stores.sql.clock import ServerClockMicros, ServerExpiry, ServerNow, live
from chatmemory.stores.sql.plan import SCALAR_DIFF_LIMIT
from chatmemory.stores.sql.schema import RECENT_WRITES_LENGTH, MemoryIdType, SchemaTables

__all__ = ["Statements"]

_ENTRY = 32
"""Characters of one ``recent_writes`` entry."""


class Statements:
    """Every statement the store runs, for one table prefix, dialect and expiry setting.

    Args:
        tables: the store's tables.
        dialect: the engine's dialect.
        expires: whether memories expire (writes then set ``expires_at`` to the server's time + ``p_ttl``).
    """

    def __init__(self, tables: SchemaTables, dialect: Dialect, *, expires: bool) -> None:
        self._tables = tables
        self._dialect = dialect
        memories, messages = tables.memories, tables.messages
        stamp = memories.c.updated_at.type
        memory_id = memories.c.memory_id == bindparam("p_id")
        self._live = live(memories.c.expires_at, stamp)
        self._now = ServerNow(stamp)
        self._expiry: ColumnElement[Any] = ServerExpiry(stamp) if expires else null()
        # Newest entry first; the oldest falls off the end.
        self._recent_writes = bindparam("p_entry", type_=String()) + func.substr(
            func.coalesce(memories.c.recent_writes, literal_column("''")),
            literal_column("1"),
            literal_column(str(RECENT_WRITES_LENGTH - _ENTRY)),
        )

        # One statement answers every state of a memory: no head and no rows (one row of NULLs), a live
        # head and its rows, an expired head (one row, live = 0, its rows not sent), and message rows
        # without a head (damage: reported, never read as empty). Rows the store already decoded come
        # without their payload: within one incarnation every row below the next sequence number the
        # store saw was in that snapshot (see plan.decode_read).
        key = select(bindparam("p_id", type_=MemoryIdType()).label("memory_id")).subquery("k")
        head_live = case((self._live, literal_column("1")), else_=literal_column("0"))
        known = and_(
            memories.c.incarnation == bindparam("p_known_incarnation"), messages.c.seq < bindparam("p_known_next")
        )
        self.read: Select[Any] = (
            select(
                memories.c.version,
                memories.c.incarnation,
                memories.c.next_seq,
                head_live.label("live"),
                messages.c.seq,
                case((known, null()), else_=messages.c.payload).label("payload"),
            )
            .select_from(
                key.outerjoin(memories, memories.c.memory_id == key.c.memory_id).outerjoin(
                    messages,
                    and_(
                        messages.c.memory_id == key.c.memory_id,
                        or_(memories.c.memory_id.is_(None), self._live),
                    ),
                )
            )
            .order_by(messages.c.seq)
        )
        """All of a memory in one query (see above)."""

        max_seq = select(func.max(messages.c.seq)).where(messages.c.memory_id == bindparam("p_id")).scalar_subquery()
        self.lock_head: Select[Any] = (
            select(
                memories.c.version,
                memories.c.incarnation,
                memories.c.next_seq,
                head_live.label("live"),
                memories.c.recent_writes,
                max_seq.label("max_seq"),
                ServerClockMicros().label("clock"),
            )
            .where(memory_id)
            .with_for_update()
        )
        """The head row, locked until the transaction ends, with the server's clock and the highest seq."""
        self.clock: Select[Any] = select(ServerClockMicros().label("clock"), max_seq.label("max_seq"))
        """What a write creating a memory needs: the clock, and whether message rows exist without a head."""

        self.bump_head: Update = (
            update(memories)
            .where(
                memory_id,
                memories.c.version == bindparam("p_expected"),
                memories.c.incarnation == bindparam("p_incarnation"),
                self._live,
            )
            .values(
                version=memories.c.version + literal_column("1"),
                next_seq=bindparam("p_next_seq"),
                updated_at=self._now,
                expires_at=self._expiry,
                recent_writes=self._recent_writes,
            )
        )
        """The conditional write of a diff: matches one row only at the expected version and incarnation."""
        self.insert_head: Insert = insert(memories).values(
            memory_id=bindparam("p_id"),
            version=bindparam("p_version"),
            incarnation=bindparam("p_incarnation"),
            next_seq=bindparam("p_next_seq"),
            created_at=self._now,
            updated_at=self._now,
            expires_at=self._expiry,
            recent_writes=bindparam("p_recent"),
        )
        self.rewrite_head: Update = (
            update(memories)
            .where(memory_id)
            .values(
                version=bindparam("p_version"),
                incarnation=bindparam("p_incarnation"),
                next_seq=bindparam("p_next_seq"),
                updated_at=self._now,
                expires_at=self._expiry,
                created_at=case((bindparam("p_fresh", type_=Integer()) == 1, self._now), else_=memories.c.created_at),
                recent_writes=bindparam("p_recent"),
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
        self.max_allowed_packet: TextClause = text("SELECT @@max_allowed_packet")
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
        ``SCALAR_DIFF_LIMIT`` rows each way take one scalar parameter per row; PostgreSQL runs them
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
        head = self.bump_head.returning(memories.c.version).cte("head")
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
                selects = [
                    select(
                        memory_id,
                        bindparam(f"p_s{index}", type_=BigInteger),
                        bindparam(f"p_b{index}", type_=LargeBinary),
                    ).where(matched)
                    for index in range(appended)
                ]
                rows = union_all(*selects) if appended > 1 else selects[0]
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
            .where(memories.c.expires_at <= self._now)
            .limit(batch_size)
            .with_for_update(skip_locked=True)
        )
