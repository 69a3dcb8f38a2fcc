"""A MongoDB store's operations, written once as generators of commands for both executors.

Each operation (``_load``, ``_save``, ``_update`` ...) yields :class:`~chatmemory.stores.mongodb.commands.Command`
objects and receives their results; the sync executor (:mod:`chatmemory.stores.mongodb.store`) and the
async one (:mod:`chatmemory.aio.stores.mongodb`) only send them, so a decision here is made once for
both. A driver exception is thrown back in where the command was yielded, so the ``try`` blocks below
read as they would around a direct call. What each write sends is decided in
:mod:`~chatmemory.stores.mongodb.plan`; this module adds the order of the calls and the cache.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from pymongo import ReturnDocument

from chatmemory.core.errors import ConcurrentUpdateError, SerializationError, StoreError
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import Resealed, require_keyring, reseal_plan
from chatmemory.stores.base import Operation
from chatmemory.stores.mongodb.clock import expired
from chatmemory.stores.mongodb.commands import Command, Result, Sleep, Steps, Target, call
from chatmemory.stores.mongodb.driver import (
    DRIVER_ERRORS,
    EXPIRY_INDEX,
    INDEX_CONFLICT_CODES,
    describe,
    equivalent_expiry_index,
    expiry_index_conflict,
    reply_to_error,
    resend_error,
    write_error,
)
from chatmemory.stores.mongodb.history import UPDATE_ATTEMPTS, with_history
from chatmemory.stores.mongodb.history_operations import HistoryOperations
from chatmemory.stores.mongodb.layout import MemoryState, decode_document, materialize, raw_records, record_fields
from chatmemory.stores.mongodb.plan import (
    Conflict,
    Document,
    Resend,
    Verify,
    WritePlan,
    WriteReply,
    Written,
    memory_times_of,
    outcome_of,
    plan_expire_at,
    plan_raw_write,
    plan_replace,
    plan_save,
    read_filter,
    verified_outcome,
)

__all__ = ["MongoOperations"]

_Client = TypeVar("_Client")

_WINDOW = Target.WINDOW
_EXPIRY_KEY = [("expires_at", 1)]


class MongoOperations(HistoryOperations[_Client]):
    """Every operation of a MongoDB store as a command generator (the executors run them)."""

    def _ensure_expiry_index(self) -> Steps[None]:
        if self._indexed:
            return
        try:
            # create_index is idempotent for the same key and options.
            yield call(_WINDOW, "create_index", _EXPIRY_KEY, name=EXPIRY_INDEX, expireAfterSeconds=0)
        except DRIVER_ERRORS as exc:
            detail = describe(exc)
            if getattr(exc, "code", None) in INDEX_CONFLICT_CODES:
                try:
                    indexes = yield call(_WINDOW, "list_indexes", result=Result.LIST)
                    if equivalent_expiry_index([dict(index) for index in indexes]):
                        self._indexed = True
                        return
                except DRIVER_ERRORS:
                    pass
                detail = expiry_index_conflict(self._collection.name)
            raise StoreError(Operation.SCHEMA, detail=f"creating the TTL index: {detail}") from exc
        self._indexed = True

    def _find(self, memory_id: str) -> Steps[Document | None]:
        try:
            server_now = self._clock.now()
            # No projection leaves the staged history groups out: one costs a server more than their bytes.
            query = read_filter(memory_id, server_now is not None, self._window_field)
            document = yield call(_WINDOW, "find_one", query)
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        if document is not None and server_now is not None and expired(document, server_now, self._window_field):
            return None
        return document  # type: ignore[no-any-return]

    def _send(self, plan: WritePlan) -> Steps[tuple[WriteReply, BaseException | None]]:
        """Send ``plan`` once; a driver error that the plan can interpret becomes its reply."""
        try:
            if not plan.returns_document:
                matched = yield Command(_WINDOW, "update_one", (plan.filter, plan.update), result=Result.MATCHED)
                return WriteReply(matched=matched), None
            document = yield call(
                _WINDOW, "find_one_and_update", plan.filter, plan.update,
                projection=plan.projection, upsert=plan.upsert, return_document=ReturnDocument.AFTER,
            )  # fmt: skip
        except DRIVER_ERRORS as exc:
            reply = reply_to_error(exc)
            if reply is None:
                raise write_error(plan.memory_id, exc) from exc
            return reply, exc
        return WriteReply(document), None

    def _verify(self, plan: WritePlan) -> Steps[Document | None]:
        try:
            document = yield call(_WINDOW, "find_one", plan.verify_filter, plan.verify_projection)
        except DRIVER_ERRORS as exc:
            raise write_error(plan.memory_id, exc) from exc
        return document  # type: ignore[no-any-return]

    def _execute(self, plan: WritePlan) -> Steps[Written | Conflict]:
        if not self._indexed:
            yield from self._ensure_expiry_index()
        if not self._history_indexed:
            yield from self._ensure_history_index()
        # A task cancelled while the write is in flight keeps the cached state it started from; if the write
        # landed, that state is stale, and the version and incarnation in every later write's filter make
        # such a write a conflict, never a diff against the wrong array.
        attempts = self._retry.start()
        resent = False
        while True:
            sent = self._clock.local()
            reply, error = yield from self._send(plan)
            received = self._clock.local()
            document = reply.document
            outcome = outcome_of(plan, reply, resent=resent)
            if isinstance(outcome, Verify):
                document = yield from self._verify(plan)
                outcome = verified_outcome(plan, document)
            if not isinstance(outcome, Resend):
                break
            resent = True
            delay = attempts.backoff()
            if delay is None:
                self._cache.forget(plan.memory_id)
                raise resend_error(plan.memory_id, attempts.count, error)
            yield Sleep(delay)
        state = outcome.state if isinstance(outcome, Written) else None
        if isinstance(outcome, Written) and plan.keeps_history:
            state = yield from self._record(plan, outcome, document)
        if isinstance(outcome, Written) and state is not None:
            self._clock.observe(sent, received, outcome.server_time)
            self._cache.put(plan.memory_id, state)
        else:
            self._cache.forget(plan.memory_id)
        return outcome

    # ---------------------------------------------------------------------------------------------- read

    def _load_state_steps(self, memory_id: str) -> Steps[MemoryState | None]:
        document = yield from self._find(memory_id)
        if document is None:
            self._cache.forget(memory_id)
            return None
        previous = self._cache.get(memory_id)
        try:
            state = decode_document(memory_id, document, previous, self._codec)
            if self._history is not None:
                state = with_history(state, document, previous)
        except Exception:
            self._cache.forget(memory_id)
            raise
        self._cache.put(memory_id, state)
        return state

    def _load(self, memory_id: str) -> Steps[Snapshot]:
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        state = yield from self._load_state_steps(memory_id)
        if state is None:
            return Snapshot([], 0)
        return Snapshot(state.layout.messages(), state.version)

    def _read_raw(self, memory_id: str) -> Steps[list[bytes]]:
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        document = yield from self._find(memory_id)
        return [] if document is None else raw_records(memory_id, document)

    def _reseal(self, memory_id: str) -> Steps[Resealed]:
        """Re-seal every record of ``memory_id`` not under the primary key: window, staged and copied history.

        Each record is replaced only where it still holds what was read (a field path of the window
        document, or a history entry), so versions and cached states stay valid beside live writers.
        """
        memory_id = validate_memory_id(memory_id)
        codec = require_keyring(self._codec, repr(self))
        self._check_open(Operation.WRITE, memory_id)
        try:
            document = yield call(_WINDOW, "find_one", {"_id": memory_id})
            fields = [] if document is None else list(record_fields(document))
            window, current = reseal_plan(codec, memory_id, fields)
            entries: list[Any] = []
            if self._history is not None:
                entries = yield call(Target.HISTORY, "find", {"m": memory_id}, {"_id": 1, "r": 1}, result=Result.LIST)
            history, current_entries = reseal_plan(
                codec, memory_id, ((entry["_id"], entry.get("r")) for entry in entries if "r" in entry)
            )
            done = 0
            for path, old, new in window:
                done += yield call(
                    _WINDOW, "update_one", {"_id": memory_id, path: old}, {"$set": {path: new}}, result=Result.MATCHED
                )
            for entry_id, old, new in history:
                done += yield call(
                    Target.HISTORY,
                    "update_one",
                    {"_id": entry_id, "r": old},
                    {"$set": {"r": new}},
                    result=Result.MATCHED,
                )
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.WRITE, memory_id, describe(exc)) from exc
        return Resealed(done, current + current_entries, len(window) + len(history) - done)

    def _memory_times(self, memory_id: str) -> Steps[MemoryTimes | None]:
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        try:
            query = read_filter(memory_id, field=self._window_field)
            document = yield call(_WINDOW, "find_one", query, {"written_at": 1, self._window_field: 1})
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        return memory_times_of(document, self._window_field)

    # --------------------------------------------------------------------------------------------- write

    def _save(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Iterable[ChatMessage] = (),
    ) -> Steps[int]:
        memory_id = validate_memory_id(memory_id)
        taken = materialize(messages)
        extra = materialize(also_recorded) if self._history is not None else ()
        if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 0:
            raise ValueError(f"expected_version must be an int >= 0, got {expected_version!r}")
        self._check_open(Operation.WRITE, memory_id)
        cached = self._cache.get(memory_id)
        if (
            self._history is not None
            and expected_version
            and (cached is None or cached.version != expected_version or cached.history is None)
        ):
            # The history records what the write appends to the stored window: plan against it.
            cached = yield from self._load_state_steps(memory_id)
            if cached is None or cached.version != expected_version:
                raise ConcurrentUpdateError(memory_id, expected_version)
        refreshed = None
        if self._history is not None and expected_version:
            refreshed = yield from self._refresh_before(memory_id, cached)
        plan = plan_save(
            memory_id, taken, expected_version, cached, self._ttl, server_now=self._clock.now(),
            history=self._history, refreshed=refreshed, also_recorded=extra, codec=self._codec,
        )  # fmt: skip
        outcome = yield from self._execute(plan)
        if isinstance(outcome, Conflict):
            raise ConcurrentUpdateError(memory_id, expected_version)
        return outcome.version

    def _update(self, memory_id: str, messages: Iterable[ChatMessage]) -> Steps[None]:
        memory_id = validate_memory_id(memory_id)
        taken = materialize(messages)
        self._check_open(Operation.WRITE, memory_id)
        if self._history is None:
            cached = self._cache.get(memory_id)
            if cached is not None:
                # The cached window is most likely the stored one: send the diff against it, pinned to its
                # version and incarnation; if another writer got there first, replace the window whole.
                plan = plan_save(
                    memory_id, taken, cached.version, cached, self._ttl, server_now=self._clock.now(), codec=self._codec
                )
                if isinstance((yield from self._execute(plan)), Written):
                    return
            yield from self._execute(plan_replace(memory_id, taken, self._ttl, codec=self._codec))
            return
        for _ in range(UPDATE_ATTEMPTS):
            try:
                state = yield from self._load_state_steps(memory_id)
            except SerializationError:
                # A window it cannot read is replaced whole; the history records the new one whole.
                yield from self._execute(plan_replace(memory_id, taken, self._ttl, self._history, self._codec))
                return
            version = 0 if state is None else state.version
            refreshed = yield from self._refresh_before(memory_id, state)
            plan = plan_save(
                memory_id, taken, version, state, self._ttl, server_now=self._clock.now(),
                history=self._history, refreshed=refreshed, codec=self._codec,
            )  # fmt: skip
            if isinstance((yield from self._execute(plan)), Written):
                return
        raise StoreError(
            Operation.WRITE, memory_id, f"other writers won {UPDATE_ATTEMPTS} times in a row; nothing was written"
        )

    def _write_raw(self, memory_id: str, records: Sequence[bytes]) -> Steps[None]:
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.WRITE, memory_id)
        yield from self._execute(plan_raw_write(memory_id, records, self._ttl, self._history))

    def _expire_at(self, memory_id: str, when: datetime.datetime | None) -> Steps[None]:
        memory_id = validate_memory_id(memory_id)
        query, update = plan_expire_at(memory_id, when, self._history)
        self._check_open(Operation.WRITE, memory_id)
        if when is not None and not self._expiry_index_checked:
            # A store without a ttl makes its TTL index on first need; once, not at every call (a mongos
            # sends createIndexes to every shard).
            self._indexed = False
            yield from self._ensure_expiry_index()
            self._expiry_index_checked = True
        try:
            yield call(_WINDOW, "update_one", query, update, result=Result.NOTHING)
        except DRIVER_ERRORS as exc:
            raise write_error(memory_id, exc) from exc

    def _delete(self, memory_id: str) -> Steps[None]:
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.DELETE, memory_id)
        self._cache.forget(memory_id)
        try:
            yield call(_WINDOW, "delete_one", {"_id": memory_id}, result=Result.NOTHING)
            if self._history is not None:
                yield call(Target.HISTORY, "delete_many", {"m": memory_id}, result=Result.NOTHING)
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.DELETE, memory_id, describe(exc)) from exc
