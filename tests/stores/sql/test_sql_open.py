"""What a SQL store opened from a URL sends before its first answer: nothing it does not need.

A CLI command or a short-lived worker opens a store, reads or writes a little, and closes it; an open that
sends more than the driver's own connect needs is paid on every one of them. On PostgreSQL, SQLAlchemy's
psycopg dialect looks the ``hstore`` type up on each new engine's first connection; the store keeps no
hstore columns, so a store made from a URL turns that off (and an engine the caller passes is left alone).
On MySQL/MariaDB, PyMySQL builds a default TLS context for its "preferred" TLS on every connection (the
system's CA store read each time, most of an open's time); a store's connections share one.
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


@pytest.mark.postgres
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


@pytest.mark.postgres
def test_an_asyncio_store_from_a_url_does_not_either() -> None:
    backend = open_backend()

    async def open_and_close() -> bool:
        store = AsyncSQLChatMemoryStore(backend.url, table_prefix=backend.fresh_prefix())
        try:
            return bool(store.engine.dialect.use_native_hstore)
        finally:
            await store.aclose()

    assert asyncio.run(open_and_close()) is False


@pytest.mark.postgres
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


@pytest.mark.mysql
def test_pymysql_connections_share_one_preferred_tls_context() -> None:
    """PyMySQL builds a default TLS context (reading the system's CA store) on every connection otherwise."""
    import ssl

    from support.backends.mysql import open_backend as open_mysql

    backend = open_mysql()
    prefix = backend.fresh_prefix()
    first: Any = open_store(backend.url, table_prefix=prefix)
    second: Any = open_store(backend.url, table_prefix=prefix)
    try:
        first.create_schema()
        assert first.load("absent").version == 0 and second.load("absent").version == 0
        contexts = []
        for store in (first, second):
            connection = store.engine.raw_connection()
            try:
                contexts.append(connection.driver_connection.ctx)
            finally:
                connection.close()
        assert isinstance(contexts[0], ssl.SSLContext) and contexts[0] is contexts[1]
        # What PyMySQL's preferred TLS builds: it verifies no certificate, so the CA store was read for nothing.
        assert contexts[0].verify_mode == ssl.CERT_NONE and not contexts[0].check_hostname
        given = type(first.engine.raw_connection().driver_connection)
        assert given._create_ssl_ctx(object.__new__(given), {"verify_mode": False}) is not contexts[0]
    finally:
        first.drop_schema()
        first.close()
        second.close()


@pytest.mark.mysql
def test_a_pymysql_engine_the_caller_passes_is_left_as_it_is() -> None:
    from pymysql.connections import Connection
    from sqlalchemy import create_engine

    from support.backends.mysql import open_backend as open_mysql

    engine = create_engine(open_mysql().url)
    try:
        store = SQLChatMemoryStore(engine, table_prefix="unused_")
        connection = store.engine.raw_connection()
        assert type(connection.driver_connection) is Connection
        connection.close()
        store.close()
    finally:
        engine.dispose()
