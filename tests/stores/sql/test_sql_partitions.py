"""The ``partitions`` option: PostgreSQL's message table hash-partitioned by memory_id, checked when built.

The contract on such a store is in test_sql_partitioned_contract.py; here: the option's checks, the
tables the store and the migrations create, existing tables never converted, and PostgreSQL's own plans
showing that each statement of an operation on one memory reads or changes one partition only.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text

from chatmemory import AiMessage, MessageWindowChatMemory, SystemMessage, UserMessage
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLChatMemoryStore
from chatmemory.core.errors import StoreError
from chatmemory.migrations import create_schema, current, drop_schema, head, upgrade
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.schema import partitions_on
from support.backends import postgres

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def url() -> str:
    return postgres.open_backend().url


@pytest.fixture
def prefix() -> str:
    return f"pt{uuid.uuid4().hex[:10]}_"


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    made = create_engine(url)
    yield made
    made.dispose()


def _partition_of_each_memory(engine: Engine, prefix: str) -> dict[str, set[str]]:
    with engine.connect() as connection:
        rows = connection.execute(text(f'SELECT tableoid::regclass::text, memory_id FROM "{prefix}messages"')).all()
    found: dict[str, set[str]] = {}
    for partition, memory_id in rows:
        found.setdefault(bytes(memory_id).decode(), set()).add(partition)
    return found


# --------------------------------------------------------------------------------------------- checks


@pytest.mark.parametrize("partitions", [0, -1, 1025, True, 2.0, "4"])
def test_partitions_out_of_range_are_refused_at_construction(url: str, partitions: Any) -> None:
    with pytest.raises(ValueError, match="partitions must be an int from 1 to 1024"):
        SQLChatMemoryStore(url, partitions=partitions)
    with pytest.raises(ValueError, match="partitions must be an int from 1 to 1024"):
        AsyncSQLChatMemoryStore(url, partitions=partitions)


@pytest.mark.parametrize(
    "other", ["mysql+pymysql://root@127.0.0.1:3306/test", "sqlite:///{tmp}/chat.db"], ids=["mysql", "sqlite"]
)
def test_partitions_on_another_database_are_refused_at_construction(other: str, tmp_path: Path) -> None:
    url = other.format(tmp=tmp_path)
    with pytest.raises(ValueError, match="PostgreSQL only"):
        SQLChatMemoryStore(url, partitions=4)
    with pytest.raises(ValueError, match="PostgreSQL only"):
        AsyncSQLChatMemoryStore(url, partitions=4)
    with pytest.raises(ValueError, match="PostgreSQL only"):
        upgrade(url, partitions=4)


def test_the_store_names_its_partitions(url: str) -> None:
    store = SQLChatMemoryStore(url, partitions=8)
    try:
        assert store.partitions == 8
        assert "partitions=8" in repr(store)
    finally:
        store.close()
    plain = SQLChatMemoryStore(url)
    try:
        assert plain.partitions is None
        assert "partitions" not in repr(plain)
    finally:
        plain.close()


# --------------------------------------------------------------------------------------------- tables


def test_create_schema_partitions_the_message_table_and_each_memory_lives_in_one(
    url: str, prefix: str, engine: Engine
) -> None:
    store = SQLChatMemoryStore(url, table_prefix=prefix, partitions=4, history=True)
    store.create_schema()
    try:
        with store.engine.connect() as connection:
            assert partitions_on(connection, prefix) == 4
            assert partitions_on(connection, f"{prefix}no_such_") is None
        for index in range(24):
            memory = MessageWindowChatMemory(f"memory {index}", store=store, max_messages=3)
            memory.add(SystemMessage("s"), UserMessage("q"), AiMessage("a"), UserMessage("q2"))
        placed = _partition_of_each_memory(store.engine, prefix)
        assert len(placed) == 24
        assert all(len(partitions) == 1 for partitions in placed.values()), placed
        assert len(set().union(*placed.values())) == 4  # 24 ids spread over every partition
        store.update_messages("memory 3", [UserMessage("replaced")])
        # The add's 4 (its first evicted at once, still recorded), then the one that replaced them.
        assert [entry.sequence for entry in store.history("memory 3").entries] == [1, 2, 3, 4, 5]
    finally:
        store.drop_schema()
        store.close()
    with engine.connect() as connection:
        left = connection.execute(text("SELECT count(*) FROM pg_class WHERE relname LIKE :p"), {"p": f"{prefix}%"})
        assert left.scalar() == 0


def test_a_mixed_case_prefix_is_partitioned_too(url: str) -> None:
    prefix = f"Pt{uuid.uuid4().hex[:8]}_"
    store = SQLChatMemoryStore(url, table_prefix=prefix, partitions=2)
    store.create_schema()
    try:
        store.update_messages("m", [UserMessage("x")])
        with store.engine.connect() as connection:
            assert partitions_on(connection, prefix) == 2
    finally:
        store.drop_schema()
        store.close()


async def test_the_asyncio_store_creates_partitioned_tables(url: str, prefix: str) -> None:
    store = AsyncSQLChatMemoryStore(url, table_prefix=prefix, partitions=3)
    await store.create_schema()
    try:
        await store.update_messages("m", [UserMessage("x")])
        async with store.engine.connect() as connection:
            assert await connection.run_sync(lambda sync: partitions_on(sync, prefix)) == 3
        assert await store.get_messages("m") == [UserMessage("x")]
    finally:
        await store.drop_schema()
        await store.aclose()


def test_existing_unpartitioned_tables_are_not_converted(url: str, prefix: str) -> None:
    plain = SQLChatMemoryStore(url, table_prefix=prefix)
    plain.create_schema()
    plain.update_messages("kept", [UserMessage("x")])
    partitioned = SQLChatMemoryStore(url, table_prefix=prefix, partitions=4)
    try:
        with pytest.raises(StoreError, match=r"is not partitioned; existing tables are not converted"):
            partitioned.create_schema()
        with pytest.raises(StoreError, match="is not partitioned"):
            upgrade(url, table_prefix=prefix, partitions=4)
        assert partitioned.get_messages("kept") == [UserMessage("x")]
    finally:
        partitioned.close()
        plain.drop_schema()
        plain.close()


def test_partitioned_tables_refuse_another_count_and_serve_a_store_without_the_option(url: str, prefix: str) -> None:
    store = SQLChatMemoryStore(url, table_prefix=prefix, partitions=4)
    store.create_schema()
    other = SQLChatMemoryStore(url, table_prefix=prefix, partitions=2)
    plain = SQLChatMemoryStore(url, table_prefix=prefix)
    try:
        store.create_schema()  # the tables it asks for: nothing to do
        with pytest.raises(StoreError, match="has 4 partitions"):
            other.create_schema()
        plain.create_schema()
        plain.update_messages("m", [UserMessage("x")])
        assert len(store.get_messages("m")) == 1
    finally:
        other.close()
        plain.close()
        store.drop_schema()
        store.close()


def test_the_migrations_create_partitioned_tables(engine: Engine, prefix: str) -> None:
    upgrade(engine, table_prefix=prefix, partitions=4)
    try:
        assert current(engine, table_prefix=prefix) == head()
        with engine.connect() as connection:
            assert partitions_on(connection, prefix) == 4
            columns = connection.execute(
                text(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = :t ORDER BY ordinal_position"
                ),
                {"t": f"{prefix}messages_p3"},
            )
            # 0003_history's columns reached every partition.
            assert columns.scalars().all() == ["memory_id", "seq", "payload", "written_at", "evicted"]
        upgrade(engine, table_prefix=prefix, partitions=4)  # at head: nothing to do
        with pytest.raises(StoreError, match="has 4 partitions"):
            upgrade(engine, table_prefix=prefix, partitions=8)
        store = SQLChatMemoryStore(engine, table_prefix=prefix, history=True)
        try:
            store.update_messages("m", [UserMessage("x"), AiMessage("y")])
            assert len(store.history("m").entries) == 2
        finally:
            store.close()
    finally:
        drop_schema(engine, table_prefix=prefix)


def test_create_schema_of_the_migrations_takes_partitions(engine: Engine, prefix: str) -> None:
    create_schema(engine, table_prefix=prefix, partitions=2)
    try:
        with engine.connect() as connection:
            assert partitions_on(connection, prefix) == 2
    finally:
        drop_schema(engine, table_prefix=prefix)


# ---------------------------------------------------------------------------------------- pruning


def _message_partitions_in(plan: Any, prefix: str) -> set[str]:
    """The partitions of ``<prefix>messages`` a plan scans or changes (``Relation Name`` anywhere in it)."""
    found: set[str] = set()
    if isinstance(plan, dict):
        name = plan.get("Relation Name")
        if isinstance(name, str) and name.lower().startswith(f"{prefix}messages_p".lower()):
            found.add(name)
        for value in plan.values():
            found |= _message_partitions_in(value, prefix)
    elif isinstance(plan, list):
        for value in plan:
            found |= _message_partitions_in(value, prefix)
    return found


def test_each_statement_on_one_memory_reaches_one_partition(url: str, prefix: str) -> None:
    """PostgreSQL's own plans (EXPLAIN of each statement sent, with its parameters) prune to one partition.

    A hash-partitioned table prunes as a distributed one is routed: by equality on memory_id. An INSERT
    routes its rows when it runs, so its plan names no partition: test_sql_routing.py checks its rows.
    """
    store = SQLChatMemoryStore(url, table_prefix=prefix, partitions=8, history=True, ttl=3600)
    store.create_schema()
    seen: list[tuple[str, Any]] = []

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen.append((statement, parameters[0] if executemany else parameters))

    try:
        memory_id = "pruned"
        store.get_messages("warm")
        for other in range(8):
            store.update_messages(f"other {other}", [UserMessage("elsewhere")])
        event.listen(store.engine, "before_cursor_execute", before)
        memory = MessageWindowChatMemory(memory_id, store=store, max_messages=4, always_keep_system_message_first=True)
        memory.add(SystemMessage("s"))
        for index in range(6):
            memory.add(UserMessage(f"q{index}"), AiMessage(f"a{index}"))
        store.update_messages(memory_id, [*store.get_messages(memory_id), *(UserMessage(str(i)) for i in range(12))])
        store.modify(memory_id, lambda messages: messages[-2:])
        store.history(memory_id, after=3, limit=2, reverse=True)
        store.trim_history(older_than=datetime.timedelta(days=1), memory_id=memory_id)
        store.read_raw(memory_id)
        store.delete_messages(memory_id)
        store.load(memory_id)
        event.remove(store.engine, "before_cursor_execute", before)

        explained = 0
        wide: list[str] = []
        with store.engine.connect() as connection:
            cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            for sql, parameters in seen:
                if f"{prefix}messages" not in sql or sql.lstrip().upper().startswith("INSERT"):
                    continue
                cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", parameters or None)
                row = cursor.fetchone()
                assert row is not None
                plan = json.loads(row[0]) if isinstance(row[0], str) else row[0]
                reached = _message_partitions_in(plan, prefix)
                explained += 1
                if len(reached) > 1:
                    wide.append(f"{sorted(reached)}: {' '.join(sql.split())[:200]}")
            cursor.close()
        assert explained >= 8
        assert wide == []
        # The check itself: a statement over every memory reaches every partition.
        with store.engine.connect() as connection:
            plan = connection.execute(text(f'EXPLAIN (FORMAT JSON) SELECT count(*) FROM "{prefix}messages"')).scalar()
        assert len(_message_partitions_in(plan, prefix)) == 8
    finally:
        store.drop_schema()
        store.close()
