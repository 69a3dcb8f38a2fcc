"""Batches taken apart: what an executor sends for a batch, one statement or signal at a time (pure).

An operation may yield a :class:`~chatmemory.stores.sql.commands.Batch`, so that a turn goes through
its generators once; the executor sends what :func:`sending` yields for it (the batch's statements one
by one, with the ``BEGIN``, ``COMMIT`` or ``ROLLBACK`` of a batch that is a transaction of its own) and
hands the operation their results as one list. A batch with a joined form goes to the executor whole
(one round trip where the connection allows it, else :func:`in_order`), then ``COMMIT`` or
``ROLLBACK``. Both executors drive ``sending(batch)`` with :mod:`chatmemory.stores.base.driving`, so a
batch is sent the same way by both. No driver, no I/O.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from chatmemory.stores.sql.commands import COMMIT, ROLLBACK, Batch, Statement

__all__ = ["in_order", "missed", "sending"]


def sending(batch: Batch) -> Generator[Statement | Batch, Any, list[Any]]:
    """What to send for ``batch`` (statements, or the batch whole when it has a joined form); returns its results.

    A failure thrown in (the driver's error for what was sent) is answered as the batch says: a
    transaction is rolled back, then the error goes on.
    """
    return _sent(batch) if batch.joined is None else _sent_joined(batch)


def _sent(batch: Batch) -> Generator[Statement, Any, list[Any]]:
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


def _sent_joined(batch: Batch) -> Generator[Statement | Batch, Any, list[Any]]:
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
