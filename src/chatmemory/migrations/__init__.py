"""Schema migrations of the SQL store: Alembic, shipped inside the package and driven from code.

Each table prefix is migrated on its own, with its own version table ``<prefix>alembic_version``::

    from chatmemory.migrations import upgrade, current
    upgrade("postgresql+psycopg://app@db/app")          # or: chatmemory migrate URL
    current("postgresql+psycopg://app@db/app")          # "0003_history"

Revision ids are readable (``0001_initial``, ``0002_...``); :func:`head` is the one this chatmemory needs.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chatmemory.core.optional import require

require("alembic", feature="chatmemory migrations", extra="sql")

from alembic import command  # noqa: E402 - after the dependency check
from alembic.config import Config  # noqa: E402
from alembic.runtime.migration import MigrationContext  # noqa: E402
from alembic.script import ScriptDirectory  # noqa: E402
from sqlalchemy import Connection, Engine, create_engine, inspect  # noqa: E402
from sqlalchemy.exc import SQLAlchemyError  # noqa: E402

from chatmemory.core.errors import StoreError  # noqa: E402
from chatmemory.stores.sql.dialect import dialect_family  # noqa: E402
from chatmemory.stores.sql.engine import normalize_url as _normalize_url  # noqa: E402
from chatmemory.stores.sql.schema import (  # noqa: E402
    DEFAULT_TABLE_PREFIX,
    REQUIRED_SCHEMA_REVISION,
    SchemaAdmin,
    check_partitions_on,
    migrate_command,
    schema_lock,
    validate_partitions,
    validate_table_prefix,
    version_table_name,
)

__all__ = [
    "check_schema",
    "cli_migrate",
    "create_schema",
    "current",
    "current_on",
    "drop_schema",
    "head",
    "migrate_command",
    "normalize_url",
    "revisions",
    "stamp",
    "upgrade",
]

_SCRIPT_LOCATION = str(Path(__file__).resolve().parent)


def _config(table_prefix: str) -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPT_LOCATION)
    config.attributes["table_prefix"] = validate_table_prefix(table_prefix)
    return config


@functools.lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config(DEFAULT_TABLE_PREFIX))


def head() -> str:
    """The newest shipped revision: the one this chatmemory's store needs (``REQUIRED_SCHEMA_REVISION``)."""
    revision = _scripts().get_current_head()
    assert revision is not None
    return revision


def revisions() -> list[str]:
    """Every shipped revision, oldest first."""
    return [script.revision for script in reversed(list(_scripts().walk_revisions()))]


def normalize_url(url: str) -> str:
    """A URL without a driver gets the one chatmemory's extras install (psycopg 3, PyMySQL).

    SQLAlchemy's own defaults would be psycopg2 and mysqlclient, which ``chatmemory[postgres]`` and
    ``chatmemory[mysql]`` do not install.

    Raises:
        ValueError: not a SQL database URL; the message says what to use.
    """
    return _normalize_url(url).render_as_string(hide_password=False)


@contextmanager
def _connection(url_or_engine: str | Engine) -> Iterator[Connection]:
    """An autocommit connection: the schema lock opens the transaction itself (see ``schema_lock``)."""
    engine = create_engine(_normalize_url(url_or_engine)) if isinstance(url_or_engine, str) else url_or_engine
    try:
        with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
            yield connection
    finally:
        if isinstance(url_or_engine, str):
            engine.dispose()


def _dialect_of(url_or_engine: str | Engine) -> str:
    if isinstance(url_or_engine, str):
        return dialect_family(_normalize_url(url_or_engine).get_backend_name())
    return dialect_family(url_or_engine.dialect.name)


