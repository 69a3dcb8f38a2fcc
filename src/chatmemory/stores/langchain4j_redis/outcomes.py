"""What the LangChain4j-layout scripts' replies and the driver's reply errors mean (pure: no driver, no I/O).

A compare-and-set replies :data:`WRITTEN` (this run wrote), :data:`WRITTEN_BEFORE` (an earlier run of the
same write did: a resend after a lost reply) or anything else for a conflict (:func:`written_version`).
An error reply of the server reaches the operations as :class:`ReplyError`, raised by the executors, so
that an operation can tell a key of another type (``WRONGTYPE``: a damaged memory) from a failure.
"""

from __future__ import annotations

from chatmemory.core.errors import ConcurrentUpdateError, StoreError
from chatmemory.stores.langchain4j_redis.commands import LayoutWrite, Script
from chatmemory.stores.langchain4j_redis.plan import WRITE_HISTORY_SCRIPT_SHA, WRITE_SCRIPT_SHA, VersionBook, WritePlan

__all__ = ["WRITTEN", "WRITTEN_BEFORE", "ReplyError", "replayed", "written_version"]

WRITTEN, WRITTEN_BEFORE = 1, 2
"""The write scripts' replies for a write made by this run, and by an earlier run of the same write (a resend)."""

_WRITES = frozenset({WRITE_SCRIPT_SHA, WRITE_HISTORY_SCRIPT_SHA})


class ReplyError(StoreError):
    """The server answered a command with an error (a ``ResponseError``); the driver's exception is the cause.

    Attributes:
        detail: the server's message.
        wrong_type: it was ``WRONGTYPE``: a key of the memory holds another type of value.
    """

    def __init__(self, operation: str, memory_id: str | None, detail: str) -> None:
        super().__init__(operation, memory_id, detail)
        self.detail = detail
        self.wrong_type = detail.startswith("WRONGTYPE")


def written_version(book: VersionBook, memory_id: str, plan: WritePlan, reply: object, expected_version: int) -> int:
    """The outcome of a sent plan: the new version, or a conflict.

    Raises:
        ConcurrentUpdateError: the key held another value; nothing was written.
    """
    if reply != WRITTEN and reply != WRITTEN_BEFORE:
        # The versions handed out stay: the next read sees the other value and issues a new one.
        raise ConcurrentUpdateError(memory_id, expected_version)
    return book.written(memory_id, plan.new_digest)


def replayed(write: LayoutWrite, reply: object) -> bool:
    """Whether a write script's ``reply`` says an earlier run of the same write made it (a resend).

    ``WAIT`` cannot vouch for such a write.
    """
    command = write.command
    return isinstance(command, Script) and command.sha in _WRITES and reply == WRITTEN_BEFORE
