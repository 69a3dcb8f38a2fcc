"""The store's side of the schema: check the revision, create fresh tables, drop them, lock per prefix.

Alembic (:mod:`chatmemory.migrations`) upgrades existing tables; the store never imports it. A store
only reads the revision from the version table Alembic keeps (``<prefix>alembic_version``), and creates
tables on an empty database from its metadata, stamped with :data:`REQUIRED_SCHEMA_REVISION` exactly as
Alembic would. Both take the per-prefix schema lock, as the migrations do, so two processes creating or
migrating one schema at once both succeed.

The functions ending in ``_on`` take an open SQLAlchemy connection in autocommit, so the asyncio store
runs them through ``AsyncConnection.run_sync``.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from chatmemory.core.errors import SchemaVersionError, StoreError
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.sql.engine import begin_statement, dialect_family, is_packet_too_large, lost_connection
from chatmemory.stores.sql.schema import (
    DEFAULT_TABLE_PREFIX,
    REQUIRED_SCHEMA_REVISION,
    build_tables,
    validate_table_prefix,
    version_table_name,
)

__all__ = [
    "SchemaAdmin",
    "check_with",
    "connect",
    "check_partitions_on",
    "migrate_command",
    "partitions_on",
    "schema_lock",
    "unname_primary_keys",
    "version_table",
]

_LOCK_WAIT_SECONDS = 300


def version_table(prefix: str) -> Table:
    """Alembic's version table of ``prefix`` (the layout Alembic creates)."""
    name = version_table_name(prefix)
    return Table(
        name,
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name=f"{name}_pkc"),
    )


def unname_primary_keys(tables: Iterable[Table]) -> None:
    """Leave the primary keys of ``tables`` unnamed (for MySQL/MariaDB, where every one is ``PRIMARY``).

    Those servers answer a named one with a warning (1280, the name is ignored), which asyncmy reads
    with ``SHOW WARNINGS`` and logs: three warnings at each schema creation that say nothing is wrong.
    The tables are the same either way.
    """
    for table in tables:
        table.primary_key.name = None


def migrate_command(url: str | URL, table_prefix: str = DEFAULT_TABLE_PREFIX) -> str:
    """The shell command that migrates ``url`` (password hidden), as named in error messages."""
    from sqlalchemy.engine import make_url

    shown = make_url(url).render_as_string(hide_password=True)
    suffix = "" if table_prefix == DEFAULT_TABLE_PREFIX else f" --table-prefix {table_prefix}"
    return f"chatmemory migrate '{shown}'{suffix}"


def _lock_key(prefix: str) -> int:
    """A stable signed 64-bit key naming the schema lock of ``prefix`` (PostgreSQL advisory locks)."""
    digest = hashlib.blake2b(f"chatmemory schema {prefix}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def schema_lock(connection: Connection, prefix: str) -> Iterator[None]:
    """Hold the schema lock of ``prefix`` inside a transaction on ``connection`` (in autocommit).

    PostgreSQL: a transaction-scoped advisory lock (DDL is transactional there); MySQL/MariaDB:
    ``GET_LOCK`` around the work (DDL commits by itself there); SQLite: ``BEGIN IMMEDIATE`` (the write
    lock on the whole file). The transaction commits when the block ends, and rolls back if it raises.
    """
    dialect = dialect_family(connection.dialect.name)
    name = f"chatmemory_schema_{validate_table_prefix(prefix)}"
    if connection.in_transaction():
        connection.commit()
    try:
        # A transaction SQLAlchemy (and Alembic, and create_all) can see: on an autocommit connection it
        # sends nothing, and its commit or rollback ends the transaction begun inside it.
        with connection.begin():
            if dialect == "mysql":
                wait = {"name": name, "wait": _LOCK_WAIT_SECONDS}
                if connection.execute(text("SELECT GET_LOCK(:name, :wait)"), wait).scalar() != 1:
                    raise StoreError(
                        Operation.SCHEMA, detail=f"the schema lock {name!r} was not granted in {_LOCK_WAIT_SECONDS} s"
                    )
            connection.exec_driver_sql(begin_statement(dialect))
            if dialect == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(prefix)})
            yield
    finally:
        if dialect == "mysql":
            connection.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": name})
            connection.commit()


