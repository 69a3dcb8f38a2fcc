"""Which writes of the LangChain4j layout wait for replicas (``replicas_to_ack``), and how they are sent.

The native Redis store's :func:`chatmemory.stores.redis.replication.acknowledged` runs an operation with
each write that changes a memory followed by ``WAIT`` on the same connection, and
:mod:`chatmemory.stores.redis.acknowledged_sending` sends the pair to the node owning the memory's slot;
this module tells them which commands of this layout those writes are (:func:`pinning`) and how each is
sent (:class:`LayoutWrite`): the compare-and-set scripts (with and without history), the delete script,
a history trim and the plain ``SET`` of ``update_messages``. The lease lock (``SET NX``, unlock) is not
waited for, nor the adoption of a history kept where earlier stores kept it (adopted again if lost). A
write script replies :data:`~.plan.WRITTEN_BEFORE` for a write an earlier run made: ``WAIT`` cannot vouch
for it (:func:`replayed`). Pure: no driver, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from chatmemory.stores.langchain4j_redis.commands import Script, Set
from chatmemory.stores.langchain4j_redis.history import WRITE_HISTORY_SCRIPT_SHA
from chatmemory.stores.langchain4j_redis.keys import memory_id_of_history_key
from chatmemory.stores.langchain4j_redis.plan import DELETE_SCRIPT_SHA, WRITE_SCRIPT_SHA, WRITTEN_BEFORE, memory_id_of
from chatmemory.stores.redis.scripts import TRIM

__all__ = ["LayoutWrite", "pinning", "replayed"]

_WRITES = frozenset({WRITE_SCRIPT_SHA, WRITE_HISTORY_SCRIPT_SHA})
_WAITED = _WRITES | {DELETE_SCRIPT_SHA, TRIM.sha}
"""The scripts that change what a memory holds (by sha: the scripts are plain source here)."""


class LayoutWrite(NamedTuple):
    """A write of this layout as the native store's acknowledged sending takes it (a ``PinnedWrite``).

    Attributes:
        command: the script run or the plain ``SET``.
        operation: what a failure is reported as.
        memory_id: the memory written.
    """

    command: Script | Set
    operation: str
    memory_id: str

    @property
    def key(self) -> bytes:
        """The memory's key, or its history's for a trim: where a cluster sends the write."""
        command = self.command
        return command.keys[0] if isinstance(command, Script) else command.key

    def sent(self, fallback: bool) -> tuple[Any, ...]:
        """The write as ``execute_command``'s arguments (``EVAL`` of the source if ``fallback``)."""
        command = self.command
        if isinstance(command, Set):
            expiry = () if command.px is None else ("PX", command.px)
            return ("SET", command.key, command.value, *expiry)
        if fallback:
            return ("EVAL", *command.fallback())
        return ("EVALSHA", command.sha, len(command.keys), *command.keys, *command.args)


def pinning(operation: str, prefix: bytes) -> Callable[[object], LayoutWrite | None]:
    """What to wait for among the commands of an operation (``operation``, for the errors) under ``prefix``."""

    def pin(command: object) -> LayoutWrite | None:
        if isinstance(command, Set):
            return LayoutWrite(command, operation, memory_id_of(command.key, prefix) or "")
        if not isinstance(command, Script) or command.sha not in _WAITED:
            return None
        found = command.keys[0]  # a trim's is the history's key, the others' the memory's
        owner = memory_id_of_history_key(found, prefix) if command.sha == TRIM.sha else memory_id_of(found, prefix)
        return LayoutWrite(command, operation, owner or "")

    return pin


def replayed(write: LayoutWrite, reply: object) -> bool:
    """Whether a write script's ``reply`` says an earlier run of the same write made it (a resend)."""
    command = write.command
    return isinstance(command, Script) and command.sha in _WRITES and reply == WRITTEN_BEFORE
