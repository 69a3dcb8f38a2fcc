"""Engines for the SQL store from URLs, their connect hooks and driver facts; SQLite's queue of writers.

:class:`IdsRead` is a read rendered once whose ids are written in per call, in the driver's placeholders.
:func:`normalize_url` checks a store URL and gives it the driver chatmemory's extras install
(``postgresql://``: psycopg 3, in its async mode on asyncio; ``mysql://`` and ``mariadb://``: PyMySQL,
asyncmy on asyncio; ``sqlite://``: ``sqlite3``, aiosqlite on asyncio). Every engine a store uses runs its
connections in autocommit: the store's transactions issue ``BEGIN`` themselves, so a single-statement
turn costs no ``BEGIN``/``COMMIT`` round trips. SQLite writers of one file in one process take the
file's turn (:class:`WriterQueue`) before ``BEGIN IMMEDIATE`` instead of polling for SQLite's lock, and
hand it on once their ``COMMIT`` or ``ROLLBACK`` has run, when the ``BEGIN`` fails, or when the operation
ends; only stores that make their engine from a file URL queue. Why, and what it costs: *SQL* in
``docs/stores.md``.
"""

from __future__ import annotations

import functools
import inspect
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import CompoundSelect, Dialect, Engine, Select, create_engine, event, make_url
from sqlalchemy.engine import URL
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import PoolResetState

from chatmemory.core.errors import MissingDependencyError
from chatmemory.stores.sql.dialect import Rendered, dialect_family, render

__all__ = [
    "AUTOCOMMIT",
    "IDS_SLOT",
    "CONNECT_TIMEOUT_SECONDS",
    "SQLITE_BUSY_TIMEOUT_SECONDS",
    "STOP_CHECK_SECONDS",
    "FileTurn",
    "IdsRead",
    "TurnAbandoned",
    "WriterQueue",
    "autocommit_options",
    "connects_in_autocommit",
    "driver_options",
    "engine_from_url",
    "engine_isolation_level",
    "in_transaction",
    "install_connect_hooks",
    "missing_driver",
    "normalize_url",
    "takes_multi_statements",
    "writer_queue",
    "writer_queue_for",
]

AUTOCOMMIT = "AUTOCOMMIT"
CONNECT_TIMEOUT_SECONDS = 10
"""How long a store-made engine waits to connect to PostgreSQL or MySQL/MariaDB (``engine_options``
``connect_args={"connect_timeout": ...}`` overrides it)."""
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0
"""How long a SQLite write waits for another writer's lock (``BEGIN IMMEDIATE``)."""

_CLIENT_FOUND_ROWS = 1 << 1
"""MySQL protocol: report the rows an ``UPDATE`` matched, not those it changed (SQLAlchemy's default)."""
_CLIENT_MULTI_STATEMENTS = 1 << 16
"""MySQL protocol: the client may send several ``;``-separated statements as one query."""
_SERVER_STATUS_IN_TRANS = 1
"""MySQL protocol: the server status flag of an open transaction (``SERVER_STATUS_IN_TRANS``)."""
_PSYCOPG_IDLE = 0
"""psycopg: ``pq.TransactionStatus.IDLE``, a session with no transaction open."""
_SKIPS_AUTOCOMMIT_ROLLBACK = "skip_autocommit_rollback" in inspect.signature(DefaultDialect.__init__).parameters
"""Whether SQLAlchemy (2.0.43 and later) can skip ``rollback()`` on a connection in autocommit."""

_SYNC_DRIVERS = {"postgresql": "psycopg", "mysql": "pymysql", "mariadb": "pymysql", "sqlite": "pysqlite"}
_ASYNC_DRIVERS = {"postgresql": "psycopg", "mysql": "asyncmy", "mariadb": "asyncmy", "sqlite": "aiosqlite"}
_DRIVER_MODULES = {"psycopg": "psycopg", "pymysql": "pymysql", "asyncmy": "asyncmy", "aiosqlite": "aiosqlite"}
_EXTRAS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "sqlite": "sql"}
_OTHER_STORES = {
    "redis": "chatmemory.stores.redis.RedisChatMemoryStore",
    "rediss": "chatmemory.stores.redis.RedisChatMemoryStore",
    "redis+cluster": "chatmemory.stores.redis.RedisChatMemoryStore",
    "unix": "chatmemory.stores.redis.RedisChatMemoryStore",
    "mongodb": "chatmemory.stores.mongodb.MongoChatMemoryStore",
    "mongodb+srv": "chatmemory.stores.mongodb.MongoChatMemoryStore",
    "memory": "chatmemory.InMemoryChatMemoryStore",
}
_EXAMPLES = "postgresql+psycopg://user@host/db, mysql+pymysql://user@host/db or sqlite:///path/to/chat.db"


