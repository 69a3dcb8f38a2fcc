"""The SQL store: PostgreSQL (psycopg 3), SQLite, MySQL/MariaDB (PyMySQL) through SQLAlchemy 2 Core.

* :mod:`~chatmemory.stores.sql.plan` — what the store decides (pure: no driver, no I/O): writes
  (:mod:`~chatmemory.stores.sql.write_requests`, :mod:`~chatmemory.stores.sql.diffed_writes`,
  :mod:`~chatmemory.stores.sql.locked_writes`), the outcomes (:mod:`~chatmemory.stores.sql.outcomes`) and
  the read plan (:mod:`~chatmemory.stores.sql.reads`);
* :mod:`~chatmemory.stores.sql.writes` — when it tries again (shared by the sync and asyncio stores);
* :mod:`~chatmemory.stores.sql.operations` (with :mod:`~chatmemory.stores.sql.locked_operations` and
  :mod:`~chatmemory.stores.sql.history_operations`) — every operation, written once as a generator of
  :mod:`~chatmemory.stores.sql.commands` for both executors, on the shared state of
  :mod:`~chatmemory.stores.sql.base`; :mod:`~chatmemory.stores.sql.batches` sends a batch of statements
  (a transaction of its own, if it says so) one by one;
* :mod:`~chatmemory.stores.sql.statements` (with :mod:`~chatmemory.stores.sql.page_statements`,
  :mod:`~chatmemory.stores.sql.turn_statement`, :mod:`~chatmemory.stores.sql.rendered`) and
  :mod:`~chatmemory.stores.sql.clock` — the SQL it sends;
* :mod:`~chatmemory.stores.sql.schema` — the tables and the schema revision the store needs;
* :mod:`~chatmemory.stores.sql.schema_admin` — checking, creating and dropping that schema;
* :mod:`~chatmemory.stores.sql.engine` — URLs, driver defaults and error kinds;
* :mod:`~chatmemory.stores.sql.store` — the sync executor, :class:`SQLChatMemoryStore`, which sends the
  commands with :mod:`~chatmemory.stores.sql.driver` (the asyncio one is :mod:`chatmemory.aio.stores.sql`).

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
