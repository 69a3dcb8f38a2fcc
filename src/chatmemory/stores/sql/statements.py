"""The statements of the SQL store, one builder per table and operation, built once per store and dialect.

Parameters are named ``p_*`` (SQLAlchemy reserves column names for the SET and VALUES clauses). Times
come from the server's clock (:mod:`~chatmemory.stores.sql.dialect`); a store with a ``ttl`` passes it as
``p_ttl`` (and one with a ``history_ttl`` that as ``p_history_ttl``). The window is the rows its head
row's ranges enclose and that are not marked evicted (:func:`~chatmemory.stores.sql.plan.cover_window`).
A store with history marks rows instead of deleting them, and stamps the rows it adds with the head row's
write time. :class:`Statements` holds a store's reads and writes (the hot ones rendered once in the
driver's SQL), :class:`BatchStatements`, :class:`CreateStatements` and :class:`RestoreStatements` those
of operators' tools.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass
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
    Rendered,
    ServerClockMicros,
    ServerExpiry,
    ServerNow,
    dialect_of,
    live,
    render,
)
from chatmemory.stores.sql.plan import RUN, SCALAR_DIFF_LIMIT
from chatmemory.stores.sql.schema import RECENT_WRITES_LENGTH, MemoryIdType, SchemaTables, build_tables

__all__ = [
    "BatchStatements",
    "CreateStatements",
    "RestoreStatements",
    "Statements",
    "shared_statements",
    "stray_read",
    "window_read",
]

_ENTRY = 32
"""Characters of one ``recent_writes`` entry."""


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
        self._expires = expires
        family = dialect_of(dialect.name)
        assert family is not None, "the store checks its database first"
        self.family = family
        """What differs on this database (the flags of :attr:`has_diff_statement`, :attr:`joins_turns`)."""
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

        head_live = case((self._live, literal_column("1")), else_=literal_column("0"))
        self.read: CompoundSelect[Any] = window_read(tables, dialect)
        """All of a memory in one statement (see :func:`window_read`)."""
        self.strays: Select[Any] = stray_read(tables)
        """The rows of a memory without a head row (see :func:`stray_read`)."""

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
        self._diffs: dict[tuple[int, int], str] = {}
        self._diffs_lock = threading.Lock()
        # The statements of a steady-state turn and read, rendered once (see Rendered).
        self.fast_read = render(self.read, dialect)
        """:attr:`read`, rendered."""
        self.fast_strays = render(self.strays, dialect)
        """:attr:`strays`, rendered."""
        self.fast_bump_head = render(self.bump_head, dialect)
        """:attr:`bump_head`, rendered."""
        row_columns = ["memory_id", "seq", "payload"]
        self.fast_insert_messages = render(self.insert_messages, dialect, row_columns)
        """:attr:`insert_messages`, rendered (rows of ``memory_id``, ``seq``, ``payload``)."""
        self.fast_insert_history = render(self.insert_history, dialect, row_columns)
        """:attr:`insert_history`, rendered (rows also name their head as ``p_head``)."""
        self._removals: dict[int, Rendered] = {}
        self._joined: dict[tuple[int, int, bool, bool], Joined] = {}
        self.blocks_mariadb_turns = True
        """Whether MariaDB's diffed turns go as compound statements (:attr:`blocks_turns`); ``False`` sends
        them as MySQL's go, in one multi-statement string and a ``COMMIT`` (how that path is tested on
        MariaDB)."""

    @functools.cached_property
    def fast_lock_head(self) -> Rendered:
        """:attr:`lock_head`, rendered (at the store's first locked write)."""
        return render(self.lock_head, self._dialect)

    @functools.cached_property
    def batch(self) -> BatchStatements:
        """The statements of a batch read."""
        return BatchStatements(self._tables)

    @functools.cached_property
    def creates(self) -> CreateStatements:
        """The statements of a batch create."""
        return CreateStatements(self._tables, expires=self._expires)

    @functools.cached_property
    def restore(self) -> RestoreStatements:
        """The statements of a history restore."""
        return RestoreStatements.of(self._tables)

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

    @property
    def tables(self) -> SchemaTables:
        """The tables the statements name (the store builds its other statements on these too)."""
        return self._tables

    def for_store(self, dialect: Dialect) -> Statements:
        """A copy for another store of the same key (see :func:`shared_statements`): nothing rendered lazily shared."""
        clone = copy.copy(self)
        clone._dialect = dialect
        clone._diffs = {}
        clone._diffs_lock = threading.Lock()
        clone._removals = {}
        clone._joined = {}
        for cached in ("fast_lock_head", "batch", "creates", "restore"):
            clone.__dict__.pop(cached, None)
        return clone

    def removal(self, count: int) -> Rendered:
        """The delete (or, with history, the mark) of rows of ``p_id``, rendered once per ``count``.

        ``count`` rows ``p_d0``…, or, for :data:`~chatmemory.stores.sql.diffed_writes.RUN`, the rows from
        ``p_first`` to ``p_last`` (see :attr:`~chatmemory.stores.sql.diffed_writes.DiffWrite.removal`).
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
    def joins_turns(self) -> bool:
        """Whether a diffed turn can also go as one multi-statement string (:meth:`joined_turn`): MySQL/MariaDB."""
        return self.family.joins_turns

    @property
    def blocks_turns(self) -> bool:
        """Whether a diffed turn goes as one compound statement (:meth:`block_turn`): MariaDB 10.1.1 and later."""
        return self.blocks_mariadb_turns and self.family.blocks_turns(self._dialect)

    def joined_turn(self, removed: int, appended: int, recorded: bool) -> Joined | None:
        """The transaction of a diffed turn as one string, or ``None`` for a turn too large to render so.

        ``BEGIN``, the conditional head update, the delete (or mark) of ``removed`` rows (a
        :meth:`removal`) and one
        insert of ``appended`` rows (``p_s0``/``p_b0``…; ``recorded``: history entries, stamped with
        the head's write time): one round trip where the transaction otherwise takes five, then
        ``COMMIT``. Rendered once per shape, up to ``SCALAR_DIFF_LIMIT`` rows each way (at most 162
        strings); larger turns, rare, are sent statement by statement. Bind it with the values of
        :meth:`~chatmemory.stores.sql.diffed_writes.DiffWrite.joined_parameters`.
        """
        return self._turn_as_one(removed, appended, recorded, block=False)

    def block_turn(self, removed: int, appended: int, recorded: bool) -> Joined | None:
        """A diffed turn as one MariaDB compound statement, or ``None`` for a turn too large to render so.

        The parts of :meth:`joined_turn` in a :meth:`~chatmemory.stores.sql.rendered.Joined.atomic_block`:
        the head update, then, only if it matched its row, the delete (or mark) and the insert, and the
        ``COMMIT``; one round trip and one result, where the multi-statement string answers with one
        result per statement and still needs a ``COMMIT`` of its own (PyMySQL spends tens of
        microseconds of the client's CPU on each). Bound as :meth:`joined_turn` is.
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
        """Up to ``batch_size`` expired ids, locked (skipping rows a writer holds) until the purge commits.

        Unordered: without an index on ``expires_at`` (see the schema) the scan stops at the batch's last id.
        """
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


_SHARED_SIZE = 32
"""How many stores' statement sets (dialect, table prefix, options) a process keeps built."""
_shared: OrderedDict[tuple[Any, ...], Statements] = OrderedDict()
_shared_lock = threading.Lock()


def shared_statements(
    prefix: str, dialect: Dialect, *, expires: bool, history: bool = False, history_expires: bool = False
) -> Statements:
    """:class:`Statements` for a store, built once per process for its dialect, table prefix and options.

    Building and rendering them costs milliseconds of CPU, felt by every store opened from a URL (a CLI
    command, a short-lived worker). The statements are the same for every store of one key; each store
    gets its own copy of the set, with its own dialect and its own lazily rendered shapes (those rendered
    after the first connection may depend on the server the dialect has seen). The tables of ``prefix``
    are built with the set (:attr:`Statements.tables`): a statement the store builds must name the same
    ``Table`` objects.
    """
    key = (
        type(dialect),
        dialect.name,
        dialect.driver,
        dialect.paramstyle,
        getattr(dialect, "server_version_info", None),
        prefix,
        expires,
        history,
        history_expires,
    )
    with _shared_lock:
        built = _shared.get(key)
        if built is not None:
            _shared.move_to_end(key)
    if built is None:
        tables = build_tables(prefix)
        built = Statements(tables, dialect, expires=expires, history=history, history_expires=history_expires)
        with _shared_lock:
            _shared[key] = built
            while len(_shared) > _SHARED_SIZE:
                _shared.popitem(last=False)
    return built.for_store(dialect)


def window_read(tables: SchemaTables, dialect: Dialect) -> CompoundSelect[Any]:
    """The window read: every state of a memory in one statement, as ``(seq, payload)`` rows in any order.

    Three branches of one ``UNION ALL``, so the head row and its message rows are one snapshot:

    * the head row (none if the memory is absent): ``seq`` is ``NULL`` and ``payload`` carries its
      ``version incarnation next_seq live window_start`` as ASCII digits separated by spaces (``live``:
      1, or 0 once it has expired; see :class:`~chatmemory.stores.sql.reads.ReadHead`);
    * the window's message rows from ``window_start`` on, then those of its pinned run (below
      ``window_start``), only if the head is live: two branches rather than one ``OR``, so that each is
      a range of the primary key, which skips the rows (and the dead index entries) before the window;
      a row the store already decoded comes without its payload: within one incarnation every row below
      the next sequence number the store saw was in that snapshot (``p_known_incarnation``,
      ``p_known_next``; see :func:`~chatmemory.stores.sql.reads.decode_read`).

    Message rows of a memory without a head row are damage, reported, never read as empty: a read that
    finds no head row sends :func:`stray_read` next. A branch for them here cost every read of a present
    memory a probe of its own (11 µs a read on PostgreSQL, 34 µs on MariaDB); now only a read of an
    absent memory pays, with a second statement.

    Why this shape: one round trip; two narrow columns instead of the head's five repeated on every
    row; and no ``ORDER BY``: sorting a join's result made MariaDB build a temporary table (on disk, for
    the ``LONGBLOB`` payload) on every read. The decoder sorts the rows when they do not come in order.
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

    def rows_in(cover: ColumnElement[bool]) -> Select[Any]:
        return (
            select(messages.c.seq, case((known, null()), else_=messages.c.payload).label("payload"))
            .select_from(memories.join(messages, and_(messages.c.memory_id == memories.c.memory_id, cover)))
            .where(memories.c.memory_id == memory_id, is_live, messages.c.evicted.is_(None))
        )

    window = rows_in(messages.c.seq >= memories.c.window_start)
    pinned = rows_in(
        and_(
            messages.c.seq.between(memories.c.pin_start, memories.c.pin_end),
            messages.c.seq < memories.c.window_start,
        )
    )
    return union_all(head, window, pinned)


def stray_read(tables: SchemaTables) -> Select[Any]:
    """The message rows of ``p_id`` if it has no head row (damage), as ``(seq, payload)``; else none.

    Sent only after a window read found no head row: one statement, so a memory created meanwhile
    (its head and rows written together) is not taken for damage.
    """
    memories, messages = tables.memories, tables.messages
    memory_id = bindparam("p_id", type_=MemoryIdType())
    head: Select[Any] = select(literal_column("1")).select_from(memories).where(memories.c.memory_id == memory_id)
    return select(messages.c.seq, messages.c.payload).where(messages.c.memory_id == memory_id, ~head.exists())


# ------------------------------------------------------------------ batches and restores (operators' tools)


class BatchStatements:
    """The statements of a batch read on one store's tables (the ids bound as ``p_ids``, a list: see :class:`IdsIn`)."""

    def __init__(self, tables: SchemaTables) -> None:
        memories, messages = tables.memories, tables.messages
        is_live = live(memories.c.expires_at, memories.c.updated_at.type)
        self.heads: Select[Any] = select(
            memories.c.memory_id,
            memories.c.version,
            memories.c.updated_at,
            memories.c.expires_at,
            case((is_live, literal_column("1")), else_=literal_column("0")).label("live"),
        ).where(IdsIn(memories.c.memory_id))
        """Every head row of the batch, live or not (one that is not is an absent memory, not damage)."""

        def rows_in(cover: Any) -> Select[Any]:
            # The id as stored (bytes): read_batch maps it back to the id it asked for, not a decode per row.
            return (
                select(type_coerce(messages.c.memory_id, LargeBinary()), messages.c.seq, messages.c.payload)
                .select_from(memories.join(messages, and_(messages.c.memory_id == memories.c.memory_id, cover)))
                .where(IdsIn(memories.c.memory_id), is_live, messages.c.evicted.is_(None))
            )

        window = rows_in(messages.c.seq >= memories.c.window_start)
        # Only heads with a pinned range (few): said outright, so a plan filters the heads before the join.
        pinned = rows_in(
            and_(
                messages.c.seq.between(memories.c.pin_start, memories.c.pin_end),
                messages.c.seq < memories.c.window_start,
            )
        ).where(memories.c.pin_start.is_not(None))
        self.rows = window.union_all(pinned)
        """The window's message rows of every live memory of the batch, in any order."""
        head: Select[Any] = (
            select(literal_column("1")).select_from(memories).where(memories.c.memory_id == messages.c.memory_id)
        )
        self.strays: Select[Any] = select(messages.c.memory_id, messages.c.seq, messages.c.payload).where(
            IdsIn(messages.c.memory_id), ~head.exists()
        )
        """The message rows of ids without a head row (damage)."""


class CreateStatements:
    """The statements of a batch create on one store's tables (``expires``: the store has a ttl)."""

    def __init__(self, tables: SchemaTables, *, expires: bool) -> None:
        memories, messages = tables.memories, tables.messages
        ids: BindParameter[Any] = bindparam("p_ids", expanding=True)
        stamp = memories.c.updated_at.type
        is_live = live(memories.c.expires_at, stamp)
        self.heads: Select[Any] = select(
            memories.c.memory_id, case((is_live, literal_column("1")), else_=literal_column("0")).label("live")
        ).where(memories.c.memory_id.in_(ids))
        """The head rows of the batch, live or not."""
        head: Select[Any] = (
            select(literal_column("1")).select_from(memories).where(memories.c.memory_id == messages.c.memory_id)
        )
        self.strays: Select[Any] = (
            select(messages.c.memory_id).where(messages.c.memory_id.in_(ids), ~head.exists()).distinct()
        )
        """The ids of the batch with message rows and no head row (damage)."""
        now = ServerNow(stamp)
        store_expiry: Any = ServerExpiry(stamp) if expires else literal_column("NULL")
        # The memory's own expiry when it asks for one (NULL: never), else the store's, in the insert itself.
        expiry = case(
            (
                bindparam("p_sets_expiry", type_=Integer()) == 1,
                bindparam("p_expires_at", type_=memories.c.expires_at.type),
            ),
            else_=store_expiry,
        )
        self.insert_heads: Insert = insert(memories).values(
            memory_id=bindparam("p_id"),
            version=bindparam("p_version"),
            incarnation=bindparam("p_incarnation"),
            next_seq=bindparam("p_next_seq"),
            created_at=now,
            updated_at=now,
            expires_at=expiry,
            recent_writes=bindparam("p_recent"),
            window_start=bindparam("p_window_start"),
            pin_start=bindparam("p_pin_start"),
            pin_end=bindparam("p_pin_end"),
        )
        self.insert_messages: Insert = insert(messages)


@dataclass(frozen=True, slots=True)
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