def normalize_url(url: str, *, asynchronous: bool = False) -> URL:
    """Check a store URL and give it the driver chatmemory's extras install.

    Without a driver, ``postgresql://`` (or ``postgres://``) means psycopg 3 and ``mysql://`` /
    ``mariadb://`` mean PyMySQL (SQLAlchemy's own defaults, psycopg2 and mysqlclient, are not installed by
    ``chatmemory[postgres]`` / ``chatmemory[mysql]``). For the asyncio store, sync drivers are swapped for
    their async twins (``sqlite`` → ``aiosqlite``, ``pymysql`` → ``asyncmy``), so both stores take the same
    URL.

    Raises:
        ValueError: the URL is not a SQL database URL, names another store's scheme, is an in-memory
            SQLite database, or names a driver the store does not use; the message says what to use.
    """
    if not isinstance(url, str):
        raise TypeError(f"a SQL store URL must be a str, not {type(url).__name__}")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if not scheme or not scheme.replace("+", "").replace("-", "").isalnum():
        raise ValueError(f"{url!r} is not a database URL (it has no scheme); use a URL such as {_EXAMPLES}")
    if scheme in _OTHER_STORES:
        raise ValueError(
            f"{url.split('://', 1)[0]}:// is not a SQL database URL; use {_OTHER_STORES[scheme]} "
            "(or chatmemory.open_store(url), which picks the store by scheme)"
        )
    backend, _, driver = scheme.partition("+")
    if backend == "postgres":
        backend = "postgresql"
    if backend not in _SYNC_DRIVERS:
        raise ValueError(
            f"the SQL store supports PostgreSQL, MySQL/MariaDB and SQLite, not {backend!r}; use {_EXAMPLES}"
        )
    try:
        parsed = make_url(f"{backend}{'+' + driver if driver else ''}://{url.split('://', 1)[1]}")
    except ArgumentError as exc:
        raise ValueError(f"{url!r} is not a valid database URL ({exc}); use a URL such as {_EXAMPLES}") from exc
    wanted = (_ASYNC_DRIVERS if asynchronous else _SYNC_DRIVERS)[backend]
    if driver in ("", _SYNC_DRIVERS[backend], _ASYNC_DRIVERS[backend]):
        driver = wanted
    if driver != wanted:
        raise ValueError(
            f"the {'asyncio ' if asynchronous else ''}SQL store does not use the driver {driver!r} of "
            f"{parsed.drivername!r} (it is tested with {wanted}); use {backend}+{wanted}:// or {backend}://"
        )
    if backend == "sqlite":
        database = parsed.database
        if database in (None, "", ":memory:") or (database.startswith("file:") and "mode=memory" in url):
            # Each SQLite connection to an in-memory database gets its own empty database.
            raise ValueError(
                f"{url!r} is an in-memory SQLite database, which lives in one connection and is invisible to "
                "other threads; use a file (sqlite:///path/to/chat.db) or chatmemory.InMemoryChatMemoryStore"
            )
    return parsed.set(drivername=f"{backend}+{driver}")


_HSTORE_DRIVERS = frozenset(("psycopg", "psycopg_async", "psycopg2"))
"""PostgreSQL drivers whose SQLAlchemy dialect looks the hstore type up on a new engine's first connection."""


