"""The head table and the message table.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import mysql

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

# Frozen copies of the column types of this revision (later schema changes must not alter them).
_MEMORY_ID = sa.LargeBinary().with_variant(mysql.VARBINARY(1020), "mysql", "mariadb")
_PAYLOAD = sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")
_TIMESTAMP = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    """Create the head table and the message table of the prefix.

    ``upgrade(..., partitions=n)`` on PostgreSQL creates the message table ``PARTITION BY HASH
    (memory_id)`` with ``n`` partitions ``<prefix>messages_p0`` … (its primary key holds ``memory_id``,
    as a partitioned table's unique keys must); later revisions' column changes reach every partition.
    """
    prefix: str = context.config.attributes["table_prefix"]
    partitions: int | None = context.config.attributes.get("partitions")
    partitioning: dict[str, Any] = {} if partitions is None else {"postgresql_partition_by": "HASH (memory_id)"}
    op.create_table(
        f"{prefix}memories",
        sa.Column("memory_id", _MEMORY_ID, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("incarnation", sa.BigInteger(), nullable=False),
        sa.Column("next_seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.Column("expires_at", _TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("memory_id", name=f"pk_{prefix}memories"),
    )
    op.create_table(
        f"{prefix}messages",
        sa.Column("memory_id", _MEMORY_ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False, autoincrement=False),
        sa.Column("payload", _PAYLOAD, nullable=False),
        sa.PrimaryKeyConstraint("memory_id", "seq", name=f"pk_{prefix}messages"),
        **partitioning,
    )
    for remainder in range(partitions or 0):
        op.execute(
            f'CREATE TABLE "{prefix}messages_p{remainder}" PARTITION OF "{prefix}messages" '
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )


def downgrade() -> None:
    """Drop both tables."""
    prefix: str = context.config.attributes["table_prefix"]
    op.drop_table(f"{prefix}messages")
    op.drop_table(f"{prefix}memories")
