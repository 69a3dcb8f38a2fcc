"""The blocking SQL executor: a SQLAlchemy ``Engine``, hot statements on the DBAPI cursor, driver errors translated.

:class:`Executor` runs an operation to its end with :func:`~chatmemory.core.driving.drive`: each command
goes on the connection the operation holds (checked out by its first statement, handed back at
``RELEASE`` or at the end, on every exit path). A driver exception never reaches an operation:
:meth:`Session.perform` raises it as a :class:`~chatmemory.stores.sql.outcomes.SQLFailure` (its kind, the
driver's exception its cause). Driver SQL goes straight to the DBAPI cursor (through ``exec_driver_sql``
when cursor events are listened to); a SQLAlchemy ``Connection`` is put around the pooled connection only
where one is needed. A store that made its engine keeps the connection an operation ended with for the
next one (:meth:`Executor.keep`). The asyncio executors (:mod:`~chatmemory.stores.sql.aio`) run this
module's :class:`Session`. When each path is taken: *SQL* in ``docs/stores.md``.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection

from chatmemory.core.driving import Sleep, Steps, drive, drive_iter
from chatmemory.stores.sql.commands import (
    CHECK_SCHEMA,
    COMMIT,
    RELEASE,
    ROLLBACK,
    Batch,
    Command,
    Result,
    Statement,
    result_of,
    send_batch,
    send_in_order,
)
from chatmemory.stores.sql.dialect import SQLITE
from chatmemory.stores.sql.engine import WriterQueue, connects_in_autocommit, in_transaction, takes_multi_statements
from chatmemory.stores.sql.outcomes import SQLFailure

__all__ = ["Executor", "QueuedSession", "Session", "execute_driver_sql", "joined_results", "max_overflow"]

_T = TypeVar("_T")
_A = TypeVar("_A")


class Executor:
    """Sends the commands of one store's operations with ``engine``.

    Args:
        engine: the store's engine (whose event listeners decide the path of driver SQL).
        autocommit: the engine in autocommit, which operations check connections out of.
        check_schema: checks the schema revision (once per store), for :data:`CHECK_SCHEMA`.
        failure: the store's error for a driver exception (the dialect's :class:`SQLFailure`).
        sleep: waits a retry's backoff, for :class:`Sleep` (the asyncio executor's awaits ``asyncio.sleep``).
        keeps_connection: whether the connection an operation ended with may be kept for the next one
            (a store-made engine's: see :meth:`keep`).
        writers: the writer queue of a SQLite file (:class:`~chatmemory.stores.sql.engine.WriterQueue`), which
            each transaction takes first; ``None``: none.
    """

    __slots__ = (
        "__weakref__",
        "_autocommit",
        "_check_schema",
        "_dbapi_error",
        "_engine",
        "_execute_sql",
        "_failure",
        "_joined_results",
        "_keeping",
        "_keeps",
        "_kept",
        "_pooled",
        "_sleep",
        "_writers",
    )

    def __init__(
        self,
        engine: Engine,
        autocommit: Engine,
        check_schema: Callable[[Callable[[str], list[Any] | None] | None], None],
        failure: Callable[[SQLAlchemyError], SQLFailure],
        sleep: Callable[[float], None] = time.sleep,
        *,
        keeps_connection: bool = False,
        writers: WriterQueue | None = None,
    ) -> None:
        self._engine = engine
        self._writers = writers
        self._autocommit = autocommit
        self._check_schema = check_schema
        self._failure = failure
        self._sleep = sleep
        self._dbapi_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        self._pooled = connects_in_autocommit(autocommit)
        """Whether driver SQL may go on the pooled connection without a ``Connection`` around it."""
        self._joined_results = functools.partial(joined_results, dbapi_error=self._dbapi_error)
        # psycopg (sync) sends the rows of a read in binary: a payload's bytes as they are, not hex to decode.
        binary = engine.dialect.driver == "psycopg" and not engine.dialect.is_async
        self._execute_sql = functools.partial(execute_driver_sql, binary_records=True) if binary else execute_driver_sql
        self._kept: list[PoolProxiedConnection] = []
        """The connection the last operation ended with, for the next (at most one)."""
        self._keeping = threading.Lock()
        """Held to keep a connection: two operations ending at once keep one of theirs, not both."""
        # A plain queue pool only: a NullPool's user wants no connection left open between calls.
        self._keeps = keeps_connection and type(autocommit.pool).__name__ in _KEEPING_POOLS
        if self._keeps:
            _KEEPING.add(self)

    def checkout(self) -> PoolProxiedConnection:
        """A connection for one operation: the one the last operation left, else one from the pool."""
        kept = self._kept
        if kept:
            try:
                return kept.pop()
            except IndexError:  # another thread took it meanwhile
                pass
        return self._autocommit.raw_connection()

    def keep(self, pooled: PoolProxiedConnection) -> bool:
        """Keep ``pooled``, which an operation ended with, for the next operation; ``False`` if it may not be.

        It may be if the store keeps connections (a store-made engine on a queue pool), none is kept
        already, nothing listens to the pool's checkouts and returns (they would miss some), the pool
        could still give out a connection at once (else a task or thread waiting in it would wait for
        the kept one for ever), and the connection is sound and outside a transaction (as the pool's
        reset would leave it). It is then
        used as a connection from the pool would be, without the pool's checkout: no pre-ping and no
        recycling (a store whose ``engine_options`` ask for either keeps no connection).
        """
        if not self._keeps or self._kept:
            return False
        pool = self._autocommit.pool
        dispatch = pool.dispatch
        if dispatch.checkout or dispatch.checkin or not pooled.is_valid or not _room_beside(pool):
            return False
        if in_transaction(pooled.dbapi_connection):
            return False
        with self._keeping:
            if self._kept or not self._keeps:  # another operation kept one meanwhile, or the store closed
                return False
            self._kept.append(pooled)
        return True

    def hand_back(self) -> None:
        """Return the kept connection to the pool, and keep none from now on (before the engine is disposed)."""
        with self._keeping:
            self._keeps = False
        kept = self._kept
        while kept:
            try:
                pooled = kept.pop()
            except IndexError:  # pragma: no cover - another thread took it meanwhile
                break
            pooled.close()

    def run(self, steps: Steps[Command, _T]) -> _T:
        """Send each command ``steps`` yields; a failure goes back in (as a chatmemory error) where it was yielded."""
        session = self.session()
        try:
            result = drive(steps, session.perform)
        except BaseException as exc:
            session.end(exc)
            raise
        session.end(None)
        return result

    def session(self) -> Session:
        """A session for one operation (what :meth:`run` drives it with; the asyncio executor drives its own)."""
        writers = self._writers
        return Session(self) if writers is None else QueuedSession(self, writers)

    def iterate(self, steps: Steps[Command, None]) -> Iterator[str]:
        """Like :meth:`run`, handing out the ids the operation emits; a caller that stops ends it."""
        session = self.session()
        try:
            yield from drive_iter(steps, session.perform)
        except GeneratorExit:  # the caller stopped, and the listing ended what it held
            session.end(None)
            raise
        except BaseException as exc:
            session.end(exc)
            raise
        session.end(None)


class Session:
    """The connection one operation holds, and how each command is sent on it.

    ``_pooled`` is the pooled DBAPI connection the operation checked out; ``_connection`` the SQLAlchemy
    ``Connection`` around it, made when driver SQL cannot go to the cursor alone (see the module).
    """

    __slots__ = ("_connection", "_driver", "_pooled")

    def __init__(self, driver: Executor) -> None:
        self._driver = driver
        self._connection: Connection | None = None
        self._pooled: PoolProxiedConnection | None = None

    def perform(self, command: Any) -> Any:
        """Send ``command``; return what the operation receives. A driver error is raised as a :class:`SQLFailure`."""
        try:
            if type(command) is Statement:
                return self.send(command)
            if type(command) is Batch:
                return self.send_batch(command)
            if command is RELEASE:
                self.end(None)
            elif command is CHECK_SCHEMA:
                self._driver._check_schema(self._quick_rows if self._on_pooled() else None)
            elif isinstance(command, Sleep):
                self._driver._sleep(command.seconds)
            else:  # pragma: no cover - every command is handled above
                raise TypeError(f"not a command: {command!r}")
        except SQLAlchemyError as exc:
            failure = self._driver._failure(exc)
            if type(command) is Statement or type(command) is Batch:
                failure.sent(command.operation, command.memory_id)
            raise failure from exc
        return None

    def send(self, command: Statement) -> Any:
        """Send a statement on the operation's connection (checked out by the first); return its result.

        A ``ROLLBACK`` after the connection was lost sends nothing: the server ended the transaction with
        the connection, and sending would check out another only to fail in place of the error that was
        lost (the operation may then try again on a new connection, as it does for a lost connection).
        """
        if command is ROLLBACK and self._connection is not None and self._connection.invalidated:
            self._connection.rollback()  # SQLAlchemy's record of the transaction only: nothing is sent
            return None
        driver = self._driver
        sql = command.statement
        if type(sql) is str and self._on_pooled():
            return self._on_cursor(driver._execute_sql, command, command)
        connection = self.connection()
        if type(sql) is not str:
            return result_of(command.result, connection.execute(sql, command.parameters))
        if connection._has_events or driver._engine._has_events:
            return result_of(command.result, connection.exec_driver_sql(sql, command.parameters))
        return self._on_cursor(driver._execute_sql, command, command)

    def send_batch(self, batch: Batch) -> list[Any]:
        """Send ``batch`` as :func:`~chatmemory.stores.sql.commands.send_batch` says; return its results.

        On the pooled connection alone (see the module), its statements share one cursor.
        """
        if self._on_pooled():
            cursor = self._checked_out().cursor()
            try:
                return send_batch(batch, functools.partial(self._send_on, cursor))
            finally:
                cursor.close()
        return send_batch(batch, self._send_part)

    def _send_on(self, cursor: Any, command: Statement | Batch) -> Any:
        """Send one command of a batch on ``cursor``, the pooled connection's (until a ``Connection`` is needed)."""
        if self._connection is not None or type(command) is not Statement or type(command.statement) is not str:
            return self._send_part(command)
        return self._run(cursor, self._driver._execute_sql, command, command)

    def _send_part(self, command: Statement | Batch) -> Any:
        return self.send(command) if isinstance(command, Statement) else self.send_joined(command)

    def send_joined(self, batch: Batch) -> list[Any]:
        """Send a batch that has a joined form: as one string if the connection allows it, else in order."""
        driver = self._driver
        joined = batch.joined
        if joined is None:  # pragma: no cover - only batches with a joined form come here
            raise ValueError("the batch has no joined form")
        if self._on_pooled():
            joins = takes_multi_statements(self._checked_out().dbapi_connection)
        else:
            connection = self.connection()
            joins = not (connection._has_events or driver._engine._has_events) and takes_multi_statements(
                connection.connection.dbapi_connection
            )
        if joins:
            return self._on_cursor(driver._joined_results, batch, joined)
        return send_in_order(batch, self.send)

    def _quick_rows(self, sql: str) -> list[Any] | None:
        """The rows of driver SQL on the operation's pooled connection; ``None`` if the driver failed.

        The schema check's first try: a failed statement leaves nothing to end in autocommit, but the
        connection is handed back invalidated (a lost one is never reused) and the check answered on
        another (see :meth:`~chatmemory.stores.sql.schema.SchemaAdmin.check`).
        """
        try:
            pooled = self._checked_out()
        except self._driver._dbapi_error:
            return None  # the check on a connection of its own raises it as the store's error
        cursor = pooled.cursor()
        try:
            cursor.execute(sql)
            return list(cursor.fetchall())
        except self._driver._dbapi_error:
            cursor.close()
            self._pooled = None
            pooled.invalidate()
            pooled.close()
            return None
        finally:
            if self._pooled is pooled:
                cursor.close()

    def _on_pooled(self) -> bool:
        """Whether driver SQL goes to the pooled connection's cursor alone (see the module)."""
        driver = self._driver
        return self._connection is None and driver._pooled and not driver._engine._has_events

    def _checked_out(self) -> PoolProxiedConnection:
        pooled = self._pooled
        if pooled is None:
            pooled = self._pooled = self._driver.checkout()
        return pooled

    def _on_cursor(self, run: Callable[[Any, _A], _T], argument: _A, command: Statement) -> _T:
        """:meth:`_run` on a new cursor of the operation's DBAPI connection (its ``Connection``'s if made), closed."""
        connection = self._connection
        cursor: Any = (self._checked_out() if connection is None else connection.connection).cursor()
        try:
            return self._run(cursor, run, argument, command)
        finally:
            cursor.close()

    def _run(self, cursor: Any, run: Callable[[Any, _A], _T], argument: _A, command: Statement) -> _T:
        """``run(cursor, argument)``; a driver error raised as SQLAlchemy raises it for ``command``."""
        try:
            return run(cursor, argument)
        except self._driver._dbapi_error as exc:
            self._raise_wrapped(exc, command, cursor)

    def _raise_wrapped(self, exc: Exception, command: Statement, cursor: Any) -> NoReturn:
        """Raise driver error ``exc`` of ``command`` as SQLAlchemy does (wrapped; a lost connection invalidated).

        The operation's transaction, if it began one, is left for it to end: a ``Connection`` outside a
        transaction of its own rolls the driver connection back while it handles an error, which would end
        the operation's transaction under it and make its ``ROLLBACK`` fail in place of the error that
        caused it. So the ``Connection`` is marked in a transaction first (its ``BEGIN`` sends nothing).
        """
        connection = self.connection()
        if not connection.in_transaction() and not connection.invalidated:
            connection.begin()
        connection._handle_dbapi_exception(exc, command.statement, command.parameters, cursor, None)
        raise exc  # pragma: no cover - the handler raises

    def connection(self) -> Connection:
        """The operation's ``Connection``, around its pooled connection (checked out first if it has none).

        The pooled connection is the session's before the ``Connection`` is made, so one whose making is
        interrupted is still invalidated and handed back instead of staying checked out.
        """
        connection = self._connection
        if connection is None:
            engine = self._driver._autocommit
            pooled = self._pooled
            if pooled is None:
                try:
                    pooled = self._pooled = self._driver.checkout()
                except engine.dialect.loaded_dbapi.Error as exc:  # raised as Engine.connect() raises it
                    Connection._handle_dbapi_exception_noconnection(exc, engine.dialect, engine)
                    raise  # pragma: no cover - the handler raises
            try:
                connection = Connection(engine, connection=pooled)
            except BaseException:
                # Its settings half applied (an engine put in autocommit by execution options sets the
                # isolation level here: an await with asyncio drivers, where a cancellation can land).
                self._pooled = None
                pooled.invalidate()
                pooled.close()
                raise
            self._connection = connection
        return connection

    @property
    def holds_connection(self) -> bool:
        """Whether the operation made a ``Connection``, whose closing resets its settings (see :meth:`end`)."""
        return self._connection is not None

    def end(self, error: BaseException | None) -> None:
        """Hand the connection back (one interrupted mid-call is invalidated, never reused)."""
        connection, self._connection = self._connection, None
        pooled, self._pooled = self._pooled, None
        interrupted = error is not None and not isinstance(error, Exception)
        if connection is not None:
            if interrupted:
                connection.invalidate()
            connection.close()
        elif pooled is not None:
            if interrupted:
                pooled.invalidate()
            elif error is None and self._driver.keep(pooled):
                return
            pooled.close()


class QueuedSession(Session):
    """A session whose transactions take a SQLite file's writer queue first (an engine module ``WriterQueue``).

    The queue is taken before ``BEGIN IMMEDIATE`` is sent (a batch that is a transaction of its own takes
    it for the whole batch), and given back once ``COMMIT`` or ``ROLLBACK`` has run (failed or not), when
    the ``BEGIN`` fails, or when the operation ends.
    """

    __slots__ = ("_held", "_queue", "stop")

    def __init__(self, driver: Executor, queue: WriterQueue) -> None:
        Session.__init__(self, driver)
        self._queue = queue
        self._held: threading.Lock | None = None
        """The lock of the turn this session holds, if it does."""
        self.stop: threading.Event | None = None
        """Set when the operation's caller gives up (the asyncio executor's): a wait for the turn then
        ends with :class:`~chatmemory.stores.sql.engine.TurnAbandoned`."""

    def send(self, command: Statement) -> Any:
        """Send a statement as :meth:`Session.send` does; from ``BEGIN IMMEDIATE`` on, in the queue's turn."""
        if command.statement is _BEGINS and self._held is None:
            self._take()
            try:
                return Session.send(self, command)
            except BaseException:
                self._leave()  # nothing was begun
                raise
        if command is COMMIT or command is ROLLBACK:
            try:
                return Session.send(self, command)
            finally:
                self._leave()
        return Session.send(self, command)

    def send_batch(self, batch: Batch) -> list[Any]:
        """Send ``batch`` as :meth:`Session.send_batch` does; a transaction of its own, in the queue's turn."""
        begin = batch.begin
        if begin is None or begin.statement is not _BEGINS or self._held is not None:
            return Session.send_batch(self, batch)
        self._take()
        try:
            return Session.send_batch(self, batch)
        finally:
            self._leave()

    def _take(self) -> None:
        """Take the connection, then the turn (at once when no other writer holds it)."""
        if self._pooled is None:
            # The connection first: a writer waiting for the pool while it holds the turn would wait for
            # the writers queued behind it, which hold the pool's connections.
            if self._on_pooled():
                self._checked_out()
            else:
                self.connection()
        self._held = self._queue.enter(_BEGINS, self.stop)

    def end(self, error: BaseException | None) -> None:
        """Hand the connection back (see :meth:`Session.end`), then the queue's turn, if this session holds it."""
        if self._held is None:
            Session.end(self, error)
            return
        try:
            Session.end(self, error)
        finally:
            self._leave()

    def _leave(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.release()


_BEGINS = SQLITE.begin
"""How a SQLite write transaction begins: the very string the store's operations send (compared by identity)."""


_KEEPING_POOLS = frozenset({"QueuePool", "AsyncAdaptedQueuePool"})
"""The pools a store keeps a connection of between operations (by name: not a subclass of the caller's)."""

_KEEPING: weakref.WeakSet[Executor] = weakref.WeakSet()
"""The drivers that may keep a connection, for :func:`_forget_kept_connections` after a fork."""

_INHERITED: list[PoolProxiedConnection] = []
"""Connections a forked child's drivers kept in its parent: held here so that they are never used, closed
or collected (which would hand them back to the child's pool) in the child, as their sockets are the parent's."""


def _forget_kept_connections() -> None:
    for driver in list(_KEEPING):
        _INHERITED.extend(driver._kept)
        driver._kept.clear()
        driver._keeping = threading.Lock()  # a lock another thread of the parent held stays held here


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere a process has no fork to inherit connections through
    os.register_at_fork(after_in_child=_forget_kept_connections)


def execute_driver_sql(cursor: Any, command: Statement, binary_records: bool = False) -> Any:
    """Run ``command``'s driver SQL on a DBAPI ``cursor``; return its result (driver errors go through).

    ``binary_records``: a psycopg cursor, asked for the rows of a :data:`Result.RECORDS` read in binary.
    """
    parameters = command.parameters
    kind = command.result
    if command.many:
        cursor.executemany(command.statement, parameters)
    elif binary_records and kind is Result.RECORDS:
        cursor.execute(command.statement, parameters, binary=True)
    elif parameters is None:
        cursor.execute(command.statement)
    else:
        cursor.execute(command.statement, parameters)
    if kind is Result.ROWCOUNT:
        return int(cursor.rowcount)
    if kind is Result.RECORDS:
        return cursor.fetchall()
    return cursor.fetchone()  # Result.FIRST, the only other result asked of driver SQL


def max_overflow(pool: Any) -> int | None:
    """A queue pool's ``max_overflow`` (-1: no bound; ``None``: not a pool that has one)."""
    found = getattr(pool, "_max_overflow", None)  # QueuePool keeps it; it has no public accessor
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def _room_beside(pool: Any) -> bool:
    """Whether a queue pool could give out a connection without waiting, one more kept out of it."""
    overflow = max_overflow(pool)
    return bool(pool.checkedin() > 0 or overflow is None or overflow < 0 or pool.overflow() < overflow)


def joined_results(cursor: Any, batch: Batch, dbapi_error: type[Exception]) -> list[int]:
    """Run ``batch``'s joined string on a DBAPI ``cursor``; the row counts up to the first missed ``expect``.

    The server runs the statements in order and stops at the first that fails (its error goes through).
    Results after a statement that missed its ``expect`` are read and dropped, errors included: they ran
    in the transaction the operation rolls back.
    """
    joined: Any = batch.joined
    results: list[int] = []
    cursor.execute(joined.statement, joined.parameters)
    pending = batch.begin is None  # the first result is the BEGIN's, when there is one
    statements = batch.statements
    for index, statement in enumerate(statements):
        if not pending:
            cursor.nextset()
        pending = False
        count = int(cursor.rowcount)
        results.append(count)
        if statement.expect is not None and count != statement.expect:
            _drop_results(cursor, len(statements) - index - 1, dbapi_error)
            break
    return results


def _drop_results(cursor: Any, count: int, dbapi_error: type[Exception]) -> None:
    """Read and drop the next ``count`` results; the server stops at the first failed statement."""
    try:
        for _ in range(count):
            cursor.nextset()
    except dbapi_error:
        return
