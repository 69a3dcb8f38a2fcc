"""Batches taken apart: what an executor sends for a batch, one statement or signal at a time (pure).

An operation may yield a :class:`~chatmemory.stores.sql.commands.Batch`, so that a turn goes through
its generators once; the executor sends what :func:`sending` yields for it (the batch's statements one
by one, with the ``BEGIN``, ``COMMIT`` or ``ROLLBACK`` of a batch that is a transaction of its own) and
hands the operation their results as one list. A batch with a joined form goes to the executor whole
(one round trip, ``COMMIT`` included, where the connection allows it, else :func:`in_order`), followed
by ``ROLLBACK`` only after a miss or an error. Both executors drive ``sending(batch)`` with
:mod:`chatmemory.stores.base.driving`, so a batch is sent the same way by both. No driver, no I/O.
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
    """Send ``batch`` whole (its joined form, which commits), then ``ROLLBACK`` after a miss or an error.

    After a miss the joined string committed nothing (its statements after the miss are guarded by it),
    or it stopped at an error with the transaction still open, or :func:`in_order` stopped before its
    ``COMMIT``: the ``ROLLBACK`` ends what is open, and is a no-op otherwise. The error may be the
    ``COMMIT``'s, whose outcome is unknown (its reply was lost with the connection): when the ``ROLLBACK``
    fails too, the batch's own error goes on (the ``ROLLBACK``'s as its context), so that the operation
    sees a lost connection, and finds out whether its write landed, rather than a failed ``ROLLBACK``.
    """
    try:
        results: list[Any] = yield batch
    except Exception as failure:
        try:
            yield ROLLBACK
        except Exception:
            raise failure  # noqa: B904 - the batch's error, not the ROLLBACK's, says what happened
        raise
    if missed(batch, results):
        yield ROLLBACK
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
    """``BEGIN``, the statements of ``batch`` one by one and ``COMMIT``, stopping at the first miss.

    How an executor sends a batch with a joined form on a connection that cannot run it as one string;
    it returns what the joined form would (the results, up to the first statement that misses its
    ``expect``), and commits as it does, unless a statement missed (the transaction is then left open
    for the ``ROLLBACK`` that follows a miss).
    """
    if batch.begin is not None:
        yield batch.begin
    results: list[Any] = []
    for statement in batch.statements:
        reply = yield statement
        results.append(reply)
        if statement.expect is not None and reply != statement.expect:
            return results
    if batch.begin is not None:
        yield COMMIT
    return results
