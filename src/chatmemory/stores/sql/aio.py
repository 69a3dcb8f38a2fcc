"""The asyncio SQL executors: the blocking executor's ``Session`` in a greenlet, or on worker threads.

:class:`AsyncExecutor` drives an operation on the ``AsyncEngine``'s ``sync_engine`` in one greenlet (as
``AsyncConnection.run_sync`` does): the same commands sent the same way (driver errors translated as the
blocking executor's), a retry's backoff awaiting ``asyncio.sleep``; on a bounded queue pool, operations
are admitted in the order they began, ``pool_size`` at a time (:mod:`chatmemory.stores.base.aio`).
:class:`ThreadExecutor` (SQLite from a URL) drives each operation on a worker thread of the store with
the ``sqlite3`` engine, where aiosqlite would make every cursor, statement and commit a trip of its own.
A cancelled operation leaves its connection invalidated or back in the pool before the cancellation goes
on. Why, and what a cancellation leaves: *The asyncio store* in ``docs/store-sql.md``.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import Pool, QueuePool
from sqlalchemy.util import greenlet_spawn

from chatmemory.core.driving import Steps, drive, drive_async_iter
from chatmemory.stores.base.aio import Admission
from chatmemory.stores.sql.commands import Command
from chatmemory.stores.sql.engine import WriterQueue
from chatmemory.stores.sql.executor import Executor, QueuedSession, Session, max_overflow
from chatmemory.stores.sql.outcomes import SQLFailure

try:  # SQLAlchemy 2.1 renamed await_only (the old name goes in 2.2)
    from sqlalchemy.util import await_ as _await
except ImportError:  # pragma: no cover - SQLAlchemy 2.0
    from sqlalchemy.util import await_only as _await

__all__ = ["WORKERS", "AsyncExecutor", "OnLoop", "ThreadExecutor", "admission_for", "emitted_ids"]

_T = TypeVar("_T")


class AsyncExecutor:
    """Sends the commands of one store's operations with an ``AsyncEngine``.

    Args:
        engine: the store's engine (whose event listeners decide the path of driver SQL).
        autocommit: the engine in autocommit, which operations check connections out of.
        check_schema: checks the schema revision (once per store), for ``CHECK_SCHEMA``.
        failure: the store's error for a driver exception.
        keeps_connection: whether the connection an operation ended with may be kept for the next one
            (see :meth:`~chatmemory.stores.sql.executor.Executor.keep`).
    """

    __slots__ = ("_check_schema", "_sync", "admission")

    def __init__(
        self,
        engine: AsyncEngine,
        autocommit: AsyncEngine,
        check_schema: Callable[[], Coroutine[Any, Any, None]],
        failure: Callable[[SQLAlchemyError], SQLFailure],
        *,
        keeps_connection: bool = False,
    ) -> None:
        self._check_schema = check_schema
        self._sync = Executor(
            engine.sync_engine,
            autocommit.sync_engine,
            self._checked_schema,
            failure,
            _sleep,
            keeps_connection=keeps_connection,
        )
        self.admission = admission_for(engine.sync_engine.pool)
        """What admits the operations in order (``None``: the pool has no bound, every one goes at once)."""

    async def hand_back(self) -> None:
        """Return the connection kept for the next operation to the pool (before the engine is disposed)."""
        await _to_completion(greenlet_spawn(self._sync.hand_back))

    def _checked_schema(self, _rows_of: Callable[[str], list[Any] | None] | None = None) -> None:
        _await(self._check_schema())

    async def run(self, steps: Steps[Command, _T]) -> _T:
        """Send each command ``steps`` yields, once admitted; a driver error goes back in where it was yielded."""
        admission = self.admission
        if admission is None:
            return await self._run(steps)
        async with admission:
            return await self._run(steps)

    async def _run(self, steps: Steps[Command, _T]) -> _T:
        session = self._sync.session()
        try:
            result: _T = await greenlet_spawn(_ran, session, steps)
        except BaseException as exc:
            await _to_completion(greenlet_spawn(session.end, exc))
            raise
        if session.holds_connection:
            # Closing a Connection resets what it set (the isolation level of an engine put in autocommit
            # by execution options): awaits that a cancellation must not cut short, since SQLAlchemy's
            # pool loses the connection's slot when its return is interrupted there.
            await _to_completion(greenlet_spawn(session.end, None))
        return result

    def iterate(self, steps: Steps[Command, None]) -> AsyncGenerator[str, None]:
        """Like :meth:`run`, handing out the ids the operation emits; a caller that stops ends it.

        Admitted at its first id, it holds its place until it ends (it holds a connection until then).
        """
        admission = self.admission
        if admission is None:
            return self._iterate(steps)
        return _admitted(admission, self._iterate(steps))

    def _iterate(self, steps: Steps[Command, None]) -> AsyncGenerator[str, None]:
        session = self._sync.session()

        async def perform(command: Any) -> Any:
            return await greenlet_spawn(session.perform, command)

        async def end(error: BaseException | None) -> None:
            await _to_completion(greenlet_spawn(session.end, error))

        return emitted_ids(steps, perform, end)


def admission_for(pool: Pool) -> Admission | None:
    """An admission as wide as ``pool``'s lasting connections when it is a bounded queue pool, else ``None``.

    A ``QueuePool`` (``AsyncAdaptedQueuePool`` included) keeps ``pool_size`` connections and opens up to
    ``max_overflow`` more while they are all busy, closing each extra one as soon as it is returned. Let
    through more operations than ``pool_size`` and the extra connections are opened and closed all the
    time (a new server session each: measured on PostgreSQL, 617 connections opened in 4,000 turns of
    200 tasks, at half the turns per second). So the store's operations are admitted ``pool_size`` at a
    time, the overflow left to other users of the engine, and the wait for a turn is bounded by the
    pool's ``pool_timeout``. A pool that never makes a checkout wait (``max_overflow=-1``, or
    ``pool_size=0``, which SQLAlchemy takes as no bound) admits every operation at once.
    """
    if not isinstance(pool, QueuePool):
        return None
    overflow = max_overflow(pool)
    size = pool.size()
    if overflow is None or overflow < 0 or size < 1:
        return None
    timeout = pool.timeout()
    return Admission(size, timeout, f"pool_size={size}, pool_timeout={timeout:g} s")


async def _admitted(admission: Admission, ids: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
    """``ids`` run once admitted, their place held until they end."""
    async with admission:
        try:
            async for memory_id in ids:
                yield memory_id
        finally:
            await ids.aclose()


async def emitted_ids(
    steps: Steps[Command, None],
    perform: Callable[[Any], Awaitable[Any]],
    end: Callable[[BaseException | None], Awaitable[None]],
) -> AsyncGenerator[str, None]:
    """:func:`~chatmemory.core.driving.drive_async_iter` of a listing, its session ``end``-ed however it ends."""
    ids = drive_async_iter(steps, perform)
    try:
        try:
            async for memory_id in ids:
                yield memory_id
        finally:
            await ids.aclose()  # a caller that stopped: the listing ends its snapshot first
    except GeneratorExit:
        await end(None)
        raise
    except BaseException as exc:
        await end(exc)
        raise
    await end(None)


def _ran(session: Session, steps: Steps[Command, _T]) -> _T:
    """``steps`` driven by ``session`` to its end, its pooled connection handed back (in the greenlet).

    A ``Connection`` the operation made is handed back by :meth:`AsyncExecutor.run`, shielded.
    """
    result = drive(steps, session.perform)
    if not session.holds_connection:
        session.end(None)
    return result


def _sleep(seconds: float) -> None:
    _await(asyncio.sleep(seconds))


async def _to_completion(cleanup: Coroutine[Any, Any, None]) -> None:
    """Await ``cleanup`` to its end even if the task is cancelled meanwhile (the cancellation then follows).

    A call that returned (or raised) before its connection was back in the pool would leave the slot
    taken after the call, and a cancelled cleanup would be abandoned halfway.
    """
    task = asyncio.ensure_future(cleanup)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:  # noqa: PERF203 - a cleanup, once per cancelled call
            if task.done():
                raise
            cancelled = exc
        else:
            break
    if cancelled is not None:
        raise cancelled


# ----------------------------------------------------------------------------------- worker threads

WORKERS = 16
"""The most worker threads one store runs at once (threads are made only as operations need them)."""


class _Stopped(BaseException):
    """Raised on the worker thread at an operation's next command once its task was cancelled."""


