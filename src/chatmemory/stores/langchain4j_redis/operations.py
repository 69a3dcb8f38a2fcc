"""A LangChain4j-layout store's operations, written once as generators of commands for both executors.

Each operation (``_load``, ``_save``, ``_update`` ...) yields :mod:`~chatmemory.stores.langchain4j_redis.commands`
and receives the replies; the sync executor (:mod:`chatmemory.stores.langchain4j_redis.store`) and the
asyncio one (:mod:`chatmemory.aio.stores.langchain4j_redis`) only send them. A driver exception is thrown
back in where the command was yielded, so the ``try`` blocks below read as they would around a direct
call. What a write sends is decided in :mod:`.plan` and :mod:`.history`; this module adds the order of the
commands and the errors. ``modify`` is three operations run in order: :meth:`~LangChain4jOperations._lock`
(``SET NX PX`` of :func:`.keys.lock_key` with the holder's token, polled with
:class:`~chatmemory.core.memory_steps.Sleep` while busy), :meth:`~LangChain4jOperations._locked_change`
(read, change, compare-and-set) and :meth:`~LangChain4jOperations._unlock` (deleted only by its token).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import TypeVar

from chatmemory import telemetry
from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, StoreError
from chatmemory.core.history import HistoryPage, history_query
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.recorded_writes import recorded_parts
from chatmemory.core.store import Change, Snapshot
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.langchain4j_redis.base import LangChain4jStoreBase
from chatmemory.stores.langchain4j_redis.commands import Get, Scan, Script, Sends, Set, SetIfAbsent, Sleep
from chatmemory.stores.langchain4j_redis.history import HistorySteps
from chatmemory.stores.langchain4j_redis.keys import (
    any_history_pattern,
    history_key,
    legacy_history_key,
    lock_key,
    memory_id_of_history_key,
    memory_id_of_legacy_history_key,
    write_ids_key,
)
from chatmemory.stores.langchain4j_redis.plan import (
    DELETE_SCRIPT,
    DELETE_SCRIPT_SHA,
    WRITE_SCRIPT,
    WRITE_SCRIPT_SHA,
    digest,
    message_list,
    plan_write,
    written_version,
)
from chatmemory.stores.langchain4j_redis.value import decode, encode
from chatmemory.stores.redis.plan import trim_args
from chatmemory.stores.redis.scripts import UNLOCK

from redis.exceptions import RedisError, ResponseError  # isort: skip - base.py checked that the extra is installed

__all__ = ["LangChain4jOperations"]

_Client = TypeVar("_Client")
_T = TypeVar("_T")


class LangChain4jOperations(LangChain4jStoreBase[_Client]):
    """Every operation of a LangChain4j-layout store as a command generator (the executors run them)."""

    def _recorded(self, operation: str, memory_id: str, step: Sends[_T]) -> Sends[_T]:
        """Run ``step`` of the history steps, its driver errors as the store's."""
        try:
            return (yield from step)
        except ResponseError as exc:
            if str(exc).startswith("WRONGTYPE"):
                raise CorruptedMemoryError(memory_id, f"a key of the memory is of another type ({exc})") from None
            raise StoreError(operation, memory_id, str(exc)) from exc
        except RedisError as exc:
            raise StoreError(operation, memory_id, str(exc)) from exc

    # ---------------------------------------------------------------------------------------------- read

    def _load(self, memory_id: str, versioned: bool = True) -> Sends[Snapshot]:
        """Read the value of ``memory_id``: its messages, and their version if ``versioned`` (else ``0``)."""
        memory_id = validate_memory_id(memory_id)  # versions are kept under the id's text (a UUID's too)
        try:
            value = yield Get(self.key_of(memory_id))
        except ResponseError as exc:  # WRONGTYPE: another kind of key where the memory should be
            raise CorruptedMemoryError(memory_id, f"its key is not a string ({exc})") from None
        except RedisError as exc:
            raise StoreError(Operation.READ, memory_id, str(exc)) from exc
        assert value is None or isinstance(value, bytes)  # the client decodes no replies (checked at construction)
        if value is None:
            return Snapshot([], 0)
        value_digest = digest(value)
        known = self._known.get(memory_id, value_digest)
        if known is None:
            messages = decode(value, memory_id)
            self._known.put(memory_id, value_digest, messages)
        else:  # the value this store last read or wrote: the same bytes, so the same messages
            telemetry.note(bytes=len(value))
            messages = list(known)
        return Snapshot(messages, self._book.read(memory_id, value_digest) if versioned else 0)

    # --------------------------------------------------------------------------------------------- write

    def _save(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Iterable[ChatMessage] = (),
    ) -> Sends[int]:
        memory_id = validate_memory_id(memory_id)
        listed = message_list(messages)
        if self._history is not None:
            step = self._history.save(memory_id, listed, expected_version, message_list(also_recorded))
            return (yield from self._recorded(Operation.WRITE, memory_id, step))
        write_id = self._write_ids.next()
        plan = plan_write(self._book, self._prefix, memory_id, listed, expected_version, self._ttl_ms, write_id)
        try:
            keys = (plan.key, write_ids_key(plan.key))
            reply = yield Script(WRITE_SCRIPT, WRITE_SCRIPT_SHA, keys, plan.script_args())
        except RedisError as exc:
            raise StoreError(Operation.WRITE, memory_id, str(exc)) from exc
        version = written_version(self._book, memory_id, plan, reply, expected_version)
        self._known.put(memory_id, plan.new_digest, listed)
        return version

    def _update(self, memory_id: str, messages: Iterable[ChatMessage]) -> Sends[None]:
        memory_id = validate_memory_id(memory_id)
        if self._history is not None:
            step = self._history.update(memory_id, message_list(messages))
            yield from self._recorded(Operation.WRITE, memory_id, step)
            return
        listed = message_list(messages)
        value = encode(listed)
        try:
            yield Set(self.key_of(memory_id), value, self._ttl_ms or None)
        except RedisError as exc:
            raise StoreError(Operation.WRITE, memory_id, str(exc)) from exc
        finally:
            self._book.forget(memory_id)
        self._known.put(memory_id, digest(value), listed)

    def _delete(self, memory_id: str) -> Sends[None]:
        try:
            memory_key = self.key_of(memory_id)
            keys = (memory_key, history_key(memory_key), write_ids_key(memory_key), legacy_history_key(memory_key))
            yield Script(DELETE_SCRIPT, DELETE_SCRIPT_SHA, keys, ())
        except RedisError as exc:
            raise StoreError(Operation.DELETE, memory_id, str(exc)) from exc
        finally:
            self._book.forget(memory_id)
            self._known.forget(memory_id)

    # -------------------------------------------------------------------------------------- taking turns

    def _lock(self, memory_id: str, token: bytes) -> Sends[None]:
        """Take the lease lock of ``memory_id`` for ``token``, waiting while another writer holds it.

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``lock_wait`` seconds.
        """
        options = self._lock_options
        take = SetIfAbsent(lock_key(self.key_of(memory_id)), token, options.lease_ms)
        waiting = options.polling().start()
        while True:
            try:
                taken = yield take
            except RedisError as exc:
                raise StoreError(Operation.WRITE, memory_id, str(exc)) from exc
            if taken:
                return
            delay = waiting.backoff()
            if delay is None:
                raise ConcurrentUpdateError(memory_id, attempts=waiting.count)
            yield Sleep(delay)

    def _locked_change(self, memory_id: str, change: Change) -> Sends[int]:
        """Apply ``change`` to the stored value and save it at the version read, over again until it lands.

        Run while holding the lock: the writes that still get in between come from writers that have not
        queued (an optimistic first attempt, a plain ``update_messages``, a Java ``SET``), and each costs
        one more read. The save stays a compare-and-set, so a holder whose lease ran out cannot overwrite
        what the next holder wrote.
        """
        while True:
            snapshot = yield from self._load(memory_id)
            new, also_recorded = recorded_parts(change(list(snapshot.messages)))
            if new is None:
                return snapshot.version
            try:
                return (yield from self._save(memory_id, new, snapshot.version, also_recorded))
            except ConcurrentUpdateError:
                telemetry.retried()

    def _unlock(self, memory_id: str, token: bytes) -> Sends[None]:
        """Give back the lease lock of ``memory_id`` if ``token`` still holds it."""
        try:
            yield Script(UNLOCK.source, UNLOCK.sha, (lock_key(self.key_of(memory_id)),), (token,))
        except RedisError as exc:
            raise StoreError(Operation.WRITE, memory_id, str(exc)) from exc

    # ------------------------------------------------------------------------------------------- history

    def _history_page(self, memory_id: str, after: int | None, limit: int, reverse: bool) -> Sends[HistoryPage]:
        """A page of the history of ``memory_id``, its arguments checked now (before anything is sent).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        query = history_query(after, limit, reverse)
        steps = self._require_history()
        return self._recorded(Operation.READ, memory_id, steps.history(memory_id, query))

    def _trim(self, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None) -> Sends[int]:
        """The trim of one memory's history, or of every memory's, its arguments checked now.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        args = trim_args(older_than)
        steps = self._require_history()
        if memory_id is not None:
            return self._recorded(Operation.WRITE, memory_id, steps.trim(memory_id, args))
        return self._trim_all(steps, args)

    def _trim_all(self, steps: HistorySteps, args: tuple[bytes, ...]) -> Sends[int]:
        try:
            keys: set[bytes] = yield Scan(any_history_pattern(self._prefix), "list")  # type: ignore[assignment]
        except RedisError as exc:
            raise StoreError(Operation.LIST, detail=str(exc)) from exc
        owners = {
            memory_id_of_history_key(each, self._prefix) or memory_id_of_legacy_history_key(each, self._prefix)
            for each in keys
        }
        removed = 0
        for owner in owners:
            if owner is not None:
                removed += yield from self._recorded(Operation.WRITE, owner, steps.trim(owner, args))
        return removed
