"""Reading many memories of a SQL store in a few statements, for operators' tools (pure: no I/O).

:func:`read_batch` is an operation like those of :mod:`.operations`: for a batch of ids it sends one
``SELECT`` of their head rows and one of their window's message rows (the rows the window read
:func:`~chatmemory.stores.sql.statements.window_read` returns, for every id of the batch at once), and,
only when some ids have no head row, one of their stray rows (damage, shown as ``read_raw`` shows it).
Each memory becomes a :class:`~chatmemory.stored_memories.StoredMemory`. The ids go as one array on
PostgreSQL (``= ANY``: one parameter, one statement text whatever the batch size), as ``IN`` elsewhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import (
    ARRAY,
    Boolean,
    LargeBinary,
    Select,
    and_,
    any_,
    bindparam,
    case,
    literal_column,
    select,
    type_coerce,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from chatmemory.core.memory_id import validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.stored_memories import StoredMemory
from chatmemory.stores.sql.clock import live
from chatmemory.stores.sql.commands import CHECK_SCHEMA, Command, Result, Statement, Steps
from chatmemory.stores.sql.outcomes import stray_detail
from chatmemory.stores.sql.schema import SchemaTables
from chatmemory.stores.sql.times import aware

__all__ = ["BatchStatements", "IdsIn", "read_batch"]


class IdsIn(FunctionElement[bool]):
    """``column`` is one of the ids bound as ``p_ids`` (a list): ``IN`` their list, or ``= ANY`` their array."""

    name = "chatmemory_ids_in"
    type = Boolean()
    inherit_cache = True
    _is_implicitly_boolean = True  # a predicate as it is: not compared with 1 where booleans are integers

    def __init__(self, column: Any) -> None:
        super().__init__(column)


def _column_of(element: IdsIn) -> Any:
    return next(iter(element.clauses))


@compiles(IdsIn)
def _ids_in(element: IdsIn, compiler: Any, **kw: Any) -> str:
    column = _column_of(element)
    return str(compiler.process(column.in_(bindparam("p_ids", expanding=True)), **kw))


@compiles(IdsIn, "postgresql")
def _ids_any(element: IdsIn, compiler: Any, **kw: Any) -> str:
    column = _column_of(element)
    return str(compiler.process(column == any_(bindparam("p_ids", type_=ARRAY(column.type))), **kw))


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


def read_batch(
    statements: BatchStatements,
    memory_ids: Sequence[str],
    *,
    checked: bool,
    store_error: Callable[[SQLAlchemyError], Exception],
) -> Steps[Command, list[StoredMemory | None]]:
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
            stored_ids = {memory_id.encode("utf-8", "surrogatepass"): memory_id for memory_id in live_heads}
            rows = yield Statement(statements.rows, {"p_ids": list(live_heads)}, Result.ROWS)
            for raw_id, seq, payload in rows:
                records[stored_ids[bytes(raw_id)]].append((seq, bytes(payload)))
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
