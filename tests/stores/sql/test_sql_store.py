"""The SQL store beyond the contract: expiry and purging, listing, schema checks, URLs, engines, errors."""

from __future__ import annotations

import datetime
import pathlib
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from chatmemory import (
    ConcurrentUpdateError,
    CorruptedMemoryError,
    MissingDependencyError,
    SchemaVersionError,
    StoreError,
    SystemMessage,
    UserMessage,
    open_store,
)
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends.sqlite import SQLBackend, open_sql_backend


@pytest.fixture
def store(sql_backend: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = sql_backend.make_store()
    yield made
    sql_backend.close_store(made)


# ------------------------------------------------------------------------------------------------- TTL


def test_purge_expired_deletes_in_batches_and_counts(sql_backend: SQLBackend, store: SQLChatMemoryStore) -> None:
    # A second and a half of life: nothing may expire before the first purge, even on a loaded machine.
    expiring = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix, ttl=1.5)
    try:
        for index in range(5):
            expiring.update_messages(f"short-{index}", [UserMessage("soon gone")])
        store.update_messages("forever", [UserMessage("kept")])
        assert expiring.purge_expired() == 0
        time.sleep(1.8)
        assert expiring.get_messages("short-0") == []
        assert expiring.load("short-0").version == 0
        assert store.purge_expired(batch_size=2) == 5
        assert store.purge_expired(batch_size=2) == 0
        assert list(store.memory_ids()) == ["forever"]
        with store.engine.connect() as connection:
            rows = connection.execute(text(f"SELECT count(*) FROM {store.table_prefix}messages")).scalar()
        assert rows == 1
    finally:
        expiring.close()


def test_an_expired_memory_is_created_afresh(sql_backend: SQLBackend, store: SQLChatMemoryStore) -> None:
    expiring = SQLChatMemoryStore(
        sql_backend.url, table_prefix=store.table_prefix, ttl=datetime.timedelta(milliseconds=400)
    )
    try:
        assert expiring.ttl == pytest.approx(0.4)
        old = expiring.save("m", [UserMessage("old")], 0)
        time.sleep(0.6)
        assert "m" not in set(expiring.memory_ids())
        with pytest.raises(ConcurrentUpdateError):
            expiring.save("m", [UserMessage("stale")], old)
        new = expiring.save("m", [UserMessage("new")], 0)
        assert new > old
        assert expiring.get_messages("m") == [UserMessage("new")]
    finally:
        expiring.close()


def test_ttl_must_be_positive(sql_backend: SQLBackend) -> None:
    with pytest.raises(ValueError, match="ttl"):
        SQLChatMemoryStore(sql_backend.url, ttl=0)


# --------------------------------------------------------------------------------------------- listing


def test_memory_ids_page_by_id_and_by_recency(store: SQLChatMemoryStore) -> None:
    ids = ["b", "a ", "A", "a", "🦜", "用户", "z\x00z", "a\U0001d11e"]
    for index, memory_id in enumerate(ids):
        store.update_messages(memory_id, [UserMessage(str(index))])
        time.sleep(0.002)
    assert list(store.memory_ids(page_size=3)) == sorted(ids)
    assert list(store.memory_ids(order="newest", page_size=3)) == ids[::-1]
    store.update_messages("a", [UserMessage("touched")])
    assert next(store.memory_ids(order="newest")) == "a"
    for index, memory_id in enumerate(ids):
        assert store.get_messages(memory_id) == [UserMessage("touched" if memory_id == "a" else str(index))]
    with pytest.raises(ValueError, match="order"):
        store.memory_ids(order="oldest")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- schema and migrations


def test_a_store_on_a_missing_schema_names_the_command(sql_backend: SQLBackend) -> None:
    prefix = sql_backend.fresh_prefix()
    with SQLChatMemoryStore(sql_backend.url, table_prefix=prefix) as store:
        with pytest.raises(SchemaVersionError) as raised:
            store.get_messages("x")
    assert "chatmemory migrate" in str(raised.value)
    assert f"--table-prefix {prefix}" in str(raised.value)
    assert raised.value.found is None
    password = make_url(sql_backend.url).password
    if password:
        assert password not in str(raised.value)


def test_a_schema_from_a_newer_chatmemory_is_refused(store: SQLChatMemoryStore) -> None:
    with store.engine.begin() as connection:
        connection.execute(text(f"UPDATE {store.table_prefix}alembic_version SET version_num = '0099_future'"))
    with SQLChatMemoryStore(store.engine, table_prefix=store.table_prefix) as fresh:
        with pytest.raises(SchemaVersionError, match="newer"):
            fresh.update_messages("x", [])


