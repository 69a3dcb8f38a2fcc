"""The SQL store on MySQL or MariaDB through PyMySQL."""

from __future__ import annotations

from typing import Any

from support.backends.sqlite import AsyncSQLBackend, SQLBackend
from support.servers import server_url


def _container() -> tuple[Any, str]:
    from testcontainers.mysql import MySqlContainer

    container = MySqlContainer("mariadb:11", dialect="pymysql").start()
    return container, container.get_connection_url()


def open_backend() -> SQLBackend:
    url = server_url(
        "MySQL/MariaDB", "CHATMEMORY_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test", _container
    )
    return SQLBackend("mysql", url)


def open_async_backend() -> AsyncSQLBackend:
    """The asyncio store on the same server (the store maps the URL's driver to its async twin)."""
    url = server_url(
        "MySQL/MariaDB", "CHATMEMORY_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test", _container
    )
    return AsyncSQLBackend("mysql", url)