def driver_options(url: URL, options: dict[str, Any]) -> dict[str, Any]:
    """``create_engine`` keyword arguments for a store-made engine: the caller's, plus defaults.

    Connections are in autocommit (see the module docstring); connect timeouts are short. There is no
    pool pre-ping: a call that finds its pooled connection dead is retried once on a new connection.
    PyMySQL connections allow multiple statements per query (unless ``connect_args`` sets
    ``client_flag``; one in the URL is kept beside it), so that a MySQL turn is one round trip and a
    ``COMMIT`` (a MariaDB turn is one compound statement, which needs no such flag).
    On PostgreSQL the dialect does not look the hstore type up (the store has no hstore columns).
    A connection goes back to the pool without a rollback unless a transaction is open (see
    :func:`install_connect_hooks`).
    """
    settings = dict(options)
    settings.setdefault("isolation_level", AUTOCOMMIT)
    # The pool does not roll back each connection it takes back: the reset hook rolls back what is really
    # open. A rollback with nothing open costs a round trip with PyMySQL and asyncmy (they send ROLLBACK
    # on every call), a hop to aiosqlite's thread, or a hop out of the greenlet with psycopg's async mode.
    settings.setdefault("pool_reset_on_return", None)
    connect_args = dict(settings.pop("connect_args", {}))
    backend = dialect_family(url.get_backend_name())
    if backend == "sqlite":
        connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT_SECONDS)
    else:
        connect_args.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    settings["connect_args"] = connect_args
    if backend == "mysql" and url.get_driver_name() == "pymysql" and "client_flag" not in connect_args:
        # A diffed turn goes as one multi-statement string (Statements.joined_turn): one round trip
        # instead of five. asyncmy always allows them; PyMySQL does when asked. Only the store's own
        # statements run on its engine, their parameters escaped by the driver.
        given = url.query.get("client_flag", "0")
        asked = int(given if isinstance(given, str) else given[-1])
        connect_args["client_flag"] = asked | _CLIENT_FOUND_ROWS | _CLIENT_MULTI_STATEMENTS
    if backend == "postgresql" and url.get_driver_name() in _HSTORE_DRIVERS:
        # The store keeps no hstore columns: without this, each new engine's first connection asks the server
        # for the hstore type (one more round trip, a third of an open's time beside psycopg's own connect).
        settings.setdefault("use_native_hstore", False)
    if backend == "mysql":
        # Nor (in autocommit) does SQLAlchemy roll back when it closes a connection: PyMySQL and asyncmy
        # would send ROLLBACK even with no transaction open.
        if _SKIPS_AUTOCOMMIT_ROLLBACK:
            settings.setdefault("skip_autocommit_rollback", True)
    return settings


def install_connect_hooks(engine: Engine) -> None:
    """Per-connection settings (WAL on SQLite, ``READ COMMITTED`` on MySQL/MariaDB), and the pool's reset.

    A connection going back to the pool is rolled back only if its driver says a transaction is open
    (:func:`in_transaction`: state the driver keeps, read without I/O): the reset costs nothing after an
    autocommit statement or a committed transaction, and a transaction left open (an operation
    interrupted between ``BEGIN`` and ``COMMIT``) is still ended before another call gets the connection.
    """
    backend = dialect_family(engine.dialect.name)

    @event.listens_for(engine, "reset")
    def _rollback_if_open(dbapi_connection: Any, _record: Any, state: PoolResetState) -> None:
        if state.terminate_only or not state.asyncio_safe:
            return  # discarded, not reused (or, on asyncio, in a garbage collection: nothing can be sent)
        if in_transaction(dbapi_connection):
            dbapi_connection.rollback()

    if backend == "sqlite":

        @event.listens_for(engine, "connect")
        def _write_ahead_log(dbapi_connection: Any, _record: Any) -> None:
            # In WAL mode readers never wait for the writer (the setting is kept in the file).
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()

    elif backend == "mysql":

        @event.listens_for(engine, "connect")
        def _read_committed(dbapi_connection: Any, _record: Any) -> None:
            # READ COMMITTED takes no gap locks, so writers of different memories do not deadlock on
            # neighbouring index ranges; set once per connection, not per transaction.
            cursor = dbapi_connection.cursor()
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cursor.close()


