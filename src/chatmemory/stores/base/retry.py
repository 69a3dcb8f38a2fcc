"""One retry policy for every conflict a store or a memory retries: a time budget, jittered backoff.

Writers to one memory that collide retry from a fresh read. Counting attempts makes the outcome depend on
how busy the machine is (a writer that is descheduled loses every race); a time budget does not: a writer
keeps trying for ``budget`` seconds, backing off exponentially with full jitter so that colliding writers
spread out. The policy only computes delays; a sync caller sleeps with ``time.sleep``, an async one with
``asyncio.sleep``::

    attempts = policy.start()
    while True:
        outcome = try_once()
        if outcome is not a conflict:
            return outcome
        delay = attempts.backoff()
        if delay is None:
            raise ConcurrentUpdateError(memory_id, attempts=attempts.count)
        time.sleep(delay)

Inside a store operation (see :mod:`chatmemory.stores.base.telemetry`) each new attempt is counted as a
retry of it, and a spent budget marks it so that its error is logged as a WARNING.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from chatmemory import telemetry

__all__ = ["Attempts", "RetryPolicy"]


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

    def start(self, operation: str | None = None) -> Attempts:
        """Begin retrying one operation (its first attempt starts now).

        Args:
            operation: what retries are counted as when no store operation runs (``memory.add``).
        """
        return Attempts(self, operation)


class Attempts:
    """The retries of one operation under a :class:`RetryPolicy`."""

    def __init__(self, policy: RetryPolicy, operation: str | None = None) -> None:
        self._policy = policy
        self._operation = operation
        self._deadline = time.monotonic() + policy.budget
        self.count = 1
        """Attempts made so far (the first one included)."""

    def backoff(self) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` when the budget is spent."""
        delay = random.uniform(0, min(self._policy.max_delay, self._policy.base_delay * 2 ** min(self.count, 30)))
        if time.monotonic() + delay >= self._deadline:
            telemetry.retries_exhausted()
            return None
        self.count += 1
        telemetry.retried(self._operation)
        return delay

    @staticmethod
    def again() -> None:
        """Count an attempt that follows at once, without backoff (a resend on a new connection)."""
        telemetry.retried()
