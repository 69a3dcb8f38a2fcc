"""A SQL store's operations, written once as generators of commands for both executors.

:class:`Operations` holds the store's planner, statements, schema checks, dialect and snapshot cache; each
method (``load``, ``save``, ``modify``, ``delete`` ...) yields :mod:`~chatmemory.stores.sql.commands` and
receives their results (one decision for both executors). A driver failure comes back in at the ``yield``
as a :class:`~chatmemory.stores.sql.outcomes.SQLFailure`, retried (a lost connection once, conflicts and
deadlocks within the retry budget: :class:`~chatmemory.stores.sql.outcomes.WriteLoop`) or reported as the
operation's ``StoreError``. A read is one statement; a diffed turn is one statement on PostgreSQL and
MariaDB, elsewhere one batch that is a transaction of its own; any other write goes under the head row's
lock. Histories, restores and batch reads and creates are in :mod:`~chatmemory.stores.sql.history`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from chatmemory.core.driving import Emit, Sleep, Steps
from chatmemory.core.errors import CorruptedMemoryError, HistoryNotEnabledError, UnsupportedFormatVersionError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.recorded_writes import recorded_parts
from chatmemory.core.store import Snapshot, validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import Resealed, require_keyring, reseal_plan
from chatmemory.stores.base import Operation, RetryPolicy, SnapshotCache
from chatmemory.stores.sql import history, outcomes, plan
from chatmemory.stores.sql.commands import CHECK_SCHEMA, COMMIT, RELEASE, ROLLBACK, Batch, Command, Result, Statement
from chatmemory.stores.sql.outcomes import CachedSnapshot, Failure, ReadAttempts, SQLFailure, WriteLoop, times_of
from chatmemory.stores.sql.plan import Planner, WriteRequest, check_batch_size

if TYPE_CHECKING:
    from chatmemory.stores.sql.schema import SchemaAdmin
    from chatmemory.stores.sql.statements import Statements

__all__ = ["Change", "Operations"]

_T = TypeVar("_T")

Change = Callable[[list[ChatMessage]], Iterable[ChatMessage] | None]
"""What :meth:`Operations.modify` is given: the stored messages to the new list, or ``None``."""

_Outcome: TypeAlias = outcomes.Written | outcomes.Conflict | outcomes.Corrupted


class Operations:
    """Every operation of a SQL store as a command generator (the executors run them).

    Built with the store's planner, statements (and their dialect object), schema checks (whether the
    schema was checked; MySQL's ``max_allowed_packet``), snapshot cache, retry policy, the check that
    refuses a closed store, and its ``repr`` (for errors naming it).
    """

    def __init__(
        self,
        planner: Planner,
        statements: Statements,
        schema: SchemaAdmin,
        cache: SnapshotCache[CachedSnapshot],
        retry: RetryPolicy,
        check_open: Callable[..., None],
        name: Callable[[], str],
    ) -> None:
        self.planner = planner
        self.statements = statements
        self.tables = statements.tables
        self.schema = schema
        self.dialect = statements.family
        self.cache = cache
        self.retry = retry
        self.check_open = check_open
        self.name = name
        self.codec = planner.codec
        self.begin = Statement(self.dialect.begin)
        """The ``BEGIN`` of a write transaction (``BEGIN IMMEDIATE`` on SQLite)."""

    # ------------------------------------------------------------------------------------------ helpers

    def ready(self, operation: str, memory_id: str | None = None) -> Steps[Command, None]:
        """Refuse a closed store; check the schema on the store's first operation."""
        self.check_open(operation, memory_id)
        if not self.schema.checked:
            yield CHECK_SCHEMA

    def in_transaction(self, body: Steps[Command, _T]) -> Steps[Command, _T]:
        """Run ``body`` between ``BEGIN`` and ``COMMIT``; ``ROLLBACK`` if it raises (not if they fail)."""
        yield self.begin
        try:
            result = yield from body
        except Exception:
            yield ROLLBACK
            raise
        yield COMMIT
        return result

    def retried(
        self, operation: str, memory_id: str | None, attempt: Callable[[], Steps[Command, _T]]
    ) -> Steps[Command, _T]:
        """Run ``attempt()`` (a delete, a trim, a purge's batch) until no retryable failure cuts it short.

        Any other failure is raised as a ``StoreError`` of ``operation``.
        """
        loop = WriteLoop(None, self.retry, operation, memory_id)
        while True:
            try:
                return (yield from attempt())
            except SQLFailure as failure:
                if not loop.retryable(failure):
                    raise failure.error(operation, memory_id) from failure.__cause__
            yield from self.pause(loop)

    def pause(self, loop: WriteLoop) -> Steps[Command, None]:
        """Between two attempts: hand the connection back, then back off as ``loop`` says."""
        yield RELEASE
        delay = loop.delay()
        if delay:
            yield Sleep(delay)

    def remember(self, memory_id: str, state: CachedSnapshot | None) -> None:
        """Cache what a write left (or forget the memory when the write does not say)."""
        if state is None:
            self.cache.forget(memory_id)
        else:
            self.cache.put(memory_id, state)

    def require_history(self) -> None:
        """Refuse a history operation of a store without history."""
        if not self.planner.history:
            raise HistoryNotEnabledError(self.name())

    def check_payloads(self, memory_id: str, payloads: Iterable[bytes]) -> None:
        """Refuse, before sending, a message larger than MySQL's ``max_allowed_packet`` (None elsewhere)."""
        if self.schema.max_allowed_packet is not None:
            self.schema.check_payloads(memory_id, payloads)

    # -------------------------------------------------------------------------------------------- reads

    def load(self, memory_id: str) -> Steps[Command, Snapshot]:
        """The messages of ``memory_id`` and their version: one query (again without the cache if stale)."""
        memory_id = validate_memory_id(memory_id)
        self.check_open(Operation.READ, memory_id)  # ready, inline on the hot path
        if not self.schema.checked:
            yield CHECK_SCHEMA
        read = self.statements.fast_read
        for attempt in ReadAttempts():
            cached = self.cache.get(memory_id) if attempt.use_cache else None
            try:
                parameters = read.bind(plan.read_parameters(memory_id, cached))
                rows = yield Statement(read.sql, parameters, Result.RECORDS, Operation.READ, memory_id)
                result = outcomes.decode_read(memory_id, rows, cached, self.codec)
                if isinstance(result, outcomes.Headless):
                    strays = self.statements.fast_strays
                    parameters = strays.bind({"p_id": memory_id})
                    found = yield Statement(strays.sql, parameters, Result.RECORDS, Operation.READ, memory_id)
                    result = outcomes.absent_read(found)
            except SQLFailure as failure:
                if not attempt.lost(failure):
                    raise failure.error() from failure.__cause__
                yield RELEASE  # read again, on a new connection
                continue
            if isinstance(result, outcomes.Corrupted):
                self.cache.forget(memory_id)
                raise result.error(memory_id)
            if isinstance(result, outcomes.StaleCache):
                self.cache.forget(memory_id)
                attempt.stale()
                continue
            self.remember(memory_id, result.state)
            return result.snapshot
        raise AssertionError("unreachable: the last read attempt raises")

    def read_raw(self, memory_id: str) -> Steps[Command, list[bytes]]:
        """The stored records of ``memory_id``, undecoded (those of rows without a head row too)."""
        memory_id = validate_memory_id(memory_id)
        yield from self.ready(Operation.READ, memory_id)
        try:
            parameters = plan.read_parameters(memory_id, None)
            rows = yield Statement(self.statements.read, parameters, Result.ROWS, Operation.READ, memory_id)
            records = outcomes.raw_records(rows)
            if isinstance(records, outcomes.Headless):  # what an operator inspects: the rows without a head
                parameters = {"p_id": memory_id}
                strays = yield Statement(self.statements.strays, parameters, Result.ROWS, Operation.READ, memory_id)
                records = outcomes.stray_records(strays)
        except SQLFailure as failure:
            raise failure.error() from failure.__cause__
        return records

    def reseal(self, memory_id: str) -> Steps[Command, Resealed]:
        """Re-seal every row of ``memory_id`` not under the primary key, each only if it still holds what was read.

        Rows are never rewritten in place (a writer only adds or removes rows): versions and caches stay valid.
        """
        memory_id = validate_memory_id(memory_id)
        codec = require_keyring(self.codec, self.name())
        yield from self.ready(Operation.WRITE, memory_id)
        statements = self.statements
        try:
            rows = yield Statement(statements.payloads_of(memory_id), {}, Result.ROWS, Operation.WRITE, memory_id)
            records = ((int(row.seq), bytes(row.payload)) for row in rows)
            changes, current = reseal_plan(codec, memory_id, records, positioned=True)
            done = 0
            for seq, old, new in changes:
                reseal = statements.reseal_row(memory_id, seq, old, new)
                done += yield Statement(reseal, {}, Result.ROWCOUNT, Operation.WRITE, memory_id)
        except SQLFailure as failure:
            raise failure.error() from failure.__cause__
        return Resealed(done, current, len(changes) - done)

    def memory_times(self, memory_id: str) -> Steps[Command, MemoryTimes | None]:
        """When ``memory_id`` was last written and when it expires; ``None`` if absent."""
        memory_id = validate_memory_id(memory_id)
        yield from self.ready(Operation.READ, memory_id)
        try:
            row = yield Statement(self.statements.times, {"p_id": memory_id}, Result.FIRST, Operation.READ, memory_id)
        except SQLFailure as failure:
            raise failure.error() from failure.__cause__
        return times_of(row)

    # ------------------------------------------------------------------------------------------- writes

    # The write's arguments are checked when its operation is made, before any command is sent.

    def save(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Iterable[ChatMessage] = (),
    ) -> Steps[Command, int]:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        return self.write(
            self.planner.request(validate_memory_id(memory_id), messages, expected_version, also_recorded)
        )

    def update(self, memory_id: str, messages: Iterable[ChatMessage]) -> Steps[Command, int]:
        """Replace the stored messages of ``memory_id``."""
        return self.write(self.planner.request(validate_memory_id(memory_id), messages, None))

    def write_raw(self, memory_id: str, records: Iterable[bytes]) -> Steps[Command, int]:
        """Store records as they are."""
        return self.write(self.planner.records_request(validate_memory_id(memory_id), records))

    def write(self, request: WriteRequest) -> Steps[Command, int]:
        """Write ``request``: a diff against the cached snapshot if it has one, else under the lock."""
        self.check_open(Operation.WRITE, request.memory_id)  # ready, inline on the hot path
        if not self.schema.checked:
            yield CHECK_SCHEMA
        loop = WriteLoop(request, self.retry)
        while True:
            outcome: _Outcome | None = None
            cached = self.cache.get(request.memory_id)
            diff = plan.plan_diff(request, cached) if loop.may_diff else None
            try:
                if diff is not None:
                    outcome = yield from self.write_diff(diff)
                else:
                    outcome = yield from self.write_locked(request, cached)
            except SQLFailure as failure:
                if not loop.retryable(failure):
                    raise failure.error(Operation.WRITE, request.memory_id) from failure.__cause__
            if outcome is not None:
                written = loop.settle(outcome)
                if written is not None:
                    self.remember(request.memory_id, written.state)
                    return written.version
            yield from self.pause(loop)

    def write_diff(self, diff: plan.DiffWrite) -> Steps[Command, outcomes.Written | outcomes.Conflict]:
        """A diffed write: one statement on PostgreSQL and MariaDB, else one batch (one string on MySQL)."""
        memory_id = diff.request.memory_id
        self.check_payloads(memory_id, diff.payloads)
        statements = self.statements
        if self.dialect.has_diff_statement:
            turn = statements.diff_postgresql(*diff.shape)
            row = yield Statement(turn, diff.postgresql_parameters(), Result.FIRST, Operation.WRITE, memory_id)
            return plan.diff_outcome(diff, row is not None)
        joinable = self.dialect.joins_turns and diff.joinable(self.schema.max_allowed_packet)
        if joinable and statements.blocks_turns:
            block = statements.block_turn(diff.removal, len(diff.payloads), diff.request.recorded)
            if block is not None:  # MariaDB: one compound statement, a transaction of its own
                try:
                    parameters = block.bind(diff.joined_parameters())[0]
                    yield Statement(block.sql, parameters, Result.ROWCOUNT, Operation.WRITE, memory_id)
                except SQLFailure as failure:
                    if failure.kind is not Failure.MISSED_BLOCK:
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
            batch = self.diff_statements(diff)
            joined = None
        # One transaction; a head update that matched no row (a stale snapshot) rolls it back.
        counts = yield Batch(tuple(batch), self.begin, joined, Operation.WRITE, memory_id)
        return plan.diff_outcome(diff, counts[0] == 1)

    def diff_statements(self, diff: plan.DiffWrite) -> list[Statement]:
        """A diffed write as statements: the head update (which must match one row), the removal, the insert."""
        statements = self.statements
        bump = statements.fast_bump_head
        batch = [Statement(bump.sql, bump.bind(diff.head_parameters()), expect=1)]
        if diff.removed_seqs:
            removal = statements.removal(diff.removal)
            batch.append(Statement(removal.sql, removal.bind(diff.removal_parameters())))
        if diff.payloads:
            insert = statements.fast_insert_history if diff.request.recorded else statements.fast_insert_messages
            batch.append(Statement(insert.sql, insert.bind_many(diff.rows()), many=True))
        return batch

    def delete(self, memory_id: str) -> Steps[Command, None]:
        """Remove ``memory_id`` and its messages in one transaction (tried again on conflicts)."""
        memory_id = validate_memory_id(memory_id)
        yield from self.ready(Operation.DELETE, memory_id)
        statements, key = self.statements, {"p_id": memory_id}
        # The head row first: writers lock it before any message row, so this order cannot deadlock.
        deletes = (Statement(statements.delete_head, key), Statement(statements.delete_all, key))
        batch = Batch(deletes, self.begin, None, Operation.DELETE, memory_id)

        def attempt() -> Steps[Command, Any]:
            return (yield batch)

        yield from self.retried(Operation.DELETE, memory_id, attempt)
        self.cache.forget(memory_id)

    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> Steps[Command, None]:
        """One statement on the head row (an absent or expired memory is left as it is)."""
        memory_id = validate_memory_id(memory_id)
        parameters = {"p_id": memory_id, "p_expires_at": self.dialect.expiry(when)}
        yield from self.ready(Operation.WRITE, memory_id)
        try:
            yield Statement(self.statements.set_expiry, parameters, Result.ROWCOUNT, Operation.WRITE, memory_id)
        except SQLFailure as failure:
            raise failure.error() from failure.__cause__
        self.cache.forget(memory_id)

    # --------------------------------------------------------------------------------- under the lock

    def write_locked(self, request: WriteRequest, cached: CachedSnapshot | None) -> Steps[Command, _Outcome]:
        """One attempt of a write under the head row's lock, in a transaction of its own."""
        try:
            return (yield from self.in_transaction(self._locked_write(request, cached)))
        except outcomes.Abort as aborted:
            return aborted.outcome

    def _locked_write(self, request: WriteRequest, cached: CachedSnapshot | None) -> Steps[Command, _Outcome]:
        head = yield from self.lock_head(request.memory_id)
        if plan.window_needed(request, cached, head):
            # Read under the lock, the stored window lets the write change only the rows that differ. It
            # is read whole, every payload decoded (not filled in from a stale snapshot): a row damaged
            # since is then found, and replaced with the others, as an unconditional write promises.
            try:
                current: outcomes.ReadResult | outcomes.Corrupted | None = yield from self.locked_window(
                    request.memory_id, head, cached if request.history else None
                )
            except (CorruptedMemoryError, UnsupportedFormatVersionError):
                if request.history:  # what it adds to the history depends on what is stored
                    raise
                current = None  # rows it cannot decode: the write replaces them whole, as it does any rows
            cached = current.state if isinstance(current, outcomes.ReadResult) else None
        return (yield from self.decide(request, cached, head))

    def decide(
        self, request: WriteRequest, cached: CachedSnapshot | None, head: outcomes.LockedHead
    ) -> Steps[Command, outcomes.Written | outcomes.Conflict]:
        """Plan the write under the lock and run its statements (unless it landed already or conflicts)."""
        decision = plan.plan_locked(request, cached, head)
        if not isinstance(decision, plan.LockedWrite):
            return decision
        yield from self.apply(request.memory_id, decision)
        return outcomes.Written(decision.version, decision.state)

    def lock_head(self, memory_id: str) -> Steps[Command, outcomes.LockedHead]:
        """Lock the head row of ``memory_id`` (with the server's clock), or read the clock when there is none."""
        statements = self.statements
        lock = statements.fast_lock_head
        found = yield Statement(lock.sql, lock.bind({"p_id": memory_id}), Result.FIRST)
        row = None if found is None else outcomes.HeadRow._make(found)
        # No head row: only the server's clock is needed, read touching no table (a statement naming another
        # memory's rows would leave the memory's shard on a database distributed by memory_id).
        clock = None if row is not None else (yield Statement(statements.server_clock, None, Result.SCALAR))
        return outcomes.locked_head(row, clock)

    def apply(self, memory_id: str, decision: plan.LockedWrite) -> Steps[Command, None]:
        """Run a locked write's statements in the open transaction; stray rows abort it."""
        statements = self.statements
        self.check_payloads(memory_id, (row["payload"] for row in decision.rows))
        if decision.insert_head:
            yield Statement(statements.insert_head, decision.head)
            damage = outcomes.stray_rows(decision, (yield Statement(statements.delete_all, decision.head)))
            if damage is not None:
                raise outcomes.Abort(damage)
        else:
            if decision.delete_all:
                yield Statement(statements.delete_all, decision.head)
            elif decision.deleted_seqs:
                yield Statement(statements.delete_seqs, decision.seqs_parameters(decision.deleted_seqs))
            if decision.flagged_seqs:
                yield Statement(statements.flag_seqs, decision.seqs_parameters(decision.flagged_seqs))
            yield Statement(statements.rewrite_head, decision.head)
        if decision.rows:
            yield Statement(
                statements.insert_history if decision.recorded else statements.insert_messages, decision.rows
            )
        if decision.flagged_new:
            yield Statement(statements.flag_seqs, decision.seqs_parameters(decision.flagged_new))

    def locked_window(
        self, memory_id: str, head: outcomes.LockedHead, cached: CachedSnapshot | None
    ) -> Steps[Command, outcomes.ReadResult | outcomes.Corrupted]:
        """The stored window, read under the head row's lock (again without the cache if it was stale)."""
        rows = yield from self._read_locked(memory_id, cached, head)
        current = outcomes.locked_read(memory_id, head, cached, rows, self.codec)
        if isinstance(current, outcomes.StaleCache):
            rows = yield from self._read_locked(memory_id, None, head)
            current = outcomes.locked_read(memory_id, head, None, rows, self.codec)
        if isinstance(current, outcomes.StaleCache):  # pragma: no cover - every payload was sent
            raise AssertionError("a read without the cache cannot find it stale")
        return current

    def _read_locked(
        self, memory_id: str, cached: CachedSnapshot | None, head: outcomes.LockedHead
    ) -> Steps[Command, Sequence[Any]]:
        if not (head.present and head.live):
            return []
        rows: Sequence[Any] = yield Statement(
            self.statements.read, plan.read_parameters(memory_id, cached), Result.ROWS
        )
        return rows

    # ------------------------------------------------------------------------------------------- modify

    def modify(self, memory_id: str, change: Change) -> Steps[Command, int]:
        """Read, change and write ``memory_id`` under its head row's lock; return the version it is at."""
        memory_id = validate_memory_id(memory_id)
        yield from self.ready(Operation.WRITE, memory_id)
        loop = WriteLoop(None, self.retry, Operation.WRITE, memory_id)
        while True:
            outcome: outcomes.Written | outcomes.Unchanged | outcomes.Conflict | outcomes.Corrupted | None = None
            try:
                outcome = yield from self._modify_once(memory_id, change)
            except SQLFailure as failure:
                if not loop.retryable(failure):
                    raise failure.error(Operation.WRITE, memory_id) from failure.__cause__
            if isinstance(outcome, outcomes.Corrupted):
                raise outcome.error(memory_id)
            if isinstance(outcome, outcomes.Unchanged):
                return outcome.version
            if isinstance(outcome, outcomes.Written):
                self.remember(memory_id, outcome.state)
                return outcome.version
            if isinstance(outcome, outcomes.Conflict):
                # Two writers creating the memory at once: read it again.
                loop.conflicted()
            yield from self.pause(loop)

    def _modify_once(
        self, memory_id: str, change: Change
    ) -> Steps[Command, outcomes.Written | outcomes.Unchanged | outcomes.Conflict | outcomes.Corrupted]:
        """One attempt of ``modify``, in a transaction of its own (which its last statement may end itself)."""
        cached = self.cache.get(memory_id)
        yield self.begin
        try:
            outcome, ended = yield from self._modify_locked(memory_id, change, cached)
        except outcomes.Abort as aborted:
            yield ROLLBACK
            return aborted.outcome
        except Exception:
            yield ROLLBACK
            raise
        if not ended:
            yield COMMIT
        return outcome

    def _modify_locked(
        self, memory_id: str, change: Change, cached: CachedSnapshot | None
    ) -> Steps[Command, tuple[outcomes.Written | outcomes.Unchanged | outcomes.Conflict | outcomes.Corrupted, bool]]:
        """Lock, read (unless the cache is the locked head's window), change and write; and whether it committed."""
        head = yield from self.lock_head(memory_id)
        current: outcomes.ReadResult | outcomes.Corrupted | None = outcomes.cached_window(head, cached)
        if current is None:  # the cache does not describe the locked head: read the window under the lock
            current = yield from self.locked_window(memory_id, head, cached)
        if isinstance(current, outcomes.Corrupted):
            return current, False
        new, also_recorded = recorded_parts(change(list(current.snapshot.messages)))
        if new is None:
            return outcomes.Unchanged(current.snapshot.version), False
        request = self.planner.request(memory_id, new, current.snapshot.version, also_recorded)
        diff = plan.plan_diff(request, current.state) if plan.diffs_under_lock(head, current.state) else None
        if diff is not None:
            return (yield from self._diff_locked(diff))
        return (yield from self.decide(request, current.state, head)), False

    def _diff_locked(self, diff: plan.DiffWrite) -> Steps[Command, tuple[outcomes.Written | outcomes.Conflict, bool]]:
        """A diffed write in the open transaction, under the lock; and whether it ended it (a joined string does).

        The head is at the diff's version, so its update matches unless the memory expired meanwhile: then
        nothing changed and the attempt is a conflict (the cache is forgotten: the next one reads).
        """
        memory_id = diff.request.memory_id
        self.check_payloads(memory_id, diff.payloads)
        statements = self.statements
        ended = False
        if self.dialect.has_diff_statement:
            turn = statements.diff_postgresql(*diff.shape)
            matched = (
                yield Statement(turn, diff.postgresql_parameters(), Result.FIRST, Operation.WRITE, memory_id)
            ) is not None
        else:
            batch = self.diff_statements(diff)
            joined = None
            if self.dialect.joins_turns and diff.joinable(self.schema.max_allowed_packet):
                rendered = statements.joined_turn(diff.removal, len(diff.payloads), diff.request.recorded)
                if rendered is not None:  # its parts without the BEGIN: the transaction is open
                    whole, _ = rendered.bind(diff.joined_parameters())
                    joined = Statement(statements.joined_parts(rendered).sql, whole)
            counts = yield Batch(tuple(batch), None, joined, Operation.WRITE, memory_id)
            matched = bool(counts) and counts[0] == 1
            ended = joined is not None  # a joined batch ends with COMMIT, or ROLLBACK after a miss
        if not matched:
            self.cache.forget(memory_id)
        return plan.diff_outcome(diff, matched), ended

    # --------------------------------------------------------------------------------- listing and TTL

    def pages(self, order: str, page_size: int) -> Steps[Command, None]:
        """Emit the live ids page by page (keyset pagination); newest first, all pages in one snapshot.

        By id each page is read on a connection of its own; newest first one holds the snapshot to the end.
        """
        begin, setup = self.dialect.snapshot if order == "newest" else (None, None)
        try:
            if setup is not None:
                yield Statement(setup, None, Result.ROWCOUNT, Operation.LIST)
            if begin is not None:
                yield Statement(begin, None, Result.ROWCOUNT, Operation.LIST)
        except SQLFailure as failure:
            raise failure.error() from failure.__cause__
        try:
            after: tuple[Any, ...] | None = None
            while True:
                self.check_open(Operation.LIST)
                statement = self.statements.list_page(order, after is not None, page_size)
                parameters = {} if after is None else dict(zip(("p_after_id", "p_after_updated"), after, strict=True))
                try:
                    rows = yield Statement(statement, parameters, Result.ROWS, Operation.LIST)
                except SQLFailure as failure:
                    raise failure.error() from failure.__cause__
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

    def purge(self, batch_size: int) -> Steps[Command, int]:
        """Delete expired memories in transactions of ``batch_size`` (each retried as a write); return how many."""
        check_batch_size(batch_size)
        yield from self.ready(Operation.PURGE)
        purged = 0
        while True:
            ids = yield from self.retried(
                Operation.PURGE, None, lambda: self.in_transaction(self._purge_batch(batch_size))
            )
            self.cache.forget(*ids)
            purged += len(ids)
            if len(ids) < batch_size:
                return purged

    def _purge_batch(self, batch_size: int) -> Steps[Command, list[str]]:
        statements = self.statements
        ids: list[str] = yield Statement(statements.lock_expired(batch_size), None, Result.SCALARS, Operation.PURGE)
        if ids:
            parameters = {"p_ids": ids}
            batch = (
                Statement(statements.delete_heads, parameters),
                Statement(statements.delete_messages_of, parameters),
            )
            yield Batch(batch, None, None, Operation.PURGE)
        return ids

    # ------------------------------------------------------------------------ histories and batches

    history_page = history.history_page
    trim = history.trim
    restore_history = history.restore_history
    read_batch = history.read_batch
    create_batch = history.create_batch
