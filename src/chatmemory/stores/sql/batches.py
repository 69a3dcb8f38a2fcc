"""Batches taken apart: an operation as its executor sends it, one statement or signal at a time (pure).

An operation may yield a :class:`~chatmemory.stores.sql.commands.Batch`, so that a turn goes through
its generators once; :func:`unbatched` hands the executor the batch's statements one by one (with the
``BEGIN``, ``COMMIT`` or ``ROLLBACK`` of a batch that is a transaction of its own) and the operation
their results as one list. A batch with a joined form goes to the executor whole (one round trip where
the connection allows it, else :func:`in_order`), then ``COMMIT`` or ``ROLLBACK``. Both executors drive
``unbatched(operation)`` with :mod:`chatmemory.stores.base.driving`, so a batch is sent the same way by
both. No driver, no I/O.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from chatmemory.stores.sql.commands import COMMIT, ROLLBACK, Batch, Sent, Statement, Steps

__all__ = ["in_order", "unbatched"]

_T = TypeVar("_T")


def unbatched(steps: Steps[_T]) -> Generator[Sent, Any, _T]:
    """``steps`` with each batch it yields sent statement by statement; what it returns, returned.

    A failure thrown in goes on into ``steps`` where it yielded the command (or the batch) that failed.
    """
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            command = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            if type(command) is Batch:
                reply = yield from (_sent(command) if command.joined is None else _sent_joined(command))
            else:
                reply = yield command  # not a Batch: a command the executor sends
            error = None
        except Exception as exc:
            reply, error = None, exc


def _sent(batch: Batch) -> Generator[Sent, Any, list[Any]]:
    """Send ``batch``; return its results (fewer when one missed its ``expect``), or raise what failed.

    In a transaction (``batch.begin``): a statement that raises or misses its ``expect`` is rolled back
    (a failing ``ROLLBACK`` raises with the error it rolled back as its context); a ``BEGIN`` or
    ``COMMIT`` that raises is not (nothing was begun, or the outcome is unknown).
    """
    transaction = batch.begin is not None
    if transaction:
        yield batch.begin  # type: ignore[misc]  # not None: a transaction
    results: list[Any] = []
    missed = False
    try:
        for statement in batch.statements:
            reply = yield statement
            results.append(reply)
            if statement.expect is not None and reply != statement.expect:
                missed = True
                break
    except Exception:
        if transaction:
            yield ROLLBACK
        raise
    if transaction:
        yield ROLLBACK if missed else COMMIT
    return results


def _sent_joined(batch: Batch) -> Generator[Sent, Any, list[Any]]:
    """Send ``batch`` whole (its joined form), then ``COMMIT``, or ``ROLLBACK`` after a miss or an error."""
    try:
        results: list[Any] = yield batch
    except Exception:
        yield ROLLBACK
        raise
    yield ROLLBACK if missed(batch, results) else COMMIT
    return results


def missed(batch: Batch, results: list[Any]) -> bool:
    """Whether ``results`` stop short of ``batch`` or end with a statement that missed its ``expect``."""
    if len(results) < len(batch.statements):
        return True
    return any(
        statement.expect is not None and result != statement.expect
        for statement, result in zip(batch.statements, results, strict=True)
    )


def in_order(batch: Batch) -> Generator[Statement, Any, list[Any]]:
    """``BEGIN`` and the statements of ``batch`` one by one, up to the first that misses its ``expect``.

    How an executor sends a batch with a joined form on a connection that cannot run it as one string;
    it returns what the joined form would (the results, up to that miss).
    """
    if batch.begin is not None:
        yield batch.begin
    results: list[Any] = []
    for statement in batch.statements:
        reply = yield statement
        results.append(reply)
        if statement.expect is not None and reply != statement.expect:
            break
    return results
