"""A SQL store's operations, written once as generators of commands for both executors.

Each operation (``_load``, ``_write``, ``_delete`` ...) yields :mod:`~chatmemory.stores.sql.commands`
and receives their results; the sync executor (:mod:`chatmemory.stores.sql.store`) and the asyncio one
(:mod:`chatmemory.aio.stores.sql`) only send them, so a decision here is made once for both. A driver
exception is thrown back in where the command was yielded, so the ``try`` blocks below read as they
would around a direct call. What each read and write sends is decided in
:mod:`~chatmemory.stores.sql.plan`, when to try again in :mod:`~chatmemory.stores.sql.writes`; this
module adds the order of the statements and the cache. Writes under the head row's lock are in
:mod:`~chatmemory.stores.sql.locked_operations`, histories in :mod:`~chatmemory.stores.sql.history_operations`.
The hot path takes one round each: a read is one statement; a diffed turn is one statement on PostgreSQL
and elsewhere one :class:`~chatmemory.stores.sql.commands.Batch` that is a transaction of its own.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any, TypeVar

from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import Resealed, require_keyring, reseal_plan
from chatmemory.stores.base import Operation
from chatmemory.stores.sql import plan
from chatmemory.stores.sql.commands import (
    CHECK_SCHEMA,
    RELEASE,
    ROLLBACK,
    Batch,
    Command,
    Emit,
    Result,
    Statement,
    Steps,
)
from chatmemory.stores.sql.engine import is_missed_block, snapshot_statements
from chatmemory.stores.sql.locked_operations import LockedOperations
from chatmemory.stores.sql.plan import WriteRequest
from chatmemory.stores.sql.times import expiry_parameter, times_of
from chatmemory.stores.sql.writes import WriteLoop, retry_read

__all__ = ["SQLOperations", "check_batch_size", "check_listing"]

_Engine = TypeVar("_Engine")


def check_listing(order: str, page_size: int) -> None:
    """Refuse a listing order or page size the store does not take.

    Raises:
        ValueError: naming the argument.
    """
    if order not in ("id", "newest"):
        raise ValueError("order must be 'id' or 'newest'")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ValueError("page_size must be an int >= 1")


def check_batch_size(batch_size: int) -> None:
    """Refuse a purge batch size that is not a positive int.

    Raises:
        ValueError: naming the argument.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError("batch_size must be an int >= 1")