def in_transaction(dbapi_connection: Any) -> bool:
    """Whether a connection of a store's drivers has a transaction open, as the driver knows it (no I/O).

    PyMySQL and asyncmy keep the server status of the last reply; psycopg the session's transaction
    status (anything but idle counts: in a transaction, failed in one, a command running, or unknown);
    ``sqlite3`` and aiosqlite ask SQLite whether it is in autocommit. An asyncio driver's connection is
    reached through SQLAlchemy's adapter around it.
    """
    driver_connection = getattr(dbapi_connection, "driver_connection", dbapi_connection)
    status = getattr(driver_connection, "server_status", None)
    if status is not None:  # PyMySQL, asyncmy
        return bool(status & _SERVER_STATUS_IN_TRANS)
    info = getattr(driver_connection, "info", None)
    if info is not None:  # psycopg
        return int(info.transaction_status) != _PSYCOPG_IDLE
    return bool(driver_connection.in_transaction)  # sqlite3, aiosqlite


def takes_multi_statements(dbapi_connection: Any) -> bool:
    """Whether a MySQL/MariaDB connection runs several ``;``-separated statements sent as one query.

    PyMySQL connections do when opened with ``CLIENT.MULTI_STATEMENTS`` (store-made engines are);
    asyncmy always opens them so.
    """
    driver_connection = getattr(dbapi_connection, "driver_connection", dbapi_connection)  # asyncmy's adapter
    flags = getattr(driver_connection, "client_flag", None)
    if flags is None:  # asyncmy keeps its flags to itself, and always asks for multiple statements
        return type(driver_connection).__module__.startswith("asyncmy")
    return bool(flags & _CLIENT_MULTI_STATEMENTS)


def missing_driver(url: URL, exc: ImportError, feature: str) -> Exception:
    """The error for an engine whose driver is not installed: the extra to install."""
    backend = url.get_backend_name()
    module = _DRIVER_MODULES.get(url.get_driver_name(), exc.name or "?")
    return MissingDependencyError(feature, _EXTRAS.get(backend, "sql"), module)


def engine_from_url(url: str, options: dict[str, Any]) -> Engine:
    """An engine for the sync store to own (see :func:`normalize_url` and :func:`driver_options`).

    On PyMySQL its connections share one TLS context for the driver's "preferred" TLS (see
    :func:`pymysql_connection_type`).
    """
    parsed = normalize_url(url)
    try:
        engine = create_engine(parsed, **driver_options(parsed, options))
    except ImportError as exc:
        raise missing_driver(parsed, exc, "SQLChatMemoryStore") from exc
    install_connect_hooks(engine)
    if parsed.get_driver_name() == "pymysql" and "creator" not in options:
        connection_type = pymysql_connection_type()
        if connection_type is not None:

            @event.listens_for(engine, "do_connect")
            def connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> Any:
                return connection_type(*cargs, **cparams)

    return engine


@functools.cache
def pymysql_connection_type() -> type[Any] | None:
    """PyMySQL's connection, building the TLS context of its "preferred" TLS once per process.

    Given no TLS options, PyMySQL (1.1 and later) tries TLS and falls back to plain text when the server
    offers none, and for that builds a default TLS context on every connection: the system's CA store is
    read and parsed each time (tens of milliseconds, most of an open's time; several times that on a
    loaded machine), to verify nothing (the context verifies no certificate). The context is the same
    every time, so one is built and shared; a connection given TLS options of its own builds its own as
    before. ``None`` where PyMySQL has no such step.
    """
    from pymysql.connections import Connection  # type: ignore[import-untyped]

    if not callable(getattr(Connection, "_create_ssl_ctx", None)):
        return None
    lock = threading.Lock()
    shared: list[Any] = []

    class SharedTLSContextConnection(Connection):  # type: ignore[misc]
        def _create_ssl_ctx(self, sslp: Any) -> Any:
            if not (isinstance(sslp, dict) and not sslp):  # TLS options of the caller's: as PyMySQL does
                return super()._create_ssl_ctx(sslp)
            with lock:
                if not shared:
                    shared.append(super()._create_ssl_ctx(sslp))
                return shared[0]

    return SharedTLSContextConnection


def autocommit_options(isolation_level: object) -> dict[str, str]:
    """Execution options that put a caller's engine in autocommit (none if it is already)."""
    return {} if isolation_level == AUTOCOMMIT else {"isolation_level": AUTOCOMMIT}


