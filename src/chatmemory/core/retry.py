"""One retry policy for every conflict a store or a memory retries: a time budget, jittered backoff.

Writers to one memory that collide retry from a fresh read, for ``budget`` seconds, backing off
exponentially with full jitter so that colliding writers spread out (a time budget, not a count of
attempts: a descheduled writer would lose every race). The policy only computes delays; a sync caller
sleeps with ``time.sleep``, an async one with ``asyncio.sleep``. Retries are reported to the observer
:mod:`chatmemory.telemetry` registers (each counted as a retry of the store operation running, and a
spent budget logged as a WARNING); see docs/concurrency.md.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Attempts", "RetryObserver", "RetryPolicy", "observe_retries"]


class RetryObserver(Protocol):
    """Who counts retries (:mod:`chatmemory.telemetry` registers itself when imported)."""

    def retried(self, operation: str | None = None) -> None:
        """One more attempt: of the current store operation, else of ``operation``."""

    def retries_exhausted(self) -> None:
        """The current operation's retry budget is spent."""


class _Unobserved:
    def retried(self, operation: str | None = None) -> None:
        pass

    def retries_exhausted(self) -> None:
        pass


_observer: RetryObserver = _Unobserved()


def observe_retries(observer: RetryObserver) -> None:
    """Report every retry and spent budget to ``observer`` from now on."""
    global _observer
    _observer = observer


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long and how to retry a write that conflicted with another writer.

    Args:
        budget: seconds from the first attempt after which no new attempt starts.
        base_delay: the backoff ceiling after the first conflict, in seconds; it doubles per conflict.
        max_delay: the largest backoff ceiling, in seconds. It is reached only after about nine conflicts in
            a row, so a lightly contended write waits milliseconds; on a heavily contended memory a ceiling of
            half a second lets colliding writers spread out over more than one server round trip (with 50 ms,
            writers on a slow MongoDB server kept colliding until their budget was spent).

    Raises:
        ValueError: a value is not a finite number above zero, or ``base_delay > max_delay``.
    """

    budget: float = 30.0
    base_delay: float = 0.001
    max_delay: float = 0.5

    def __post_init__(self) -> None:
        for name in ("budget", "base_delay", "max_delay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"RetryPolicy {name} must be a finite number of seconds above zero, got {value!r}")
        if self.base_delay > self.max_delay:
            raise ValueError(f"RetryPolicy base_delay ({self.base_delay}) must not exceed max_delay ({self.max_delay})")

    def start(self, operation: str | None = None, *, started: float | None = None) -> Attempts:
        """Begin retrying one operation (its first attempt starts now, or at ``started``).

        Args:
            operation: what retries are counted as when no store operation runs (``memory.add``).
            started: the ``time.monotonic()`` of the first attempt, for a caller that starts retrying
                only once that attempt conflicted (an operation that never conflicts makes no tracker).
        """
        return Attempts(self, operation, started)


class Attempts:
    """The retries of one operation under a :class:`RetryPolicy`."""

    def __init__(self, policy: RetryPolicy, operation: str | None = None, started: float | None = None) -> None:
        self._policy = policy
        self._operation = operation
        self._deadline = (time.monotonic() if started is None else started) + policy.budget
        self.count = 1
        """Attempts made so far (the first one included)."""

    def backoff(self) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` when the budget is spent."""
        delay = random.uniform(0, min(self._policy.max_delay, self._policy.base_delay * 2 ** min(self.count, 30)))
        if time.monotonic() + delay >= self._deadline:
            _observer.retries_exhausted()
            return None
        self.count += 1
        _observer.retried(self._operation)
        return delay

    @staticmethod
    def again() -> None:
        """Count an attempt that follows at once, without backoff (a resend on a new connection)."""
        _observer.retried()
