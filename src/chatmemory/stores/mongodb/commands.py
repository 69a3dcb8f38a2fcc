"""What a MongoDB store asks its executor to send, and how the executor hands the answer back (pure).

The store's operations (:mod:`~chatmemory.stores.mongodb.operations`) are written once, as generators
that yield a :class:`Command` and receive its result: the sync executor sends each command with
``MongoClient``, the async one with ``AsyncMongoClient``, and both throw a driver exception back into
the generator at the point where the command was yielded. No driver import and no I/O here.
"""

from __future__ import annotations

import enum
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeVar

__all__ = ["Command", "Result", "Sleep", "Steps", "Target", "call", "result_of"]

_T = TypeVar("_T")


class Target(enum.Enum):
    """What a command is sent to."""

    WINDOW = "window"
    """The memories collection."""
    HISTORY = "history"
    """The history collection (only on a store with history)."""
    LOCKS = "locks"
    """The collection of the writers' locks (see :mod:`~chatmemory.stores.mongodb.lease`)."""
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

    A named tuple rather than a dataclass: one is built per command, on every turn.
    """

    target: Target
    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = _NO_KWARGS
    result: Result = Result.AS_IS


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` before the next command (a resend's backoff, or a busy lock's)."""

    seconds: float


Steps = Generator["Command | Sleep", Any, _T]
"""An operation: yields commands, receives each one's result, returns its own result."""


def call(target: Target, method: str, *args: Any, result: Result = Result.AS_IS, **kwargs: Any) -> Command:
    """The command calling ``method`` on ``target`` with these arguments."""
    return Command(target, method, args, kwargs or _NO_KWARGS, result)


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