class ThreadExecutor:
    """Sends the commands of one asyncio store's operations on worker threads, with a sync engine.

    Args:
        engine: the sync engine of the store's database (the store made it; its event listeners decide
            the path of driver SQL, as for the sync store).
        autocommit: that engine in autocommit, which operations check connections out of.
        check_schema: checks the schema revision once per store (called on a worker thread).
        failure: the store's error for a driver exception.
        keeps_connection: whether the connection an operation ended with may be kept for the next one
            (see :meth:`~chatmemory.stores.sql.executor.Executor.keep`).
        writers: the file's writer queue, which each transaction takes first
            (:class:`~chatmemory.stores.sql.engine.WriterQueue`).
    """

    __slots__ = ("_executor", "_shut", "_sync")

    def __init__(
        self,
        engine: Engine,
        autocommit: Engine,
        check_schema: Callable[[Callable[[str], list[Any] | None] | None], None],
        failure: Callable[[SQLAlchemyError], SQLFailure],
        *,
        keeps_connection: bool = False,
        writers: WriterQueue | None = None,
    ) -> None:
        self._sync = Executor(
            engine, autocommit, check_schema, failure, keeps_connection=keeps_connection, writers=writers
        )
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
        return await _outcome(self._submit(_ran_stoppable, session, steps, stop), stop)

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


def _ran_stoppable(session: Session, steps: Steps[Command, _T], stop: threading.Event) -> _T:
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


class OnLoop:
    """What the store sends with on one event loop: an engine of that loop, in autocommit, and its executor."""

    __slots__ = ("autocommit", "engine", "executor", "schema_lock")

    def __init__(self, engine: AsyncEngine, autocommit: AsyncEngine, executor: AsyncExecutor) -> None:
        self.engine = engine
        self.autocommit = autocommit
        self.executor = executor
        self.schema_lock = asyncio.Lock()

    async def close(self) -> None:
        """Hand back the kept connection and close the pool's connections (the engine stays usable)."""
        await self.executor.hand_back()
        await self.engine.dispose()
