"""The SQL store: PostgreSQL (psycopg 3), SQLite, MySQL/MariaDB (PyMySQL) through SQLAlchemy 2 Core.

* :mod:`~chatmemory.stores.sql.plan` — what the store decides (pure: no driver, no I/O), with the
  outcomes (:mod:`~chatmemory.stores.sql.outcomes`) and the read plan (:mod:`~chatmemory.stores.sql.reads`);
* :mod:`~chatmemory.stores.sql.writes` — when it tries again (shared by the sync and asyncio stores);
* :mod:`~chatmemory.stores.sql.statements` and :mod:`~chatmemory.stores.sql.clock` — the SQL it sends;
* :mod:`~chatmemory.stores.sql.schema` — the tables and the schema revision the store needs;
* :mod:`~chatmemory.stores.sql.schema_admin` — checking, creating and dropping that schema;
* :mod:`~chatmemory.stores.sql.engine` — URLs, driver defaults and error kinds;
* :mod:`~chatmemory.stores.sql.store` — the sync executor, :class:`SQLChatMemoryStore`.

``SQLChatMemoryStore`` is imported on first use, so that ``plan`` imports without SQLAlchemy installed;
without it, ``from chatmemory.stores.sql import SQLChatMemoryStore`` raises
:class:`~chatmemory.MissingDependencyError` naming the extra.
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
