"""The SQL store: PostgreSQL (psycopg 3), SQLite, MySQL/MariaDB (PyMySQL) through SQLAlchemy 2 Core.

A head row per memory and a row per message (:mod:`~chatmemory.stores.sql.schema`). What the store
decides is pure (:mod:`~chatmemory.stores.sql.plan`, :mod:`~chatmemory.stores.sql.outcomes`); every
operation is written once as a generator of :mod:`~chatmemory.stores.sql.commands`
(:mod:`~chatmemory.stores.sql.operations`), which the sync store, :mod:`~chatmemory.stores.sql.store`,
sends with :mod:`~chatmemory.stores.sql.executor` (the asyncio one, :mod:`chatmemory.aio.stores.sql`,
with :mod:`~chatmemory.stores.sql.aio`). ``SQLChatMemoryStore`` is imported on first use, so that the
plans import without SQLAlchemy; without it, ``from chatmemory.stores.sql import SQLChatMemoryStore``
raises :class:`~chatmemory.MissingDependencyError` naming the extra. Guide: ``docs/store-sql.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chatmemory.stores.sql.store import SQLChatMemoryStore

__all__ = ["SQLChatMemoryStore"]


def __getattr__(name: str) -> Any:
    if name == "SQLChatMemoryStore":
        from chatmemory.stores.sql.store import SQLChatMemoryStore

        return SQLChatMemoryStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