def upgrade(
    url_or_engine: str | Engine,
    *,
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    revision: str = "head",
    partitions: int | None = None,
) -> None:
    """Migrate the tables of ``table_prefix`` to ``revision`` (default: the newest).

    Migrations of one table prefix hold its schema lock (a PostgreSQL advisory lock, MariaDB/MySQL
    ``GET_LOCK``, SQLite's write lock), so two deploys migrating at once both succeed: the second finds
    the work done.

    Args:
        url_or_engine: a SQLAlchemy URL (an engine is made and disposed of) or an engine the caller owns.
        table_prefix: which store's tables.
        revision: the target revision id.
        partitions: PostgreSQL: create the message table ``PARTITION BY HASH (memory_id)`` in this many
            partitions. Applies when the tables are created; existing tables must already be partitioned
            so (they are never converted).

    Raises:
        ValueError: ``partitions`` out of range, or on a database other than PostgreSQL.
        StoreError: the database failed (the driver's exception is the ``__cause__``), or ``partitions``
            was given and the existing message table is not partitioned so.
    """
    validate_partitions(partitions, _dialect_of(url_or_engine))
    config = _config(table_prefix)
    config.attributes["partitions"] = partitions
    try:
        with _connection(url_or_engine) as connection, schema_lock(connection, table_prefix):
            if partitions is not None and current_on(connection, table_prefix=table_prefix) is not None:
                check_partitions_on(connection, table_prefix, partitions)
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    except SQLAlchemyError as exc:
        raise StoreError("schema migration", detail=str(exc).splitlines()[0]) from exc


def stamp(connection: Connection, *, table_prefix: str = DEFAULT_TABLE_PREFIX, revision: str = "head") -> None:
    """Record ``revision`` as applied without running it (used after creating tables from metadata)."""
    config = _config(table_prefix)
    config.attributes["connection"] = connection
    command.stamp(config, revision)


def current_on(connection: Connection, *, table_prefix: str = DEFAULT_TABLE_PREFIX) -> str | None:
    """The applied revision of ``table_prefix`` on an open connection (``None``: never migrated)."""
    version_table = version_table_name(table_prefix)
    if not inspect(connection).has_table(version_table):
        return None
    context = MigrationContext.configure(connection, opts={"version_table": version_table})
    return context.get_current_revision()


def current(url_or_engine: str | Engine, *, table_prefix: str = DEFAULT_TABLE_PREFIX) -> str | None:
    """The applied revision of ``table_prefix`` (``None``: never migrated)."""
    try:
        with _connection(url_or_engine) as connection:
            return current_on(connection, table_prefix=table_prefix)
    except SQLAlchemyError as exc:
        raise StoreError("reading the schema revision", detail=str(exc).splitlines()[0]) from exc


def _admin(engine: Engine, table_prefix: str, partitions: int | None = None) -> SchemaAdmin:
    return SchemaAdmin(engine, engine.url, validate_table_prefix(table_prefix), engine.dialect.name, partitions)


def create_schema(engine: Engine, *, table_prefix: str = DEFAULT_TABLE_PREFIX, partitions: int | None = None) -> None:
    """Create the tables of ``table_prefix`` at the newest revision, or migrate existing ones to it.

    The quick path for development and tests; it never hides a pending migration. ``partitions``: as
    for :func:`upgrade`.
    """
    validate_partitions(partitions, _dialect_of(engine))
    found = current(engine, table_prefix=table_prefix)
    if found is not None and found != REQUIRED_SCHEMA_REVISION:
        upgrade(engine, table_prefix=table_prefix, partitions=partitions)
        return
    _admin(engine, table_prefix, partitions).create()


def drop_schema(engine: Engine, *, table_prefix: str = DEFAULT_TABLE_PREFIX) -> None:
    """Drop the tables of ``table_prefix`` and its version table (the data is gone)."""
    _admin(engine, table_prefix).drop()


def check_schema(engine: Engine, *, table_prefix: str = DEFAULT_TABLE_PREFIX) -> None:
    """Raise :class:`~chatmemory.SchemaVersionError` naming the command to run unless the schema is at head."""
    _admin(engine, table_prefix).check()


def cli_migrate(url: str, *, table_prefix: str = DEFAULT_TABLE_PREFIX) -> int:
    """``chatmemory migrate URL``: upgrade to the newest revision and report; returns the exit status."""
    try:
        before = current(url, table_prefix=table_prefix)
        upgrade(url, table_prefix=table_prefix)
        after = current(url, table_prefix=table_prefix)
    except (StoreError, ValueError) as exc:
        print(f"chatmemory migrate: {exc}", file=sys.stderr)
        return 1
    if before == after:
        print(f"schema already at {after}")
    else:
        print(f"schema migrated from {before or 'empty'} to {after}")
    return 0