def test_create_schema_is_idempotent(store: SQLChatMemoryStore) -> None:
    store.update_messages("kept", [UserMessage("x")])
    store.create_schema()
    assert store.get_messages("kept") == [UserMessage("x")]


def test_table_prefix_is_an_identifier(sql_backend: SQLBackend) -> None:
    with pytest.raises(ValueError, match="table_prefix"):
        SQLChatMemoryStore(sql_backend.url, table_prefix="x; DROP TABLE y")


# ------------------------------------------------------------------------------------ URLs and engines


def test_open_store_and_from_url(sql_backend: SQLBackend, store: SQLChatMemoryStore) -> None:
    store.update_messages("shared", [UserMessage("hi")])
    opened = open_store(sql_backend.url, table_prefix=store.table_prefix)
    try:
        assert isinstance(opened, SQLChatMemoryStore)
        assert opened.get_messages("shared") == [UserMessage("hi")]
    finally:
        opened.close()


@pytest.mark.mysql
def test_mysql_and_mariadb_urls_without_a_driver_mean_pymysql() -> None:
    backend = open_sql_backend("mysql")
    url = make_url(backend.url)
    prefix = backend.fresh_prefix()
    for drivername in ("mysql", "mariadb"):
        plain = url.set(drivername=drivername).render_as_string(hide_password=False)
        store = open_store(plain, table_prefix=prefix)
        assert isinstance(store, SQLChatMemoryStore)
        try:
            assert store.engine.driver == "pymysql"
            store.create_schema()
            store.update_messages(drivername, [UserMessage(drivername)])
            assert store.get_messages(drivername) == [UserMessage(drivername)]
        finally:
            store.close()
    with SQLChatMemoryStore(backend.url, table_prefix=prefix) as store:
        assert sorted(store.memory_ids()) == ["mariadb", "mysql"]
        store.drop_schema()


@pytest.mark.postgres
def test_postgresql_url_without_a_driver_means_psycopg_3() -> None:
    backend = open_sql_backend("postgres")
    url = make_url(backend.url)
    for drivername in ("postgresql", "postgres"):
        plain = url.set(drivername=drivername).render_as_string(hide_password=False)
        with SQLChatMemoryStore(plain) as store:
            assert store.engine.driver == "psycopg"


def test_an_engine_passed_in_stays_open(sql_backend: SQLBackend, store: SQLChatMemoryStore) -> None:
    engine = create_engine(sql_backend.url)
    try:
        with SQLChatMemoryStore(engine, table_prefix=store.table_prefix) as borrowed:
            borrowed.update_messages("e", [UserMessage("x")])
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar() == 1
        assert store.get_messages("e") == [UserMessage("x")]
    finally:
        engine.dispose()


def test_a_write_transaction_is_one_transaction(store: SQLChatMemoryStore) -> None:
    # A PostgreSQL engine made from a URL is in autocommit; the store's transactions BEGIN themselves.
    store.update_messages("tx", [UserMessage("kept")])
    with pytest.raises(RuntimeError), store._transaction() as connection:
        connection.execute(store._statements.delete_all, {"p_id": "tx"})
        raise RuntimeError("rolled back")
    assert store.get_messages("tx") == [UserMessage("kept")]


def test_another_store_instance_makes_the_cache_stale_and_harmless(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    other = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix)
    try:
        store.update_messages("m", [UserMessage(str(i)) for i in range(5)])
        stale = store.load("m")
        other.delete_messages("m")
        other.update_messages("m", [UserMessage(str(i)) for i in range(5)])
        with pytest.raises(ConcurrentUpdateError):
            store.save("m", [*stale.messages[1:], UserMessage("5")], stale.version)
        fresh = store.load("m")
        store.save("m", [*fresh.messages[1:], UserMessage("5")], fresh.version)
        assert other.get_messages("m") == [UserMessage(str(i)) for i in range(1, 6)]
    finally:
        other.close()


# -------------------------------------------------------------------------------------------- failures


def test_driver_errors_are_store_errors(sql_backend: SQLBackend) -> None:
    url = make_url(sql_backend.url)
    if url.get_backend_name() == "sqlite":
        broken = f"sqlite:///{uuid.uuid4().hex}/missing/dir/x.db"
    else:
        broken = url.set(host="127.0.0.1", port=1).render_as_string(hide_password=False)
    with SQLChatMemoryStore(broken) as store:
        with pytest.raises(StoreError) as raised:
            store.get_messages("x")
    assert raised.value.__cause__ is not None


