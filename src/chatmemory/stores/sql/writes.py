"""When the SQL store tries again: the retry decisions the sync and asyncio executors share.

No I/O: the operations run an attempt inside :meth:`WriteLoop.errors` (which classifies the driver's
exception), hand its outcome to :meth:`WriteLoop.settle`, and sleep :meth:`WriteLoop.delay`; a read asks
:meth:`ReadAttempts.lost`.

* A connection that died under a call: the outcome is unknown; the call is sent once more on a new
  connection, a write through the locked path, which finds its write id if the first send landed.
* A database-level conflict (two writers creating one memory, a deadlock): tried again, with jittered
  backoff, within the retry policy's time budget.
* A diffed write whose snapshot went stale: a conditional write reports the conflict; an unconditional
  one falls back to the locked path at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError

from chatmemory import telemetry
from chatmemory.core.errors import StoreError
from chatmemory.stores.base import Attempts, Operation, RetryPolicy
from chatmemory.stores.sql import plan
from chatmemory.stores.sql.engine import is_conflict, is_disconnect

__all__ = ["ReadAttempts", "WriteLoop"]

_DISCONNECT_RETRIES = 1


class WriteLoop:
    """The attempts of one write (or of another operation that changes rows: a delete, a trim, a purge).

    Args:
        request: the write (``None`` for the others, which have no outcome to settle).
        policy: how long database-level conflicts are retried.
        dialect: the dialect family, to classify driver errors.
        operation: what the error says failed when conflicts outlast ``policy``.
        memory_id: the memory it names, when there is no ``request`` (``None``: every memory).
    """

    def __init__(
        self,
        request: plan.WriteRequest | None,
        policy: RetryPolicy,
        dialect: str,
        operation: str = Operation.WRITE,
        memory_id: str | None = None,
    ) -> None:
        self._request = request
        self._operation = operation
        self._memory_id = memory_id if request is None else request.memory_id
        self._attempts: Attempts = policy.start()
        self._dialect = dialect
        self._disconnects = 0
        self._last_error: DBAPIError | None = None
        self._conflicted = False
        self.failed = False
        """Whether the last attempt failed with a retryable driver error."""
        self.may_diff = True
        """Whether the next attempt may take the diffed path (not after a lost connection or a stale diff)."""

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Run one attempt: a retryable driver error sets :attr:`failed`; any other propagates."""
        self.failed = False
        try:
            yield
        except DBAPIError as exc:
            if not self.retryable(exc):
                raise

    def retryable(self, exc: BaseException) -> bool:
        """Whether the attempt that raised ``exc`` may be tried again (then :attr:`failed` is set)."""
        if not isinstance(exc, DBAPIError):
            return False
        if is_disconnect(exc) and self._disconnects < _DISCONNECT_RETRIES:
            self._disconnects += 1
            self.may_diff = False
        elif is_conflict(self._dialect, exc):
            self.may_diff = False
            telemetry.conflicted()
        else:
            return False
        self.failed = True
        self._last_error = exc
        return True

    def settle(self, outcome: plan.Written | plan.Conflict | plan.Corrupted, *, diffed: bool) -> plan.Written | None:
        """The written outcome, or ``None`` to try again (after :meth:`delay`).

        Raises:
            ConcurrentUpdateError: a conditional write found the memory at another version.
            CorruptedMemoryError: the write found the memory damaged.
        """
        request = self._request
        assert request is not None
        if isinstance(outcome, plan.Written):
            telemetry.note(version=outcome.version)
            return outcome
        if isinstance(outcome, plan.Corrupted):
            raise outcome.error(request.memory_id)
        if request.conditional:
            raise plan.conflict_error(request)
        # An unconditional write whose cached snapshot was stale writes under the lock instead.
        self.may_diff = False
        self._last_error = None
        return None

    def conflicted(self) -> None:
        """The attempt lost to another writer (its outcome said so): back off before the next one."""
        self._conflicted = True
        telemetry.conflicted()

    def delay(self) -> float:
        """Seconds to wait before the next attempt.

        Raises:
            StoreError: conflicts went on for the whole time budget.
        """
        error, self._last_error = self._last_error, None
        conflicted, self._conflicted = self._conflicted, False
        if (error is None and not conflicted) or (error is not None and is_disconnect(error)):
            self._attempts.again()
            return 0.0
        delay = self._attempts.backoff()
        if delay is None:
            raise StoreError(
                self._operation,
                self._memory_id,
                f"conflicted with other writers on each of {self._attempts.count} attempts",
            ) from error
        return delay


class ReadAttempts:
    """The attempts of one read: with the cached snapshot, then without it if the rows disagree with it."""

    def __init__(self) -> None:
        self._disconnects = 0
        self._stale = False

    @property
    def use_cache(self) -> bool:
        """Whether this attempt may leave out the payloads of cached messages."""
        return not self._stale

    def stale(self) -> None:
        """The rows named a message the cache does not hold: read everything next time."""
        if self._stale:
            raise AssertionError("a read without the cache cannot find the cache stale")
        self._stale = True
        telemetry.retried()

    def lost(self, exc: BaseException) -> bool:
        """Whether the attempt that raised ``exc`` lost its connection and may be sent again (once, on a new one)."""
        if not (isinstance(exc, DBAPIError) and is_disconnect(exc) and self._disconnects < _DISCONNECT_RETRIES):
            return False
        self._disconnects += 1
        telemetry.retried()
        return True

    def __iter__(self) -> Iterator[ReadAttempts]:
        """Yield this object once per attempt allowed."""
        # At most: a lost connection, a stale cache, and the read that answers.
        for _ in range(_DISCONNECT_RETRIES + 2):
            yield self


def retry_read() -> ReadAttempts:
    """The attempts of one read."""
    return ReadAttempts()
