"""History: the window's ranges in the head row, and the write time and eviction mark of each message row.

Revision ID: 0003_history
Revises: 0002_recent_writes
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import mysql

revision = "0003_history"
down_revision = "0002_recent_writes"
branch_labels = None
depends_on = None

# A frozen copy of the timestamp type of this revision (later schema changes must not alter it).
_TIMESTAMP = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    """Add the window's ranges and the history expiry to heads, the write time and mark to messages.

    Existing memories get ``window_start = 0`` and no pinned run: every row they have is in the window,
    as before; their rows have no ``written_at`` (they were written without history).
    """
    prefix: str = context.config.attributes["table_prefix"]
    with op.batch_alter_table(f"{prefix}memories") as batch:
        batch.add_column(sa.Column("window_start", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("pin_start", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("pin_end", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("history_expires_at", _TIMESTAMP, nullable=True))
    with op.batch_alter_table(f"{prefix}messages") as batch:
        batch.add_column(sa.Column("written_at", _TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("evicted", sa.SmallInteger(), nullable=True))


def downgrade() -> None:
    """Delete the message rows outside the windows (the histories), then drop the columns."""
    prefix: str = context.config.attributes["table_prefix"]
    messages, memories = f"{prefix}messages", f"{prefix}memories"
    op.execute(
        f"DELETE FROM {messages} WHERE evicted IS NOT NULL OR EXISTS (SELECT 1 FROM {memories} h "
        f"WHERE h.memory_id = {messages}.memory_id AND {messages}.seq < h.window_start "
        f"AND NOT ({messages}.seq BETWEEN COALESCE(h.pin_start, -1) AND COALESCE(h.pin_end, -2)))"
    )
    with op.batch_alter_table(f"{prefix}messages") as batch:
        batch.drop_column("evicted")
        batch.drop_column("written_at")
    with op.batch_alter_table(f"{prefix}memories") as batch:
        batch.drop_column("history_expires_at")
        batch.drop_column("pin_end")
        batch.drop_column("pin_start")
        batch.drop_column("window_start")
