"""Engines for the SQL store: URL checks and normalisation, driver defaults, transactions, error kinds.

Shared by the sync store and the asyncio store, which differ only in the driver a URL maps to
(``postgresql://``: psycopg 3, in its async mode on asyncio; ``mysql://`` and ``mariadb://``: PyMySQL,
asyncmy on asyncio; ``sqlite://``: the standard ``sqlite3``, aiosqlite on asyncio).

Every engine a store uses runs its connections in autocommit: the store's transactions issue ``BEGIN``
themselves (``BEGIN IMMEDIATE`` on SQLite), so they are real transactions whatever engine a caller
passes in — including one built with ``isolation_level="AUTOCOMMIT"`` — and a single-statement turn
costs no ``BEGIN``/``COMMIT`` round trips.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.engine import URL
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import PoolResetState

from chatmemory.core.errors import MissingDependencyError

__all__ = [
    "AUTOCOMMIT",
    "CONNECT_TIMEOUT_SECONDS",
    "SQLITE_BUSY_TIMEOUT_SECONDS",
    "autocommit_options",
    "begin_statement",
    "connects_in_autocommit",
    "dialect_family",
    "engine_from_url",
    "is_conflict",
    "is_disconnect",
    "is_missed_block",
    "is_packet_too_large",
    "lost_connection",
    "normalize_url",
    "snapshot_statements",
    "takes_multi_statements",
    "transactional_isolation_level",
]

AUTOCOMMIT = "AUTOCOMMIT"
CONNECT_TIMEOUT_SECONDS = 10
"""How long a store-made engine waits to connect to PostgreSQL or MySQL/MariaDB (``engine_options``
``connect_args={"connect_timeout": ...}`` overrides it)."""
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0
"""How long a SQLite write waits for another writer's lock (``BEGIN IMMEDIATE``)."""

_CONFLICT_SQLSTATES = frozenset({"40001", "40P01", "23505"})
"""PostgreSQL: serialization failure, deadlock, unique violation (two writers creating one memory)."""
_CONFLICT_MYSQL_CODES = frozenset({1062, 1213, 1205})
"""MySQL/MariaDB: duplicate key, deadlock, lock wait timeout."""
_PACKET_MYSQL_CODES = frozenset({1153, 1301, 2006, 2013})
"""MySQL/MariaDB: packet too large, result larger than max_allowed_packet, server gone away, lost connection."""

MISSED_BLOCK_MESSAGE = "chatmemory: the first statement of the block matched no row"
"""What a MariaDB compound statement of the store signals when its first statement matched no row
(:meth:`~chatmemory.stores.sql.rendered.Joined.atomic_block`): nothing else ran, and nothing is left open."""
_SIGNAL_MYSQL_CODE = 1644
"""MySQL/MariaDB: the error of a ``SIGNAL SQLSTATE '45000'`` that sets no ``MYSQL_ERRNO`` of its own."""

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


def dialect_family(name: str) -> str:
    """``postgresql``, ``mysql`` (MySQL and MariaDB) or ``sqlite`` for a SQLAlchemy dialect name."""
    return "mysql" if name == "mariadb" else name


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


def transactional_isolation_level(dialect: str) -> str:
    """The isolation level of the schema engine (Alembic runs its migrations in transactions)."""
    return "SERIALIZABLE" if dialect == "sqlite" else "READ COMMITTED"


def begin_statement(dialect: str) -> str:
    """How a write transaction starts; on SQLite it takes the write lock at once.

    SQLite transactions that read before they write fail with "database is locked" when two of them try
    to upgrade their locks; ``BEGIN IMMEDIATE`` takes the write lock up front, waiting for it under the
    busy timeout.
    """
    return "BEGIN IMMEDIATE" if dialect == "sqlite" else "BEGIN"


def snapshot_statements(dialect: str) -> tuple[str, str | None]:
    """How a read-only snapshot transaction starts: ``(begin, statement to send before it or None)``.

    Every statement of the transaction sees the database as of its first read, so a listing that pages
    through it neither misses nor repeats a memory written meanwhile.
    """
    if dialect == "postgresql":
        return "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", None
    if dialect == "mysql":
        return (
            "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        )
    return "BEGIN", None


def _sqlstate(exc: DBAPIError) -> str | None:
    state = getattr(exc.orig, "sqlstate", None)
    return state if isinstance(state, str) else None


def _mysql_code(exc: DBAPIError) -> object:
    args: tuple[Any, ...] = getattr(exc.orig, "args", ())
    return args[0] if args else None


def is_conflict(dialect: str, exc: DBAPIError) -> bool:
    """Whether ``exc`` means another writer got there first (retry or report a concurrent update)."""
    if dialect == "postgresql":
        return _sqlstate(exc) in _CONFLICT_SQLSTATES
    if dialect == "mysql":
        return _mysql_code(exc) in _CONFLICT_MYSQL_CODES
    return False


def is_missed_block(exc: DBAPIError) -> bool:
    """Whether ``exc`` is the store's compound statement saying its first statement matched no row."""
    args: tuple[Any, ...] = getattr(exc.orig, "args", ())
    return len(args) > 1 and args[0] == _SIGNAL_MYSQL_CODE and args[1] == MISSED_BLOCK_MESSAGE


def is_disconnect(exc: DBAPIError) -> bool:
    """Whether the connection died under the call: its outcome is unknown, and a retry takes a new one."""
    return bool(exc.connection_invalidated)


def lost_connection(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a driver error whose connection died under the call (see :func:`is_disconnect`)."""
    return isinstance(exc, DBAPIError) and is_disconnect(exc)


def is_packet_too_large(dialect: str, exc: DBAPIError) -> bool:
    """Whether a MySQL/MariaDB failure may be a statement over ``max_allowed_packet``."""
    return dialect == "mysql" and _mysql_code(exc) in _PACKET_MYSQL_CODES
