"""Writers taking turns on one memory: the lease lock's options and the in-process queue in front of it.

Where the database has no lock a write can wait on (Redis, MongoDB), ``modify`` takes a lease lock of the
store's own on the server: taken with a token, given back by it, gone by itself ``lock_lease`` seconds
after a holder died or hung. Writers of one process sharing the store queue here first (per memory id, and
per event loop), so one at a time asks the server, and a writer that finishes while others wait hands
them the server lock. A memory queued for lately is *contended*: window memories queue for it at once
instead of trying a write the writers ahead would make conflict. The lock never replaces the version
check: a holder whose lease ran out still writes only at the version it read (``docs/semantics.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import math
import secrets
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

from chatmemory.core.retry import RetryPolicy

__all__ = [
    "DEFAULT_LOCK_LEASE",
    "DEFAULT_LOCK_WAIT",
    "AsyncLocalTurns",
    "LocalTurns",
    "LockOptions",
    "Turn",
    "modify_in_turn",
    "modify_in_turn_async",
]

DEFAULT_LOCK_LEASE = 5.0
"""Seconds a lock holder that died or hung can keep the other writers of its memory waiting."""
DEFAULT_LOCK_WAIT = 30.0
"""Seconds a writer waits for the lock before it gives up with :class:`~chatmemory.ConcurrentUpdateError`."""

_POLL_FIRST, _POLL_MAX = 0.001, 0.025
CONTENDED_FOR = 1.0
"""Seconds after a writer of this process last queued for a memory during which its adds queue at once."""
_KEPT = 4096


class _Recent:
    """When a writer of this process last queued for each memory (bounded: the oldest are forgotten)."""

    def __init__(self) -> None:
        self._at: dict[str, float] = {}

    def saw(self, memory_id: str) -> None:
        self._at.pop(memory_id, None)
        self._at[memory_id] = time.monotonic()
        if len(self._at) > _KEPT:
            for old in list(self._at)[: _KEPT // 4]:
                del self._at[old]

    def contended(self, memory_id: str) -> bool:
        at = self._at.get(memory_id)
        return at is not None and time.monotonic() - at < CONTENDED_FOR


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


class Turn:
    """One memory's turn in this process, and the server lock it may hand to the next writer in line.

    Attributes:
        token: the token of the server lock the turn holds (``None``: it holds none).
        until: ``time.monotonic()`` before which that lock's lease is surely not over (half of it).
    """

    __slots__ = ("__weakref__", "_users", "lock", "token", "until")

    def __init__(self, lock: threading.Lock | asyncio.Lock) -> None:
        self.lock = lock
        self._users = 0
        self.token: bytes | None = None
        self.until = 0.0

    @property
    def queued(self) -> bool:
        """Whether other writers wait for this turn (then its holder hands them the server lock it holds)."""
        return self._users > 1

    def holding(self, lease: float) -> bytes | None:
        """The token of a server lock handed on with the turn and still well within its lease, else ``None``."""
        return self.token if self.token is not None and time.monotonic() < self.until else None

    def took(self, token: bytes, lease: float) -> None:
        """Note the server lock just taken with ``token`` for ``lease`` seconds."""
        self.token, self.until = token, time.monotonic() + lease / 2

    def gave_back(self) -> None:
        """Note that the server lock was given back (or may be gone)."""
        self.token = None

    def _orphan(self) -> bytes | None:
        """The token of a server lock nobody is left to use or give back (called as the last user leaves)."""
        if self._users or self.token is None:
            return None
        token, self.token = self.token, None
        return token


class LocalTurns:
    """Threads of one process writing one memory through one store take turns here, before the server lock."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._turns: weakref.WeakValueDictionary[str, Turn] = weakref.WeakValueDictionary()
        self._recent = _Recent()

    def contended(self, memory_id: str) -> bool:
        """Whether a writer of this process queued for ``memory_id`` in the last :data:`CONTENDED_FOR` seconds."""
        return self._recent.contended(memory_id)

    @contextlib.contextmanager
    def hold(self, memory_id: str, unlock: Callable[[bytes], object]) -> Iterator[Turn]:
        """Wait for the turn of ``memory_id`` in this process and hold it for the ``with`` block.

        A server lock handed on to writers who then all left without their turn is given back with ``unlock``.
        """
        with self._guard:
            self._recent.saw(memory_id)
            turn = self._turns.get(memory_id)
            if turn is None:
                turn = self._turns[memory_id] = Turn(threading.Lock())
            turn._users += 1
        try:
            with turn.lock:  # type: ignore[union-attr]
                yield turn
        finally:
            with self._guard:
                turn._users -= 1
                orphan = turn._orphan()
            if orphan is not None:
                unlock(orphan)


