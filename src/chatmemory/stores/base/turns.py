"""Writers taking turns on one memory: the lease lock's options and the in-process queue in front of it.

A store whose database has no lock a write can wait on (Redis, MongoDB) gives ``modify`` a lease lock of
its own, kept on the server beside the memory: taken with a token, given back by that token, and gone by
itself after ``lock_lease`` seconds when its holder died or hung. Writers of one process that share the
store first queue here, in the process (one lock per memory id; for asyncio, per event loop too), so that
only one of them at a time asks the server. What the lock never replaces is the version check: a holder
whose lease ran out still writes only at the version it read (see ``docs/semantics.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import math
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from chatmemory.stores.base.retry import RetryPolicy

__all__ = ["DEFAULT_LOCK_LEASE", "DEFAULT_LOCK_WAIT", "AsyncLocalTurns", "LocalTurns", "LockOptions"]

DEFAULT_LOCK_LEASE = 5.0
"""Seconds a lock holder that died or hung can keep the other writers of its memory waiting."""
DEFAULT_LOCK_WAIT = 30.0
"""Seconds a writer waits for the lock before it gives up with :class:`~chatmemory.ConcurrentUpdateError`."""

_POLL_FIRST, _POLL_MAX = 0.001, 0.025


def _seconds(name: str, value: float | datetime.timedelta) -> float:
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds or a timedelta, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number of seconds above zero, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class LockOptions:
    """A store's lease lock: how long a holder keeps it at most, how long a writer waits for it.

    Attributes:
        lease: seconds after which a lock whose holder has not given it back is free again.
        wait: seconds a writer waits for the lock before it gives up.
    """

    lease: float = DEFAULT_LOCK_LEASE
    wait: float = DEFAULT_LOCK_WAIT

    @classmethod
    def validate(cls, lock_lease: float | datetime.timedelta, lock_wait: float | datetime.timedelta) -> LockOptions:
        """The options, or the error naming the wrong one.

        Raises:
            TypeError: a value is neither a number nor a ``timedelta``.
            ValueError: a value is not a finite number of seconds above zero.
        """
        return cls(_seconds("lock_lease", lock_lease), _seconds("lock_wait", lock_wait))

    @property
    def lease_ms(self) -> int:
        """The lease in whole milliseconds (at least one), as ``PX`` takes it."""
        return max(1, math.ceil(self.lease * 1000))

    def polling(self) -> RetryPolicy:
        """How a writer polls a busy lock: jittered backoff from 1 ms up to 25 ms, for ``wait`` seconds."""
        return RetryPolicy(budget=self.wait, base_delay=_POLL_FIRST, max_delay=_POLL_MAX)


class _Turn:
    """One memory's in-process lock (a plain lock cannot be weakly referenced)."""

    __slots__ = ("__weakref__", "lock")

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock


class LocalTurns:
    """Threads of one process writing one memory through one store take turns here, before the server lock."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._turns: weakref.WeakValueDictionary[str, _Turn] = weakref.WeakValueDictionary()

    @contextlib.contextmanager
    def hold(self, memory_id: str) -> Iterator[None]:
        """Wait for the turn of ``memory_id`` in this process and hold it for the ``with`` block."""
        with self._guard:
            turn = self._turns.get(memory_id)
            if turn is None:
                turn = self._turns[memory_id] = _Turn(threading.Lock())
        with turn.lock:
            yield


class AsyncLocalTurns:
    """Tasks writing one memory through one asyncio store take turns here: one lock per event loop and id.

    An ``asyncio.Lock`` belongs to the loop that first waits on it, so each loop has locks of its own; a
    loop's locks go with the loop.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()  # loops of several threads may share the store
        self._loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, weakref.WeakValueDictionary[str, asyncio.Lock]
        ] = weakref.WeakKeyDictionary()

    @contextlib.asynccontextmanager
    async def hold(self, memory_id: str) -> AsyncIterator[None]:
        """Wait for the turn of ``memory_id`` on the running loop and hold it for the ``async with`` block."""
        loop = asyncio.get_running_loop()
        with self._guard:
            locks = self._loops.get(loop)
            if locks is None:
                locks = self._loops[loop] = weakref.WeakValueDictionary()
            lock = locks.get(memory_id)
            if lock is None:
                lock = locks[memory_id] = asyncio.Lock()
        async with lock:
            yield
