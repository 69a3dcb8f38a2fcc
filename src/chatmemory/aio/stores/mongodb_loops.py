"""The clients of an asyncio MongoDB store, one per event loop: ``asyncio.run`` twice, a loop per thread.

PyMongo's ``AsyncMongoClient`` belongs to the event loop it first ran on: its connections and monitors
are that loop's, and on any other it raises "Cannot use AsyncMongoClient in different event loop". A
store built from a URL therefore keeps one client per loop, made when that loop first uses the store
(the one built by the constructor serves the first loop), in a weak dictionary keyed by the loop. Each
such client is closed when its loop shuts down (``asyncio.run``, ``asyncio.Runner`` and pytest-asyncio
shut down a loop's async generators first: a suspended generator per client closes it then), or by the
store's ``aclose``. A client the caller passed in cannot be copied to another loop: the store uses it on
the first loop only, and on any other raises :class:`~chatmemory.core.errors.StoreError` at once, naming
the fix. Pure asyncio around the driver; no command is sent here but ``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncGenerator, Callable
from typing import Final

from chatmemory.aio.stores.admission import Admission
from chatmemory.core.errors import StoreError
from chatmemory.stores.base import Operation
from chatmemory.stores.mongodb.base import Collections

__all__ = ["OTHER_LOOP", "LoopClients", "OnLoop"]

OTHER_LOOP: Final = "Cannot use AsyncMongoClient in different event loop"
"""The start of PyMongo's error for a client used on a loop other than its own."""

_CLOSE_TIMEOUT: Final = 10.0
"""Seconds ``aclose`` waits for a client running on another thread's loop to close."""


class OnLoop:
    """What an asyncio MongoDB store uses on one event loop: a client bound to it and its collections."""

    __slots__ = ("__weakref__", "admission", "closed", "closer", "collections", "owned")

    def __init__(self, collections: Collections, owned: bool) -> None:
        self.collections = collections
        self.owned = owned
        self.admission = _admission(collections)
        self.closer: AsyncGenerator[None, None] | None = None
        self.closed = False

    async def close(self) -> None:
        """Close the client if the store built it (once)."""
        if self.owned and not self.closed:
            self.closed = True
            await self.collections.client.close()


def _admission(collections: Collections) -> Admission | None:
    """What admits the commands sent on one loop in order, as many at once as the client's pool connects.

    ``maxPoolSize`` of them (``None`` for ``maxPoolSize=0``, no bound), each waiting at most
    ``waitQueueTimeoutMS``: PyMongo's pool gives a returned connection to whoever asks next, the task
    that returned it, and with more tasks than connections the others would wait until it is done.
    """
    pool = collections.client.options.pool_options
    limit = int(pool.max_pool_size)
    if not limit:
        return None
    timeout = pool.wait_queue_timeout
    wait = "no waitQueueTimeoutMS" if timeout is None else f"waitQueueTimeoutMS={timeout * 1000:g}"
    return Admission(limit, timeout, f"maxPoolSize={limit}, {wait}")


async def _close_with_loop(clients: weakref.ReferenceType[LoopClients], on: OnLoop) -> AsyncGenerator[None, None]:
    """Suspended for the loop's lifetime: the loop's ``shutdown_asyncgens`` closes its client."""
    loop = asyncio.get_running_loop()
    try:
        yield
    finally:
        owner = clients()
        if owner is not None:
            owner.forget(loop, on)
        await on.close()


class LoopClients:
    """The client of each event loop an asyncio MongoDB store runs on (see the module docstring).

    Args:
        first: the client the constructor built or was given, with its collections.
        another: builds one more client like ``first`` (``None``: the caller's client, which cannot be).
        owned: whether the store built the clients (and closes them).
        store: the store's name, for errors.
    """

    def __init__(
        self, first: Collections, another: Callable[[], Collections] | None, *, owned: bool, store: str
    ) -> None:
        self._first: Collections | None = first
        self._another = another
        self._owned = owned
        self._store = store
        self._guard = threading.Lock()  # several threads may each run a loop on one store
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OnLoop] = weakref.WeakKeyDictionary()

    def current(self) -> OnLoop | None:
        """What the running loop uses, if it has been made (``None`` outside a loop, or not yet)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return self._loops.get(loop)

    async def on_loop(self) -> OnLoop:
        """What the running loop uses: made on this loop's first call, closed when the loop shuts down.

        Raises:
            StoreError: the store was given a client, and this is not the loop it runs on.
        """
        loop = asyncio.get_running_loop()
        on = self._loops.get(loop)
        if on is None:
            on = self._make(loop)
        if on.owned and on.closer is None:
            on.closer = _close_with_loop(weakref.ref(self), on)
            await on.closer.asend(None)  # runs to its yield: the loop now finalizes it when it shuts down
        return on

    def _make(self, loop: asyncio.AbstractEventLoop) -> OnLoop:
        with self._guard:
            on = self._loops.get(loop)
            if on is not None:
                return on
            for gone in [other for other in self._loops if other.is_closed()]:
                del self._loops[gone]  # its client closed with it (or could not be closed any more)
            if self._first is not None:
                collections, self._first = self._first, None
            elif self._another is not None:
                collections = self._another()
            else:
                raise StoreError(Operation.CONNECT, detail=other_loop_advice(self._store))
            on = self._loops[loop] = OnLoop(collections, self._owned)
            return on

    def forget(self, loop: asyncio.AbstractEventLoop, on: OnLoop) -> None:
        """Drop ``on``, the client of ``loop``, which is shutting down."""
        with self._guard:
            if self._loops.get(loop) is on:
                del self._loops[loop]

    async def aclose(self) -> None:
        """Close every client the store built: on this loop now, on another running loop there.

        A client of a loop that is not running now (another thread's idle loop) is closed when that loop
        runs again or shuts down; one of a loop that was closed without shutting down its async
        generators cannot be closed any more (its connections went with the loop).
        """
        running = asyncio.get_running_loop()
        with self._guard:
            every = list(self._loops.items())
            self._loops.clear()
            unused, self._first = self._first, None
        if unused is not None and self._owned:
            await unused.client.close()
        for loop, on in every:
            if loop is running:
                await on.close()
            elif loop.is_closed():
                continue
            elif loop.is_running():
                future = asyncio.run_coroutine_threadsafe(on.close(), loop)
                with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.wrap_future(future), _CLOSE_TIMEOUT)
            else:
                asyncio.run_coroutine_threadsafe(on.close(), loop)


def other_loop_advice(store: str) -> str:
    """The error of a caller's client used on another event loop than its own."""
    return (
        f"the AsyncMongoClient given to {store} belongs to the event loop it first ran on, and this is "
        "another one; build the store from a URL (it then keeps a client per event loop), or build one "
        "store (and client) per event loop"
    )
