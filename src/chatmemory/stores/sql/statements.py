"""The statements of the SQL store, one builder per table and operation, built once per store and dialect.

Parameters are named ``p_*``; times come from the server's clock (:mod:`~chatmemory.stores.sql.dialect`),
a store with a ``ttl`` passing it as ``p_ttl`` (and ``p_history_ttl``). The window is the rows its head
row's ranges enclose that are not marked evicted; a store with history marks rows instead of deleting
them and stamps those it adds with the head's write time. :class:`Statements` holds a store's reads and
writes (the hot ones rendered once in the driver's SQL); :class:`BatchStatements` and
:class:`RestoreStatements` those of operators' tools.
"""

from __future__ import annotations

import copy
import functools
import threading
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Delete,
    Dialect,
    Insert,
    Integer,
    LargeBinary,
    Select,
    String,
    Update,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    null,
    or_,
    select,
    type_coerce,
    union_all,
    update,
)

from chatmemory.stores.sql.dialect import (
    POSTGRESQL,
    IdsIn,
    Joined,
    MemoryIdType,
    Rendered,
    ServerClockMicros,
    ServerExpiry,
    ServerNow,
    dialect_of,
    live,
    render,
)
from chatmemory.stores.sql.engine import IDS_SLOT, IdsRead
from chatmemory.stores.sql.plan import RUN, SCALAR_DIFF_LIMIT
from chatmemory.stores.sql.schema import RECENT_WRITES_LENGTH, SchemaTables

__all__ = [
    "BatchStatements",
    "RestoreStatements",
    "Statements",
    "stray_read",
    "window_read",
]

_ENTRY = 32
"""Characters of one ``recent_writes`` entry."""


