"""How the asyncio SQL store sends commands on SQLite: the sync executor, one worker thread per operation.

An operation is driven by the sync executor's :class:`~chatmemory.stores.sql.driver.Session` on a worker
thread of the store (up to :data:`WORKERS`, never the loop's default executor), with the sync ``sqlite3``
engine of the same file, and the event loop awaits its outcome: one trip per operation, where aiosqlite
makes every cursor, statement and commit a trip. A retry's backoff and the schema check run on the worker
thread. A cancelled operation stops before its next command (a command already sent runs to its end), and
the call returns only once its thread is done and its connection back in the pool. Why, and what a
cancellation leaves: *The asyncio store* in ``docs/store-sql.md``.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Engine

from chatmemory.aio.stores.sql_driver import emitted_ids
from chatmemory.core.driving import drive
from chatmemory.stores.sql.commands import Command, Steps
from chatmemory.stores.sql.driver import QueuedSession, Session, SyncDriver
from chatmemory.stores.sql.sqlite_writers import WriterQueue

__all__ = ["WORKERS", "ThreadDriver"]

_T = TypeVar("_T")

WORKERS = 16
"""The most worker threads one store runs at once (threads are made only as operations need them)."""


class _Stopped(BaseException):
    """Raised on the worker thread at an operation's next command once its task was cancelled."""


class ThreadDriver:
    """Sends the commands of one asyncio store's operations on worker threads, with a sync engine.

    Args:
        engine: the sync engine of the store's database (the store made it; its event listeners decide
            the path of driver SQL, as for the sync store).
        autocommit: that engine in autocommit, which operations check connections out of.
        check_schema: checks the schema revision once per store (called on a worker thread).
        keeps_connection: whether the connection an operation ended with may be kept for the next one
            (see :meth:`~chatmemory.stores.sql.driver.SyncDriver.keep`).
        writers: the file's writer queue, which each transaction takes first
            (:mod:`~chatmemory.stores.sql.sqlite_writers`).
    """

    __slots__ = ("_executor", "_shut", "_sync")

    def __init__(
        self,
        engine: Engine,
        autocommit: Engine,
        check_schema: Callable[[Callable[[str], list[Any] | None] | None], None],
        *,
        keeps_connection: bool = False,
        writers: WriterQueue | None = None,
    ) -> None:
        self._sync = SyncDriver(engine, autocommit, check_schema, keeps_connection=keeps_connection, writers=writers)
        self._executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="chatmemory-sqlite")
        self._shut = False

    def shutdown(self) -> None:
        """Let the worker threads end once the operations under way are done (blocks until then).

        Then the connection kept for the next operation goes back to the pool.

        An operation of the closed store that follows is driven on the caller's thread with nothing to
        send it: it refuses before its first command (the store checks that it is open first).
        """
        self._shut = True
        self._executor.shutdown(wait=True)
        self._sync.hand_back()

    def _submit(self, function: Callable[..., _T], *args: Any) -> Future[_T]:
        context = contextvars.copy_context()  # as asyncio.to_thread: the caller's context variables
        return self._executor.submit(context.run, function, *args)

    async def run(self, steps: Steps[Command, _T]) -> _T:
        """Send each command ``steps`` yields; a driver error goes back in where it was yielded."""
        if self._shut:
            return drive(steps, _closed)
        stop = threading.Event()
        session = self._sync.session()
        if isinstance(session, QueuedSession):
            session.stop = stop  # a write waiting for the file's turn stops waiting
        return await _outcome(self._submit(_ran, session, steps, stop), stop)

    def iterate(self, steps: Steps[Command, None]) -> AsyncGenerator[str, None]:
        """Like :meth:`run`, handing out the ids the operation emits; a caller that stops ends it."""
        session = self._sync.session()
        stop = threading.Event()

        async def perform(command: Any) -> Any:
            return await _outcome(self._submit(session.perform, command), stop)

        async def end(error: BaseException | None) -> None:
            await _finished(self._submit(session.end, error))

        return emitted_ids(steps, perform, end)


def _closed(command: Any) -> Any:
    raise RuntimeError(f"the store is closed: {command!r} was not sent")


def _ran(session: Session, steps: Steps[Command, _T], stop: threading.Event) -> _T:
    """``steps`` driven by ``session`` to its end, its connection handed back (on the worker thread)."""

    def perform(command: Any) -> Any:
        if stop.is_set():
            raise _Stopped
        return session.perform(command)

    try:
        result = drive(steps, perform)
    except BaseException as exc:
        session.end(exc)  # _Stopped is not an Exception: the connection is invalidated
        raise
    session.end(None)
    return result


async def _outcome(future: Future[_T], stop: threading.Event) -> _T:
    """What the worker thread's ``future`` gives; on cancellation, stop it and wait for its end first."""
    waiting = asyncio.wrap_future(future)
    try:
        return await asyncio.shield(waiting)
    except asyncio.CancelledError:
        stop.set()
        if not future.cancel():  # under way: it stops before its next command
            await _settled(waiting)
        raise


async def _finished(future: Future[None]) -> None:
    """Await a cleanup on the worker thread to its end even if the task is cancelled meanwhile."""
    waiting = asyncio.wrap_future(future)
    try:
        await asyncio.shield(waiting)
    except asyncio.CancelledError:
        await _settled(waiting)
        raise


async def _settled(waiting: asyncio.Future[Any]) -> None:
    """Wait until ``waiting`` is done, through further cancellations; its outcome is dropped."""
    while not waiting.done():
        try:
            await asyncio.wait({waiting})
        except asyncio.CancelledError:  # noqa: PERF203 - once per cancellation that arrives meanwhile
            continue
    if not waiting.cancelled():
        waiting.exception()  # retrieved: a cancelled call's outcome is not reported
