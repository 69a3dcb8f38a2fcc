"""Reading many memories of the Redis store in one round trip, for operators' tools (pure: no driver, no I/O).

:func:`read_batch` is an operation like those of :mod:`.steps`: it yields a :class:`Pipelined` batch of
commands, which an executor sends in one pipeline (``send_pipelined`` in :mod:`.sending`), and receives
their replies in order: per memory the read script (without sliding the expiry) and the times script.
A memory whose head is damaged is read again as ``read_raw`` reads it (``LRANGE``), in a second pipeline
of only those, so its records are shown, never skipped.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import NamedTuple

from chatmemory.stored_memories import StoredMemory
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.redis.commands import Call, ScriptCall
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.outcomes import Absent, Corrupted, Loaded, read_outcome
from chatmemory.stores.redis.scripts import READ
from chatmemory.stores.redis.times import times_call, times_of

__all__ = ["Pipelined", "read_batch"]


class Pipelined(NamedTuple):
    """Commands sent in one pipeline; the reply is the list of their replies, in order.

    The executor sends a script the server does not know again as ``EVAL``, and raises the store's error
    for a command the server refused (naming its memory).

    Attributes:
        commands: the commands.
        operation: what a driver failure is reported as.
        memory_id: always ``None``: a batch is for no one memory.
    """

    commands: tuple[ScriptCall | Call, ...]
    operation: str
    memory_id: None = None


def _read_call(key_space: KeySpace, memory_id: str) -> ScriptCall:
    keys = key_space.keys_of(memory_id)
    # "0": the read does not slide the expiry, whatever the store's refresh_ttl_on_read.
    return ScriptCall(READ, keys, (b"0", b"", b""), Operation.READ, memory_id, keys.window)


def read_batch(
    key_space: KeySpace, memory_ids: Sequence[str]
) -> Generator[Pipelined, list[object], list[StoredMemory | None]]:
    """Read ``memory_ids``: a :class:`StoredMemory` per id, ``None`` for an absent one (see ``SupportsBatchReads``).

    Raises:
        StoreError: a reply no script of this store gives.
    """
    reads = [_read_call(key_space, memory_id) for memory_id in memory_ids]
    times = [times_call(key_space, memory_id) for memory_id in memory_ids]
    commands = tuple(command for pair in zip(reads, times, strict=True) for command in pair)
    replies: list[object] = yield Pipelined(commands, Operation.READ)
    found: list[StoredMemory | None] = []
    damaged: dict[int, str] = {}
    for index, (read, time_call) in enumerate(zip(reads, times, strict=True)):
        outcome = read_outcome(read, None, replies[2 * index])
        memory_times = times_of(time_call, replies[2 * index + 1])
        if isinstance(outcome, Loaded):
            found.append(StoredMemory(read.memory_id, list(outcome.records), outcome.version, memory_times))
        elif isinstance(outcome, Absent):
            found.append(None)
        else:
            assert isinstance(outcome, Corrupted)
            damaged[index] = outcome.reason
            found.append(None)
    if damaged:
        lranges = tuple(
            Call("lrange", (reads[index].keys.messages, 0, -1), Operation.READ, reads[index].memory_id)
            for index in damaged
        )
        raw: list[object] = yield Pipelined(lranges, Operation.READ)
        for (index, reason), records in zip(damaged.items(), raw, strict=True):
            found[index] = StoredMemory(
                reads[index].memory_id,
                [bytes(record) for record in records] if isinstance(records, list) else [],
                0,
                times_of(times[index], replies[2 * index + 1]),
                damage=reason,
            )
    return found
