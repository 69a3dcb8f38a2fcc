"""The statements of the SQL store, built once per store so SQLAlchemy compiles each only once.

Parameters are named ``p_*`` (SQLAlchemy reserves column names for the SET and VALUES clauses). Times
come from the server's clock (:mod:`chatmemory.stores.sql.clock`); a store with a ``ttl`` passes it as
``p_ttl`` (and one with a ``history_ttl`` that as ``p_history_ttl``).

The window is the rows its head row's ranges enclose and that are not marked evicted (see
:mod:`chatmemory.stores.sql.window`); every write sets the ranges. A store with history marks rows
instead of deleting them, and stamps the rows it adds with the head row's write time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ClauseElement,
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

__all__ = ["Rendered", "Statements", "render"]

_ENTRY = 32
"""Characters of one ``recent_writes`` entry."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """A statement rendered once in the driver's SQL, with what turns named parameters into the driver's.

    Executors run :attr:`sql` with ``exec_driver_sql`` and :meth:`bind` (one row) or :meth:`bind_many`:
    no compile-cache lookup, parameter construction or post-compile step per execution.

    Attributes:
        sql: the statement in the driver's paramstyle.
        names: the parameter names (in the statement's order when :attr:`positional`).
        positional: whether the driver takes a tuple (else a mapping).
        processors: bind processors by parameter name (a memory id's encoding, a blob wrapper).
        defaults: values of parameters the statement fixes itself.
    """

    sql: str
    names: tuple[str, ...]
    positional: bool
    processors: Mapping[str, Callable[[Any], Any]]
    defaults: Mapping[str, Any]

    def bind(self, values: Mapping[str, Any]) -> Any:
        """The driver's parameters (a tuple, or a dict for a named paramstyle) for named ``values``."""
        processors = self.processors
        if self.defaults:
            values = {**self.defaults, **values}
        bound = [processors[name](values[name]) if name in processors else values[name] for name in self.names]
        return tuple(bound) if self.positional else dict(zip(self.names, bound, strict=True))

    def bind_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Any]:
        """The driver's parameters of an ``executemany`` of ``rows``."""
        return [self.bind(row) for row in rows]


def render(statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None = None) -> Rendered:
    """Compile ``statement`` once for ``dialect`` into a :class:`Rendered` (``column_keys``: an INSERT's)."""
    compiled: Any = statement.compile(
        dialect=dialect,
        column_keys=list(column_keys) if column_keys is not None else None,
        compile_kwargs={"render_postcompile": True},
    )
    positional = bool(compiled.positional)
    names = tuple(compiled.positiontup) if positional else tuple(compiled.binds)
    processors = {name: processor for name, processor in compiled._bind_processors.items() if processor is not None}
    defaults = {
        name: bind.effective_value
        for name, bind in compiled.binds.items()
        if not bind.required and not name.startswith("p_")
    }
    return Rendered(str(compiled), names, positional, processors, defaults)


class Statements:
    """Every statement the store runs, for one table prefix, dialect and expiry setting.

    Args:
        tables: the store's tables.
        dialect: the engine's dialect.
        expires: whether memories expire (writes then set ``expires_at`` to the server's time + ``p_ttl``).
        history: whether the store keeps history (writes mark evicted rows instead of deleting them).
        history_expires: whether histories outlive windows (writes then set ``history_expires_at`` to the
            server's time + ``p_history_ttl``).
    """

    def __init__(
        self,
        tables: SchemaTables,
        dialect: Dialect,
        *,
        expires: bool,
        history: bool = False,
        history_expires: bool = False,
    ) -> None:
        self._tables = tables
        self._dialect = dialect
        self._history = history
        memories, messages = tables.memories, tables.messages
        stamp = memories.c.updated_at.type
        memory_id = memories.c.memory_id == bindparam("p_id")
        self._live = live(memories.c.expires_at, stamp)
        self._now = ServerNow(stamp)
        self._expiry: ColumnElement[Any] = ServerExpiry(stamp) if expires else null()
        cover: dict[str, Any] = {
            "window_start": bindparam("p_window_start", type_=BigInteger()),
            "pin_start": bindparam("p_pin_start", type_=BigInteger()),
            "pin_end": bindparam("p_pin_end", type_=BigInteger()),
        }
        if history_expires:
            cover["history_expires_at"] = ServerExpiry(stamp, "p_history_ttl")
        # A row is in the window if the head's ranges enclose it and it is not marked evicted.
        self._in_window = and_(
            or_(
                messages.c.seq >= memories.c.window_start,
                messages.c.seq.between(memories.c.pin_start, memories.c.pin_end),
            ),
            messages.c.evicted.is_(None),
        )
        history_kept = and_(memories.c.history_expires_at.is_not(None), memories.c.history_expires_at > self._now)
        self._history_live = or_(self._live, history_kept)
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
                memories.c.window_start,
                messages.c.seq,
                case((known, null()), else_=messages.c.payload).label("payload"),
            )
            .select_from(
                # The id is compared as a constant (not through k): MySQL/MariaDB then read the head row
                # first, as a constant, and bound the message index scan by its ranges.
                key.outerjoin(memories, memory_id).outerjoin(
                    messages,
                    and_(
                        messages.c.memory_id == bindparam("p_id"),
                        # The ranges bound the index scan (every row when there is no head: strays).
                        or_(
                            messages.c.seq >= func.coalesce(memories.c.window_start, literal_column("-1")),
                            messages.c.seq.between(memories.c.pin_start, memories.c.pin_end),
                        ),
                        or_(memories.c.memory_id.is_(None), and_(self._live, messages.c.evicted.is_(None))),
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
                case((history_kept, literal_column("1")), else_=literal_column("0")).label("history_live"),
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
                **cover,
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
            **cover,
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
                **cover,
            )
        )
        self.times: Select[Any] = select(memories.c.updated_at, memories.c.expires_at).where(memory_id, self._live)
        """A live memory's last write time and expiry (no row when it is absent or expired)."""
        self.set_expiry: Update = (
            update(memories)
            .where(memory_id, self._live)
            .values(expires_at=bindparam("p_expires_at", type_=memories.c.expires_at.type))
        )
        """Set a live memory's expiry (``NULL``: never); an absent or expired memory is left as it is."""
        self.delete_head: Delete = delete(memories).where(memory_id)
        self.delete_all: Delete = delete(messages).where(messages.c.memory_id == bindparam("p_id"))
        self.delete_seqs: Delete = delete(messages).where(
            messages.c.memory_id == bindparam("p_id"), messages.c.seq.in_(bindparam("p_seqs", expanding=True))
        )
        self.insert_messages: Insert = insert(messages)
        self.insert_history: Insert = insert(messages).values(
            written_at=select(memories.c.updated_at)
            .where(memories.c.memory_id == bindparam("p_head", type_=MemoryIdType()))
            .scalar_subquery()
        )
        """Rows that are history entries: stamped with their head row's write time (set earlier in the write)."""
        self.flag_seqs: Update = (
            update(messages)
            .where(messages.c.memory_id == bindparam("p_id"), messages.c.seq.in_(bindparam("p_seqs", expanding=True)))
            .values(evicted=literal_column("1"))
        )
        """Mark rows that left the window but lie in its ranges (a store with history)."""
        self.server_clock: Select[Any] = select(ServerClockMicros().label("clock"))
        self.delete_heads: Delete = delete(memories).where(memories.c.memory_id.in_(bindparam("p_ids", expanding=True)))
        self.delete_messages_of: Delete = delete(messages).where(
            messages.c.memory_id.in_(bindparam("p_ids", expanding=True))
        )
        self.max_allowed_packet: TextClause = text("SELECT @@max_allowed_packet")
        self._diffs: dict[tuple[int, int], str] = {}
        self._diffs_lock = threading.Lock()
        # The statements of a steady-state turn and read, rendered once (see Rendered).
        self.fast_read = render(self.read, dialect)
        """:attr:`read`, rendered."""
        self.fast_bump_head = render(self.bump_head, dialect)
        """:attr:`bump_head`, rendered."""
        row_columns = ["memory_id", "seq", "payload"]
        self.fast_insert_messages = render(self.insert_messages, dialect, row_columns)
        """:attr:`insert_messages`, rendered (rows of ``memory_id``, ``seq``, ``payload``)."""
        self.fast_insert_history = render(self.insert_history, dialect, row_columns)
        """:attr:`insert_history`, rendered (rows also name their head as ``p_head``)."""
        self._removals: dict[int, Rendered] = {}

    def removal(self, count: int) -> Rendered:
        """The delete (or, with history, the mark) of ``count`` rows ``p_d0``… of ``p_id``, rendered once per count."""
        rendered = self._removals.get(count)
        if rendered is None:
            messages = self._tables.messages
            seqs = messages.c.seq.in_([bindparam(f"p_d{index}", type_=BigInteger) for index in range(count)])
            where = (messages.c.memory_id == bindparam("p_id"), seqs)
            statement = (
                update(messages).where(*where).values(evicted=literal_column("1"))
                if self._history
                else delete(messages).where(*where)
            )
            rendered = render(statement, self._dialect)
            with self._diffs_lock:
                self._removals[count] = rendered
        return rendered

    def history_page(self, reverse: bool, after: bool) -> Select[Any]:
        """One page of a memory's history entries by sequence (``p_limit`` rows, after ``p_after``).

        The entries are the rows with a write time, while the window is live or its history outlives it.
        """
        memories, messages = self._tables.memories, self._tables.messages
        statement = (
            select(messages.c.seq, messages.c.payload, messages.c.written_at)
            .select_from(memories.join(messages, messages.c.memory_id == memories.c.memory_id))
            .where(
                memories.c.memory_id == bindparam("p_id"),
                messages.c.written_at.is_not(None),
                self._history_live,
            )
        )
        if after:
            bound = bindparam("p_after", type_=BigInteger())
            statement = statement.where(messages.c.seq < bound if reverse else messages.c.seq > bound)
        order = messages.c.seq.desc() if reverse else messages.c.seq
        return statement.order_by(order).limit(bindparam("p_limit", type_=Integer()))

    def trim(self, one_memory: bool) -> tuple[Delete, Update]:
        """Trim history entries written before ``p_cutoff`` (of ``p_id``, or of all memories).

        Two statements, run in this order in one transaction: delete the rows outside their window, then
        take the write time off the (window) rows left, which are then no longer history entries.
        """
        memories, messages = self._tables.memories, self._tables.messages
        in_window = (
            select(literal_column("1"))
            .select_from(memories)
            .where(memories.c.memory_id == messages.c.memory_id, self._in_window)
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
            if self._history:
                # With history the evicted rows stay, marked (only those the window's ranges still enclose).
                flag = update(messages).where(messages.c.memory_id == bindparam("p_id"), seqs, matched)
                ctes.append(flag.values(evicted=literal_column("1")).cte("flagged"))
            else:
                ctes.append(
                    delete(messages).where(messages.c.memory_id == bindparam("p_id"), seqs, matched).cte("deleted")
                )
        if appended:
            memory_id = bindparam("p_id", type_=MemoryIdType())
            # History entries are stamped now(): the transaction's start, the head row's updated_at.
            stamp: list[Any] = [ServerNow(messages.c.written_at.type)] if self._history else []
            columns = (
                ["memory_id", "seq", "payload", "written_at"] if self._history else ["memory_id", "seq", "payload"]
            )
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
        # A memory whose history outlives its window (history_ttl) stays until the history expires too.
        history_gone = or_(memories.c.history_expires_at.is_(None), memories.c.history_expires_at <= self._now)
        return (
            select(memories.c.memory_id)
            .where(memories.c.expires_at <= self._now, history_gone)
            .limit(batch_size)
            .with_for_update(skip_locked=True)
        )