def connects_in_autocommit(engine: Any) -> bool:
    """Whether ``engine``'s pooled connections are in autocommit as they are, with nothing to apply per checkout.

    True for ``create_engine(..., isolation_level="AUTOCOMMIT")`` (the level is set when a connection is
    made) and no execution options: a ``Connection`` around such a connection adds nothing to driver SQL.
    An engine in autocommit through ``execution_options`` is not: its ``Connection`` switches the level at
    each checkout and back at each return.
    """
    on_connect = getattr(engine.dialect, "_on_connect_isolation_level", None)
    return not engine.get_execution_options() and on_connect == AUTOCOMMIT


def engine_isolation_level(engine: Any) -> object:
    """The isolation level ``engine``'s connections get (``create_engine`` or ``execution_options``)."""
    level = engine.get_execution_options().get("isolation_level")
    if level is None:
        # SQLAlchemy keeps create_engine(isolation_level=...) here and applies it on connect.
        level = getattr(engine.dialect, "_on_connect_isolation_level", None)
    return level


# --------------------------------------------------------------------------------- SQLite's writers

STOP_CHECK_SECONDS = 0.02
"""How often a writer that may be stopped (an asyncio task's, on a worker thread) looks whether it was."""


class TurnAbandoned(BaseException):
    """A writer stopped waiting for its turn: its caller gave up (an asyncio task was cancelled).

    Nothing was begun. Like a cancellation, not an ``Exception``: the operation does not handle it.
    """


