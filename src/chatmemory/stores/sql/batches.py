"""Batches taken apart: what an executor sends for a batch, one statement or signal at a time (pure).

An operation may yield a :class:`~chatmemory.stores.sql.commands.Batch`, so that a turn goes through
its generators once; the executor hands it to :func:`send_batch` with its own ``send`` (one statement,
or a batch with a joined form, on the operation's connection), which sends the batch's statements one
by one, with the ``BEGIN``, ``COMMIT`` or ``ROLLBACK`` of a batch that is a transaction of its own, and
returns their results as one list. A batch with a joined form goes to ``send`` whole (one round trip
where the connection allows it, else :func:`send_in_order`), then ``COMMIT`` or ``ROLLBACK``. Both
executors send a batch through :func:`send_batch`, so it is sent the same way by both. Plain calls
rather than a generator: a batch is sent on every turn. No driver, no I/O of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatmemory.stores.sql.commands import COMMIT, ROLLBACK, Batch, Statement

__all__ = ["Send", "missed", "send_batch", "send_in_order"]

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
