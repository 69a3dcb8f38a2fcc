"""Admission: an asyncio store's operations take its connections in the order they asked for them.

A connection pool is not a queue: a task that returns a connection can take it back at once, ahead of
the task the pool woke, so with more tasks than connections a few keep them turn after turn. An
:class:`Admission` lets at most ``limit`` operations through at once (as many as the pool has
connections) and hands a finished operation's place to the task that has waited longest; a waiter gives
up after the pool's own ``timeout``, with a :class:`~chatmemory.core.errors.StoreError` naming the limit.
Why, and what it changed: *How admission works* in ``docs/asyncio.md``.

Pure asyncio, no I/O: asyncio's own ``Semaphore`` does not promise an order on every supported Python.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType

from chatmemory import telemetry
from chatmemory.core.errors import StoreError
from chatmemory.stores.base.operations import Operation

__all__ = ["Admission"]


class _Expired(Exception):
    """A waiter's timeout passed before its turn came."""


class Admission:
    """At most ``limit`` operations at once, admitted first come, first served.

    Use it as ``async with admission: ...`` around everything an operation does with a connection.

    Args:
        limit: how many operations may run at once (the pool's connections); at least 1.
        timeout: seconds a task waits for its turn before :class:`StoreError` (``None``: no limit).
        pool: the pool's limits as its settings name them, for the error (``max_connections=50``).

    Raises:
        ValueError: ``limit`` below 1, or a negative ``timeout``.
    """

    __slots__ = ("_free", "_waiters", "limit", "pool", "timeout")

    def __init__(self, limit: int, timeout: float | None, pool: str) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"an admission limit must be an int of at least 1, got {limit!r}")
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"an admission timeout must be None or at least 0 seconds, got {timeout!r}")
        self.limit = limit
        self.timeout = timeout
        self.pool = pool
        self._free = limit
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def running(self) -> int:
        """How many admitted operations have not finished yet."""
        return self.limit - self._free

    @property
    def waiting(self) -> int:
        """How many tasks wait for their turn."""
        return sum(1 for waiter in self._waiters if not waiter.done())

    async def __aenter__(self) -> None:
        if self._free and not self._waiters:
            self._free -= 1
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        expiry = None if self.timeout is None else loop.call_later(self.timeout, _expire, waiter)
        try:
            await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Admitted, and cancelled before it could run: the turn goes to the next in line.
                self._leave()
            else:
                self._forget(waiter)
            if isinstance(exc, _Expired):
                raise self._expired() from None
            raise
        finally:
            if expiry is not None:
                expiry.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._leave()

    def _leave(self) -> None:
        """End one admitted operation: its place goes to the longest waiting task, else it is free."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the place passes on: no task arriving meanwhile can take it
                return
        self._free += 1

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:  # already taken off by _leave
            pass

    def _expired(self) -> StoreError:
        op = telemetry.current()
        memory_id = op.memory_id if op is not None and op.owner is not None else None
        return StoreError(
            Operation.CONNECT,
            memory_id,
            f"no connection came free within {self.timeout:g} s: the store's {self.limit} connections "
            f"({self.pool}) were all busy. Give the pool more connections or a longer timeout, or run "
            "fewer operations at once",
        )


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(_Expired())
