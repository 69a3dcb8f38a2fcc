r"""The tables of the SQL store, per table prefix, with column types chosen per dialect.

``<prefix>memories`` holds a memory's head row: its version, incarnation, next sequence number, times
(from the database's clock), the ids of its last few writes, and the ranges of message rows that form its
window (:mod:`chatmemory.stores.sql.window`). ``<prefix>messages`` holds a row per message, keyed by
``(memory_id, seq)``, with its ``dumps_message`` payload as bytes; with history, the rows a window evicted
stay as the history. On PostgreSQL the message table can be created hash-partitioned by ``memory_id``
(:func:`validate_partitions`). Memory ids are stored as their UTF-8 bytes, so equality is byte equality on
every dialect. Column by column: *Schema and migrations* in ``docs/store-sql.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chatmemory.stores._optional import require

require("sqlalchemy", feature="SQLChatMemoryStore", extra="sql")

from sqlalchemy import (  # noqa: E402 - after the dependency check, so a missing extra names itself
    BigInteger,
    Column,
    Connection,
    DateTime,
    Dialect,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    TypeDecorator,
)
from sqlalchemy import event as sqlalchemy_event  # noqa: E402
from sqlalchemy.dialects import mysql  # noqa: E402
from sqlalchemy.types import TypeEngine  # noqa: E402

__all__ = [
    "DEFAULT_TABLE_PREFIX",
    "RECENT_WRITES_LENGTH",
    "REQUIRED_SCHEMA_REVISION",
    "MemoryIdType",
    "SchemaTables",
    "MAX_PARTITIONS",
    "build_tables",
    "partition_names",
    "validate_partitions",
    "validate_table_prefix",
    "version_table_name",
]

REQUIRED_SCHEMA_REVISION = "0003_history"
"""The Alembic revision this store reads and writes (a test asserts it is the head of the shipped revisions).

The store learns it from here, never from :mod:`chatmemory.migrations` (which imports this module)."""

DEFAULT_TABLE_PREFIX = "chatmemory_"
RECENT_WRITES_LENGTH = 256
"""Characters of ``recent_writes``: eight entries of 32 hexadecimal digits (write id, then version)."""
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,29}")
MEMORY_ID_BYTES = 1020
"""255 characters of at most 4 UTF-8 bytes each."""


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


class MemoryIdType(TypeDecorator[str]):
    """A memory id, stored as its UTF-8 bytes (lone surrogates kept with ``surrogatepass``)."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """``VARBINARY(1020)`` on MySQL/MariaDB (a key column needs a length), bytes elsewhere."""
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.VARBINARY(MEMORY_ID_BYTES))
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: str | None, dialect: Dialect) -> bytes | None:
        """The id as UTF-8 bytes."""
        return None if value is None else value.encode("utf-8", "surrogatepass")

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        """The id from its UTF-8 bytes."""
        return None if value is None else bytes(value).decode("utf-8", "surrogatepass")

    @property
    def python_type(self) -> type[str]:
        """``str``."""
        return str


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
