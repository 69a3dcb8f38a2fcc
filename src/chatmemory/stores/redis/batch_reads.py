"""Reading many memories of the Redis store in one round trip, for operators' tools (pure: no driver, no I/O).

:func:`read_batch` is an operation like those of :mod:`.steps`: it yields a :class:`Pipelined` batch of
commands, which an executor sends in one pipeline (``send_pipelined`` in :mod:`.sending`), and receives
their replies in order: one run of ``stored.lua`` per memory, which reads what the read script (without
sliding the expiry) and the times script would, in one run. A memory whose head is damaged comes back
with its records as ``read_raw`` reads them (``LRANGE``), so it is shown, never skipped.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import NamedTuple

from chatmemory.stored_memories import StoredMemory
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.redis.commands import Call, ScriptCall
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.outcomes import unexpected
from chatmemory.stores.redis.scripts import STORED
from chatmemory.stores.redis.times import memory_times_of

__all__ = ["Pipelined", "read_batch", "stored_call", "stored_of"]


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


def stored_call(key_space: KeySpace, memory_id: str) -> ScriptCall:
    """The run of ``stored.lua`` that reads ``memory_id`` for a batch (``memory_id`` validated here)."""
    keys = key_space.keys_of(memory_id)
    return ScriptCall(STORED, keys, (), Operation.READ, memory_id, keys.window)


def _records(call: ScriptCall, raw: object) -> list[bytes]:
    if not isinstance(raw, list):
        raise unexpected(call, raw)
    return raw


def stored_of(call: ScriptCall, reply: object) -> StoredMemory | None:
    """The memory ``stored.lua``'s ``reply`` to ``call`` tells; ``None`` when it does not exist.

    Raises:
        StoreError: a reply the script never gives.
    """
    if reply == 0:
        return None
    if isinstance(reply, list):
        status = reply[0] if reply else None
        if status == b"m" and len(reply) == 6:
            version = reply[1]
            if not isinstance(version, bytes) or not version.isdigit() or not isinstance(reply[2], bytes):
                raise unexpected(call, reply)
            times = memory_times_of(call, reply[3], reply[4])
            return StoredMemory(call.memory_id, _records(call, reply[5]), int(version), times)
        if status == b"c" and len(reply) == 5 and isinstance(reply[1], bytes):
            times = memory_times_of(call, reply[2], reply[3])
            reason = reply[1].decode("utf-8", "replace")
            return StoredMemory(call.memory_id, _records(call, reply[4]), 0, times, damage=reason)
    raise unexpected(call, reply)


def read_batch(
    key_space: KeySpace, memory_ids: Sequence[str]
) -> Generator[Pipelined, list[object], list[StoredMemory | None]]:
    """Read ``memory_ids``: a :class:`StoredMemory` per id, ``None`` for an absent one (see ``SupportsBatchReads``).

    Raises:
        StoreError: a reply no script of this store gives.
    """
    calls = tuple(stored_call(key_space, memory_id) for memory_id in memory_ids)
    replies: list[object] = yield Pipelined(calls, Operation.READ)
    return [stored_of(call, reply) for call, reply in zip(calls, replies, strict=True)]
