"""The operations of the Redis store as sans-IO steps: generators that yield script calls.

Each operation (load, save, update, raw write) is a generator: it yields a :class:`~.plan.ScriptCall`,
receives the driver's reply through ``send`` and finally returns its result or raises the store's
error. It keeps the snapshot cache up to date on the way. The sync store drives a step with blocking
calls, the asyncio store with awaited ones; neither decides anything::

    step = steps.load(memory_id)
    call = next(step)
    while True:
        try:
            call = step.send(run(call))
        except StopIteration as done:
            return done.value
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence

from chatmemory import telemetry
from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, StoreError
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.serialization.native import loads_message
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.base.snapshot_cache import SnapshotCache
from chatmemory.stores.redis.plan import (
    Absent,
    CachedMemory,
    Conflict,
    Loaded,
    Planner,
    ScriptCall,
    StaleIncarnation,
    Unchanged,
    WritePlan,
    Written,
)

__all__ = ["Steps"]


def _refused(memory_id: str, outcome: object) -> StoreError:
    # The write script never refuses an unconditional write; a refusal means another script under its name.
    return StoreError(Operation.WRITE, memory_id, f"an unconditional write was refused ({outcome!r})")


class Steps:
    """The store's operations over one planner and one snapshot cache.

    Args:
        planner: plans the script calls.
        cache: the store's snapshot cache.
    """

    def __init__(self, planner: Planner, cache: SnapshotCache[CachedMemory]) -> None:
        self.planner = planner
        self.cache = cache

    def load(self, memory_id: str) -> Generator[ScriptCall, object, Snapshot]:
        """Read ``memory_id``: its messages and version.

        Raises:
            CorruptedMemoryError: the memory is damaged or a record does not decode.
        """
        memory_id = validate_memory_id(memory_id)
        plan = self.planner.read(memory_id, self.cache.get(memory_id))
        outcome = self.planner.read_outcome(plan, (yield plan.call))
        if isinstance(outcome, Unchanged):
            return Snapshot(list(outcome.cached.messages), outcome.cached.version)
        if isinstance(outcome, Loaded):
            telemetry.note(bytes=sum(map(len, outcome.records)))
            try:
                messages = [loads_message(record, memory_id=memory_id) for record in outcome.records]
            except Exception:
                self.cache.forget(memory_id)
                raise
            self.cache.put(
                memory_id,
                CachedMemory(
                    outcome.version, outcome.incarnation, tuple(messages), plan.call.keys, b"%d" % outcome.version
                ),
            )
            return Snapshot(messages, outcome.version)
        self.cache.forget(memory_id)
        if isinstance(outcome, Absent):
            return Snapshot([], 0)
        raise CorruptedMemoryError(memory_id, outcome.reason)

    def save(
        self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int
    ) -> Generator[ScriptCall, object, int]:
        """Write ``messages`` if the memory is at ``expected_version``; return the new version.

        Raises:
            ConcurrentUpdateError: the memory is not at ``expected_version``; nothing was written.
            CorruptedMemoryError: the memory is damaged; nothing was written.
        """
        memory_id = validate_memory_id(memory_id)
        new = tuple(messages)
        cached = self.cache.get(memory_id)
        if self.planner.known_stale(cached, expected_version):
            raise ConcurrentUpdateError(memory_id, expected_version)
        plan = self.planner.save(memory_id, new, expected_version, cached)
        while True:
            outcome = self.planner.write_outcome(plan, (yield plan.call))
            if isinstance(outcome, Written):
                return self._written(memory_id, plan, outcome)
            if isinstance(outcome, Conflict):
                # Another writer moved the memory on. A state this store cached since (the winner may be
                # a thread or task sharing it) is kept: the retry's read is then an "unchanged" round trip.
                current = self.cache.get(memory_id)
                if current is not None and current.version <= expected_version:
                    self.cache.forget(memory_id)
                raise ConcurrentUpdateError(memory_id, expected_version)
            self.cache.forget(memory_id)
            if isinstance(outcome, StaleIncarnation):
                # The cached list is not the stored one: send the whole list, still conditionally.
                plan = self.planner.full(memory_id, new, expected_version)
                telemetry.retried()
                continue
            raise CorruptedMemoryError(memory_id, outcome.reason)

    def update(self, memory_id: str, messages: Iterable[ChatMessage]) -> Generator[ScriptCall, object, None]:
        """Replace the list of ``memory_id`` whatever it holds (a damaged memory included)."""
        memory_id = validate_memory_id(memory_id)
        new = tuple(messages)
        plan = self.planner.update(memory_id, new, self.cache.get(memory_id))
        while True:
            outcome = self.planner.write_outcome(plan, (yield plan.call))
            if isinstance(outcome, Written):
                self._written(memory_id, plan, outcome)
                return
            if plan.expected_version is None:
                raise _refused(memory_id, outcome)
            # The diff did not apply (moved, other incarnation, damaged): replace the list whole.
            self.cache.forget(memory_id)
            plan = self.planner.full(memory_id, new, None)
            telemetry.retried()

    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> Generator[ScriptCall, object, None]:
        """Replace the memory with ``records`` as they are."""
        memory_id = validate_memory_id(memory_id)
        self.cache.forget(memory_id)
        plan = self.planner.raw(memory_id, records)
        outcome = self.planner.write_outcome(plan, (yield plan.call))
        if not isinstance(outcome, Written):
            raise _refused(memory_id, outcome)

    def _written(self, memory_id: str, plan: WritePlan, outcome: Written) -> int:
        telemetry.note(version=outcome.version)
        state = self.planner.cached_after(plan, outcome)
        if state is None:
            self.cache.forget(memory_id)
        else:
            self.cache.put(memory_id, state)
        return outcome.version