class AsyncLocalTurns:
    """Tasks writing one memory through one asyncio store take turns here: one lock per event loop and id.

    An ``asyncio.Lock`` belongs to the loop that first waits on it, so each loop has locks of its own; a
    loop's locks go with the loop.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()  # loops of several threads may share the store
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, weakref.WeakValueDictionary[str, Turn]] = (
            weakref.WeakKeyDictionary()
        )
        self._recent = _Recent()

    def contended(self, memory_id: str) -> bool:
        """Whether a writer of this process queued for ``memory_id`` in the last :data:`CONTENDED_FOR` seconds."""
        return self._recent.contended(memory_id)

    @contextlib.asynccontextmanager
    async def hold(self, memory_id: str, unlock: Callable[[bytes], Awaitable[object]]) -> AsyncIterator[Turn]:
        """Wait for the turn of ``memory_id`` on the running loop and hold it for the ``async with`` block.

        A server lock handed on to tasks that were then all cancelled before their turn is given back with
        ``unlock`` (shielded from a cancellation).
        """
        loop = asyncio.get_running_loop()
        with self._guard:
            self._recent.saw(memory_id)
            turns = self._loops.get(loop)
            if turns is None:
                turns = self._loops[loop] = weakref.WeakValueDictionary()
            turn = turns.get(memory_id)
            if turn is None:
                turn = turns[memory_id] = Turn(asyncio.Lock())
            turn._users += 1
        try:
            async with turn.lock:  # type: ignore[union-attr]
                yield turn
        finally:
            with self._guard:
                turn._users -= 1
                orphan = turn._orphan()
            if orphan is not None:
                await asyncio.shield(unlock(orphan))


def modify_in_turn(
    turns: LocalTurns,
    memory_id: str,
    lease: float,
    *,
    lock: Callable[[bytes], object],
    unlock: Callable[[bytes], object],
    change: Callable[[], int],
) -> int:
    """Run ``change`` (a store's read, change and conditional write) in the turn of ``memory_id``.

    Takes the server lock with ``lock(token)`` unless the writer before in this process handed it on (and
    half its lease is left), gives it back with ``unlock(token)`` unless writers of this process wait for
    it, and gives it back whatever ``change`` raised (the lease would free it; the error is the news).
    """
    with turns.hold(memory_id, unlock) as turn:
        token = turn.holding(lease)
        try:
            if token is None:
                if turn.token is not None:  # handed on, but half its lease is gone: take a fresh one
                    stale, turn.token = turn.token, None
                    unlock(stale)
                token = secrets.token_bytes(16)  # set first: a lock sent but not answered is given back too
                lock(token)
                turn.took(token, lease)
            version = change()
        except BaseException:
            turn.gave_back()
            if token is not None:
                with contextlib.suppress(Exception):
                    unlock(token)
            raise
        if not turn.queued:  # else the next writer of this process takes the server lock as it is
            turn.gave_back()
            unlock(token)
        return version


async def modify_in_turn_async(
    turns: AsyncLocalTurns,
    memory_id: str,
    lease: float,
    *,
    lock: Callable[[bytes], Awaitable[object]],
    unlock: Callable[[bytes], Awaitable[object]],
    change: Callable[[], Awaitable[int]],
) -> int:
    """:func:`modify_in_turn` awaited; giving the lock back is shielded from a cancellation."""
    async with turns.hold(memory_id, unlock) as turn:
        token = turn.holding(lease)
        try:
            if token is None:
                if turn.token is not None:
                    stale, turn.token = turn.token, None
                    await asyncio.shield(unlock(stale))
                token = secrets.token_bytes(16)
                await lock(token)
                turn.took(token, lease)
            version = await change()
        except BaseException:
            turn.gave_back()
            if token is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(unlock(token))
            raise
        if not turn.queued:
            turn.gave_back()
            await asyncio.shield(unlock(token))
        return version
