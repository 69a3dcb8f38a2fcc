"""A MongoDB store's operations, written once as generators of commands for both executors.

:class:`MongoOperations` holds the planner, the snapshot cache and the server's clock; each method yields
:class:`~chatmemory.stores.mongodb.commands.Command` values (or a ``Sleep``) and receives their results.
The executors only send them: a driver failure comes back in at the ``yield`` as the executor's
:class:`~chatmemory.stores.mongodb.outcomes.CommandFailed`, a ``StoreError``, so an operation that does
nothing about it lets it go. What each write sends is the planner's; this module adds the order of the
calls, the cache and the retries. ``modify`` is three of them (:meth:`MongoOperations.take_lease`,
:meth:`~MongoOperations.change_locked`, :meth:`~MongoOperations.give_lease_back`) run in the writers' turn.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from chatmemory import telemetry
from chatmemory.core.driving import Sleep, Steps
from chatmemory.core.errors import ConcurrentUpdateError, HistoryNotEnabledError, SerializationError, StoreError
from chatmemory.core.history import HistoryEntry, HistoryPage, checked_restore, history_query, trim_cutoff
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.recorded_writes import recorded_parts
from chatmemory.core.store import Change, Snapshot, validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import Resealed, require_keyring, reseal_plan
from chatmemory.stored_memories import NewMemory, StoredMemory
from chatmemory.stores.base import Operation, RetryPolicy, SnapshotCache
from chatmemory.stores.mongodb import history as hist
from chatmemory.stores.mongodb import layout
from chatmemory.stores.mongodb.commands import Result, Step, Target, call
from chatmemory.stores.mongodb.layout import Document, HistoryConfig, HistoryState, MemoryState, Record
from chatmemory.stores.mongodb.outcomes import (
    INDEX_CONFLICT_CODES,
    BatchCreate,
    CommandFailed,
    Conflict,
    Resend,
    Verify,
    WritePlan,
    Written,
    batch_asked,
    batch_left,
    batch_versions,
    equivalent_expiry_index,
    memory_times_of,
    outcome_of,
    resend_error,
    server_time_of,
    stored_memory,
    verified_outcome,
)
from chatmemory.stores.mongodb.plan import MongoPlanner, ServerClock, expired

__all__ = ["MongoOperations"]

_WINDOW, _HISTORY = Target.WINDOW, Target.HISTORY
_READ, _WRITE = Operation.READ, Operation.WRITE


class MongoOperations:
    """Every operation of a MongoDB store as a command generator (the executors run them).

    Args:
        planner: what the store sends.
        retry: how long a write whose reply was lost is resent.
        cache: the memories' last states.
        check_open: raises the store's error once it is closed (called as each operation starts).
        label: the store's ``repr``, named in errors.
    """

    def __init__(
        self,
        planner: MongoPlanner,
        retry: RetryPolicy,
        cache: SnapshotCache[MemoryState],
        check_open: Callable[[str, str | None], None],
        label: str,
    ) -> None:
        self.planner = planner
        self.history = planner.history
        self.cache = cache
        self.clock = ServerClock()
        self._retry = retry
        self._check_open = check_open
        self._label = label
        self.indexed = planner.ttl is None
        """Whether the TTL index of the memories is known to be there (none is needed without a ttl)."""
        self.expiry_index_checked = False
        """Whether ``expire_at`` made sure of the TTL index (it does so once per store)."""
        self._history_indexed = self.history is None

    def _require_history(self) -> HistoryConfig:
        if self.history is None:
            raise HistoryNotEnabledError(self._label)
        return self.history

    # -------------------------------------------------------------------------------------- indexes

    def ensure_expiry_index(self) -> Steps[Step, None]:
        """Create the TTL index on ``expires_at`` unless it is known to be there."""
        if self.indexed:
            return
        try:
            yield layout.CREATE_EXPIRY_INDEX
        except CommandFailed as exc:
            detail = exc.detail
            if exc.code in INDEX_CONFLICT_CODES:
                try:
                    if equivalent_expiry_index((yield layout.LIST_INDEXES)):
                        self.indexed = True
                        return
                except CommandFailed:
                    pass
                detail = self.planner.expiry_index_conflict()
            raise exc.again(Operation.SCHEMA, None, f"creating the TTL index: {detail}") from exc.__cause__
        self.indexed = True

    def _ensure_history_index(self) -> Steps[Step, None]:
        if self._history_indexed or self.history is None:
            return
        try:
            for command in hist.index_commands(self.history):  # noqa: UP028 - a list takes no send()
                yield command
        except CommandFailed as exc:
            raise exc.again(Operation.SCHEMA, None, f"creating the history index: {exc.detail}") from exc.__cause__
        self._history_indexed = True

    # ------------------------------------------------------------------------------------------ sends

    def _find(self, memory_id: str) -> Steps[Step, Document | None]:
        server_now = self.clock.now()
        # No projection leaves the staged history groups out: one costs a server more than their bytes.
        query = self.planner.read_filter(memory_id, server_now is not None)
        document = yield call(_READ, memory_id, _WINDOW, "find_one", query)
        if document is not None and server_now is not None and expired(document, server_now, self.planner.window_field):
            return None
        return document  # type: ignore[no-any-return]

    def _insert(
        self, operation: str, memory_id: str | None, target: Target, documents: list[Document]
    ) -> Steps[Step, list[int]]:
        """Insert ``documents`` unordered (none: nothing sent); those refused as duplicates (else it raises)."""
        if not documents:
            return []
        try:
            yield call(operation, memory_id, target, "insert_many", documents, ordered=False, result=Result.NOTHING)
        except CommandFailed as exc:
            if exc.duplicates is None:
                raise
            return exc.duplicates
        return []

    def _execute(self, plan: WritePlan) -> Steps[Step, Written | Conflict]:
        if not self.indexed:
            yield from self.ensure_expiry_index()
        if not self._history_indexed:
            yield from self._ensure_history_index()
        # A task cancelled while the write is in flight keeps the cached state it started from; if the write
        # landed, that state is stale, and the version and incarnation in every later write's filter make
        # such a write a conflict, never a diff against the wrong array.
        attempts = self._retry.start()
        resent = False
        while True:
            sent, error = self.clock.local(), None
            try:
                reply = plan.reply((yield plan.command()))
            except CommandFailed as exc:
                failed = exc.reply()  # a failure the plan can interpret is its reply
                if failed is None:
                    raise
                reply, error = failed, exc
            received = self.clock.local()
            document = reply.document
            outcome = outcome_of(plan, reply, resent=resent)
            if isinstance(outcome, Verify):
                document = yield plan.verify()
                outcome = verified_outcome(plan, document)
            if not isinstance(outcome, Resend):
                break
            resent = True
            delay = attempts.backoff()
            if delay is None:
                self.cache.forget(plan.memory_id)
                raise resend_error(plan.memory_id, attempts.count, error)
            yield Sleep(delay)
        state = outcome.state if isinstance(outcome, Written) else None
        if isinstance(outcome, Written) and plan.keeps_history:
            state = yield from self._record(plan, outcome, document)
        if isinstance(outcome, Written) and state is not None:
            self.clock.observe(sent, received, outcome.server_time)
            self.cache.put(plan.memory_id, state)
        else:
            self.cache.forget(plan.memory_id)
        return outcome

    # -------------------------------------------------------------------------------------------- read

    def load_state(self, memory_id: str) -> Steps[Step, MemoryState | None]:
        """Read ``memory_id`` into the cache: its state, or ``None`` when it is absent."""
        document = yield from self._find(memory_id)
        if document is None:
            self.cache.forget(memory_id)
            return None
        previous = self.cache.get(memory_id)
        try:
            state = layout.decode_document(memory_id, document, previous, self.planner.codec)
            if self.history is not None:
                state = hist.with_history(state, document, previous)
        except Exception:
            self.cache.forget(memory_id)
            raise
        self.cache.put(memory_id, state)
        return state

    def load(self, memory_id: str) -> Steps[Step, Snapshot]:
        """``load``: the messages and their version (one ``find_one``)."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(_READ, memory_id)
        state = yield from self.load_state(memory_id)
        return Snapshot([], 0) if state is None else Snapshot(state.layout.messages(), state.version)

    def read_raw(self, memory_id: str) -> Steps[Step, list[bytes]]:
        """``read_raw``: the stored records in window order, undecoded."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(_READ, memory_id)
        document = yield from self._find(memory_id)
        return [] if document is None else layout.raw_records(memory_id, document)

    def reseal(self, memory_id: str) -> Steps[Step, Resealed]:
        """Re-seal every record of ``memory_id`` not under the primary key: window, staged and copied history.

        Each record is replaced only where it still holds what was read (a field path of the window
        document, or a history entry), so versions and cached states stay valid beside live writers.
        """
        memory_id = validate_memory_id(memory_id)
        codec = require_keyring(self.planner.codec, self._label)
        self._check_open(_WRITE, memory_id)
        document = yield call(_WRITE, memory_id, _WINDOW, "find_one", {"_id": memory_id})
        fields = [] if document is None else list(layout.record_fields(document))
        window, current = reseal_plan(codec, memory_id, fields)
        entries = [] if self.history is None else (yield hist.records_read(memory_id))
        history, current_entries = reseal_plan(
            codec, memory_id, ((entry["_id"], entry.get("r")) for entry in entries if "r" in entry)
        )
        done = 0
        for command in hist.reseal_commands(memory_id, window, history):
            done += yield command
        return Resealed(done, current + current_entries, len(window) + len(history) - done)

    def memory_times(self, memory_id: str) -> Steps[Step, MemoryTimes | None]:
        """``memory_times``: when the memory was last written and when it expires."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(_READ, memory_id)
        field = self.planner.window_field
        query = self.planner.read_filter(memory_id)
        document = yield call(_READ, memory_id, _WINDOW, "find_one", query, {"written_at": 1, field: 1})
        return memory_times_of(document, field)

    def read_batch(self, memory_ids: Sequence[str]) -> Steps[Step, list[StoredMemory | None]]:
        """Read ``memory_ids`` in one ``find``: a :class:`StoredMemory` per id, ``None`` for an absent one.

        A document this store cannot read as a memory is reported with its damage, never skipped.
        """
        self._check_open(_READ, None)
        field = self.planner.window_field
        try:
            ids = [validate_memory_id(memory_id) for memory_id in memory_ids]
            documents = yield call(_READ, None, _WINDOW, "find", self.planner.live_filter(ids), result=Result.LIST)
        except CommandFailed as exc:
            raise exc.again(_READ, None, f"reading {len(memory_ids)} memories: {exc.detail}") from exc.__cause__
        found = {document.get("_id"): document for document in documents}
        return [
            None if (document := found.get(memory_id)) is None else stored_memory(memory_id, document, field)
            for memory_id in ids
        ]

    # ------------------------------------------------------------------------------------------- write

    def create_batch(self, memories: Sequence[NewMemory]) -> Steps[Step, BatchCreate]:
        """Create the absent ``memories`` in one unordered ``insert_many`` of the documents ``save`` would make.

        An id that is there already, or a second copy of an id in the batch, is refused on the unique
        ``_id``: ``None``. Those ids are then read once: one that is not live (expired, which ``save`` at
        version 0 creates again) is left to the store's ``save`` (:attr:`BatchCreate.one_by_one`).
        """
        expiring = any(memory.sets_expiry and memory.expires_at is not None for memory in memories)
        if expiring and not self.expiry_index_checked:
            self.indexed = False  # a store without a ttl makes its TTL index on first need, as expire_at does
            self.expiry_index_checked = True
        if not self.indexed:
            yield from self.ensure_expiry_index()
        try:
            done = yield from self._create_batch(memories)
        except CommandFailed as exc:
            detail = f"creating {len(memories)} memories: {exc.detail}"
            raise exc.again(_WRITE, None, detail) from exc.__cause__
        self.cache.forget(*(validate_memory_id(memory.memory_id) for memory in memories))
        return done

    def _create_batch(self, memories: Sequence[NewMemory]) -> Steps[Step, BatchCreate]:
        for memory in memories:
            validate_memory_id(memory.memory_id)
        if not memories:
            return BatchCreate([])
        server_now = yield from self._server_now(_WRITE)
        documents = [self.planner.new_document(memory, server_now) for memory in memories]
        refused = yield from self._insert(_WRITE, None, _WINDOW, documents)
        versions = batch_versions(documents, refused)
        if not refused:
            return BatchCreate(versions)
        asked = batch_asked(documents, versions, refused)
        live: set[str] = set()
        if asked:
            query = self.planner.live_filter(asked)
            found = yield call(_WRITE, None, _WINDOW, "find", query, {"_id": 1}, result=Result.LIST)
            live = {document["_id"] for document in found}
        return BatchCreate(versions, batch_left(documents, versions, refused, live))

    def save(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Iterable[ChatMessage] = (),
    ) -> Steps[Step, int]:
        """``save``: write ``messages`` if the memory is at ``expected_version``; the new version."""
        memory_id = validate_memory_id(memory_id)
        taken = layout.materialize(messages)
        extra = layout.materialize(also_recorded) if self.history is not None else ()
        if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 0:
            raise ValueError(f"expected_version must be an int >= 0, got {expected_version!r}")
        self._check_open(_WRITE, memory_id)
        cached = self.cache.get(memory_id)
        if self.history is not None and hist.must_read(cached, expected_version):
            cached = yield from self.load_state(memory_id)
            if cached is None or cached.version != expected_version:
                raise ConcurrentUpdateError(memory_id, expected_version)
        refreshed = None
        if self.history is not None and expected_version:
            refreshed = yield from self._refresh(memory_id, None if cached is None else cached.history)
        plan = self.planner.save(
            memory_id, taken, expected_version, cached, server_now=self.clock.now(), refreshed=refreshed,
            also_recorded=extra,
        )  # fmt: skip
        outcome = yield from self._execute(plan)
        if isinstance(outcome, Conflict):
            raise ConcurrentUpdateError(memory_id, expected_version)
        return outcome.version

    def update(self, memory_id: str, messages: Iterable[ChatMessage]) -> Steps[Step, None]:
        """``update_messages``: replace the messages whatever version the memory is at."""
        memory_id = validate_memory_id(memory_id)
        taken = layout.materialize(messages)
        self._check_open(_WRITE, memory_id)
        planner = self.planner
        if self.history is None:
            cached = self.cache.get(memory_id)
            if cached is not None:
                # The cached window is most likely the stored one: send the diff against it, pinned to its
                # version and incarnation; if another writer got there first, replace the window whole.
                plan = planner.save(memory_id, taken, cached.version, cached, server_now=self.clock.now())
                if isinstance((yield from self._execute(plan)), Written):
                    return
            yield from self._execute(planner.replace(memory_id, taken))
            return
        for _ in range(layout.UPDATE_ATTEMPTS):
            try:
                state = yield from self.load_state(memory_id)
            except SerializationError:
                # A window it cannot read is replaced whole; the history records the new one whole.
                yield from self._execute(planner.replace(memory_id, taken))
                return
            version = 0 if state is None else state.version
            refreshed = yield from self._refresh(memory_id, None if state is None else state.history)
            plan = planner.save(memory_id, taken, version, state, server_now=self.clock.now(), refreshed=refreshed)
            if isinstance((yield from self._execute(plan)), Written):
                return
        detail = f"other writers won {layout.UPDATE_ATTEMPTS} times in a row; nothing was written"
        raise StoreError(_WRITE, memory_id, detail)

    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> Steps[Step, None]:
        """``write_raw``: plant ``records`` as they are."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(_WRITE, memory_id)
        yield from self._execute(self.planner.raw_write(memory_id, records))

    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> Steps[Step, None]:
        """``expire_at``: set a live memory's expiry (its TTL index made on first need)."""
        memory_id = validate_memory_id(memory_id)
        query, update = self.planner.expire_at(memory_id, when)
        self._check_open(_WRITE, memory_id)
        if when is not None and not self.expiry_index_checked:
            # A store without a ttl makes its TTL index on first need; once, not at every call (a mongos
            # sends createIndexes to every shard).
            self.indexed = False
            yield from self.ensure_expiry_index()
            self.expiry_index_checked = True
        yield call(_WRITE, memory_id, _WINDOW, "update_one", query, update, result=Result.NOTHING)

    def delete(self, memory_id: str) -> Steps[Step, None]:
        """``delete_messages``: the window document and the history entries."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.DELETE, memory_id)
        self.cache.forget(memory_id)
        yield call(Operation.DELETE, memory_id, _WINDOW, "delete_one", {"_id": memory_id}, result=Result.NOTHING)
        if self.history is not None:
            yield call(Operation.DELETE, memory_id, _HISTORY, "delete_many", {"m": memory_id}, result=Result.NOTHING)

    # ------------------------------------------------------------------------------------------ modify

    def take_lease(self, memory_id: str, token: bytes) -> Steps[Step, None]:
        """Take the writers' lock of ``memory_id`` for ``token``, waiting while another writer holds it.

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``lock_wait`` seconds; nothing was written.
            StoreError: the server failed.
        """
        memory_id = validate_memory_id(memory_id)
        self._check_open(_WRITE, memory_id)
        acquire, waiting = self.planner.acquire(memory_id, token), self.planner.lock.polling().start()
        while True:
            try:
                yield acquire
                return
            except CommandFailed as exc:
                # A duplicate key: a live lease is there. A lost reply: the upsert may have landed, and
                # sending it again finds this token.
                if exc.reply() is None:
                    detail = f"taking its writers' lock: {exc.detail}"
                    raise exc.again(_WRITE, memory_id, detail) from exc.__cause__
            delay = waiting.backoff()
            if delay is None:
                raise ConcurrentUpdateError(memory_id, attempts=waiting.count)
            yield Sleep(delay)

    def change_locked(self, memory_id: str, change: Change) -> Steps[Step, int]:
        """Apply ``change`` to what is stored and write it at the version read, over again until it lands.

        Run while holding the lock, so the writes that still get in between come from writers that do not
        queue (an optimistic first attempt, a plain update): each costs one more read. The write stays
        conditional: a holder whose lease ran out cannot overwrite what the next holder wrote.
        """
        memory_id = validate_memory_id(memory_id)
        while True:
            state = yield from self.load_state(memory_id)
            version = 0 if state is None else state.version
            new, also_recorded = recorded_parts(change([] if state is None else state.layout.messages()))
            if new is None:
                return version
            try:
                return (yield from self.save(memory_id, new, version, also_recorded))
            except ConcurrentUpdateError:
                telemetry.retried()

    def give_lease_back(self, memory_id: str, token: bytes) -> Steps[Step, None]:
        """Delete the writers' lock of ``memory_id`` if ``token`` still holds it.

        Raises:
            StoreError: the server failed; the lock frees itself when its lease ends.
        """
        try:
            yield self.planner.release(memory_id, token)
        except CommandFailed as exc:
            lease = self.planner.lock.lease
            detail = f"giving back its writers' lock: {exc.detail}; it frees itself within {lease:g} s"
            raise exc.again(_WRITE, memory_id, detail) from exc.__cause__

    # ----------------------------------------------------------------------------------------- history

    def _refresh(
        self, memory_id: str, head: HistoryState | None, now: datetime.datetime | None = None
    ) -> Steps[Step, datetime.datetime | None]:
        """Set the entries' expiry if ``head`` is due at ``now`` (the server's); the time it was set from."""
        history = self._require_history()
        due = hist.refresh_due(head, history, now or self.clock.now() or self.clock.local())
        if due is not None:
            yield hist.refresh_command(history, memory_id, head, due)
        return due

    def _record(
        self, plan: WritePlan, outcome: Written, document: Mapping[str, Any] | None
    ) -> Steps[Step, MemoryState | None]:
        """Copy what a history store's write left in the document; the state to cache."""
        if document is None or not isinstance(document.get("hid"), int):
            return None
        memory_id, history = plan.memory_id, self._require_history()
        groups = layout.groups_of(memory_id, document)
        copied = not groups
        if hist.should_copy(groups):
            refreshed = layout.refreshed_of(document)
            entries = hist.entry_documents(memory_id, document["hid"], groups, history.lifetime, refreshed)
            try:
                yield from self._insert(_WRITE, memory_id, _HISTORY, entries)
                copied = True
            except CommandFailed:
                pass  # the groups stay in the window document, which readers merge; the next write copies them
        if plan.history_id is not None and document["hid"] == plan.history_id:
            try:  # a new history: entries of an expired or deleted one go
                yield hist.stale_delete(memory_id, plan.history_id)
            except CommandFailed:
                pass  # never read (their history id differs); trim_history removes them too
        head = hist.state_after(memory_id, document, copied)
        if outcome.server_time is not None:
            # A write that went on a history without setting its entries' expiry first (it created
            # the window again) sets it now; the next write that knows the head records when.
            yield from self._refresh(memory_id, head, outcome.server_time)
        if outcome.state is None or head is None:
            return None
        return replace(outcome.state, history=head)

    def history_page(self, memory_id: str, after: int | None, limit: int, reverse: bool) -> Steps[Step, HistoryPage]:
        """``history``: the head in the window document, then the entries (merged with what is staged)."""
        query = history_query(after, limit, reverse)
        memory_id = validate_memory_id(memory_id)
        config = self._require_history()
        self._check_open(_READ, memory_id)
        head = hist.head_of(memory_id, (yield hist.head_read(memory_id, config)))
        if head is None:
            return HistoryPage([], None)
        documents = yield hist.entries_read(memory_id, head.hid, query)
        return hist.page_of(memory_id, query, documents, head, self.planner.codec)

    def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], window: Sequence[ChatMessage] | None
    ) -> Steps[Step, int]:
        """Add the entries the history lacks (see *History* in ``docs/store-mongodb.md``)."""
        memory_id = validate_memory_id(memory_id)
        restored = checked_restore(memory_id, entries)
        messages = None if window is None else checked_messages(window)
        self._require_history()
        records = hist.entry_records(memory_id, restored, self.planner.codec)
        self._check_open(_WRITE, memory_id)
        self.cache.forget(memory_id)
        yield from self._ensure_history_index()
        for _ in range(hist.RESTORE_ATTEMPTS):
            added = yield from self._restore_once(memory_id, restored, records, messages)
            if added is not None:
                self.cache.forget(memory_id)
                return added
        raise StoreError(_WRITE, memory_id, f"writers kept moving the history head ({hist.RESTORE_ATTEMPTS} reads)")

    def _restore_once(
        self,
        memory_id: str,
        entries: tuple[HistoryEntry, ...],
        records: Mapping[int, Record],
        window: tuple[ChatMessage, ...] | None,
    ) -> Steps[Step, int | None]:
        """One attempt: how many entries went in, or ``None`` when the head moved and must be read again."""
        history = self._require_history()
        now = yield from self._server_now(_READ)
        top = entries[-1].sequence if entries else 0
        head = hist.restore_head(memory_id, (yield hist.restore_read(memory_id)), window is not None)
        if head is None:
            assert window is not None
            hid, missing = layout.new_history_id(), list(entries)
            created = self.planner.new_head_document(memory_id, window, hid, top, now)
            if (yield from self._insert(_WRITE, memory_id, _WINDOW, [created])):
                return None  # created meanwhile: restore into it
        else:
            hid, version, present = head
            if entries:
                present.update(entry.get("s") for entry in (yield hist.present_read(memory_id, hid, entries)))
            missing = [entry for entry in entries if entry.sequence not in present]
            if not missing:
                return 0
            if not (yield hist.head_update(memory_id, version, hid, top, now)):
                return None
        # An entry there already (another restore's) is the same entry.
        documents = hist.entry_documents_of(memory_id, hid, missing, records, history, now)
        yield from self._insert(_WRITE, memory_id, _HISTORY, documents)
        return len(missing)

    def _server_now(self, operation: str) -> Steps[Step, datetime.datetime]:
        """The server's clock: the estimate, else a ``hello`` (else the local clock)."""
        now = self.clock.now()
        if now is None:
            now = server_time_of((yield call(operation, None, Target.ADMIN, "command", "hello"))) or self.clock.local()
        return now

    def trim(self, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None) -> Steps[Step, int]:
        """``trim_history``: copy what is staged, remove older entries and staged groups."""
        trim_cutoff(older_than, self.clock.local())  # checks older_than before anything else
        if memory_id is not None:
            memory_id = validate_memory_id(memory_id)
        history = self._require_history()
        self._check_open(Operation.TRIM, memory_id)
        cutoff = trim_cutoff(older_than, (yield from self._server_now(_READ)))
        trim = Operation.TRIM
        removal, head_change = hist.trim_commands(trim, cutoff, memory_id)
        # Staged groups are copied first, so that the count covers them.
        documents = yield hist.staged_read(trim, memory_id)
        yield from self._insert(trim, memory_id, _HISTORY, hist.staged_operations(documents, history.lifetime))
        removed: int = yield removal
        yield head_change
        return removed
