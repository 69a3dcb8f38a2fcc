"""Alembic environment of chatmemory: run from code (see :mod:`chatmemory.migrations`), per table prefix."""

from __future__ import annotations

from alembic import context

from chatmemory.stores.sql.schema import build_tables, version_table_name

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "chatmemory migrations run from code: use chatmemory.migrations.upgrade(url) or `chatmemory migrate URL`"
    )
prefix: str = config.attributes["table_prefix"]

context.configure(
    connection=connection,
    target_metadata=build_tables(prefix).metadata,
    version_table=version_table_name(prefix),
    # SQLite alters tables by copying them; later revisions use op.batch_alter_table for it.
    render_as_batch=True,
    compare_type=True,
)

with context.begin_transaction():
    context.run_migrations()
