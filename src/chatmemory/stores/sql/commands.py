"""What a SQL store asks its executor to send, and what it gets back (pure: no driver, no I/O).

The store's operations (:mod:`~chatmemory.stores.sql.operations` and the modules it builds on) are
written once, as generators that yield these commands and receive their results: the sync executor
(:mod:`chatmemory.stores.sql.store`) sends each one with a SQLAlchemy ``Engine``, the asyncio one
(:mod:`chatmemory.aio.stores.sql`) with an ``AsyncEngine``; a driver exception is thrown back in where the
command was yielded. The first statement of an operation checks a connection out of the pool, held until
the operation yields :data:`RELEASE` (the next statement then checks out another) or ends. Transactions
are statements like any other (``BEGIN``, ``COMMIT``, ``ROLLBACK``), sent by the operation, or by a
:class:`Batch` that is a transaction of its own.
"""

from __future__ import annotations

import enum
from typing import Any, Final, NamedTuple, TypeAlias

from chatmemory.core.driving import Emit, ListingClosed, Sleep, Steps

__all__ = [
    "CHECK_SCHEMA",
    "COMMIT",
    "RELEASE",
    "ROLLBACK",
    "Batch",
    "Command",
    "Emit",
    "ListingClosed",
    "Result",
    "Sleep",
    "Statement",
    "Steps",
    "result_of",
]


class Result(enum.Enum):
    """What the executor hands back for a statement."""

    ROWCOUNT = "rowcount"
    """The rows the statement changed (the driver's ``rowcount``)."""
    ROWS = "rows"
    """Every row, each readable by column label (a SQLAlchemy statement's)."""
    RECORDS = "records"
    """Every row of driver SQL, each a sequence of its columns (the window read's ``(seq, payload)``)."""
    FIRST = "first"
    """The first row, or ``None``."""
    SCALAR = "scalar"
    """The first column of the first row, or ``None``."""
    SCALARS = "scalars"
    """The first column of every row, as a list."""


class Statement(NamedTuple):
    """One statement on the operation's connection.

    A named tuple rather than a dataclass: several are built per operation, on every turn.

    Attributes:
        statement: driver SQL (a ``str``, already in the driver's paramstyle: sent straight to the
            cursor when nothing listens to cursor events) or a SQLAlchemy executable.
        parameters: the driver's parameters (for driver SQL) or named values (for an executable).
        result: what to hand back.
        many: ``parameters`` is a list of rows (an ``executemany``).
        expect: in a :class:`Batch`, the result this statement must have for the batch to go on.
    """

    statement: Any
    parameters: Any = None
    result: Result = Result.ROWCOUNT
    many: bool = False
    expect: int | None = None


class Batch(NamedTuple):
    """Statements (at least one) sent in order on the operation's connection, in one round of the operation.

    The operation gets the list of their results; sending stops after the first statement whose result
    differs from its :attr:`Statement.expect` (when that is not ``None``), so the list is then shorter.

    With :attr:`begin` the batch is a transaction of its own: ``begin`` first, ``COMMIT`` last; a
    statement that raises or misses its ``expect`` is followed by ``ROLLBACK`` instead, before the error
    (or the shorter list) goes back. A ``begin`` or ``COMMIT`` that raises is not rolled back: nothing
    was begun, or the outcome is unknown. (:func:`~chatmemory.stores.sql.batches.send_batch` takes batches
    apart, the same way for both executors.)
    """

    statements: tuple[Statement, ...]
    begin: Statement | None = None
    joined: Statement | None = None
    """The transaction (``begin`` and every statement, all counting rows) as one multi-statement string,
    for a connection that runs one: the executor then sends the batch whole, in one round trip, and hands
    back the results up to the first that missed its ``expect`` (what followed ran in the transaction the
    operation then rolls back; its errors are not raised). Otherwise it sends ``begin`` and the
    statements one by one, stopping as :class:`Batch` says. ``COMMIT`` or ``ROLLBACK`` follows as for
    any transaction (:func:`~chatmemory.stores.sql.batches.send_batch`)."""


class _Signal(enum.Enum):
    RELEASE = "release"
    CHECK_SCHEMA = "check schema"


RELEASE: Final = _Signal.RELEASE
"""Hand the operation's connection back to the pool (the next statement checks out another)."""
CHECK_SCHEMA: Final = _Signal.CHECK_SCHEMA
"""Check, once per store, that the tables are at the revision the store needs (raises otherwise)."""
COMMIT: Final = Statement("COMMIT")
ROLLBACK: Final = Statement("ROLLBACK")

Command: TypeAlias = Statement | Batch | Sleep | Emit[str] | _Signal
"""Anything an operation yields."""


def result_of(kind: Result, result: Any) -> Any:
    """What an operation receives, as ``kind`` says, from a SQLAlchemy result (sync or asyncio, buffered)."""
    if kind is Result.ROWCOUNT:
        return int(result.rowcount)
    if kind is Result.ROWS or kind is Result.RECORDS:
        return result.all()
    if kind is Result.FIRST:
        return result.first()
    if kind is Result.SCALAR:
        return result.scalar()
    return result.scalars().all()
