"""How the asyncio SQL store sends commands: SQLAlchemy's ``AsyncEngine``.

:class:`AsyncDriver` runs an operation of :mod:`chatmemory.stores.sql.operations` to its end: it sends
each command the operation yields on the connection the operation holds (checked out by its first
statement, handed back at :data:`~chatmemory.stores.sql.commands.RELEASE` or at the end), awaits the
result and hands it back, or throws the driver's exception back in. A task cancelled meanwhile leaves
its connection invalidated (the server rolls back what it had begun) and back in the pool before the
cancellation goes on. Driver SQL goes to the DBAPI cursor as the sync executor sends it
(:func:`~chatmemory.stores.sql.driver.send_driver_sql`, run with ``AsyncConnection.run_sync``) unless
cursor events are listened to. A batch with a joined form (a MySQL/MariaDB turn) goes as one multi-statement
string, as the sync executor sends it (:func:`~chatmemory.stores.sql.driver.send_joined`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from chatmemory.stores.base.driving import drive_async
from chatmemory.stores.sql.batches import in_order, sending
from chatmemory.stores.sql.commands import (
    CHECK_SCHEMA,
    RELEASE,
    Batch,
    Emit,
    ListingClosed,
    Sleep,
    Statement,
    Steps,
    result_of,
)
from chatmemory.stores.sql.driver import send_driver_sql, send_joined
from chatmemory.stores.sql.engine import takes_multi_statements

__all__ = ["AsyncDriver"]

_T = TypeVar("_T")


class AsyncDriver:
    """Sends the commands of one store's operations with an ``AsyncEngine``.

    Args:
        autocommit: the engine in autocommit, which operations check connections out of.
        check_schema: checks the schema revision (once per store), for :data:`CHECK_SCHEMA`.
    """

    __slots__ = ("_autocommit", "_check_schema", "_dbapi_error")

    def __init__(self, autocommit: AsyncEngine, check_schema: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._autocommit = autocommit
        self._check_schema = check_schema
        self._dbapi_error: type[Exception] = autocommit.dialect.loaded_dbapi.Error

    async def run(self, steps: Steps[_T]) -> _T:
        """Send each command ``steps`` yields; a driver error goes back in where it was yielded."""
        session = _Session(self)
        try:
            result = await drive_async(steps, session.perform)
        except BaseException as exc:
            await session.end(exc)
            raise
        await session.end(None)
        return result

    async def iterate(self, steps: Steps[None]) -> AsyncGenerator[str, None]:
        """Like :meth:`run`, handing out the ids the operation emits; a caller that stops ends it."""
        session = _Session(self)
        sent = steps
        try:
            command = sent.send(None)
            while True:
                if isinstance(command, Emit):
                    try:
                        for memory_id in command.ids:
                            yield memory_id
                    except GeneratorExit:  # the caller stopped: the listing ends its snapshot first
                        command = sent.throw(ListingClosed())
                    else:
                        command = sent.send(None)
                    continue
                try:
                    reply = await session.perform(command)
                except Exception as exc:
                    command = sent.throw(exc)
                else:
                    command = sent.send(reply)
        except (StopIteration, ListingClosed):
            pass
        except BaseException as exc:
            await session.end(exc)
            raise
        await session.end(None)


class _Session:
    """The connection one operation holds (checked out by its first statement) and how it sends commands."""

    __slots__ = ("_connection", "_driver")

    def __init__(self, driver: AsyncDriver) -> None:
        self._driver = driver
        self._connection: AsyncConnection | None = None

    async def perform(self, command: Any) -> Any:
        """Send ``command``; return what the operation receives."""
        if type(command) is Statement:
            return await self.send(command)
        if type(command) is Batch:
            return await self.send_batch(command)
        if command is RELEASE:
            await self.end(None)
        elif command is CHECK_SCHEMA:
            await self._driver._check_schema()
        elif isinstance(command, Sleep):
            await asyncio.sleep(command.seconds)
        else:  # pragma: no cover - every command is handled above
            raise TypeError(f"not a command: {command!r}")
        return None

    async def send(self, command: Statement) -> Any:
        """Send a statement on the operation's connection (checked out by the first); return its result."""
        connection: Any = self._connection
        if connection is None:
            connection = self._driver._autocommit.connect()
            self._connection = await connection.start()
        statement = command.statement
        if type(statement) is str:
            sync_connection = connection.sync_connection
            if not (sync_connection._has_events or sync_connection.engine._has_events):
                # The sync executor's cursor path, on the adapted driver: no statement execution around it.
                return await connection.run_sync(send_driver_sql, command, self._driver._dbapi_error)
            result = await connection.exec_driver_sql(statement, command.parameters)
        else:
            result = await connection.execute(statement, command.parameters)
        return result_of(command.result, result)

    async def send_batch(self, batch: Batch) -> list[Any]:
        """Send ``batch`` as :func:`~chatmemory.stores.sql.batches.sending` says; return its results."""
        results: list[Any] = await drive_async(sending(batch), self._send_part)
        return results

    async def _send_part(self, command: Statement | Batch) -> Any:
        return await (self.send(command) if isinstance(command, Statement) else self.send_joined(command))

    async def send_joined(self, batch: Batch) -> list[Any]:
        """Send a batch that has a joined form: as one string if the connection allows it, else in order."""
        connection: Any = self._connection
        if connection is None:
            connection = self._driver._autocommit.connect()
            self._connection = connection = await connection.start()
        sync_connection = connection.sync_connection
        if not (sync_connection._has_events or sync_connection.engine._has_events) and takes_multi_statements(
            (await connection.get_raw_connection()).dbapi_connection
        ):
            results: list[Any] = await connection.run_sync(send_joined, batch, self._driver._dbapi_error)
            return results
        return await drive_async(in_order(batch), self.send)

    async def end(self, error: BaseException | None) -> None:
        """Hand the connection back; one interrupted mid-call (cancelled) is invalidated, never reused."""
        connection, self._connection = self._connection, None
        if connection is not None:
            if error is not None and not isinstance(error, Exception):
                # Interrupted mid-protocol: never reuse it; closing it rolls back any transaction.
                await _to_completion(connection.invalidate())
            await _to_completion(connection.close())


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
