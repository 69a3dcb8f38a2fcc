"""The head table and the message table.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

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
    """Create the head table and the message table of the prefix."""
    prefix: str = context.config.attributes["table_prefix"]
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
    )


def downgrade() -> None:
    """Drop both tables."""
    prefix: str = context.config.attributes["table_prefix"]
    op.drop_table(f"{prefix}messages")
    op.drop_table(f"{prefix}memories")
