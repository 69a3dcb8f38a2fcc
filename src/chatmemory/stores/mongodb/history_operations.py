"""The history side of a MongoDB store's operations, written once for the sync and async executors.

Each method is a generator of :mod:`~chatmemory.stores.mongodb.commands` (see
:mod:`~chatmemory.stores.mongodb.operations`): copying the groups a write staged, setting the entries'
expiry, reading a page, trimming and restoring entries. What they decide is in
:mod:`~chatmemory.stores.mongodb.history` (and :mod:`~chatmemory.stores.mongodb.history_restore`).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from chatmemory.core.errors import HistoryNotEnabledError, StoreError
from chatmemory.core.history import (
    HistoryEntry,
    HistoryPage,
    UnrestorableHistoryError,
    checked_restore,
    history_query,
    trim_cutoff,
)
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.stores.base import Operation
from chatmemory.stores.mongodb.base import MongoStoreBase
from chatmemory.stores.mongodb.commands import Result, Steps, Target, call
from chatmemory.stores.mongodb.driver import (
    DRIVER_ERRORS,
    copy_landed,
    describe,
    duplicate_indexes,
    server_time,
    write_error,
)
from chatmemory.stores.mongodb.history import (
    ENTRY_PROJECTION,
    HEAD_PROJECTION,
    HISTORY_EXPIRY_INDEX,
    HISTORY_INDEX,
    HISTORY_KEY,
    STAGED_PROJECTION,
    HistoryConfig,
    entry_documents,
    groups_of,
    head_filter,
    head_of,
    new_history_id,
    refresh_due,
    refresh_update,
    refreshed_of,
    should_copy,
    staged_filter,
    staged_operations,
    state_after,
)
from chatmemory.stores.mongodb.history_pages import page_of, read_entries_filter, stale_filter, trim_filter, trim_head
from chatmemory.stores.mongodb.history_restore import (
    RESTORE_ATTEMPTS,
    RESTORE_PROJECTION,
    entry_documents_of,
    entry_records,
    head_update,
    new_head_document,
    present_filter,
    staged_sequences,
    version_of,
)
from chatmemory.stores.mongodb.layout import MemoryState, Record
from chatmemory.stores.mongodb.plan import WritePlan, Written

__all__ = ["HistoryOperations"]

_Client = TypeVar("_Client")

_HISTORY = Target.HISTORY


class HistoryOperations(MongoStoreBase[_Client]):
    """History operations as command generators (the executors run them)."""

    if TYPE_CHECKING:

        def _check_open(self, operation: str, memory_id: str | None = None) -> None: ...

    def _require_history(self) -> HistoryConfig:
        if self._history is None:
            raise HistoryNotEnabledError(repr(self))
        return self._history

    def _ensure_history_index(self) -> Steps[None]:
        if self._history_indexed or self._history is None:
            return
        try:
            yield call(_HISTORY, "create_index", HISTORY_KEY, name=HISTORY_INDEX, unique=True)
            if self._history.lifetime is not None:
                yield call(_HISTORY, "create_index", [("x", 1)], name=HISTORY_EXPIRY_INDEX, expireAfterSeconds=0)
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.SCHEMA, detail=f"creating the history index: {describe(exc)}") from exc
        self._history_indexed = True

    def _copy(self, memory_id: str, document: Mapping[str, Any]) -> Steps[bool]:
        """Copy the history groups a write reply shows into the history collection; whether all landed."""
        history = self._require_history()
        groups = groups_of(memory_id, document)
        operations = entry_documents(memory_id, document["hid"], groups, history.lifetime, refreshed_of(document))
        if not operations:
            return True
        try:
            yield call(_HISTORY, "insert_many", operations, ordered=False, result=Result.NOTHING)
        except DRIVER_ERRORS as exc:
            # The groups stay in the window document, which readers merge; the next write copies them.
            return copy_landed(exc)
        return True

    def _refresh(self, memory_id: str, hid: int | None, now: datetime.datetime) -> Steps[None]:
        """Set the expiry of every entry of history ``hid`` to ``now`` plus twice the history's lifetime."""
        assert hid is not None
        query, update = refresh_update(self._require_history(), memory_id, hid, now)
        try:
            yield call(_HISTORY, "update_many", query, update, result=Result.NOTHING)
        except DRIVER_ERRORS as exc:
            raise write_error(memory_id, exc) from exc

    def _refresh_before(self, memory_id: str, state: MemoryState | None) -> Steps[datetime.datetime | None]:
        """Before a write pinned to ``state``: set the entries' expiry if it is due; the time it was set from."""
        history = self._require_history()
        if state is None or state.history is None:
            return None
        due = refresh_due(state.history, history, self._clock.now() or self._clock.local())
        if due is not None:
            yield from self._refresh(memory_id, state.history.hid, due)
        return due

    def _record(
        self, plan: WritePlan, outcome: Written, document: Mapping[str, Any] | None
    ) -> Steps[MemoryState | None]:
        """Copy what a history store's write left in the document; the state to cache."""
        if document is None or not isinstance(document.get("hid"), int):
            return None
        groups = groups_of(plan.memory_id, document)
        copied = not groups
        if should_copy(groups):
            copied = yield from self._copy(plan.memory_id, document)
        if plan.history_id is not None and document["hid"] == plan.history_id:
            try:  # a new history: entries of an expired or deleted one go
                stale = stale_filter(plan.memory_id, plan.history_id)
                yield call(_HISTORY, "delete_many", stale, result=Result.NOTHING)
            except DRIVER_ERRORS:
                pass  # never read (their history id differs); trim_history removes them too
        head = state_after(plan.memory_id, document, copied)
        history = self._require_history()
        if head is not None and outcome.server_time is not None:
            # A write that went on a history without setting its entries' expiry first (it created
            # the window again) sets it now; the next write that knows the head records when.
            due = refresh_due(head, history, outcome.server_time)
            if due is not None:
                yield from self._refresh(plan.memory_id, head.hid, due)
        if outcome.state is None or head is None:
            return None
        return replace(outcome.state, history=head)

    def _history_page(self, memory_id: str, after: int | None, limit: int, reverse: bool) -> Steps[HistoryPage]:
        query = history_query(after, limit, reverse)
        memory_id = validate_memory_id(memory_id)
        config = self._require_history()
        self._check_open(Operation.READ, memory_id)
        try:
            document = yield call(Target.WINDOW, "find_one", head_filter(memory_id, config), HEAD_PROJECTION)
            head = head_of(memory_id, document)
            if head is None:
                return HistoryPage([], None)
            filter, sort = read_entries_filter(memory_id, head.hid, query)
            documents = yield call(
                _HISTORY, "find", filter, ENTRY_PROJECTION, sort=sort, limit=query.limit + 1, result=Result.LIST
            )
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        return page_of(memory_id, query, documents, head, self._codec)

    def _restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], window: Sequence[ChatMessage] | None
    ) -> Steps[int]:
        """Add the entries the history lacks (see :mod:`~chatmemory.stores.mongodb.history_restore`)."""
        memory_id = validate_memory_id(memory_id)
        restored = checked_restore(memory_id, entries)
        messages = None if window is None else checked_messages(window)
        config = self._require_history()
        records = entry_records(memory_id, restored, self._codec)
        self._check_open(Operation.WRITE, memory_id)
        self._cache.forget(memory_id)
        yield from self._ensure_history_index()
        try:
            for _ in range(RESTORE_ATTEMPTS):
                added = yield from self._restore_once(memory_id, restored, records, messages, config)
                if added is not None:
                    self._cache.forget(memory_id)
                    return added
        except DRIVER_ERRORS as exc:
            raise write_error(memory_id, exc) from exc
        raise StoreError(Operation.WRITE, memory_id, f"writers kept moving the history head ({RESTORE_ATTEMPTS} reads)")

    def _restore_once(
        self,
        memory_id: str,
        entries: tuple[HistoryEntry, ...],
        records: Mapping[int, Record],
        window: tuple[ChatMessage, ...] | None,
        config: HistoryConfig,
    ) -> Steps[int | None]:
        """One attempt: how many entries went in, or ``None`` when the head moved and must be read again."""
        now = yield from self._server_now()
        top = entries[-1].sequence if entries else 0
        document = yield call(Target.WINDOW, "find_one", {"_id": memory_id}, RESTORE_PROJECTION)
        if document is None:
            if window is None:
                raise UnrestorableHistoryError(
                    memory_id, "a MongoDB history lives in its memory's document: restore it with its window"
                )
            hid = new_history_id()
            created = new_head_document(memory_id, window, hid, top, config, now, self._codec)
            try:
                yield call(Target.WINDOW, "insert_many", [created], ordered=False, result=Result.NOTHING)
            except DRIVER_ERRORS as exc:
                if duplicate_indexes(exc) != [0]:
                    raise
                return None  # created meanwhile: restore into it
            yield from self._insert_entries(memory_id, hid, entries, records, config, now)
            return len(entries)
        hid, version = document.get("hid"), version_of(document)
        if not isinstance(hid, int) or version is None:
            raise UnrestorableHistoryError(
                memory_id, "the memory was written without history (its document has no history id)"
            )
        present = staged_sequences(memory_id, document)
        if entries:
            found = yield call(
                _HISTORY, "find", present_filter(memory_id, hid, entries), {"_id": 0, "s": 1}, result=Result.LIST
            )
            present.update(entry.get("s") for entry in found)
        missing = [entry for entry in entries if entry.sequence not in present]
        if not missing:
            return 0
        filter, update = head_update(memory_id, version, hid, top, int(now.timestamp() * 1_000_000))
        matched: int = yield call(Target.WINDOW, "update_one", filter, update, result=Result.MATCHED)
        if not matched:
            return None
        yield from self._insert_entries(memory_id, hid, missing, records, config, now)
        return len(missing)

    def _insert_entries(
        self,
        memory_id: str,
        hid: int,
        entries: Sequence[HistoryEntry],
        records: Mapping[int, Record],
        config: HistoryConfig,
        now: datetime.datetime,
    ) -> Steps[None]:
        if not entries:
            return
        documents = entry_documents_of(memory_id, hid, entries, records, config, now)
        try:
            yield call(_HISTORY, "insert_many", documents, ordered=False, result=Result.NOTHING)
        except DRIVER_ERRORS as exc:
            if not copy_landed(exc):  # an entry there already (another restore's) is the same entry
                raise

    def _server_now(self) -> Steps[datetime.datetime]:
        now = self._clock.now()
        if now is not None:
            return now
        try:
            now = server_time((yield call(Target.ADMIN, "command", "hello")))
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, detail=describe(exc)) from exc
        return now if now is not None else self._clock.local()

    def _trim(self, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None) -> Steps[int]:
        trim_cutoff(older_than, self._clock.local())  # checks older_than before anything else
        if memory_id is not None:
            memory_id = validate_memory_id(memory_id)
        history = self._require_history()
        self._check_open(Operation.TRIM, memory_id)
        cutoff = trim_cutoff(older_than, (yield from self._server_now()))
        head_query, head_update = trim_head(cutoff, memory_id)
        try:
            # Staged groups are copied first, so that the count covers them.
            documents = yield call(
                Target.WINDOW, "find", staged_filter(memory_id), STAGED_PROJECTION, result=Result.LIST
            )
            operations = staged_operations(documents, history.lifetime)
            if operations:
                try:
                    yield call(_HISTORY, "insert_many", operations, ordered=False, result=Result.NOTHING)
                except DRIVER_ERRORS as exc:
                    if not copy_landed(exc):
                        raise
            removed: int = yield call(_HISTORY, "delete_many", trim_filter(cutoff, memory_id), result=Result.DELETED)
            yield call(Target.WINDOW, "update_many", head_query, head_update, result=Result.NOTHING)
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.TRIM, memory_id, describe(exc)) from exc
        return removed
