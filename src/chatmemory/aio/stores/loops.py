"""One driver client per event loop: how an asyncio store serves ``asyncio.run`` twice and a loop per thread.

The asyncio drivers' clients and pools belong to the loop they first ran on (their connections, locks and
futures are that loop's). An asyncio store therefore keeps what it sends with per loop in a
:class:`PerLoop`: made when a loop first uses the store, closed when that loop shuts down (``asyncio.run``,
pytest-asyncio and ``Runner.run_sync`` shut down a loop's async generators before closing it, and a
suspended generator of ours closes the loop's client there), or by the store's ``aclose``. What the
caller handed in cannot be copied to another loop: ``make`` refuses it with a
:class:`~chatmemory.core.errors.StoreError` naming the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["CLOSE_TIMEOUT", "PerLoop"]

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