def connect(engine: Engine) -> Connection:
    """A pooled connection of ``engine``; a driver error while its execution options are set is wrapped too.

    Setting them may talk to the server (autocommit on a connection of a caller's engine, in a
    transaction mode of its own): SQLAlchemy raises a driver error there as it is, and leaves the
    connection checked out (for the garbage collector to hand back). Here the connection is invalidated
    and handed back, and the error wrapped as ``Engine.connect()`` wraps the others (a lost connection
    marked so, which the schema check sends again), as the store's sessions do.
    """
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        pooled = engine.raw_connection()
    except dbapi_error as exc:  # raised as Engine.connect() raises it
        Connection._handle_dbapi_exception_noconnection(exc, engine.dialect, engine)
        raise  # pragma: no cover - the handler raises
    try:
        return Connection(engine, connection=pooled)
    except BaseException as exc:
        pooled.invalidate()
        pooled.close()
        if isinstance(exc, dbapi_error):
            Connection._handle_dbapi_exception_noconnection(exc, engine.dialect, engine)
        raise


def check_with(engine: Engine, check: Callable[[Connection], None]) -> None:
    """``check`` on a pooled connection of ``engine`` (:func:`connect`), once more on a new one after a lost one.

    A store's first call on an engine of the caller's may meet a pooled connection the server dropped (a
    restart): SQLAlchemy then invalidates the pool, and the check is sent again, as operations are.
    """
    try:
        with connect(engine) as connection:
            check(connection)
    except SQLAlchemyError as exc:
        if not lost_connection(exc):
            raise
        with connect(engine) as connection:
            check(connection)


def revision_on(connection: Connection, prefix: str) -> str | None:
    """The revision the tables of ``prefix`` are at (``None``: no version table, or an empty one)."""
    table = version_table(prefix)
    if not inspect(connection).has_table(table.name):
        return None
    found = connection.execute(select(table.c.version_num)).scalars().all()
    return found[0] if len(found) == 1 else None


def partitions_on(connection: Connection, prefix: str) -> int | None:
    """PostgreSQL: how many partitions ``<prefix>messages`` has (``None``: not a partitioned table)."""
    if dialect_family(connection.dialect.name) != "postgresql":
        return None
    name = connection.dialect.identifier_preparer.quote(f"{prefix}messages")
    found = connection.execute(
        text(
            "SELECT (SELECT count(*) FROM pg_inherits WHERE inhparent = p.partrelid) FROM pg_partitioned_table p "
            "WHERE p.partrelid = to_regclass(:name)"
        ),
        {"name": name},
    ).scalar()
    return None if found is None else int(found)


def check_partitions_on(connection: Connection, prefix: str, partitions: int) -> None:
    """Raise unless ``<prefix>messages`` exists hash-partitioned in ``partitions`` partitions.

    Raises:
        StoreError: naming what the table is and what to do (existing tables are never converted).
    """
    found = partitions_on(connection, prefix)
    if found == partitions:
        return
    what = "is not partitioned" if found is None else f"has {found} partitions"
    raise StoreError(
        Operation.SCHEMA,
        detail=(
            f"partitions={partitions} was asked for, but the existing table {prefix}messages {what}; existing "
            "tables are not converted: create the partitioned tables under a new table_prefix and copy the "
            "memories there (chatmemory copy), or build the store with the partitions the tables have"
        ),
    )


def _sent_size(payload: bytes) -> int:
    """The bytes a payload takes in a statement: escaped quotes, backslashes and control bytes count twice."""
    return len(payload) + sum(payload.count(byte) for byte in (b"\x00", b"\n", b"\r", b"\x1a", b"'", b'"', b"\\"))