class SQLOperations(LockedOperations[_Engine]):
    """Every operation of a SQL store as a command generator (the executors run them)."""

    # ------------------------------------------------------------------------------------------- reads

    def _load(self, memory_id: str) -> Steps[Command, Snapshot]:
        """The messages of ``memory_id`` and their version: one query (again without the cache if stale)."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)  # _ready, inline on the hot path
        if not self._schema.checked:
            yield CHECK_SCHEMA
        read = self._statements.fast_read
        for attempt in retry_read():
            cached = self._cache.get(memory_id) if attempt.use_cache else None
            try:
                rows = yield Statement(read.sql, read.bind(plan.read_parameters(memory_id, cached)), Result.RECORDS)
                result = plan.decode_read(memory_id, rows, cached, self._codec)
                if isinstance(result, plan.Headless):
                    strays = self._statements.fast_strays
                    found = yield Statement(strays.sql, strays.bind({"p_id": memory_id}), Result.RECORDS)
                    result = plan.absent_read(found)
            except SQLAlchemyError as exc:
                if not attempt.lost(exc):
                    raise self._schema.store_error(Operation.READ, memory_id, exc) from exc
                yield RELEASE  # read again, on a new connection
                continue
            if isinstance(result, plan.Corrupted):
                self._cache.forget(memory_id)
                raise result.error(memory_id)
            if isinstance(result, plan.StaleCache):
                self._cache.forget(memory_id)
                attempt.stale()
                continue
            self._remember(memory_id, result.state)
            return result.snapshot
        raise AssertionError("unreachable: the last read attempt raises")

    def _read_raw(self, memory_id: str) -> Steps[Command, list[bytes]]:
        memory_id = validate_memory_id(memory_id)
        yield from self._ready(Operation.READ, memory_id)
        try:
            rows = yield Statement(self._statements.read, plan.read_parameters(memory_id, None), Result.ROWS)
            records = plan.raw_records(rows)
            if isinstance(records, plan.Headless):  # what an operator inspects: the rows without a head
                records = plan.stray_records(
                    (yield Statement(self._statements.strays, {"p_id": memory_id}, Result.ROWS))
                )
        except SQLAlchemyError as exc:
            raise self._schema.store_error(Operation.READ, memory_id, exc) from exc
        return records

    def _reseal(self, memory_id: str) -> Steps[Command, Resealed]:
        """Re-seal every row of ``memory_id`` (window and history) not under the primary key, row by row.

        Each row is replaced only if it still holds the payload read (rows are never rewritten in place,
        so a concurrent writer only adds or removes rows): versions and cached snapshots stay valid.
        """
        memory_id = validate_memory_id(memory_id)
        codec = require_keyring(self._codec, repr(self))
        yield from self._ready(Operation.WRITE, memory_id)
        messages = self._tables.messages
        try:
            rows = yield Statement(
                select(messages.c.seq, messages.c.payload).where(messages.c.memory_id == memory_id), {}, Result.ROWS
            )
            records = ((int(row.seq), bytes(row.payload)) for row in rows)
            changes, current = reseal_plan(codec, memory_id, records, positioned=True)
            done = 0
            for seq, old, new in changes:
                same = (messages.c.memory_id == memory_id) & (messages.c.seq == seq) & (messages.c.payload == old)
                done += yield Statement(update(messages).where(same).values(payload=new), {}, Result.ROWCOUNT)
        except SQLAlchemyError as exc:
            raise self._schema.store_error(Operation.WRITE, memory_id, exc) from exc
        return Resealed(done, current, len(changes) - done)

    def _memory_times(self, memory_id: str) -> Steps[Command, MemoryTimes | None]:
        memory_id = validate_memory_id(memory_id)
        yield from self._ready(Operation.READ, memory_id)
        try:
            row = yield Statement(self._statements.times, {"p_id": memory_id}, Result.FIRST)
        except SQLAlchemyError as exc:
            raise self._schema.store_error(Operation.READ, memory_id, exc) from exc
        return times_of(row)

    # ------------------------------------------------------------------------------------------ writes

    # The write's arguments are checked when its operation is made, before any command is sent.

    def _save(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Iterable[ChatMessage] = (),
    ) -> Steps[Command, int]:
        request = self._request(validate_memory_id(memory_id), messages, expected_version, also_recorded)
        return self._write(request)

    def _update(self, memory_id: str, messages: Iterable[ChatMessage]) -> Steps[Command, int]:
        return self._write(self._request(validate_memory_id(memory_id), messages, None))

    def _write_raw(self, memory_id: str, records: Iterable[bytes]) -> Steps[Command, int]:
        return self._write(self._records_request(validate_memory_id(memory_id), records))

    def _write(self, request: WriteRequest) -> Steps[Command, int]:
        """Write ``request``: a diff against the cached snapshot if it has one, else under the lock."""
        self._check_open(Operation.WRITE, request.memory_id)  # _ready, inline on the hot path
        if not self._schema.checked:
            yield CHECK_SCHEMA
        loop = WriteLoop(request, self._retry, self._dialect)
        while True:
            outcome: plan.Written | plan.Conflict | plan.Corrupted | None = None
            cached = self._cache.get(request.memory_id)
            diff = plan.plan_diff(request, cached) if loop.may_diff else None
            try:
                if diff is not None:
                    outcome = yield from self._write_diff(diff)
                else:
                    outcome = yield from self._write_locked(request, cached)
            except SQLAlchemyError as exc:
                if not loop.retryable(exc):
                    raise self._schema.store_error(Operation.WRITE, request.memory_id, exc) from exc
            if outcome is not None:
                written = loop.settle(outcome, diffed=diff is not None)
                if written is not None:
                    self._remember(request.memory_id, written.state)
                    return written.version
            yield from self._pause(loop)

    def _write_diff(self, diff: plan.DiffWrite) -> Steps[Command, plan.Written | plan.Conflict]:
        """A diffed write: one statement on PostgreSQL and MariaDB, else one batch (one string on MySQL)."""
        self._schema.check_payloads(diff.request.memory_id, diff.payloads)
        statements = self._statements
        if statements.has_diff_statement:
            turn = statements.diff_postgresql(*diff.shape)
            row = yield Statement(turn, diff.postgresql_parameters(), Result.FIRST)
            return plan.diff_outcome(diff, row is not None)
        joinable = statements.joins_turns and diff.joinable(self._schema.max_allowed_packet)
        if joinable and statements.blocks_turns:
            block = statements.block_turn(diff.removal, len(diff.payloads), diff.request.recorded)
            if block is not None:  # MariaDB: one compound statement, a transaction of its own
                try:
                    yield Statement(block.sql, block.bind(diff.joined_parameters())[0])
                except DBAPIError as exc:
                    if not is_missed_block(exc):
                        raise
                    return plan.diff_outcome(diff, False)  # the head was not at the cached version
                return plan.diff_outcome(diff, True)
        rendered = statements.joined_turn(diff.removal, len(diff.payloads), diff.request.recorded) if joinable else None
        if rendered is not None:
            # The parts, bound once, go as one string where the connection allows it, else one by one.
            whole, parameters = rendered.bind(diff.joined_parameters())
            head, *rest = rendered.parts
            batch = [Statement(head.sql, parameters[0], expect=1)]
            batch.extend(Statement(part.sql, bound) for part, bound in zip(rest, parameters[1:], strict=True))
            joined: Statement | None = Statement(rendered.sql, whole)
        else:
            batch = self._diff_statements(diff)
            joined = None
        # One transaction; a head update that matched no row (a stale snapshot) rolls it back.
        counts = yield Batch(tuple(batch), self._begin_statement, joined)
        return plan.diff_outcome(diff, counts[0] == 1)

    def _delete(self, memory_id: str) -> Steps[Command, None]:
        """Remove ``memory_id`` and its messages in one transaction (tried again on conflicts)."""
        memory_id = validate_memory_id(memory_id)
        yield from self._ready(Operation.DELETE, memory_id)
        statements, key, begin = self._statements, {"p_id": memory_id}, self._begin_statement
        # The head row first: writers lock it before any message row, so this order cannot deadlock.
        batch = Batch((Statement(statements.delete_head, key), Statement(statements.delete_all, key)), begin)

        def attempt() -> Steps[Command, Any]:
            return (yield batch)

        yield from self._retried(Operation.DELETE, memory_id, attempt)
        self._cache.forget(memory_id)

    def _expire_at(self, memory_id: str, when: datetime.datetime | None) -> Steps[Command, None]:
        """One statement on the head row (an absent or expired memory is left as it is)."""
        memory_id = validate_memory_id(memory_id)
        parameters = {"p_id": memory_id, "p_expires_at": expiry_parameter(when, self._dialect)}
        yield from self._ready(Operation.WRITE, memory_id)
        try:
            yield Statement(self._statements.set_expiry, parameters)
        except SQLAlchemyError as exc:
            raise self._schema.store_error(Operation.WRITE, memory_id, exc) from exc
        self._cache.forget(memory_id)

    # ----------------------------------------------------------------------------------- listing and TTL

    def _pages(self, order: str, page_size: int) -> Steps[Command, None]:
        """Emit the live ids page by page (keyset pagination); newest first, all pages in one snapshot.

        By id each page is read on a connection of its own, handed back before its ids are; newest first
        one connection holds the snapshot until the listing ends, however it ends.
        """
        begin, setup = snapshot_statements(self._dialect) if order == "newest" else (None, None)
        try:
            if setup is not None:
                yield Statement(setup)
            if begin is not None:
                yield Statement(begin)
        except SQLAlchemyError as exc:
            raise self._schema.store_error(Operation.LIST, None, exc) from exc
        try:
            after: tuple[Any, ...] | None = None
            while True:
                self._check_open(Operation.LIST)
                statement = self._statements.list_page(order, after is not None, page_size)
                parameters = {} if after is None else dict(zip(("p_after_id", "p_after_updated"), after, strict=True))
                try:
                    rows = yield Statement(statement, parameters, Result.ROWS)
                except SQLAlchemyError as exc:
                    raise self._schema.store_error(Operation.LIST, None, exc) from exc
                if begin is None:
                    yield RELEASE
                yield Emit(tuple(row.memory_id for row in rows))
                if len(rows) < page_size:
                    break
                after = (rows[-1].memory_id, rows[-1].updated_at)
        except Exception:
            if begin is not None:
                yield ROLLBACK
            raise
        if begin is not None:
            yield ROLLBACK

    def _purge(self, batch_size: int) -> Steps[Command, int]:
        """Delete expired memories in transactions of ``batch_size`` memories; return how many went.

        Each transaction is tried again as a write is (once on a new connection after a lost one, and
        after conflicts); after a lost reply to its ``COMMIT``, its memories are not counted.
        """
        check_batch_size(batch_size)
        yield from self._ready(Operation.PURGE)
        purged = 0
        while True:
            ids = yield from self._retried(
                Operation.PURGE, None, lambda: self._in_transaction(self._purge_batch(batch_size))
            )
            self._cache.forget(*ids)
            purged += len(ids)
            if len(ids) < batch_size:
                return purged

    def _purge_batch(self, batch_size: int) -> Steps[Command, list[str]]:
        statements = self._statements
        ids: list[str] = yield Statement(statements.lock_expired(batch_size), None, Result.SCALARS)
        if ids:
            parameters = {"p_ids": ids}
            yield Batch(
                (Statement(statements.delete_heads, parameters), Statement(statements.delete_messages_of, parameters))
            )
        return ids
