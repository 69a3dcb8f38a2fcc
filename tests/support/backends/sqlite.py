"""The SQL store on SQLite (a file in a temporary directory), and the backend classes all SQL dialects share."""

from __future__ import annotations

import sqlite3
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chatmemory import ChatMemoryStore, aio
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLChatMemoryStore
from chatmemory.stores.sql import SQLChatMemoryStore


class SQLBackend:
    """A SQL server (or file) at ``url``; each store gets fresh tables under its own table prefix.

    Stores are made from the URL, so they own their engine as applications' stores do.
    """

    def __init__(self, name: str, url: str, cleanup: Any = None) -> None:
        self.name = name
        self.url = url
        self._cleanup = cleanup

    def fresh_prefix(self) -> str:
        return f"t{uuid.uuid4().hex[:12]}_"

    def make_store(self, **options: Any) -> SQLChatMemoryStore:
        options.setdefault("table_prefix", self.fresh_prefix())
        store = SQLChatMemoryStore(self.url, **options)
        store.create_schema()
        return store

    def write_raw(self, store: ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(store, SQLChatMemoryStore)
        store.write_raw(memory_id, records)

    def close_store(self, store: ChatMemoryStore) -> None:
        assert isinstance(store, SQLChatMemoryStore)
        try:
            store.drop_schema()
        finally:
            store.close()

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()


class AsyncSQLBackend:
    """The asyncio store on the same server (or file): the same URL, mapped to the async driver by the store."""

    def __init__(self, name: str, url: str, cleanup: Any = None) -> None:
        self.name = name
        self.url = url
        self._cleanup = cleanup

    async def make_store(self, **options: Any) -> aio.ChatMemoryStore:
        options.setdefault("table_prefix", f"a{uuid.uuid4().hex[:12]}_")
        store = AsyncSQLChatMemoryStore(self.url, **options)
        await store.create_schema()
        return store

    async def write_raw(self, store: aio.ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(store, AsyncSQLChatMemoryStore)
        await store.write_raw(memory_id, records)

    async def close_store(self, store: aio.ChatMemoryStore) -> None:
        assert isinstance(store, AsyncSQLChatMemoryStore)
        try:
            await store.drop_schema()
        finally:
            await store.aclose()

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()


def open_backend() -> SQLBackend:
    directory = tempfile.TemporaryDirectory(prefix="chatmemory-sqlite-")
    return SQLBackend("sqlite", f"sqlite:///{Path(directory.name) / 'chatmemory.db'}", directory.cleanup)


def open_async_backend() -> AsyncSQLBackend:
    directory = tempfile.TemporaryDirectory(prefix="chatmemory-sqlite-")
    return AsyncSQLBackend("sqlite", f"sqlite:///{Path(directory.name) / 'chatmemory.db'}", directory.cleanup)


SQL_DIALECTS = ("sqlite", "postgres", "mysql")
"""The SQL backends (module and marker names); store-specific SQL tests run on each."""


def sql_backend_params() -> list[Any]:
    """``pytest.param`` per SQL backend, marked with its backend marker."""
    import pytest

    return [pytest.param(name, id=name, marks=getattr(pytest.mark, name)) for name in SQL_DIALECTS]


def open_sql_backend(name: str) -> SQLBackend:
    """The backend of one SQL dialect (server found as for the contract suite)."""
    import importlib

    backend: SQLBackend = importlib.import_module(f"support.backends.{name}").open_backend()
    return backend


class CountedRollbacks(sqlite3.Connection):
    """A ``sqlite3`` connection that counts its ``rollback()`` calls (the driver's own, otherwise untouched).

    Pass a fresh one (:func:`counted_rollbacks`) as ``connect_args={"factory": ...}``; aiosqlite passes it
    on to ``sqlite3.connect`` too.
    """

    rollbacks = 0

    def rollback(self) -> None:
        type(self).rollbacks += 1
        super().rollback()


def counted_rollbacks() -> type[CountedRollbacks]:
    """A connection class of its own, whose count starts at zero."""
    return type("Counted", (CountedRollbacks,), {"rollbacks": 0})