class SchemaAdmin:
    """Schema checks and commands of one store (engine, table prefix).

    Args:
        engine: the store's engine (sync); ``None`` for the asyncio store, which passes connections.
        url: the database URL, for the command named in :class:`~chatmemory.SchemaVersionError`.
        prefix: the store's table prefix.
        dialect: the dialect family.
        partitions: create the message table hash-partitioned by ``memory_id`` in this many partitions
            (PostgreSQL; see :func:`~chatmemory.stores.sql.schema.build_tables`).
    """

    def __init__(
        self, engine: Engine | None, url: URL, prefix: str, dialect: str, partitions: int | None = None
    ) -> None:
        self._base_engine = engine
        self._url = url
        self._prefix = prefix
        self._dialect = dialect
        self._partitions = partitions
        self._checked = False
        self._lock = threading.Lock()
        self.max_allowed_packet: int | None = None
        """MySQL/MariaDB: the server's largest statement in bytes (read with the schema check)."""

    @functools.cached_property
    def _engine(self) -> Engine | None:
        """The engine in autocommit, made at first use (a store whose quick check passes never needs it)."""
        engine = self._base_engine
        return engine.execution_options(isolation_level="AUTOCOMMIT") if engine is not None else None

    @property
    def checked(self) -> bool:
        """Whether the tables were found at the required revision."""
        return self._checked

    # ----------------------------------------------------------------------------- on a connection

    def check_quickly_on(self, connection: Connection) -> None:
        """:meth:`check_on` in one query where the version table is there (an autocommit ``connection``).

        The revision (and, on MySQL/MariaDB, ``max_allowed_packet``) in one ``SELECT`` of the version
        table, as driver SQL (nothing for SQLAlchemy to compile on each open); a failure other than a lost
        connection (no version table) leaves the answer to :meth:`check_on`, which looks the table up
        first. In autocommit the failed statement aborts nothing.
        """
        try:
            rows = connection.exec_driver_sql(self._quick_sql(connection.dialect)).all()
        except DBAPIError as exc:
            if lost_connection(exc):
                raise
            connection.rollback()  # SQLAlchemy's record of the failed statement; nothing was begun
            self.check_on(connection)
            return
        self._take(rows)

    def _quick_sql(self, dialect: Dialect) -> str:
        """The quick check's one ``SELECT``: the revision (and, on MySQL/MariaDB, ``max_allowed_packet``)."""
        table = dialect.identifier_preparer.quote(version_table_name(self._prefix))
        packet = ", @@max_allowed_packet" if self._dialect == "mysql" else ""
        return f"SELECT version_num{packet} FROM {table}"

    def _take(self, rows: Sequence[Any]) -> None:
        """The answer of the quick check's rows: checked, or the error naming the command to run."""
        found = rows[0][0] if len(rows) == 1 else None
        if found != REQUIRED_SCHEMA_REVISION:
            raise self.version_error(found)
        if self._dialect == "mysql":
            self.max_allowed_packet = int(rows[0][1])
        self._checked = True

    def check_on(self, connection: Connection) -> None:
        """Raise :class:`~chatmemory.SchemaVersionError` naming the command to run unless at the revision."""
        found = revision_on(connection, self._prefix)
        if found != REQUIRED_SCHEMA_REVISION:
            raise self.version_error(found)
        if self._dialect == "mysql":
            self.max_allowed_packet = int(connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
        self._checked = True

    def version_error(self, found: str | None) -> SchemaVersionError:
        """The error for tables at ``found``: the command to run."""
        if found is not None and found > REQUIRED_SCHEMA_REVISION:
            command = "upgrade llm-window-memory, which chatmemory is installed from (the schema is newer than it)"
        else:
            command = migrate_command(self._url, self._prefix)
        return SchemaVersionError(found, REQUIRED_SCHEMA_REVISION, command)

    def create_on(self, connection: Connection) -> None:
        """Create the tables and stamp them, unless they exist; tables behind raise SchemaVersionError.

        With ``partitions``, existing tables must be partitioned so (else :class:`~chatmemory.StoreError`).
        """
        with schema_lock(connection, self._prefix):
            found = revision_on(connection, self._prefix)
            if found is not None and self._partitions is not None:
                check_partitions_on(connection, self._prefix, self._partitions)
            if found is None:
                metadata = build_tables(self._prefix, self._partitions).metadata
                table = version_table(self._prefix)
                if self._dialect == "mysql":
                    unname_primary_keys([*metadata.tables.values(), table])
                metadata.create_all(connection)
                table.create(connection, checkfirst=True)
                connection.execute(table.insert().values(version_num=REQUIRED_SCHEMA_REVISION))
        if found not in (None, REQUIRED_SCHEMA_REVISION):
            # Existing tables are upgraded by the migrations (which the store never imports).
            raise self.version_error(found)
        self._checked = False

    def drop_on(self, connection: Connection) -> None:
        """Drop the tables of the prefix and its version table (the data is gone)."""
        with schema_lock(connection, self._prefix):
            build_tables(self._prefix).metadata.drop_all(connection)
            version_table(self._prefix).drop(connection, checkfirst=True)
        self._checked = False

    # ------------------------------------------------------------------------------------- sync

    def _connect(self) -> Connection:
        assert self._engine is not None, "the asyncio store passes its own connections"
        return connect(self._engine)

    def check(self, rows_of: Callable[[str], list[Any] | None] | None = None) -> None:
        """Check the revision once per store (thread-safe), once more after a lost connection (:func:`check_with`).

        ``rows_of(sql)``: the rows of driver SQL on the calling operation's own autocommit connection, or
        ``None`` if it failed there: the quick check then costs no checkout of its own (a store opened for
        one call pays it at every start); a failure is answered on a connection of its own, as before.
        """
        if self._checked:
            return
        with self._lock:
            if not self._checked:
                base = self._base_engine
                assert base is not None, "the asyncio store passes its own connections"
                with self._wrapped(Operation.SCHEMA):
                    rows = None if rows_of is None else rows_of(self._quick_sql(base.dialect))
                    if rows is None:
                        check_with(base.execution_options(isolation_level="AUTOCOMMIT"), self.check_quickly_on)
                    else:
                        self._take(rows)

    def revision(self) -> str | None:
        """The revision of the tables."""
        with self._wrapped("reading the schema revision"), self._connect() as connection:
            return revision_on(connection, self._prefix)

    def create(self) -> None:
        """See :meth:`create_on`."""
        with self._wrapped("creating the schema"), self._connect() as connection:
            self.create_on(connection)

    def drop(self) -> None:
        """See :meth:`drop_on`."""
        with self._wrapped("dropping the schema"), self._connect() as connection:
            self.drop_on(connection)

    @contextmanager
    def _wrapped(self, operation: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise self.store_error(operation, None, exc) from exc

    # ---------------------------------------------------------------------------------- errors

    def check_payloads(self, memory_id: str, payloads: Iterable[bytes]) -> None:
        """MySQL/MariaDB: refuse, before sending, a message larger than the server's ``max_allowed_packet``.

        Raises:
            StoreError: naming ``max_allowed_packet``, its value and the message's size.
        """
        limit = self.max_allowed_packet
        if limit is None:
            return
        largest = max((_sent_size(payload) for payload in payloads if len(payload) * 2 + 1024 > limit), default=0)
        if largest + 1024 > limit:
            raise StoreError(
                "writing the memory",
                memory_id,
                f"a message of {largest} bytes (escaped) does not fit in the server's max_allowed_packet of "
                f"{limit} bytes; "
                "raise max_allowed_packet on the server (e.g. SET GLOBAL max_allowed_packet = 1073741824, and "
                "in its configuration) or store smaller messages",
            )

    def store_error(self, operation: str, memory_id: str | None, exc: SQLAlchemyError) -> StoreError:
        """A driver error as a :class:`~chatmemory.StoreError` (the cause is set by the caller's ``from``)."""
        detail = str(exc).splitlines()[0]
        if isinstance(exc, DBAPIError) and is_packet_too_large(self._dialect, exc) and self.max_allowed_packet:
            detail += (
                f" (the server's max_allowed_packet is {self.max_allowed_packet} bytes: a larger message "
                "makes MySQL/MariaDB drop the connection)"
            )
        return StoreError(operation, memory_id, detail)
