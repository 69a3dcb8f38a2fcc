"""What every asyncio executor shares: a driver client per event loop, and admission in arrival order.

:class:`PerLoop`: the asyncio drivers' clients belong to the loop they first ran on, so an asyncio store
keeps one per loop, made when a loop first uses the store and closed when that loop shuts down or by the
store's ``aclose``; what the caller handed in cannot move to another loop (a ``StoreError`` names the
fix). :class:`Admission`: at most ``limit`` operations hold connections at once, and a finished one's
place goes to the task that waited longest (a pool is not a queue); a waiter gives up after the pool's
own timeout. Pure asyncio, no I/O. Why: *How admission works* in ``docs/asyncio.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import TracebackType
from typing import Generic, TypeVar

from chatmemory import telemetry
from chatmemory.core.errors import Operation, StoreError

__all__ = ["Admission", "CLOSE_TIMEOUT", "PerLoop"]

CLOSE_TIMEOUT = 10.0
"""Seconds ``aclose`` waits for a value of another thread's running loop to close."""

_T = TypeVar("_T")


class _Entry(Generic[_T]):
    __slots__ = ("closer", "value")

    def __init__(self, value: _T) -> None:
        self.value = value
        self.closer: AsyncGenerator[None, None] | None = None


async def _close_with_loop(
    holder_ref: weakref.ReferenceType[PerLoop[_T]], loop: asyncio.AbstractEventLoop
) -> AsyncGenerator[None, None]:
    """Suspended for the loop's lifetime; the loop's ``shutdown_asyncgens`` closes what it holds there."""
    try:
        yield
    finally:
        holder = holder_ref()
        if holder is not None:
            entry = holder._entries.pop(loop, None)
            if entry is not None:
                await holder._close(entry.value)


class PerLoop(Generic[_T]):
    """A value per running event loop, made on a loop's first use and closed with the loop.

    Args:
        make: makes the value of a new loop; called with ``True`` for the first loop (which may take the
            value built with the store), ``False`` after. It may raise (a client that cannot move loops).
        close: awaited on a value's own loop when that loop shuts down, or by :meth:`aclose`.
        closes_with_loop: whether to close a loop's value when the loop shuts down (``False`` for a value
            the caller owns: it is theirs to close).
    """

    def __init__(
        self, make: Callable[[bool], _T], close: Callable[[_T], Awaitable[None]], *, closes_with_loop: bool = True
    ) -> None:
        self._make = make
        self._close = close
        self._closes_with_loop = closes_with_loop
        self._entries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Entry[_T]] = weakref.WeakKeyDictionary()
        self._guard = threading.Lock()
        self._made = False

    @property
    def used(self) -> bool:
        """Whether any loop has made its value yet."""
        return self._made

    def current(self) -> _T | None:
        """The running loop's value if made (``None`` outside a loop, or before the loop's first use)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        entry = self._entries.get(loop)
        return None if entry is None else entry.value

    def get(self) -> _T:
        """The running loop's value, made now on its first use (closing with the loop is set up by :meth:`ready`)."""
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is None:
            with self._guard:
                entry = self._entries.get(loop)
                if entry is None:
                    for gone in [other for other in self._entries if other.is_closed()]:
                        self._entries.pop(gone, None)  # its loop closed without shutting down; nothing to await
                    first, self._made = not self._made, True
                    entry = self._entries[loop] = _Entry(self._make(first))
        return entry.value

    async def ready(self) -> _T:
        """The running loop's value, set to close when the loop shuts down."""
        value = self.get()
        if self._closes_with_loop:
            loop = asyncio.get_running_loop()
            entry = self._entries.get(loop)
            if entry is not None and entry.closer is None:
                entry.closer = _close_with_loop(weakref.ref(self), loop)
                await entry.closer.asend(None)
        return value

    async def aclose(self) -> None:
        """Close every loop's value: on the running loop now, on another thread's running loop there.

        Another thread's loop is waited for at most :data:`CLOSE_TIMEOUT` seconds; a loop not running now
        gets the close scheduled, to run when it runs again; a loop closed without shutting down its async
        generators took its connections with it, and nothing is left to close.
        """
        running = asyncio.get_running_loop()
        with self._guard:
            entries = list(self._entries.items())
            self._entries.clear()
        for loop, entry in entries:
            entry.closer = None  # the loop's shutdown finds nothing left to close
            if loop is running:
                await self._close(entry.value)
            elif loop.is_closed():
                continue
            elif loop.is_running():
                future = asyncio.run_coroutine_threadsafe(_awaited(self._close(entry.value)), loop)
                with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.wrap_future(future), CLOSE_TIMEOUT)
            else:
                asyncio.run_coroutine_threadsafe(_awaited(self._close(entry.value)), loop)


async def _awaited(awaitable: Awaitable[None]) -> None:
    await awaitable


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
