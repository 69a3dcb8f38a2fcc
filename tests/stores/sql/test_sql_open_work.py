"""What a SQL store's open costs besides the driver's connect: statements built once per process, one check query.

The statements of a store are the same for every store of one dialect, table prefix and options: a process
builds them once (each store gets its own copy, so a setting changed on one stays there). The schema check
of a store whose tables are there is one ``SELECT`` of the version table; tables that are not there, or
behind, still raise ``SchemaVersionError`` naming the command to run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chatmemory import SchemaVersionError, UserMessage
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends.sqlite import SQLBackend


@pytest.fixture
def prefix(sql_backend: SQLBackend) -> Iterator[str]:
    prefix = sql_backend.fresh_prefix()
    yield prefix
    store = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix)
    store.drop_schema()
    store.close()


def test_stores_of_one_key_share_the_built_statements_not_their_settings(sql_backend: SQLBackend, prefix: str) -> None:
    first = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix)
    second = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix)
    other = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix, ttl=60)
    try:
        assert first._statements.fast_read is second._statements.fast_read
        assert first._statements.insert_head is second._statements.insert_head
        assert first._statements is not second._statements
        assert other._statements.insert_head is not first._statements.insert_head  # the ttl is in the statement
        second._statements.blocks_mariadb_turns = False
        assert first._statements.blocks_mariadb_turns is True
        first.create_schema()
        first.update_messages("m", [])
        assert second.load("m").version > 0
    finally:
        for store in (first, second, other):
            store.close()


def test_an_up_to_date_schema_is_checked_in_one_query(sql_backend: SQLBackend, prefix: str) -> None:
    from sqlalchemy import event

    made = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix)
    made.create_schema()
    made.close()
    store = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix)
    sent: list[str] = []

    def record(connection: Any, cursor: Any, statement: str, *arguments: Any) -> None:
        sent.append(statement)

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        store._schema.check()
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
        store.close()
    checks = [statement for statement in sent if "version" in statement.lower() or "table" in statement.lower()]
    assert len(checks) == 1 and f"{prefix}alembic_version" in checks[0], sent


def test_tables_that_are_not_there_still_name_the_command(sql_backend: SQLBackend, prefix: str) -> None:
    store = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix)
    try:
        with pytest.raises(SchemaVersionError) as raised:
            store.load("m")
        assert raised.value.found is None and "migrate" in str(raised.value)
        store.create_schema()  # the failed check left the store usable
        assert store.load("m").version == 0
    finally:
        store.close()


def test_the_first_call_checks_the_schema_on_its_own_connection(sql_backend: SQLBackend, prefix: str) -> None:
    """A store opened for one call checks out one connection: the schema check and the call share it."""
    from sqlalchemy import event

    made = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix)
    made.create_schema()
    made.update_messages("m", [UserMessage("hello")])
    made.close()
    store = SQLChatMemoryStore(sql_backend.url, table_prefix=prefix)
    checkouts: list[object] = []
    event.listen(store.engine, "checkout", lambda *arguments: checkouts.append(arguments[0]))
    try:
        assert store.load("m").messages == [UserMessage("hello")]
        assert store._schema.checked
        assert len(checkouts) == 1, checkouts
    finally:
        store.close()
