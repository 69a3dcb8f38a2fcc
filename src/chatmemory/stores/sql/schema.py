r"""The tables of the SQL store per table prefix, and the store's side of the schema: check, create, drop.

``<prefix>memories`` holds a memory's head row: its version, incarnation, next sequence number, times
(from the database's clock), the ids of its last writes, and the ranges of message rows that form its
window. ``<prefix>messages`` holds a row per message, keyed by ``(memory_id, seq)`` (ids stored as their
UTF-8 bytes), its payload as bytes; with history, the rows a window evicted stay. On PostgreSQL the
message table can be hash-partitioned by ``memory_id``. Alembic (:mod:`chatmemory.migrations`) upgrades
existing tables; the store never imports it: :class:`SchemaAdmin` reads the revision from Alembic's
version table, and creates fresh tables stamped as Alembic would, under the per-prefix lock the
migrations take. The ``*_on`` functions take a connection in autocommit (asyncio: through ``run_sync``).
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from chatmemory.core.optional import require

require("sqlalchemy", feature="SQLChatMemoryStore", extra="sql")

from sqlalchemy import (  # noqa: E402 - after the dependency check, so a missing extra names itself
    BigInteger,
    Column,
    Connection,
    DateTime,
    Dialect,
    Engine,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    inspect,
    select,
    text,
)
from sqlalchemy import event as sqlalchemy_event  # noqa: E402
from sqlalchemy.dialects import mysql  # noqa: E402
from sqlalchemy.engine import URL  # noqa: E402
from sqlalchemy.exc import DBAPIError, SQLAlchemyError  # noqa: E402
from sqlalchemy.types import TypeEngine  # noqa: E402

from chatmemory.core.errors import (  # noqa: E402
    Operation,
    SchemaVersionError,
    StoreError,
)
from chatmemory.stores.sql.dialect import SQLITE, MemoryIdType, dialect_family, dialect_of, lost_connection  # noqa: E402

__all__ = [
    "DEFAULT_TABLE_PREFIX",
    "MAX_PARTITIONS",
    "RECENT_WRITES_LENGTH",
    "REQUIRED_SCHEMA_REVISION",
    "MemoryIdType",
    "SchemaAdmin",
    "SchemaTables",
    "build_tables",
    "check_partitions_on",
    "check_with",
    "connect",
    "migrate_command",
    "partition_names",
    "partitions_on",
    "revision_on",
    "schema_lock",
    "unname_primary_keys",
    "validate_partitions",
    "validate_table_prefix",
    "version_table",
    "version_table_name",
]

REQUIRED_SCHEMA_REVISION = "0003_history"
"""The Alembic revision this store reads and writes (a test asserts it is the head of the shipped revisions).

The store learns it from here, never from :mod:`chatmemory.migrations` (which imports this module)."""

DEFAULT_TABLE_PREFIX = "chatmemory_"
RECENT_WRITES_LENGTH = 256
"""Characters of ``recent_writes``: eight entries of 32 hexadecimal digits (write id, then version)."""
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,29}")


def validate_table_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a plain identifier of at most 30 characters, else raise ``ValueError``."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"table_prefix must be letters, digits and underscores, not starting with a digit, at most 30 "
            f"characters; got {prefix!r}"
        )
    return prefix


MAX_PARTITIONS = 1024
"""The most partitions :func:`validate_partitions` accepts (each is a table PostgreSQL plans and opens)."""


def validate_partitions(partitions: int | None, dialect: str) -> int | None:
    """Return ``partitions`` if it is ``None``, or an int from 1 to :data:`MAX_PARTITIONS` on PostgreSQL.

    Raises:
        ValueError: another value, or partitions on a database other than PostgreSQL.
    """
    if partitions is None:
        return None
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be an int from 1 to {MAX_PARTITIONS} (or None); got {partitions!r}")
    if dialect != "postgresql":
        raise ValueError(
            f"partitions (hash partitioning of the message table by memory_id) is PostgreSQL only, not {dialect!r}; "
            "leave partitions=None on this database"
        )
    return partitions


def partition_names(prefix: str, partitions: int) -> list[str]:
    """The partitions of ``<prefix>messages``, in remainder order."""
    return [f"{validate_table_prefix(prefix)}messages_p{remainder}" for remainder in range(partitions)]


def version_table_name(prefix: str) -> str:
    """The Alembic version table of a prefix: each prefix migrates on its own."""
    return f"{validate_table_prefix(prefix)}alembic_version"


def payload_type() -> TypeEngine[bytes]:
    """``BYTEA`` / ``LONGBLOB`` (messages of a mebibyte and more) / ``BLOB``."""
    return LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")


def timestamp_type() -> TypeEngine[Any]:
    """``TIMESTAMP WITH TIME ZONE`` / ``DATETIME(6)`` (microseconds) / SQLite's ``DATETIME`` text."""
    return DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


@dataclass(frozen=True)
class _PartitionCreator:
    """Creates the hash partitions of a message table right after the table (an ``after_create`` listener)."""

    names: tuple[str, ...]

    def __call__(self, table: Table, connection: Connection, **kw: Any) -> None:
        """``CREATE TABLE <name> PARTITION OF <table> FOR VALUES WITH (MODULUS n, REMAINDER i)``, each i."""
        preparer = connection.dialect.identifier_preparer
        parent = preparer.format_table(table)
        for remainder, name in enumerate(self.names):
            connection.exec_driver_sql(
                f"CREATE TABLE {preparer.quote(name)} PARTITION OF {parent} "
                f"FOR VALUES WITH (MODULUS {len(self.names)}, REMAINDER {remainder})"
            )


