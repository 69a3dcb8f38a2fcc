"""What a SQL store's operations ask an executor to send, and how a batch is taken apart (pure: no driver).

The operations (:mod:`~chatmemory.stores.sql.operations`) yield these commands and receive their results;
the executors (:mod:`~chatmemory.stores.sql.executor`, :mod:`~chatmemory.stores.sql.aio`) send them. The
first statement of an operation checks a connection out of the pool, held until the operation yields
:data:`RELEASE` or ends. Transactions are statements like any other (``BEGIN``, ``COMMIT``, ``ROLLBACK``),
or a :class:`Batch` that is a transaction of its own, which both executors send through
:func:`send_batch` (plain calls rather than a generator: a batch is sent on every turn).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Final, NamedTuple, TypeAlias

from chatmemory.core.driving import Emit, Sleep

__all__ = [
    "CHECK_SCHEMA",
    "COMMIT",
    "RELEASE",
    "ROLLBACK",
    "Batch",
    "Command",
    "Result",
    "Send",
    "Statement",
    "missed",
    "result_of",
    "send_batch",
    "send_in_order",
]


class Result(enum.Enum):
    """What the executor hands back for a statement."""

    ROWCOUNT = "rowcount"
    """The rows the statement changed (the driver's ``rowcount``)."""
    ROWS = "rows"
    """Every row, each readable by column label (a SQLAlchemy statement's)."""
    RECORDS = "records"
    """Every row as the driver gives it, each a sequence of its columns (the window read's ``(seq, payload)``).

    For a SQLAlchemy statement too: no result processing and no SQLAlchemy row per record (a batch
    read's message rows, whose columns need none)."""
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
        operation: the store operation sending it (named by the error of a failure; ``None``: none).
        memory_id: the memory it is sent for (``None``: several, or none).
        many: ``parameters`` is a list of rows (an ``executemany``).
        expect: in a :class:`Batch`, the result this statement must have for the batch to go on.
    """

    statement: Any
    parameters: Any = None
    result: Result = Result.ROWCOUNT
    operation: str | None = None
    memory_id: str | None = None
    many: bool = False
    expect: int | None = None


class Batch(NamedTuple):
    """Statements (at least one) sent in order on the operation's connection, in one round of the operation.

    The operation gets the list of their results; sending stops after the first statement whose result
    differs from its :attr:`Statement.expect` (when that is not ``None``), so the list is then shorter.

    With :attr:`begin` the batch is a transaction of its own: ``begin`` first, ``COMMIT`` last; a
    statement that raises or misses its ``expect`` is followed by ``ROLLBACK`` instead, before the error
    (or the shorter list) goes back. A ``begin`` or ``COMMIT`` that raises is not rolled back: nothing
    was begun, or the outcome is unknown. (:func:`send_batch` takes batches
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
    any transaction (:func:`send_batch`)."""
    operation: str | None = None
    """The store operation sending it (for the error of a failure, as :attr:`Statement.operation`)."""
    memory_id: str | None = None
    """The memory it is sent for (``None``: several, or none)."""


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
    if kind is Result.ROWS:
        return result.all()
    if kind is Result.RECORDS:
        try:
            return result.cursor.fetchall()
        finally:
            result.close()
    if kind is Result.FIRST:
        return result.first()
    if kind is Result.SCALAR:
        return result.scalar()
    return result.scalars().all()


Send = Callable[[Statement | Batch], Any]
"""The executor's send: a :class:`Statement` (or a :class:`Batch` with a joined form, whole) → its result."""


def send_batch(batch: Batch, send: Send) -> list[Any]:
    """Send ``batch`` with ``send`` (statements, or the batch whole when it has a joined form); return its results.

    A failure of ``send`` is answered as the batch says: a transaction is rolled back, then the error
    goes on.
    """
    return _send_statements(batch, send) if batch.joined is None else _send_joined(batch, send)


def _send_statements(batch: Batch, send: Send) -> list[Any]:
    """Send ``batch``; return its results (fewer when one missed its ``expect``), or raise what failed.

    In a transaction (``batch.begin``): a statement that raises or misses its ``expect`` is rolled back
    (a failing ``ROLLBACK`` raises with the error it rolled back as its context); a ``BEGIN`` or
    ``COMMIT`` that raises is not (nothing was begun, or the outcome is unknown).
    """
    begin = batch.begin
    if begin is not None:
        send(begin)
    results: list[Any] = []
    missed = False
    try:
        for statement in batch.statements:
            reply = send(statement)
            results.append(reply)
            if statement.expect is not None and reply != statement.expect:
                missed = True
                break
    except Exception:
        if begin is not None:
            send(ROLLBACK)
        raise
    if begin is not None:
        send(ROLLBACK if missed else COMMIT)
    return results


def _send_joined(batch: Batch, send: Send) -> list[Any]:
    """Send ``batch`` whole (its joined form), then ``COMMIT``, or ``ROLLBACK`` after a miss or an error."""
    try:
        results: list[Any] = send(batch)
    except Exception:
        send(ROLLBACK)
        raise
    send(ROLLBACK if missed(batch, results) else COMMIT)
    return results


def missed(batch: Batch, results: list[Any]) -> bool:
    """Whether ``results`` stop short of ``batch`` or end with a statement that missed its ``expect``."""
    if len(results) < len(batch.statements):
        return True
    return any(
        statement.expect is not None and result != statement.expect
        for statement, result in zip(batch.statements, results, strict=True)
    )


def send_in_order(batch: Batch, send: Callable[[Statement], Any]) -> list[Any]:
    """``BEGIN`` and the statements of ``batch`` one by one, up to the first that misses its ``expect``.

    How an executor sends a batch with a joined form on a connection that cannot run it as one string;
    it returns what the joined form would (the results, up to that miss).
    """
    if batch.begin is not None:
        send(batch.begin)
    results: list[Any] = []
    for statement in batch.statements:
        reply = send(statement)
        results.append(reply)
        if statement.expect is not None and reply != statement.expect:
            break
    return results
