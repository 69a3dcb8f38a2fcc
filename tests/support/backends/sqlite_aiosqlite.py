"""The asyncio SQL store on an aiosqlite ``AsyncEngine`` the application made and passes in.

A store made from a ``sqlite://`` URL runs its operations on worker threads with ``sqlite3``; one given
an ``AsyncEngine`` uses it as it is, through SQLAlchemy's aiosqlite adapter: this backend keeps that
path under the asyncio contract suite. Each store gets its own engine, disposed of with the store, made
as applications usually make one: not in autocommit (the store switches each connection it checks out to
autocommit and back, which with aiosqlite are awaits a cancellation can land in), with SQLite's busy
timeout, the write-ahead log and the pool's reset hook (an engine in SQLite's default rollback journal
makes 200 tasks' readers and writers wait on each other past any timeout).
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from chatmemory import aio
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLChatMemoryStore
from chatmemory.stores.sql.engine import SQLITE_BUSY_TIMEOUT_SECONDS, install_connect_hooks
from support.backends.sqlite import AsyncSQLBackend


class AiosqliteEngineBackend(AsyncSQLBackend):
    """Stores on an ``AsyncEngine`` of their own over one SQLite file."""

    async def make_store(self, **options: Any) -> aio.ChatMemoryStore:
        options.setdefault("table_prefix", f"e{uuid.uuid4().hex[:12]}_")
        engine = create_async_engine(self.url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
        install_connect_hooks(engine.sync_engine)
        store = AsyncSQLChatMemoryStore(engine, **options)
        await store.create_schema()
        return store

    async def close_store(self, store: aio.ChatMemoryStore) -> None:
        assert isinstance(store, AsyncSQLChatMemoryStore)
        try:
            await super().close_store(store)
        finally:
            await store.engine.dispose()  # passed in: the store leaves it open


def open_async_backend() -> AiosqliteEngineBackend:
    directory = tempfile.TemporaryDirectory(prefix="chatmemory-aiosqlite-")
    return AiosqliteEngineBackend(
        "sqlite_aiosqlite", f"sqlite+aiosqlite:///{Path(directory.name) / 'chatmemory.db'}", directory.cleanup
    )