@dataclass(frozen=True)
class SchemaTables:
    """The tables of one prefix, in their own ``MetaData``."""

    prefix: str
    metadata: MetaData
    memories: Table
    messages: Table


def build_tables(prefix: str = DEFAULT_TABLE_PREFIX, partitions: int | None = None) -> SchemaTables:
    """The current schema (the state ``alembic upgrade head`` produces) for ``prefix``.

    ``partitions``: create the message table ``PARTITION BY HASH (memory_id)`` with this many
    partitions (PostgreSQL; checked by :func:`validate_partitions`). Its primary key already holds
    ``memory_id``, as PostgreSQL requires of a partitioned table's unique keys.
    """
    prefix = validate_table_prefix(prefix)
    partitioning: dict[str, Any] = {} if partitions is None else {"postgresql_partition_by": "HASH (memory_id)"}
    metadata = MetaData()
    memories = Table(
        f"{prefix}memories",
        metadata,
        Column("memory_id", MemoryIdType(), nullable=False),
        Column("version", BigInteger, nullable=False),
        Column("incarnation", BigInteger, nullable=False),
        Column("next_seq", BigInteger, nullable=False),
        Column("created_at", timestamp_type(), nullable=False),
        Column("updated_at", timestamp_type(), nullable=False),
        Column("expires_at", timestamp_type(), nullable=True),
        Column("recent_writes", String(RECENT_WRITES_LENGTH), nullable=True),
        Column("window_start", BigInteger, nullable=False, server_default="0"),
        Column("pin_start", BigInteger, nullable=True),
        Column("pin_end", BigInteger, nullable=True),
        Column("history_expires_at", timestamp_type(), nullable=True),
        # No index on updated_at or expires_at: every write changes both, and an index on either would
        # make each turn write index entries too (on PostgreSQL it also rules out HOT updates of the head
        # row). Purging and newest-first listing scan the head table instead; see their docstrings.
        PrimaryKeyConstraint("memory_id", name=f"pk_{prefix}memories"),
    )
    messages = Table(
        f"{prefix}messages",
        metadata,
        Column("memory_id", MemoryIdType(), nullable=False),
        Column("seq", BigInteger, nullable=False, autoincrement=False),
        Column("payload", payload_type(), nullable=False),
        Column("written_at", timestamp_type(), nullable=True),
        Column("evicted", SmallInteger, nullable=True),
        PrimaryKeyConstraint("memory_id", "seq", name=f"pk_{prefix}messages"),
        **partitioning,
    )
    if partitions is not None:
        sqlalchemy_event.listen(messages, "after_create", _PartitionCreator(tuple(partition_names(prefix, partitions))))
    return SchemaTables(prefix, metadata, memories, messages)


# ------------------------------------------------------------------------------ the schema's admin

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
            connection.exec_driver_sql(SQLITE.begin if dialect == "sqlite" else "BEGIN")
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
        family = dialect_of(dialect)
        assert family is not None, "the store checks its database first"
        self._family = family
        self._partitions = partitions
        self.checked = False
        """Whether the tables were found at the required revision (read by every operation: an attribute)."""
        self._lock = threading.Lock()
        self.max_allowed_packet: int | None = None
        """MySQL/MariaDB: the server's largest statement in bytes (read with the schema check)."""

    @functools.cached_property
    def _engine(self) -> Engine | None:
        """The engine in autocommit, made at first use (a store whose quick check passes never needs it)."""
        engine = self._base_engine
        return engine.execution_options(isolation_level="AUTOCOMMIT") if engine is not None else None

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
        self.checked = True

    def check_on(self, connection: Connection) -> None:
        """Raise :class:`~chatmemory.SchemaVersionError` naming the command to run unless at the revision."""
        found = revision_on(connection, self._prefix)
        if found != REQUIRED_SCHEMA_REVISION:
            raise self.version_error(found)
        if self._dialect == "mysql":
            self.max_allowed_packet = int(connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
        self.checked = True

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
        self.checked = False

    def drop_on(self, connection: Connection) -> None:
        """Drop the tables of the prefix and its version table (the data is gone)."""
        with schema_lock(connection, self._prefix):
            build_tables(self._prefix).metadata.drop_all(connection)
            version_table(self._prefix).drop(connection, checkfirst=True)
        self.checked = False

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
        if self.checked:
            return
        with self._lock:
            if not self.checked:
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
            raise self.store_error(operation, exc) from exc

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

    def store_error(self, operation: str, exc: SQLAlchemyError) -> StoreError:
        """A driver error of a schema command as the store's error (the caller sets the cause)."""
        return self._family.failure(exc, self.max_allowed_packet).error(operation, None)


def _sent_size(payload: bytes) -> int:
    """The bytes a payload takes in a statement: escaped quotes, backslashes and control bytes count twice."""
    return len(payload) + sum(payload.count(byte) for byte in (b"\x00", b"\n", b"\r", b"\x1a", b"'", b'"', b"\\"))
