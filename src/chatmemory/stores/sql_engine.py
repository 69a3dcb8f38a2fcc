"""Engines and transactions for the SQL store: per-dialect settings, locking, and conflict detection."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, make_url
from sqlalchemy.exc import DBAPIError

from chatmemory.core.errors import MissingDependencyError
from chatmemory.migrations import normalize_url

__all__ = ["engine_from_url", "is_autocommit", "is_conflict", "transaction"]

_CONFLICT_SQLSTATES = frozenset({"40001", "40P01", "23505"})
"""PostgreSQL: serialization failure, deadlock, unique violation (two writers creating one memory)."""
_CONFLICT_MYSQL_CODES = frozenset({1062, 1213, 1205})
"""MySQL/MariaDB: duplicate key, deadlock, lock wait timeout."""
_DRIVER_EXTRAS = {"postgresql": ("psycopg", "postgres"), "mysql": ("pymysql", "mysql")}


def engine_from_url(url: str, options: dict[str, Any]) -> Engine:
    """An engine for the store to own: ``postgresql://`` means psycopg 3; per-dialect defaults below."""
    url = normalize_url(url)
    settings = dict(options)
    scheme = url.split(":", 1)[0].split("+", 1)[0]
    if scheme in ("mysql", "mariadb"):
        # READ COMMITTED takes no gap locks, so writers of different memories do not deadlock on
        # neighbouring index ranges; it is set once per connection, not per transaction.
        settings.setdefault("isolation_level", "READ COMMITTED")
    if scheme == "postgresql":
        # The store's hot statements (a read, a diffed turn) run alone, in autocommit; an engine whose
        # connections stay in autocommit spares switching the isolation level at every pool checkout
        # and return. The store's transactions issue BEGIN themselves (see transaction()).
        settings.setdefault("isolation_level", "AUTOCOMMIT")
    if scheme == "sqlite":
        database = make_url(url).database
        if database in (None, "", ":memory:") or (database.startswith("file:") and "mode=memory" in url):
            # pysqlite gives every thread (every pooled connection) its own empty in-memory database.
            raise ValueError(
                f"{url!r} is an in-memory SQLite database, which lives in one connection and is invisible to "
                "other threads; use a file (sqlite:///path/to/chat.db) or chatmemory.InMemoryChatMemoryStore"
            )
        connect_args = dict(settings.pop("connect_args", {}))
        # BEGIN IMMEDIATE waits this long for another writer's lock before giving up.
        connect_args.setdefault("timeout", 30.0)
        settings["connect_args"] = connect_args
    try:
        engine = create_engine(url, **settings)
    except ImportError as exc:
        module, extra = _DRIVER_EXTRAS.get("mysql" if scheme == "mariadb" else scheme, (exc.name or "?", "sql"))
        if exc.name and exc.name.split(".")[0] != module:
            # Another driver was named in the URL (e.g. postgresql+asyncpg): the store runs on psycopg 3
            # and PyMySQL only; say so rather than point at an extra that is installed.
            raise ValueError(
                f"SQLChatMemoryStore cannot use the driver of {make_url(url).drivername!r} ({exc.name} is not "
                f"installed, and the store is tested with {module}); use the URL form "
                "postgresql+psycopg://, mysql+pymysql:// or sqlite:///"
            ) from exc
        raise MissingDependencyError("SQLChatMemoryStore", extra, module) from exc
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):

        @event.listens_for(engine, "connect")
        def _write_ahead_log(dbapi_connection: Any, _record: Any) -> None:
            # In WAL mode readers never wait for the writer (the setting is kept in the file).
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()

    return engine


def is_autocommit(engine: Engine) -> bool:
    """Whether ``engine``'s connections are in autocommit unless told otherwise (``isolation_level``)."""
    # SQLAlchemy keeps create_engine(isolation_level=...) here and applies it on connect (no public accessor).
    level = getattr(engine.dialect, "_on_connect_isolation_level", None)
    return engine.dialect.name == "postgresql" and level == "AUTOCOMMIT"


@contextmanager
def transaction(engine: Engine, autocommit_engine: Engine) -> Iterator[Connection]:
    """A write transaction; on SQLite it takes the write lock at BEGIN.

    pysqlite begins deferred transactions, and two writers that both read before writing fail with
    "database is locked" when both try to upgrade their locks. ``BEGIN IMMEDIATE`` takes the write lock
    up front, waiting for it under the busy timeout (SQLAlchemy's pysqlite docs, "Serializable isolation
    / Savepoints / Transactional DDL"): on an autocommit connection we issue BEGIN ourselves. So we do on
    a PostgreSQL engine in autocommit (see engine_from_url); a connection returned to the pool inside a
    transaction (an error in COMMIT) is rolled back by the pool.
    """
    begin = {"sqlite": "BEGIN IMMEDIATE", "postgresql": "BEGIN"}.get(engine.dialect.name)
    if begin == "BEGIN IMMEDIATE" or (begin is not None and is_autocommit(engine)):
        with autocommit_engine.connect() as connection:
            connection.exec_driver_sql(begin)
            try:
                yield connection
            except BaseException:
                connection.exec_driver_sql("ROLLBACK")
                raise
            connection.exec_driver_sql("COMMIT")
    else:
        with engine.begin() as connection:
            yield connection


def is_conflict(dialect: str, exc: DBAPIError) -> bool:
    """Whether ``exc`` means another writer got there first (retry or report a concurrent update)."""
    original = exc.orig
    if dialect == "postgresql":
        return getattr(original, "sqlstate", None) in _CONFLICT_SQLSTATES
    if dialect in ("mysql", "mariadb"):
        args: tuple[Any, ...] = getattr(original, "args", ())
        return bool(args) and args[0] in _CONFLICT_MYSQL_CODES
    return False