class Statements:
    """Every statement the store runs, for one table prefix, dialect and expiry setting.

    ``expires``: writes set ``expires_at`` to the server's time + ``p_ttl``; ``history``: writes mark
    evicted rows instead of deleting them; ``history_expires``: they set ``history_expires_at`` too.
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
        self._tables = self.tables = tables
        """The tables the statements name (any other statement of the store names these too)."""
        self._dialect = dialect
        self._history = history
        self._expires = expires
        family = dialect_of(dialect.name)
        assert family is not None, "the store checks its database first"
        self.family = family
        """What differs on this database (how a diffed turn goes, how transactions begin)."""
        memories, messages = tables.memories, tables.messages
        stamp = memories.c.updated_at.type
        self._live = live(memories.c.expires_at, stamp)
        self._now = ServerNow(stamp)
        self._expiry: ColumnElement[Any] = ServerExpiry(stamp) if expires else null()
        # A row is in the window if the head's ranges enclose it and it is not marked evicted.
        self._in_window = and_(
            or_(
                messages.c.seq >= memories.c.window_start,
                messages.c.seq.between(memories.c.pin_start, memories.c.pin_end),
            ),
            messages.c.evicted.is_(None),
        )
        self._history_kept = and_(memories.c.history_expires_at.is_not(None), memories.c.history_expires_at > self._now)
        self._history_live = or_(self._live, self._history_kept)
        self.read: CompoundSelect[Any] = window_read(tables, dialect)
        self.strays: Select[Any] = stray_read(tables)
        self._build_heads(history_expires)
        self._build_rows()
        self.server_clock: Select[Any] = select(ServerClockMicros().label("clock"))
        self._diffs: dict[tuple[int, int], str] = {}
        self._diffs_lock = threading.Lock()
        # The statements of a steady-state turn and read, rendered once (rows: memory_id, seq, payload).
        self.fast_read = render(self.read, dialect)
        self.fast_strays = render(self.strays, dialect)
        self.fast_bump_head = render(self.bump_head, dialect)
        row_columns = ["memory_id", "seq", "payload"]
        self.fast_insert_messages = render(self.insert_messages, dialect, row_columns)
        self.fast_insert_history = render(self.insert_history, dialect, row_columns)
        self._removals: dict[int, Rendered] = {}
        self._joined: dict[tuple[int, int, bool, bool], Joined] = {}
        self.blocks_mariadb_turns = True
        """Whether MariaDB's turns may go as compound statements (``False``: as MySQL's, in tests)."""

    def _build_heads(self, history_expires: bool) -> None:
        """The statements of the head rows (``memories``): lock, conditional bump, insert, rewrite, expiry."""
        memories, messages = self._tables.memories, self._tables.messages
        memory_id = memories.c.memory_id == bindparam("p_id")
        cover: dict[str, Any] = {
            "window_start": bindparam("p_window_start", type_=BigInteger()),
            "pin_start": bindparam("p_pin_start", type_=BigInteger()),
            "pin_end": bindparam("p_pin_end", type_=BigInteger()),
        }
        if history_expires:
            cover["history_expires_at"] = ServerExpiry(memories.c.updated_at.type, "p_history_ttl")
        one: ColumnElement[Any] = literal_column("1")
        zero: ColumnElement[Any] = literal_column("0")
        max_seq = select(func.max(messages.c.seq)).where(messages.c.memory_id == bindparam("p_id")).scalar_subquery()
        self.lock_head: Select[Any] = (
            select(
                memories.c.version,
                memories.c.incarnation,
                memories.c.next_seq,
                case((self._live, one), else_=zero).label("live"),
                memories.c.recent_writes,
                max_seq.label("max_seq"),
                ServerClockMicros().label("clock"),
                case((self._history_kept, one), else_=zero).label("history_live"),
            )
            .where(memory_id)
            .with_for_update()
        )
        """The head row, locked until the transaction ends, with the server's clock and the highest seq."""
        # Newest entry first; the oldest falls off the end.
        recent_writes = bindparam("p_entry", type_=String()) + func.substr(
            func.coalesce(memories.c.recent_writes, literal_column("''")),
            literal_column("1"),
            literal_column(str(RECENT_WRITES_LENGTH - _ENTRY)),
        )
        expected = (memories.c.version == bindparam("p_expected"), memories.c.incarnation == bindparam("p_incarnation"))
        self.bump_head: Update = (
            update(memories)
            .where(memory_id, *expected, self._live)
            .values(
                version=memories.c.version + literal_column("1"),
                next_seq=bindparam("p_next_seq"),
                updated_at=self._now,
                expires_at=self._expiry,
                recent_writes=recent_writes,
                **cover,
            )
        )
        """The conditional write of a diff: matches one row only at the expected version and incarnation."""
        whole = {
            "version": bindparam("p_version"),
            "incarnation": bindparam("p_incarnation"),
            "next_seq": bindparam("p_next_seq"),
            "updated_at": self._now,
            "expires_at": self._expiry,
            "recent_writes": bindparam("p_recent"),
            **cover,
        }
        self.insert_head: Insert = insert(memories).values(memory_id=bindparam("p_id"), created_at=self._now, **whole)
        fresh = bindparam("p_fresh", type_=Integer()) == 1
        self.rewrite_head: Update = (
            update(memories)
            .where(memory_id)
            .values(created_at=case((fresh, self._now), else_=memories.c.created_at), **whole)
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
        self.delete_heads: Delete = delete(memories).where(memories.c.memory_id.in_(bindparam("p_ids", expanding=True)))

    def _build_rows(self) -> None:
        """The statements of the message rows (``messages``): insert, history insert, delete, mark."""
        memories, messages = self._tables.memories, self._tables.messages
        of_memory = messages.c.memory_id == bindparam("p_id")
        seqs = messages.c.seq.in_(bindparam("p_seqs", expanding=True))
        self.delete_all: Delete = delete(messages).where(of_memory)
        self.delete_seqs: Delete = delete(messages).where(of_memory, seqs)
        self.insert_messages: Insert = insert(messages)
        self.insert_history: Insert = insert(messages).values(
            written_at=select(memories.c.updated_at)
            .where(memories.c.memory_id == bindparam("p_head", type_=MemoryIdType()))
            .scalar_subquery()
        )
        """Rows that are history entries: stamped with their head row's write time (set earlier in the write)."""
        self.flag_seqs: Update = update(messages).where(of_memory, seqs).values(evicted=literal_column("1"))
        """Mark rows that left the window but lie in its ranges (a store with history)."""
        self.delete_messages_of: Delete = delete(messages).where(
            messages.c.memory_id.in_(bindparam("p_ids", expanding=True))
        )

    @functools.cached_property
    def fast_lock_head(self) -> Rendered:
        """:attr:`lock_head`, rendered (at the store's first locked write)."""
        return render(self.lock_head, self._dialect)

    @property
    def dialect(self) -> Dialect:
        """The SQLAlchemy dialect the statements are rendered for."""
        return self._dialect

    @property
    def expires(self) -> bool:
        """Whether the store has a ttl (writes set an expiry)."""
        return self._expires

    @functools.cached_property
    def batch(self) -> BatchStatements:
        """The statements of a batch read or create (at the store's first)."""
        return BatchStatements(self)

    @functools.cached_property
    def restore(self) -> RestoreStatements:
        """The statements of a history restore (at the store's first)."""
        return RestoreStatements(self)

    def payloads_of(self, memory_id: str) -> Select[Any]:
        """Every row of ``memory_id``, as ``(seq, payload)`` (a reseal's read)."""
        messages = self._tables.messages
        return select(messages.c.seq, messages.c.payload).where(messages.c.memory_id == memory_id)

    def reseal_row(self, memory_id: str, seq: int, old: object, new: object) -> Update:
        """Replace the payload of a row, only if it still holds ``old``."""
        messages = self._tables.messages
        same = (messages.c.memory_id == memory_id) & (messages.c.seq == seq) & (messages.c.payload == old)
        return update(messages).where(same).values(payload=new)

    @staticmethod
    def joined_parts(joined: Joined) -> Joined:
        """The parts of ``joined`` as one string without its ``BEGIN`` (for a transaction already open)."""
        return Joined.of(joined.parts)

    def for_store(self, dialect: Dialect) -> Statements:
        """A copy for another store of the same key: nothing rendered lazily is shared."""
        clone = copy.copy(self)
        clone._dialect = dialect
        clone._diffs = {}
        clone._diffs_lock = threading.Lock()
        clone._removals = {}
        clone._joined = {}
        for cached in ("fast_lock_head", "batch", "restore"):
            clone.__dict__.pop(cached, None)
        return clone

    def removal(self, count: int) -> Rendered:
        """The delete (or, with history, the mark) of ``count`` rows ``p_d0``… of ``p_id``, rendered once.

        For :data:`~chatmemory.stores.sql.plan.RUN`, the rows from ``p_first`` to ``p_last``.
        """
        rendered = self._removals.get(count)
        if rendered is None:
            messages = self._tables.messages
            seqs = (
                messages.c.seq.between(bindparam("p_first", type_=BigInteger), bindparam("p_last", type_=BigInteger))
                if count == RUN
                else messages.c.seq.in_([bindparam(f"p_d{index}", type_=BigInteger) for index in range(count)])
            )
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

    @property
    def blocks_turns(self) -> bool:
        """Whether a diffed turn goes as one compound statement (:meth:`block_turn`): MariaDB 10.1.1 and later."""
        return self.blocks_mariadb_turns and self.family.blocks_turns(self._dialect)

    def joined_turn(self, removed: int, appended: int, recorded: bool) -> Joined | None:
        """The transaction of a diffed turn as one string, or ``None`` for a turn too large to render so.

        ``BEGIN``, the head update, the delete (or mark) of ``removed`` rows and one insert of ``appended``
        (``recorded``: history entries): one round trip where it otherwise takes five, then ``COMMIT``.
        Rendered once per shape, up to ``SCALAR_DIFF_LIMIT`` rows each way; bound with
        :meth:`~chatmemory.stores.sql.plan.DiffWrite.joined_parameters`.
        """
        return self._turn_as_one(removed, appended, recorded, block=False)

    def block_turn(self, removed: int, appended: int, recorded: bool) -> Joined | None:
        """A diffed turn as one MariaDB compound statement, or ``None`` for a turn too large to render so.

        The parts of :meth:`joined_turn` in a :meth:`~chatmemory.stores.sql.dialect.Joined.atomic_block`:
        one round trip and one result (a multi-statement string answers with one per statement, and PyMySQL
        spends tens of microseconds of CPU on each). Bound as :meth:`joined_turn` is.
        """
        return self._turn_as_one(removed, appended, recorded, block=True)

    def _turn_as_one(self, removed: int, appended: int, recorded: bool, *, block: bool) -> Joined | None:
        if removed > SCALAR_DIFF_LIMIT or appended > SCALAR_DIFF_LIMIT:
            return None
        key = (removed, appended, recorded, block)
        joined = self._joined.get(key)
        if joined is None:
            parts = [self.fast_bump_head]
            if removed:
                parts.append(self.removal(removed))
            if appended:
                parts.append(render(self._rows_insert(appended, recorded), self._dialect))
            joined = Joined.atomic_block(parts) if block else Joined.of(parts, "BEGIN")
            with self._diffs_lock:
                self._joined[key] = joined
        return joined

    def _rows_insert(self, count: int, recorded: bool) -> Insert:
        """One insert of ``count`` message rows of ``p_id``: ``p_s0``/``p_b0``, ``p_s1``/``p_b1``…."""
        memories, messages = self._tables.memories, self._tables.messages
        memory_id = bindparam("p_id", type_=MemoryIdType())
        rows: list[dict[str, Any]] = []
        for index in range(count):
            row: dict[str, Any] = {
                "memory_id": memory_id,
                "seq": bindparam(f"p_s{index}", type_=BigInteger()),
                "payload": bindparam(f"p_b{index}", type_=messages.c.payload.type),
            }
            if recorded:
                row["written_at"] = (
                    select(memories.c.updated_at).where(memories.c.memory_id == memory_id).scalar_subquery()
                )
            rows.append(row)
        return insert(messages).values(rows)

    def diff_postgresql(self, deleted: int, appended: int) -> str:
        """The one-statement turn deleting ``deleted`` rows and inserting ``appended``, in the driver's SQL.

        Compiled once per shape (the caller passes the id as UTF-8 bytes). Up to ``SCALAR_DIFF_LIMIT``
        rows each way take a parameter per row, markedly faster than the arrays larger turns use.
        """
        shape = (deleted, appended) if max(deleted, appended) <= SCALAR_DIFF_LIMIT else (-1, -1)
        statement = self._diffs.get(shape)
        if statement is None:
            compiled = POSTGRESQL.diff_turn(self._tables, self.bump_head, self._history, *shape).compile(
                dialect=self._dialect, compile_kwargs={"render_postcompile": True}
            )
            statement = str(compiled)
            with self._diffs_lock:
                self._diffs[shape] = statement
        return statement

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
        """Up to ``batch_size`` expired ids (unordered: no index), locked until the purge commits."""
        memories, now = self._tables.memories, self._now
        # A memory whose history outlives its window (history_ttl) stays until the history expires too.
        history_gone = or_(memories.c.history_expires_at.is_(None), memories.c.history_expires_at <= now)
        return (
            select(memories.c.memory_id)
            .where(memories.c.expires_at <= now, history_gone)
            .limit(batch_size)
            .with_for_update(skip_locked=True)
        )

    def history_page(self, reverse: bool, after: bool) -> Select[Any]:
        """One page of history entries (rows with a write time) by sequence: ``p_limit`` after ``p_after``."""
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
        """Trim entries before ``p_cutoff``: delete those outside the window, then unrecord those left in it."""
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


def window_read(tables: SchemaTables, dialect: Dialect) -> CompoundSelect[Any]:
    """The window read: every state of a memory in one statement, as ``(seq, payload)`` rows in any order.

    One ``UNION ALL``, so the head and its rows are one snapshot: the head row (``seq`` ``NULL``, its
    fields packed in ``payload``: :class:`~chatmemory.stores.sql.outcomes.ReadHead`); then, if it is live,
    the rows from ``window_start`` on and those of its pinned run, two ranges of the primary key rather
    than one ``OR``. A row the store decoded already comes without its payload (below the next sequence
    number it saw, in the same incarnation). Rows without a head row are left to :func:`stray_read` (a
    probe here cost every read 11-34 µs). No ``ORDER BY``: it made MariaDB sort in a temporary table on disk.
    """
    memories, messages = tables.memories.alias("h"), tables.messages.alias("m")
    stamp = memories.c.updated_at.type
    memory_id = bindparam("p_id", type_=MemoryIdType())
    is_live = live(memories.c.expires_at, stamp)
    head_live = case((is_live, literal_column("1")), else_=literal_column("0"))
    fields = (memories.c.version, memories.c.incarnation, memories.c.next_seq, head_live, memories.c.window_start)
    family = dialect_of(dialect.name)
    assert family is not None
    packed = type_coerce(family.packed(fields), LargeBinary())
    head = select(null().label("seq"), packed.label("payload")).where(memories.c.memory_id == memory_id)
    known = and_(
        memories.c.incarnation == bindparam("p_known_incarnation", type_=BigInteger()),
        messages.c.seq < bindparam("p_known_next", type_=BigInteger()),
    )

    payload = case((known, null()), else_=messages.c.payload).label("payload")
    window, pinned = window_rows(
        memories, messages, (messages.c.seq, payload), memories.c.memory_id == memory_id, is_live
    )
    return union_all(head, window, pinned)


def window_rows(memories: Any, messages: Any, columns: Any, *where: Any) -> tuple[Select[Any], Select[Any]]:
    """The window's rows from ``window_start`` on, and those of its pinned run: two ranges of the primary key."""

    def rows_in(cover: ColumnElement[bool]) -> Select[Any]:
        return (
            select(*columns)
            .select_from(memories.join(messages, and_(messages.c.memory_id == memories.c.memory_id, cover)))
            .where(*where, messages.c.evicted.is_(None))
        )

    pinned = and_(
        messages.c.seq.between(memories.c.pin_start, memories.c.pin_end), messages.c.seq < memories.c.window_start
    )
    return rows_in(messages.c.seq >= memories.c.window_start), rows_in(pinned)


def stray_read(tables: SchemaTables) -> Select[Any]:
    """The message rows of ``p_id`` if it has no head row (damage), as ``(seq, payload)``; else none.

    Sent only after a window read found no head row: one statement, so a memory created meanwhile
    (its head and rows written together) is not taken for damage.
    """
    memories, messages = tables.memories, tables.messages
    memory_id = bindparam("p_id", type_=MemoryIdType())
    head: Select[Any] = select(literal_column("1")).select_from(memories).where(memories.c.memory_id == memory_id)
    return select(messages.c.seq, messages.c.payload).where(messages.c.memory_id == memory_id, ~head.exists())


class BatchStatements:
    """A batch read's and a batch create's statements on one store's tables (a create binds ids as ``p_ids``).

    :attr:`read`: the batch read, rendered once, one statement (so each memory's head and rows are one
    state): heads as ``(id as stored, -1, NULL, version, updated_at, expires_at, live)`` and the live
    ones' window rows as ``(id as stored, seq, payload, NULL…)``, in any order. A store with a ttl gives a
    created memory that asks for no expiry its own.
    """

    def __init__(self, statements: Statements) -> None:
        memories, messages, dialect = statements.tables.memories, statements.tables.messages, statements.dialect
        stamp = memories.c.updated_at.type
        is_live = live(memories.c.expires_at, stamp)
        live_flag = case((is_live, literal_column("1")), else_=literal_column("0")).label("live")
        self.stamp = stamp.dialect_impl(dialect).result_processor(dialect, None)
        """What a head row's time is made of as the driver gives it (``None``: it is a datetime already)."""
        postgres = dialect_of(dialect.name) is POSTGRESQL

        def among(column: ColumnElement[Any]) -> ColumnElement[bool]:
            return IdsIn(column) if postgres else column.op("IN")(literal_column(f"({IDS_SLOT})"))

        stored_id = type_coerce(memories.c.memory_id, LargeBinary())
        head: list[Any] = [stored_id, literal_column("-1"), type_coerce(null(), LargeBinary()), memories.c.version]
        heads = select(*head, memories.c.updated_at, memories.c.expires_at, live_flag).where(
            among(memories.c.memory_id)
        )
        nothing = (null(), null(), null(), null())
        columns = (type_coerce(messages.c.memory_id, LargeBinary()), messages.c.seq, messages.c.payload, *nothing)
        window, pinned = window_rows(memories, messages, columns, among(memories.c.memory_id), is_live)
        # Only heads with a pinned range (few), said outright: a plan filters the heads before the join.
        self.read = IdsRead.of(
            union_all(heads, window, pinned.where(memories.c.pin_start.is_not(None))), dialect, postgres
        )
        headed: Select[Any] = select(literal_column("1")).where(memories.c.memory_id == messages.c.memory_id)
        self.strays: Select[Any] = select(messages.c.memory_id, messages.c.seq, messages.c.payload).where(
            IdsIn(messages.c.memory_id), ~headed.exists()
        )
        """The message rows of ids without a head row (damage)."""
        ids: BindParameter[Any] = bindparam("p_ids", expanding=True)
        self.create_heads: Select[Any] = select(memories.c.memory_id, live_flag).where(memories.c.memory_id.in_(ids))
        """A batch create's head rows, live or not."""
        self.create_strays: Select[Any] = (
            select(messages.c.memory_id).where(messages.c.memory_id.in_(ids), ~headed.exists()).distinct()
        )
        """The ids of the batch with message rows and no head row (damage)."""
        now = ServerNow(stamp)
        store_expiry: Any = ServerExpiry(stamp) if statements.expires else literal_column("NULL")
        # The memory's own expiry when it asks for one (NULL: never), else the store's, in the insert itself.
        asks = bindparam("p_sets_expiry", type_=Integer()) == 1
        expiry = case((asks, bindparam("p_expires_at", type_=memories.c.expires_at.type)), else_=store_expiry)
        named = ("version", "incarnation", "next_seq", "window_start", "pin_start", "pin_end")
        self.insert_heads: Insert = insert(memories).values(
            memory_id=bindparam("p_id"),
            created_at=now,
            updated_at=now,
            expires_at=expiry,
            recent_writes=bindparam("p_recent"),
            **{name: bindparam(f"p_{name}") for name in named},
        )
        self.insert_messages: Insert = insert(messages)


class RestoreStatements:
    """The statements of a history restore on one store's tables."""

    def __init__(self, statements: Statements) -> None:
        memories, messages = statements.tables.memories, statements.tables.messages
        self.present: Select[Any] = select(messages.c.seq, messages.c.written_at).where(
            messages.c.memory_id == bindparam("p_id"), messages.c.seq.in_(bindparam("p_seqs", expanding=True))
        )
        """The seqs among ``p_seqs`` that a memory's rows hold, with their write time (``NULL``: not an entry)."""
        self.insert_entries: Insert = insert(messages)
        """Rows with their own write time (``written_at``, ``evicted``)."""
        floor = bindparam("p_next_seq", type_=BigInteger())
        self.bump_head: Update = (
            update(memories)
            .where(memories.c.memory_id == bindparam("p_id"))
            .values(
                version=memories.c.version + literal_column("1"),
                next_seq=case((memories.c.next_seq < floor, floor), else_=memories.c.next_seq),
            )
        )
        """A new version, and ``next_seq`` at least ``p_next_seq``."""
