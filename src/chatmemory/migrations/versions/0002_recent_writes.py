"""The ids of each memory's last few writes, so that a write resent after a lost reply is not applied twice.

Revision ID: 0002_recent_writes
Revises: 0001_initial
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0002_recent_writes"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable ``recent_writes`` column to the head table (existing memories start without)."""
    prefix: str = context.config.attributes["table_prefix"]
    with op.batch_alter_table(f"{prefix}memories") as batch:
        batch.add_column(sa.Column("recent_writes", sa.String(256), nullable=True))


def downgrade() -> None:
    """Drop the ``recent_writes`` column."""
    prefix: str = context.config.attributes["table_prefix"]
    with op.batch_alter_table(f"{prefix}memories") as batch:
        batch.drop_column("recent_writes")