class FileTurn:
    """The turn to write one SQLite database file, shared by every store of this process on the file."""

    __slots__ = ("__weakref__", "lock", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        """The file's resolved path."""
        self.lock = threading.Lock()
        """Held by the writer whose turn it is."""


class WriterQueue:
    """One store's place in the queue of a SQLite file's writers.

    Args:
        turn: the file's turn, shared with the other stores on it.
        timeout: the longest this store's writers wait for the turn, in seconds (its busy timeout).
    """

    __slots__ = ("timeout", "turn")

    def __init__(self, turn: FileTurn, timeout: float) -> None:
        self.turn = turn
        self.timeout = max(timeout, 0.0)

    def enter(self, statement: str, stop: threading.Event | None = None) -> threading.Lock:
        """Wait for the turn to write (up to :attr:`timeout`); the lock to release when the turn ends.

        The lock itself is handed back, so that a writer releases the one it took, even in the child of
        a fork (which renews the file's lock for its own writers).

        Args:
            statement: what the writer begins with (for the error).
            stop: set when the writer's caller gives up: it then stops waiting (within
                :data:`STOP_CHECK_SECONDS`), and a turn that came meanwhile goes on to the next writer.

        Raises:
            sqlalchemy.exc.OperationalError: the turn did not come within the timeout (``database is
                locked``, as SQLite says when its busy timeout runs out), for ``statement``.
            TurnAbandoned: ``stop`` was set.
        """
        lock = self.turn.lock
        if lock.acquire(False):  # no other writer: no wait, timed or not
            return lock
        endless = self.timeout >= threading.TIMEOUT_MAX  # beyond what a lock's wait takes: no bound
        if stop is None:
            if not lock.acquire(timeout=-1 if endless else self.timeout):
                raise _locked(statement)
            return lock
        deadline = None if endless else time.monotonic() + self.timeout
        while not stop.is_set():
            wait = STOP_CHECK_SECONDS if deadline is None else min(STOP_CHECK_SECONDS, deadline - time.monotonic())
            if wait <= 0:
                raise _locked(statement)
            if lock.acquire(timeout=wait):
                if not stop.is_set():
                    return lock
                lock.release()
                break
        raise TurnAbandoned

    @property
    def busy(self) -> bool:
        """Whether a writer (of any store on the file) holds the turn."""
        return self.turn.lock.locked()


def _locked(statement: str) -> OperationalError:
    return OperationalError(statement, None, sqlite3.OperationalError("database is locked"))


_TURNS: weakref.WeakValueDictionary[str, FileTurn] = weakref.WeakValueDictionary()
_MADE = threading.Lock()


def writer_queue(url: URL, timeout: float) -> WriterQueue | None:
    """A place in the queue of the SQLite file ``url`` names (its turn shared with every store on it).

    ``None`` for a database in memory, which has no file to share (and no other connection to wait for).
    The store's writers wait ``timeout`` seconds at most.
    """
    database = url.database
    if not database or database == ":memory:" or url.query.get("mode") == "memory":
        return None
    if database.startswith("file:"):  # a URI filename (?uri=true): its path, without the query
        database = database[len("file:") :].split("?", 1)[0]
        if not database:
            return None
    path = os.path.realpath(database)
    with _MADE:
        turn = _TURNS.get(path)
        if turn is None:
            turn = _TURNS[path] = FileTurn(path)
    return WriterQueue(turn, timeout)


def writer_queue_for(engine: Engine, engine_options: dict[str, Any] | None) -> WriterQueue | None:
    """The writer queue of a store's sync ``engine`` (``None``: not a SQLite file, or an engine handed in).

    Args:
        engine: the sync engine the store's operations run on.
        engine_options: the options the store made ``engine`` with from a URL (its busy timeout is their
            ``connect_args["timeout"]``, else the store's default), or ``None`` for an engine handed in.
    """
    if engine_options is None or dialect_family(engine.dialect.name) != "sqlite":
        return None
    timeout = dict(engine_options.get("connect_args") or {}).get("timeout", SQLITE_BUSY_TIMEOUT_SECONDS)
    return writer_queue(engine.url, float(timeout))


def _renew_after_fork() -> None:
    global _MADE
    _MADE = threading.Lock()
    for turn in list(_TURNS.values()):
        turn.lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork to inherit a held lock through
    os.register_at_fork(after_in_child=_renew_after_fork)


# ------------------------------------------------------------------ reads of any number of ids

IDS_SLOT = "<chatmemory batch ids>"
"""Where a batch read's statement takes its ids, a placeholder each (not an identifier: no table prefix holds it)."""


_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%(p_i{})s"}
"""The placeholder of each id by the paramstyle of the drivers of SQLite and MySQL (pyformat: ``p_i0``…)."""


@dataclass(frozen=True, slots=True)
class IdsRead:
    """A batch read's statement in the driver's SQL, for any number of ids.

    ``mark``: the driver's placeholder of an id (:data:`_MARKS`), written once per id where the statement
    says :data:`IDS_SLOT` (``count`` times); with ``array``, the ids are one array (``p_ids``).
    """

    sql: str
    mark: str = ""
    count: int = 0
    array: Rendered | None = None

    @classmethod
    def of(cls, statement: Select[Any] | CompoundSelect[Any], dialect: Dialect, postgres: bool) -> IdsRead:
        """``statement`` rendered for ``dialect`` (``postgres``: its ids as an array; it binds nothing else)."""
        rendered = render(statement, dialect)
        if postgres:  # psycopg takes the array in binary: no text escaping of each id
            binary = rendered.sql.replace("%(p_ids)s", "%(p_ids)b") if dialect.driver == "psycopg" else rendered.sql
            return cls(binary, array=rendered)
        mark = _MARKS.get(dialect.paramstyle)
        if mark is None:
            raise ValueError(f"a batch read takes ids in the paramstyles {sorted(_MARKS)}, not {dialect.paramstyle!r}")
        return cls(rendered.sql, mark, rendered.sql.count(IDS_SLOT))

    def bind(self, ids: Sequence[str]) -> tuple[str, Any]:
        """The driver SQL and parameters reading ``ids``."""
        if self.array is not None:
            return self.sql, self.array.bind({"p_ids": list(ids)})
        stored = [memory_id.encode("utf-8", "surrogatepass") for memory_id in ids]
        if "{}" in self.mark:  # named: one name per id, wherever the ids come
            marks = ", ".join(self.mark.format(index) for index in range(len(ids)))
            return self.sql.replace(IDS_SLOT, marks), {f"p_i{index}": value for index, value in enumerate(stored)}
        return self.sql.replace(IDS_SLOT, ", ".join([self.mark] * len(ids))), tuple(stored) * self.count
