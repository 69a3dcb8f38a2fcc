"""Driving one SQL operation for an executor, one statement or signal at a time (pure).

Both executors run an operation the same way: they send what :class:`Stepper` gives them and hand the
result (or the driver's exception) back to it. The stepper resumes the operation's generator, and takes
each :class:`~chatmemory.stores.sql.commands.Batch` apart: its statements come one by one, with the
``BEGIN``, ``COMMIT`` or ``ROLLBACK`` of a batch that is a transaction, and the operation gets their
results as one list, in one round through its generators.
"""

from __future__ import annotations

from typing import Any, Final, Generic, TypeVar

from chatmemory.stores.sql.commands import COMMIT, ROLLBACK, Batch, Sent, Steps

__all__ = ["Stepper"]

_T = TypeVar("_T")

_MISSED: Final = object()
"""What stopped a transactional batch that was rolled back: a statement that missed its ``expect``."""


class Stepper(Generic[_T]):
    """Drives one operation: the executor sends what :meth:`start`, :meth:`next` and :meth:`fail` return.

    They return ``None`` once the operation has returned; its result is then :attr:`value`.
    """

    __slots__ = ("_at", "_batch", "_results", "_steps", "_stopped", "value")

    def __init__(self, steps: Steps[_T]) -> None:
        self._steps = steps
        self._batch: Batch | None = None
        self._at = 0
        """In the batch: the statement sent (-1: its ``begin``; its length: ``COMMIT``; one more: ``ROLLBACK``)."""
        self._results: list[Any] = []
        self._stopped: object = None
        """What a rollback of the batch answers for: an exception, or :data:`_MISSED`."""
        self.value: _T | None = None
        """What the operation returned (once :meth:`next` or :meth:`fail` returned ``None``)."""

    def start(self) -> Sent | None:
        """The operation's first command (``None``: it returned without one)."""
        return self._resume(None, None)

    def next(self, reply: Any) -> Sent | None:
        """The command after the one that got ``reply`` (``None``: the operation returned)."""
        batch = self._batch
        if batch is None:
            return self._resume(reply, None)
        statements, at = batch.statements, self._at
        if 0 <= at < len(statements):  # a statement of the batch answered (the hot path: inline)
            self._results.append(reply)
            expect = statements[at].expect
            if expect is None or reply == expect:
                at += 1
                self._at = at
                if at < len(statements):
                    return statements[at]
                if batch.begin is not None:
                    return COMMIT
                return self._end(self._results, None)
        return self._step(None)

    def fail(self, error: BaseException) -> Sent | None:
        """The command after the one that raised ``error``, which goes back into the operation.

        Raises:
            BaseException: whatever the operation raises (``error`` itself, if it does not handle it).
        """
        if self._batch is None:
            return self._resume(None, error)
        return self._step(error)

    def _resume(self, reply: Any, error: BaseException | None) -> Sent | None:
        """Resume the operation with ``reply`` (or ``error``); start the batch it yields, if it does."""
        try:
            command = self._steps.send(reply) if error is None else self._steps.throw(error)
        except StopIteration as stop:
            self.value = stop.value
            return None
        if type(command) is not Batch:
            return command  # type: ignore[return-value]  # not a Batch: a command the executor sends
        self._batch, self._results = command, []
        if command.begin is not None:
            self._at = -1
            return command.begin
        self._at = 0
        return command.statements[0]

    def _step(self, error: BaseException | None) -> Sent | None:
        """What follows in the batch when it does not simply go on (see :meth:`next`), or the batch's end.

        ``error``: what the statement sent raised (``None``: it answered, and its result is in the list).
        """
        batch = self._batch
        assert batch is not None
        count, at = len(batch.statements), self._at
        transaction = batch.begin is not None
        if at == -1:  # the BEGIN answered; nothing to roll back if it failed
            if error is not None:
                return self._end(None, error)
            self._at = 0
            return batch.statements[0]
        if at == count:  # the COMMIT answered; its failure is not rolled back (the outcome is unknown)
            return self._end(self._results, error)
        if at > count:  # the ROLLBACK answered: hand back what stopped the batch
            stopped = self._stopped
            if error is not None:
                if isinstance(stopped, BaseException):
                    error.__context__ = stopped  # as if raised while handling it
                return self._end(None, error)
            if stopped is _MISSED:
                return self._end(self._results, None)
            return self._end(None, stopped)  # type: ignore[arg-type]  # the exception that stopped it
        # A statement of the batch raised, or missed its expect (its result is then the list's last).
        if not transaction:
            return self._end(None, error) if error is not None else self._end(self._results, None)
        self._stopped, self._at = (error if error is not None else _MISSED), count + 1
        return ROLLBACK

    def _end(self, results: list[Any] | None, error: BaseException | None) -> Sent | None:
        """The batch is over: the operation gets ``results``, or ``error`` where it yielded the batch."""
        self._batch, self._results, self._stopped = None, [], None
        return self._resume(results, error)
