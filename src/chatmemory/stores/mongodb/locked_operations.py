"""``modify`` of a MongoDB store as command generators: take the memory's lease, change it, give it back.

The executors run them with :func:`~chatmemory.stores.base.turns.modify_in_turn` in the process's queue
for the memory, which takes the lease unless the writer before handed it on, and gives it back (also when
taking it failed: a lost reply may leave it taken) unless writers of the process wait:
:meth:`LockedOperations._take_lease` (the upsert of :mod:`~chatmemory.stores.mongodb.lease`, with a
:class:`~chatmemory.stores.mongodb.commands.Sleep` between busy answers),
:meth:`LockedOperations._change_locked` (read, change, conditional write, again if a writer that does
not queue got in between) and :meth:`LockedOperations._give_lease_back`.
"""

from __future__ import annotations

from typing import TypeVar

from chatmemory import telemetry
from chatmemory.core.errors import ConcurrentUpdateError, StoreError
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.recorded_writes import recorded_parts
from chatmemory.core.store import Change
from chatmemory.stores.base import Operation
from chatmemory.stores.mongodb.commands import Result, Sleep, Steps, Target, call
from chatmemory.stores.mongodb.driver import DRIVER_ERRORS, describe, reply_to_error
from chatmemory.stores.mongodb.lease import acquire_filter, acquire_update, release_filter
from chatmemory.stores.mongodb.operations import MongoOperations

__all__ = ["LockedOperations"]

_Client = TypeVar("_Client")


class LockedOperations(MongoOperations[_Client]):
    """The steps of ``modify`` (the executors run them in order, see the module docstring)."""

    def _take_lease(self, memory_id: str, token: bytes) -> Steps[None]:
        """Take the writers' lock of ``memory_id`` for ``token``, waiting while another writer holds it.

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``lock_wait`` seconds; nothing was written.
            StoreError: the server failed.
        """
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.WRITE, memory_id)
        query, update = acquire_filter(memory_id, token), acquire_update(token, self._lock)
        waiting = self._lock.polling().start()
        while True:
            try:
                yield call(Target.LOCKS, "update_one", query, update, upsert=True, result=Result.NOTHING)
                return
            except DRIVER_ERRORS as exc:
                # A duplicate key: a live lease is there. A lost reply: the upsert may have landed, and
                # sending it again finds this token.
                if reply_to_error(exc) is None:
                    raise StoreError(Operation.WRITE, memory_id, f"taking its writers' lock: {describe(exc)}") from exc
            delay = waiting.backoff()
            if delay is None:
                raise ConcurrentUpdateError(memory_id, attempts=waiting.count)
            yield Sleep(delay)

    def _change_locked(self, memory_id: str, change: Change) -> Steps[int]:
        """Apply ``change`` to what is stored and write it at the version read, over again until it lands.

        Run while holding the lock, so the writes that still get in between come from writers that do not
        queue (an optimistic first attempt, a plain update): each costs one more read. The write stays
        conditional: a holder whose lease ran out cannot overwrite what the next holder wrote.
        """
        memory_id = validate_memory_id(memory_id)
        while True:
            state = yield from self._load_state_steps(memory_id)
            version = 0 if state is None else state.version
            new, also_recorded = recorded_parts(change([] if state is None else state.layout.messages()))
            if new is None:
                return version
            try:
                return (yield from self._save(memory_id, new, version, also_recorded))
            except ConcurrentUpdateError:
                telemetry.retried()

    def _give_lease_back(self, memory_id: str, token: bytes) -> Steps[None]:
        """Delete the writers' lock of ``memory_id`` if ``token`` still holds it.

        Raises:
            StoreError: the server failed; the lock frees itself when its lease ends.
        """
        try:
            yield call(Target.LOCKS, "delete_one", release_filter(memory_id, token), result=Result.NOTHING)
        except DRIVER_ERRORS as exc:
            detail = f"giving back its writers' lock: {describe(exc)}; it frees itself within {self._lock.lease:g} s"
            raise StoreError(Operation.WRITE, memory_id, detail) from exc
