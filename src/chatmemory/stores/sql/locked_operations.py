"""The locked side of a SQL store's operations: writes under the head row's lock, and ``modify``.

Each method is a generator of :mod:`~chatmemory.stores.sql.commands` (see
:mod:`~chatmemory.stores.sql.operations`). A locked write locks the memory's head row (or, when there is
none, reads the server's clock), asks :func:`~chatmemory.stores.sql.plan.plan_locked` what to do and
runs its statements in the same transaction. :meth:`LockedOperations._modify` calls the caller's change
under the same lock (on the cached window when the locked head is at its version, else on the window
read there) and writes it as a diffed turn where it can, so that writers of one memory queue instead
of conflicting. :meth:`LockedOperations._restore_history` puts history entries back under the lock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from chatmemory.core.errors import CorruptedMemoryError, UnsupportedFormatVersionError
from chatmemory.core.history import HistoryEntry, UnrestorableHistoryError, checked_restore
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.recorded_writes import recorded_parts
from chatmemory.stores.base import Operation
from chatmemory.stores.sql import plan
from chatmemory.stores.sql.commands import COMMIT, ROLLBACK, Batch, Command, Result, Statement, Steps
from chatmemory.stores.sql.history_operations import HistoryOperations
from chatmemory.stores.sql.history_restore import RestoreStatements, covered_head, entry_rows, shifted, window_seqs
from chatmemory.stores.sql.locked_writes import cached_window, diffs_under_lock
from chatmemory.stores.sql.plan import CachedSnapshot, WriteRequest
from chatmemory.stores.sql.rendered import Joined, Rendered, render
from chatmemory.stores.sql.writes import WriteLoop

__all__ = ["Change", "LockedOperations"]

_Engine = TypeVar("_Engine")

Change = Callable[[list[ChatMessage]], Iterable[ChatMessage] | None]
"""What :meth:`LockedOperations._modify` is given: the stored messages to the new list, or ``None``."""


class _Abort(Exception):
    """Rolls a locked write's transaction back with an outcome (stray rows found)."""

    def __init__(self, outcome: plan.Corrupted) -> None:
        super().__init__(type(outcome).__name__)
        self.outcome = outcome


class _HeadRow(NamedTuple):
    """A row of the lock statement, as the driver hands it back (its columns in the statement's order)."""

    version: int
    incarnation: int
    next_seq: int
    live: int
    recent_writes: str | None
    max_seq: int | None
    clock: int
    history_live: int | None


def _rendered_lock(lock: Any, engine: Any) -> Rendered:
    """The lock statement rendered once in the driver's SQL (the locked path's first statement, on every turn)."""
    names = tuple(column.name for column in lock.selected_columns)
    if names != _HeadRow._fields:  # pragma: no cover - the statement and this row change together
        raise AssertionError(f"the lock statement's columns {names} are not {_HeadRow._fields}")
    return render(lock, engine.dialect)


