"""Creating many memories of a SQL store in one transaction, for ``import`` and ``copy`` (pure: no I/O).

:func:`create_batch` is an operation like those of :mod:`.operations`. In one transaction it reads
which ids of the batch have a head row or message rows, and the server's clock; then it inserts the head
rows of the absent memories (each with its expiry: the one the memory asks for, else the store's ttl)
and their message rows, one ``executemany`` each. Each head row is what ``save(id, messages, 0)``
writes when it creates a memory (:func:`~chatmemory.stores.sql.locked_writes.plan_locked` decides it).
A live memory is ``None`` and is not touched; an expired one, or ids with stray rows, are left to the
store's own ``save`` (:attr:`BatchCreate.one_by_one`), as is a batch that lost its inserts to another
writer creating one of its memories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BindParameter, Insert, Integer, Select, bindparam, case, insert, literal_column, select
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from chatmemory.stored_memories import NewMemory
from chatmemory.stores.sql.clock import ServerExpiry, ServerNow, live
from chatmemory.stores.sql.commands import COMMIT, ROLLBACK, Command, Result, Statement, Steps
from chatmemory.stores.sql.engine import is_conflict
from chatmemory.stores.sql.locked_writes import LockedHead, LockedWrite, plan_locked
from chatmemory.stores.sql.schema import SchemaTables
from chatmemory.stores.sql.times import expiry_parameter
from chatmemory.stores.sql.write_requests import WriteRequest

__all__ = ["BatchCreate", "CreateStatements", "create_batch", "create_together"]


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
class BatchCreate:
    """What a batch create did: a version (or ``None``) per memory, and those left to ``save``.

    Attributes:
        versions: one entry per memory of the batch, in order; ``None`` for one that exists (or is a
            later copy of an id earlier in the batch) and for those in :attr:`one_by_one`.
        one_by_one: indexes of the memories the store creates with its own ``save(id, messages, 0)``
            (an expired memory, stray rows, or the whole batch after another writer won a create).
    """

    versions: list[int | None]
    one_by_one: tuple[int, ...] = field(default=())


def create_together(
    statements: CreateStatements,
    server_clock: Any,
    requests: Sequence[WriteRequest],
    memories: Sequence[NewMemory],
    *,
    dialect: str,
    begin: Statement,
    check_payloads: Callable[[str, Iterable[bytes]], None],
    store_error: Callable[[SQLAlchemyError], Exception],
) -> Steps[Command, BatchCreate]:
    """:func:`create_batch` in a transaction of its own; every memory left to ``save`` if another writer won.

    Raises:
        StoreError: the database failed (``store_error``), or a message is too large for the server.
    """
    try:
        yield begin
        try:
            done = yield from create_batch(statements, server_clock, requests, memories, dialect, check_payloads)
        except Exception:
            yield ROLLBACK
            raise
        yield COMMIT
    except DBAPIError as exc:
        if not is_conflict(dialect, exc):
            raise store_error(exc) from exc
        # Another writer created one of the memories since the read: each goes through save, which says.
        return BatchCreate([None] * len(requests), _first_copies(requests))
    except SQLAlchemyError as exc:
        raise store_error(exc) from exc
    return done


def _first_copies(requests: Sequence[WriteRequest]) -> tuple[int, ...]:
    seen: set[str] = set()
    first: list[int] = []
    for index, request in enumerate(requests):
        if request.memory_id not in seen:
            seen.add(request.memory_id)
            first.append(index)
    return tuple(first)


def create_batch(
    statements: CreateStatements,
    server_clock: Any,
    requests: Sequence[WriteRequest],
    memories: Sequence[NewMemory],
    dialect: str,
    check_payloads: Callable[[str, Iterable[bytes]], None],
) -> Steps[Command, BatchCreate]:
    """Create the absent ``memories`` (``requests``: their writes at version 0), in the caller's transaction.

    Run inside a transaction (the caller's ``BEGIN`` and ``COMMIT``): the reads see what the inserts
    then add to. A unique-key failure of the insert (another writer created one of the memories since the
    read) is the caller's to catch: it rolls back and creates the batch one by one.

    Raises:
        ValueError: an expiry that is not an aware datetime.
    """
    ids = sorted({request.memory_id for request in requests})
    expiries = [expiry_parameter(memory.expires_at, dialect) if memory.sets_expiry else None for memory in memories]
    heads = yield Statement(statements.heads, {"p_ids": ids}, Result.ROWS)
    present = {row[0]: bool(row[1]) for row in heads}
    headless = [memory_id for memory_id in ids if memory_id not in present]
    strays: set[str] = set()
    if headless:
        strays = set((yield Statement(statements.strays, {"p_ids": headless}, Result.SCALARS)))
    clock = yield Statement(server_clock, None, Result.SCALAR)
    absent = LockedHead(False, 0, 0, 0, False, None, None, int(clock))
    versions: list[int | None] = []
    one_by_one: list[int] = []
    planned: list[tuple[int, LockedWrite]] = []
    seen: set[str] = set()
    for index, request in enumerate(requests):
        memory_id = request.memory_id
        versions.append(None)
        if memory_id in seen:
            continue  # created (or found) by its first copy: save(id, messages, 0) would conflict
        seen.add(memory_id)
        if present.get(memory_id) is True:
            continue
        if memory_id in present or memory_id in strays:
            one_by_one.append(index)
            continue
        decision = plan_locked(request, None, absent)
        assert isinstance(decision, LockedWrite)
        check_payloads(memory_id, (row["payload"] for row in decision.rows))
        planned.append((index, decision))
    if planned:
        head_rows = [
            {
                **decision.head,
                "p_sets_expiry": 1 if memories[index].sets_expiry else 0,
                "p_expires_at": expiries[index],
            }
            for index, decision in planned
        ]
        yield Statement(statements.insert_heads, head_rows, many=True)
        rows = [row for _, decision in planned for row in decision.rows]
        if rows:
            yield Statement(statements.insert_messages, rows, many=True)
        for index, decision in planned:
            versions[index] = decision.version
    return BatchCreate(versions, tuple(one_by_one))
