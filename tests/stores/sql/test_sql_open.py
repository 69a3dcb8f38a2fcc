"""What a SQL store opened from a URL sends before its first answer: nothing it does not need.

A CLI command or a short-lived worker opens a store, reads or writes a little, and closes it; an open that
sends more than the driver's own connect needs is paid on every one of them. On PostgreSQL, SQLAlchemy's
psycopg dialect looks the ``hstore`` type up on each new engine's first connection; the store keeps no
hstore columns, so a store made from a URL turns that off (and an engine the caller passes is left alone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from chatmemory import open_store
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLChatMemoryStore
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends.postgres import open_backend

pytestmark = pytest.mark.postgres


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement psycopg's cursors send (sync and asyncio), as text."""
    statements: list[str] = []
    for cursor_type in (psycopg.Cursor, psycopg.AsyncCursor):
        original = cursor_type.execute

        def recording(self: Any, query: Any, *arguments: Any, _original: Any = original, **options: Any) -> Any:
            statements.append(str(query))
            return _original(self, query, *arguments, **options)

        monkeypatch.setattr(cursor_type, "execute", recording)
    yield statements


def test_a_store_opened_from_a_url_does_not_look_up_hstore(sent: list[str]) -> None:
    backend = open_backend()
    prefix = backend.fresh_prefix()
    store: Any = open_store(backend.url, table_prefix=prefix)
    try:
        store.create_schema()
        sent.clear()
        opened: Any = open_store(backend.url, table_prefix=prefix)
        assert opened.load("absent").version == 0
        opened.close()
        assert sent, "the statements were not seen"
        assert not [statement for statement in sent if "typname" in statement or "hstore" in statement], sent
        assert store.engine.dialect.use_native_hstore is False
    finally:
        store.drop_schema()
        store.close()


def test_an_asyncio_store_from_a_url_does_not_either() -> None:
    backend = open_backend()

    async def open_and_close() -> bool:
        store = AsyncSQLChatMemoryStore(backend.url, table_prefix=backend.fresh_prefix())
        try:
            return bool(store.engine.dialect.use_native_hstore)
        finally:
            await store.aclose()

    assert asyncio.run(open_and_close()) is False


def test_an_engine_the_caller_passes_is_left_as_it_is() -> None:
    from sqlalchemy import create_engine

    backend = open_backend()
    engine = create_engine(backend.url)
    try:
        store = SQLChatMemoryStore(engine, table_prefix=backend.fresh_prefix())
        assert store.engine.dialect.use_native_hstore is True
        store.close()
    finally:
        engine.dispose()
