"""Creating many memories of the Redis store in two pipelines, for ``import`` and ``copy`` (pure: no I/O).

:func:`create_batch` is an operation like those of :mod:`.steps`: it yields a
:class:`~chatmemory.stores.redis.batch_reads.Pipelined` batch of the write script's calls, each the whole
list conditional on the memory being absent (what ``save(id, messages, 0)`` sends), then one of the expire
script's calls for the memories it created that ask for an expiry. A store with history creates one memory
at a time, as ``save`` does (its history records what a write appends to a window it has read).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.stored_memories import NewMemory
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.redis.batch_reads import Pipelined
from chatmemory.stores.redis.commands import Command
from chatmemory.stores.redis.outcomes import Written, write_outcome
from chatmemory.stores.redis.steps import Steps
from chatmemory.stores.redis.times import expire_at_call, expire_at_done

__all__ = ["create_batch"]


def create_batch(
    steps: Steps, memories: Sequence[NewMemory]
) -> Generator[Pipelined | Command, object, list[int | None]]:
    """Create the ``memories`` that do not exist (see ``SupportsBatchCreates``); their versions, ``None`` if not.

    Raises:
        StoreError: a reply no script of this store gives.
    """
    planner = steps.planner
    versions: list[int | None] = []
    if planner.keeps_history:
        for memory in memories:
            versions.append((yield from _created(steps, memory)))  # noqa: PERF401 - a comprehension cannot yield
    else:
        plans = [planner.full(memory.memory_id, tuple(memory.messages), 0) for memory in memories]
        replies = yield Pipelined(tuple(plan.call for plan in plans), Operation.WRITE)
        assert isinstance(replies, list)
        for plan, reply in zip(plans, replies, strict=True):
            outcome = write_outcome(plan.call, plan.incarnation, reply)
            # Not cached: the next operation on the memory reads it (an import touches each memory once).
            steps.cache.forget(plan.call.memory_id)
            # Anything but a write (there already, or damaged) is left for the caller's own write to report.
            versions.append(outcome.version if isinstance(outcome, Written) else None)
    expiries = tuple(
        expire_at_call(planner.key_space, memory.memory_id, memory.expires_at, planner.history_follows_window)
        for memory, version in zip(memories, versions, strict=True)
        if version is not None and memory.sets_expiry
    )
    if expiries:
        done = yield Pipelined(expiries, Operation.WRITE)
        assert isinstance(done, list)
        for call, reply in zip(expiries, done, strict=True):
            expire_at_done(call, reply)
    return versions


def _created(steps: Steps, memory: NewMemory) -> Generator[Command, object, int | None]:
    """``save(id, messages, 0)``: the new version, or ``None`` when the memory exists."""
    try:
        return (yield from steps.save(memory.memory_id, memory.messages, 0))
    except ConcurrentUpdateError:
        return None