class LockedOperations(HistoryOperations[_Engine]):
    """Writes under the head row's lock as command generators (the executors run them)."""

    _rendered_lock_head: Rendered | None = None
    """The lock statement in the driver's SQL, rendered at the store's first locked write."""

    def _write_locked(
        self, request: WriteRequest, cached: CachedSnapshot | None
    ) -> Steps[Command, plan.Written | plan.Conflict | plan.Corrupted]:
        """One attempt of a write under the head row's lock, in a transaction of its own."""
        try:
            return (yield from self._in_transaction(self._locked_write(request, cached)))
        except _Abort as aborted:
            return aborted.outcome

    def _locked_write(
        self, request: WriteRequest, cached: CachedSnapshot | None
    ) -> Steps[Command, plan.Written | plan.Conflict | plan.Corrupted]:
        head = yield from self._lock_head(request.memory_id)
        if plan.window_needed(request, cached, head):
            # Read under the lock, the stored window lets the write change only the rows that differ. It
            # is read whole, every payload decoded (not filled in from a stale snapshot): a row damaged
            # since is then found, and replaced with the others, as an unconditional write promises.
            try:
                current: plan.ReadResult | plan.Corrupted | None = yield from self._locked_window(
                    request.memory_id, head, cached if request.history else None
                )
            except (CorruptedMemoryError, UnsupportedFormatVersionError):
                if request.history:  # what it adds to the history depends on what is stored
                    raise
                current = None  # rows it cannot decode: the write replaces them whole, as it does any rows
            cached = current.state if isinstance(current, plan.ReadResult) else None
        return (yield from self._decide(request, cached, head))

    def _decide(
        self, request: WriteRequest, cached: CachedSnapshot | None, head: plan.LockedHead
    ) -> Steps[Command, plan.Written | plan.Conflict]:
        """Plan the write under the lock and run its statements (unless it landed already or conflicts)."""
        decision = plan.plan_locked(request, cached, head)
        if not isinstance(decision, plan.LockedWrite):
            return decision
        yield from self._apply(request.memory_id, decision)
        return plan.Written(decision.version, decision.state)

    def _lock_head(self, memory_id: str) -> Steps[Command, plan.LockedHead]:
        statements = self._statements
        lock = self._rendered_lock_head
        if lock is None:
            lock = self._rendered_lock_head = _rendered_lock(statements.lock_head, self._engine)
        found = yield Statement(lock.sql, lock.bind({"p_id": memory_id}), Result.FIRST)
        row: Any = None if found is None else _HeadRow._make(found)
        # No head row: only the server's clock is needed, read touching no table (a statement naming another
        # memory's rows would leave the memory's shard on a database distributed by memory_id).
        clock = None if row is not None else (yield Statement(statements.server_clock, None, Result.SCALAR))
        return plan.locked_head(row, clock)

    def _apply(self, memory_id: str, decision: plan.LockedWrite) -> Steps[Command, None]:
        """Run a locked write's statements in the open transaction; stray rows abort it."""
        statements = self._statements
        self._schema.check_payloads(memory_id, (row["payload"] for row in decision.rows))
        if decision.insert_head:
            yield Statement(statements.insert_head, decision.head)
            damage = plan.stray_rows(decision, (yield Statement(statements.delete_all, decision.head)))
            if damage is not None:
                raise _Abort(damage)
        else:
            if decision.delete_all:
                yield Statement(statements.delete_all, decision.head)
            elif decision.deleted_seqs:
                yield Statement(statements.delete_seqs, decision.delete_parameters())
            if decision.flagged_seqs:
                yield Statement(statements.flag_seqs, decision.flag_parameters())
            yield Statement(statements.rewrite_head, decision.head)
        if decision.rows:
            yield Statement(
                statements.insert_history if decision.recorded else statements.insert_messages, decision.rows
            )
        if decision.flagged_new:
            yield Statement(statements.flag_seqs, decision.flag_new_parameters())

    def _locked_window(
        self, memory_id: str, head: plan.LockedHead, cached: CachedSnapshot | None
    ) -> Steps[Command, plan.ReadResult | plan.Corrupted]:
        """The stored window, read under the head row's lock (again without the cache if it was stale)."""
        rows = yield from self._read_locked(memory_id, cached, head)
        current = plan.locked_read(memory_id, head, cached, rows, self._codec)
        if isinstance(current, plan.StaleCache):
            rows = yield from self._read_locked(memory_id, None, head)
            current = plan.locked_read(memory_id, head, None, rows, self._codec)
        if isinstance(current, plan.StaleCache):  # pragma: no cover - every payload was sent
            raise AssertionError("a read without the cache cannot find it stale")
        return current

    def _read_locked(
        self, memory_id: str, cached: CachedSnapshot | None, head: plan.LockedHead
    ) -> Steps[Command, Sequence[Any]]:
        if not (head.present and head.live):
            return []
        rows: Sequence[Any] = yield Statement(
            self._statements.read, plan.read_parameters(memory_id, cached), Result.ROWS
        )
        return rows

    # ------------------------------------------------------------------------------------------- modify

    def _modify(self, memory_id: str, change: Change) -> Steps[Command, int]:
        """Read, change and write ``memory_id`` under its head row's lock; return the version it is at."""
        memory_id = validate_memory_id(memory_id)
        yield from self._ready(Operation.WRITE, memory_id)
        loop = WriteLoop(None, self._retry, self._dialect, Operation.WRITE, memory_id)
        while True:
            outcome: plan.Written | plan.Unchanged | plan.Conflict | plan.Corrupted | None = None
            try:
                with loop.errors():
                    outcome = yield from self._modify_once(memory_id, change)
            except SQLAlchemyError as exc:
                raise self._schema.store_error(Operation.WRITE, memory_id, exc) from exc
            if isinstance(outcome, plan.Corrupted):
                raise outcome.error(memory_id)
            if isinstance(outcome, plan.Unchanged):
                return outcome.version
            if isinstance(outcome, plan.Written):
                self._remember(memory_id, outcome.state)
                return outcome.version
            if isinstance(outcome, plan.Conflict):
                # Two writers creating the memory at once: read it again.
                loop.conflicted()
            yield from self._pause(loop)

    def _modify_once(
        self, memory_id: str, change: Change
    ) -> Steps[Command, plan.Written | plan.Unchanged | plan.Conflict | plan.Corrupted]:
        """One attempt of ``modify``, in a transaction of its own (which its last statement may end itself)."""
        cached = self._cache.get(memory_id)
        yield self._begin_statement
        try:
            outcome, ended = yield from self._modify_locked(memory_id, change, cached)
        except _Abort as aborted:
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
    ) -> Steps[Command, tuple[plan.Written | plan.Unchanged | plan.Conflict | plan.Corrupted, bool]]:
        """Lock, read (unless the cache is the locked head's window), change and write; and whether it committed."""
        head = yield from self._lock_head(memory_id)
        current: plan.ReadResult | plan.Corrupted | None = cached_window(head, cached)
        if current is None:  # the cache does not describe the locked head: read the window under the lock
            current = yield from self._locked_window(memory_id, head, cached)
        if isinstance(current, plan.Corrupted):
            return current, False
        new, also_recorded = recorded_parts(change(list(current.snapshot.messages)))
        if new is None:
            return plan.Unchanged(current.snapshot.version), False
        request = self._request(memory_id, new, current.snapshot.version, also_recorded)
        diff = plan.plan_diff(request, current.state) if diffs_under_lock(head, current.state) else None
        if diff is not None:
            return (yield from self._diff_locked(diff))
        return (yield from self._decide(request, current.state, head)), False

    def _diff_locked(self, diff: plan.DiffWrite) -> Steps[Command, tuple[plan.Written | plan.Conflict, bool]]:
        """A diffed write in the open transaction, under the head row's lock; and whether it ended the transaction.

        The hot path's statements: on PostgreSQL one statement; on MySQL/MariaDB the head update, the
        removal and the insert as one string where the connection runs one, followed by the ``COMMIT``
        (``ROLLBACK`` after a miss); elsewhere those statements in order. The head was found at the diff's
        version under the lock, so its conditional update matches unless the memory expired meanwhile:
        then nothing was changed and the attempt is a conflict (the cache is forgotten: the next one reads).
        """
        memory_id = diff.request.memory_id
        self._schema.check_payloads(memory_id, diff.payloads)
        statements = self._statements
        ended = False
        if statements.has_diff_statement:
            turn = statements.diff_postgresql(*diff.shape)
            matched = (yield Statement(turn, diff.postgresql_parameters(), Result.FIRST)) is not None
        else:
            batch = self._diff_statements(diff)
            joined = None
            if statements.joins_turns and diff.joinable(self._schema.max_allowed_packet):
                rendered = statements.joined_turn(diff.removal, len(diff.payloads), diff.request.recorded)
                if rendered is not None:  # its parts without the BEGIN: the transaction is open
                    whole, _ = rendered.bind(diff.joined_parameters())
                    joined = Statement(Joined.of(rendered.parts).sql, whole)
            counts = yield Batch(tuple(batch), None, joined)
            matched = bool(counts) and counts[0] == 1
            ended = joined is not None  # a joined batch ends with COMMIT, or ROLLBACK after a miss
        if not matched:
            self._cache.forget(memory_id)
        return plan.diff_outcome(diff, matched), ended

    def _diff_statements(self, diff: plan.DiffWrite) -> list[Statement]:
        """A diffed write as statements: the head update (which must match one row), the removal, the insert."""
        statements = self._statements
        bump = statements.fast_bump_head
        batch = [Statement(bump.sql, bump.bind(diff.head_parameters()), expect=1)]
        if diff.removed_seqs:
            removal = statements.removal(diff.removal)
            batch.append(Statement(removal.sql, removal.bind(diff.removal_parameters())))
        if diff.payloads:
            insert = statements.fast_insert_history if diff.request.recorded else statements.fast_insert_messages
            batch.append(Statement(insert.sql, insert.bind_many(diff.rows()), many=True))
        return batch

    # ------------------------------------------------------------------------------------------- restore

    def _restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], window: Sequence[ChatMessage] | None
    ) -> Steps[Command, int]:
        """Add the entries the history of ``memory_id`` lacks (and ``window`` where it has none), in one transaction."""
        memory_id = validate_memory_id(memory_id)
        restored = checked_restore(memory_id, entries)
        messages = None if window is None else checked_messages(window)
        self._require_history()
        encode = self._codec.dumps
        # Encoded before sending: an entry's row is sequence - 1; the window's rows are placed under the lock.
        payloads = {entry.sequence: encode(entry.message, memory_id, entry.sequence - 1) for entry in restored}
        records = None if messages is None else [encode(message, memory_id) for message in messages]
        self._schema.check_payloads(memory_id, [*payloads.values(), *(records or ())])
        yield from self._ready(Operation.WRITE, memory_id)
        statements = RestoreStatements.of(self._tables)

        def attempt() -> Steps[Command, int]:
            body = self._restore_locked(memory_id, restored, payloads, records, messages, statements)
            return (yield from self._in_transaction(body))

        added = yield from self._retried(Operation.WRITE, memory_id, attempt)
        self._cache.forget(memory_id)
        return added

    def _restore_locked(
        self,
        memory_id: str,
        entries: tuple[HistoryEntry, ...],
        payloads: dict[int, bytes],
        records: list[bytes] | None,
        messages: tuple[ChatMessage, ...] | None,
        statements: RestoreStatements,
    ) -> Steps[Command, int]:
        head = yield from self._lock_head(memory_id)
        first_free = entries[-1].sequence if entries else 0  # rows are sequence - 1: those from here are free
        cover = None
        if records is not None and not (head.present and head.live):
            assert messages is not None
            window = window_seqs(list(messages), entries)
            if window is not None:  # the window's rows are restored entries' rows, as a write leaves them
                empty = plan.plan_locked(self._records_request(memory_id, []), None, head)
                assert isinstance(empty, plan.LockedWrite)  # an unconditional write
                past_rows = head.max_seq + 1 if head.max_seq is not None else 0
                created, ranges = covered_head(empty, window, max(first_free, past_rows))
                cover = (ranges, frozenset(window))
                yield from self._apply(memory_id, created)
            else:
                written = plan.plan_locked(self._records_request(memory_id, records), None, head)
                assert isinstance(written, plan.LockedWrite)
                assert messages is not None
                moved = shifted(written, first_free)
                # Each row sealed where it lands (a keyring binds a record to its row's sequence).
                rows = [
                    {**row, "payload": self._codec.dumps(message, memory_id, int(row["seq"]))}
                    for row, message in zip(moved.rows, messages, strict=True)
                ]
                yield from self._apply(memory_id, dataclasses.replace(moved, rows=rows))
        elif not head.present:
            raise UnrestorableHistoryError(
                memory_id, "a SQL history lives beside its memory's head row: restore it with its window"
            )
        present: dict[int, bool] = {}
        if entries:
            parameters = {"p_id": memory_id, "p_seqs": [entry.sequence - 1 for entry in entries]}
            found = yield Statement(statements.present, parameters, Result.ROWS)
            present = {int(row[0]): row[1] is not None for row in found}
        taken = [seq + 1 for seq, is_entry in present.items() if not is_entry]
        if taken:
            raise UnrestorableHistoryError(
                memory_id,
                f"its rows at sequences {sorted(taken)[:5]} hold messages written without history (a window "
                "imported without it); delete the memory and import it again with its history",
            )
        missing = [entry for entry in entries if entry.sequence - 1 not in present]
        if not missing:
            return 0
        if cover is None:
            yield Statement(statements.bump_head, {"p_id": memory_id, "p_next_seq": first_free})
        rows = entry_rows(memory_id, missing, payloads, self._dialect, cover)
        yield Statement(statements.insert_entries, rows)
        return len(missing)
