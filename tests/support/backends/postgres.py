"""The SQL store on PostgreSQL through psycopg 3."""

from __future__ import annotations

from typing import Any

from support.backends.sqlite import AsyncSQLBackend, SQLBackend
from support.servers import server_url


def _container() -> tuple[Any, str]:
    from testcontainers.postgres import PostgresContainer

    container = PostgresContainer("postgres:16-alpine", driver="psycopg").start()
    return container, container.get_connection_url()


def open_backend() -> SQLBackend:
    url = server_url(
        "PostgreSQL", "CHATMEMORY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test", _container
    )
    return SQLBackend("postgres", url)


def open_async_backend() -> AsyncSQLBackend:
    """The asyncio store on the same server (the store maps the URL's driver to its async twin)."""
    url = server_url(
        "PostgreSQL", "CHATMEMORY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test", _container
    )
    return AsyncSQLBackend("postgres", url)
