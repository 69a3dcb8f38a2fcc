"""What a MongoDB store's operations ask an executor to send, and how it hands the answer back (pure).

An operation (:mod:`~chatmemory.stores.mongodb.operations`) yields a :class:`Command` (one driver call,
with the operation and memory id a failure is reported under) or a :class:`~chatmemory.core.driving.Sleep`,
and receives the result :func:`result_of` reads. No driver import and no I/O here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final, NamedTuple, TypeAlias

from chatmemory.core.driving import Sleep

__all__ = ["Command", "Result", "Step", "Target", "call", "result_of"]


class Target(enum.Enum):
    """What a command is sent to."""

    WINDOW = "window"
    """The memories collection."""
    HISTORY = "history"
    """The history collection (only on a store with history)."""
    LOCKS = "locks"
    """The collection of the writers' locks of ``modify`` (one lease document per memory)."""
    ADMIN = "admin"
    """The ``admin`` database (for ``hello``)."""


class Result(enum.Enum):
    """What the executor hands back from the driver's return value."""

    AS_IS = "as is"
    """The value itself (a document, ``None`` or a command reply)."""
    MATCHED = "matched"
    """``matched_count`` of an ``UpdateResult``."""
    DELETED = "deleted"
    """``deleted_count`` of a ``DeleteResult``."""
    NOTHING = "nothing"
    """``None`` (the write's result is not used)."""
    LIST = "list"
    """Every document of the cursor returned, as a list."""


_NO_KWARGS: Final[Mapping[str, Any]] = {}


class Command(NamedTuple):
    """One driver call: ``target.method(*args, **kwargs)``, its result read as ``result`` says.

    A failure is reported as ``operation`` failing for ``memory_id`` (``None``: for no one memory). A named
    tuple rather than a dataclass: one is built per command, on every turn.
    """

    operation: str
    memory_id: str | None
    target: Target
    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = _NO_KWARGS
    result: Result = Result.AS_IS


Step: TypeAlias = Command | Sleep
"""What an operation yields: a command to send, or a wait."""


def call(
    operation: str,
    memory_id: str | None,
    target: Target,
    method: str,
    *args: Any,
    result: Result = Result.AS_IS,
    **kwargs: Any,
) -> Command:
    """The command calling ``method`` on ``target`` with these arguments, reported as ``operation``."""
    return Command(operation, memory_id, target, method, args, kwargs or _NO_KWARGS, result)


def result_of(command: Command, value: Any) -> Any:
    """What the operation receives for ``command`` from the driver's return ``value`` (cursors excepted).

    A :attr:`Result.LIST` value is a cursor, which each executor drains its own way.
    """
    kind = command.result
    if kind is Result.AS_IS:
        return value
    if kind is Result.MATCHED:
        return value.matched_count
    if kind is Result.DELETED:
        return value.deleted_count
    return None
