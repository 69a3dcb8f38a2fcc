"""The asyncio MongoDB executor: sends one command with PyMongo's native ``AsyncMongoClient``.

:class:`AsyncExecutor` sends each command an operation yields and runs a ``Sleep`` with ``asyncio.sleep``;
a driver failure is made the store's error (:func:`~chatmemory.stores.mongodb.executor.failure`) before it
is thrown back in. Commands are admitted first come, first served, as many at once as the client's pool
has connections (:mod:`chatmemory.stores.base.aio`); built from a URL, the store keeps a client per
event loop (:mod:`chatmemory.stores.base.aio`). The public class is
:class:`chatmemory.aio.stores.mongodb.MongoChatMemoryStore`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Final, TypeVar

from chatmemory.core.driving import Sleep, Steps, drive_async
from chatmemory.core.errors import StoreError
from chatmemory.core.optional import require
from chatmemory.stores.base import Operation
from chatmemory.stores.base.aio import Admission, PerLoop

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from chatmemory.stores.mongodb.commands import Command, Result, Step, result_of  # noqa: E402 - the driver is known
from chatmemory.stores.mongodb.executor import DRIVER_ERRORS, Collections, failure  # noqa: E402

__all__ = ["OTHER_LOOP", "AsyncExecutor", "OnLoop", "other_loop_advice"]

_T = TypeVar("_T")

OTHER_LOOP: Final = "Cannot use AsyncMongoClient in different event loop"
"""The start of PyMongo's error for a client used on a loop other than its own."""


class OnLoop:
    """What the store uses on one event loop: a client bound to it, its collections, its admission."""

    __slots__ = ("admission", "collections", "owned")

    def __init__(self, collections: Collections, owned: bool) -> None:
        self.collections = collections
        self.owned = owned
        self.admission = _admission(collections)

    async def close(self) -> None:
        """Close the client if the store built it."""
        if self.owned:
            await self.collections.client.close()


def _admission(collections: Collections) -> Admission | None:
    """Commands admitted in order, as many at once as the client's pool connects (``maxPoolSize``).

    PyMongo's pool gives a returned connection to whoever asks next, the task that returned it; with more
    tasks than connections the others would wait until it is done. ``None``: ``maxPoolSize=0``, no bound.
    """
    pool = collections.client.options.pool_options
    limit = int(pool.max_pool_size)
    if not limit:
        return None
    timeout = pool.wait_queue_timeout
    wait = "no waitQueueTimeoutMS" if timeout is None else f"waitQueueTimeoutMS={timeout * 1000:g}"
    return Admission(limit, timeout, f"maxPoolSize={limit}, {wait}")


def other_loop_advice(store: str) -> str:
    """The error of a caller's client used on another event loop than its own."""
    return (
        f"the AsyncMongoClient given to {store} belongs to the event loop it first ran on, and this is "
        "another one; build the store from a URL (it then keeps a client per event loop), or build one "
        "store (and client) per event loop"
    )


class AsyncExecutor:
    """Sends an operation's commands on the running loop's client (see the module docstring).

    Args:
        first: the collections of the client the store was built with.
        owned: whether the store built that client (from a URL).
        another: builds a client like the first for another loop (``None``: the caller's client, which
            serves its own loop only).
        store: the store's name, in the advice for a caller's client used on another loop.
    """

    def __init__(self, first: Collections, owned: bool, another: Callable[[], Collections] | None, store: str) -> None:
        self._first = first
        self._owned = owned
        self._another = another
        self._store = store
        self.clients: PerLoop[OnLoop] = PerLoop(self._for_loop, OnLoop.close, closes_with_loop=owned)

    def _for_loop(self, first: bool) -> OnLoop:
        if first:
            return OnLoop(self._first, self._owned)
        if self._another is None:
            raise StoreError(Operation.CONNECT, detail=other_loop_advice(self._store))
        return OnLoop(self._another(), self._owned)

    def here(self) -> Collections:
        """The collections of the running loop's client (made now if needed), else the first client's."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._first
        return self.clients.get().collections

    async def aclose(self) -> None:
        """Close the clients the store built (the first one too, if no loop used it)."""
        if not self.clients.used:
            await self._first.client.close()
        await self.clients.aclose()

    async def perform(self, command: Step) -> Any:
        """Send ``command`` (or sleep) once admitted; a driver failure is raised as the store's error."""
        if isinstance(command, Sleep):
            await asyncio.sleep(command.seconds)
            return None
        on = await self.clients.ready()
        admission = on.admission
        if admission is None:
            return await self._call(on, command)
        async with admission:
            return await self._call(on, command)

    async def _call(self, on: OnLoop, command: Command) -> Any:
        try:
            value = on.collections.method(command)(*command.args, **command.kwargs)
            if inspect.isawaitable(value):  # find() returns its cursor at once, the rest are coroutines
                value = await value
            return await value.to_list() if command.result is Result.LIST else result_of(command, value)
        except DRIVER_ERRORS as exc:
            raise failure(command, exc) from exc
        except RuntimeError as exc:
            if str(exc).startswith(OTHER_LOOP):  # a caller's client that ran on another loop before
                raise StoreError(Operation.CONNECT, detail=other_loop_advice(self._store)) from exc
            raise

    async def run(self, steps: Steps[Step, _T]) -> _T:
        """Drive ``steps``: each command sent, its reply (or failure) handed back in."""
        return await drive_async(steps, self.perform)