def test_a_call_interrupted_mid_transaction_throws_its_connection_away(tmp_path: pathlib.Path) -> None:
    # A KeyboardInterrupt between BEGIN and COMMIT: the pooled connection, its transaction open, must
    # not serve the next call (on SQLite it would still hold the write lock).
    interrupt: list[str] = []

    class Cursor(sqlite3.Cursor):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if interrupt and sql.startswith(interrupt[0]):
                interrupt.clear()
                raise KeyboardInterrupt
            return super().execute(sql, *args)

    class Connection(sqlite3.Connection):
        def cursor(self, factory: Any = Cursor) -> Any:
            return super().cursor(factory)

    connects: list[object] = []
    with SQLChatMemoryStore(
        f"sqlite:///{tmp_path / 'chat.db'}", engine_options={"connect_args": {"factory": Connection}}
    ) as store:
        event.listen(store.engine.pool, "connect", lambda dbapi_connection, _record: connects.append(dbapi_connection))
        store.create_schema()
        store.update_messages("m", [UserMessage("a")])
        opened = len(connects)
        interrupt.append("UPDATE")
        with pytest.raises(KeyboardInterrupt):
            store.update_messages("m", [UserMessage("a"), UserMessage("b")])
        assert store.get_messages("m") == [UserMessage("a")]
        assert len(connects) == opened + 1  # a new connection, the interrupted one discarded
        store.update_messages("m", [UserMessage("a"), UserMessage("c")])
        assert store.get_messages("m") == [UserMessage("a"), UserMessage("c")]


def test_a_missing_extra_names_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['sqlalchemy'] = None\n"
        "try:\n    from chatmemory.stores.sql import SQLChatMemoryStore\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert MissingDependencyError.__name__ in result.stdout
    assert "pip install 'llm-window-memory[sql]'" in result.stdout


def test_reads_reuse_decoded_messages_only_while_they_are_true(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    # `store` caches what it read; `writer` changes the memory in every way a window can change.
    writer = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix)
    texts = [UserMessage(str(i)) for i in range(6)]
    try:
        writer.update_messages("m", texts)
        assert store.get_messages("m") == texts
        writer.update_messages("m", [*texts[2:], UserMessage("6")])  # evict two, append one
        assert store.get_messages("m") == [*texts[2:], UserMessage("6")]
        writer.update_messages("m", [SystemMessage("first"), *texts[2:]])  # a rewrite
        assert store.get_messages("m") == [SystemMessage("first"), *texts[2:]]
        writer.delete_messages("m")  # a new incarnation with other messages at the same sequence numbers
        writer.update_messages("m", [UserMessage("x"), UserMessage("y")])
        assert store.get_messages("m") == [UserMessage("x"), UserMessage("y")]
        writer.write_raw("m", [b"\xff"])
        with pytest.raises(CorruptedMemoryError):
            store.get_messages("m")
    finally:
        writer.close()


def test_the_longest_ids_of_any_code_points(store: SQLChatMemoryStore) -> None:
    # 255 characters of four UTF-8 bytes each fill the id column exactly; ids differing only in the last
    # character, or in a NUL, stay apart.
    longest = "🦜" * 255
    ids = [longest, longest[:-1] + "🔥", "北" * 255, "nul\x00inside", "nul\x00inside\x00"]
    for index, memory_id in enumerate(ids):
        store.update_messages(memory_id, [UserMessage(str(index))])
    for index, memory_id in enumerate(ids):
        assert store.get_messages(memory_id) == [UserMessage(str(index))]
    assert set(store.memory_ids()) == set(ids)


def test_message_rows_without_their_head_are_not_silently_replaced(store: SQLChatMemoryStore) -> None:
    from chatmemory import MessageWindowChatMemory

    store.update_messages("m", [UserMessage("kept"), UserMessage("rows")])
    with store.engine.begin() as connection:
        connection.execute(text(f"DELETE FROM {store.table_prefix}memories"))
    memory = MessageWindowChatMemory("m", max_messages=5, store=store)
    with pytest.raises(CorruptedMemoryError) as raised:
        memory.add(UserMessage("would replace them"))
    assert raised.value.memory_id == "m"
    with store.engine.connect() as connection:
        rows = connection.execute(text(f"SELECT count(*) FROM {store.table_prefix}messages")).scalar_one()
    assert rows == 2
    store.update_messages("m", [UserMessage("replaced on purpose")])
    assert memory.messages() == [UserMessage("replaced on purpose")]


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite+pysqlite:///:memory:"])
def test_an_in_memory_sqlite_url_is_refused_with_what_to_use(url: str) -> None:
    with pytest.raises(ValueError, match="InMemoryChatMemoryStore"):
        open_store(url)


def test_a_driver_the_store_does_not_use_is_named() -> None:
    with pytest.raises(ValueError, match="asyncpg") as raised:
        open_store("postgresql+asyncpg://nobody@127.0.0.1:1/none")
    assert not isinstance(raised.value, MissingDependencyError)
