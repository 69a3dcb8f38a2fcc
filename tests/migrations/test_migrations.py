"""Alembic migrations: ``upgrade head`` builds exactly the store's metadata, and keeps data on the way.

Adding a revision ``000N``: write ``seed_000N_predecessor`` below for the revision before it (data in that
revision's shape, and the messages the store must read after upgrading), register it in ``SEEDERS``; the
upgrade test then starts from every earlier revision by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, create_engine, inspect, text

from chatmemory import ChatMessage, SystemMessage, UserMessage, migrations
from chatmemory.serialization.native import dumps_message, loads_message
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.schema import REQUIRED_SCHEMA_REVISION, build_tables, version_table_name
from support.backends.sqlite import SQLBackend


@pytest.fixture
def prefix(sql_backend: SQLBackend) -> Iterator[str]:
    chosen = sql_backend.fresh_prefix()
    yield chosen
    with SQLChatMemoryStore(sql_backend.url, table_prefix=chosen) as store:
        store.drop_schema()


def _differences(connection: Connection, prefix: str) -> list[object]:
    ours = set(build_tables(prefix).metadata.tables)
    context = MigrationContext.configure(
        connection,
        opts={
            "compare_type": True,
            "version_table": version_table_name(prefix),
            # The database is shared with other tests: compare only this prefix's tables.
            "include_name": lambda name, kind, _parent: kind != "table" or name in ours,
        },
    )
    return list(compare_metadata(context, build_tables(prefix).metadata))


def test_upgrade_head_builds_the_metadata(sql_backend: SQLBackend, prefix: str) -> None:
    assert migrations.current(sql_backend.url, table_prefix=prefix) is None
    migrations.upgrade(sql_backend.url, table_prefix=prefix)
    assert migrations.current(sql_backend.url, table_prefix=prefix) == migrations.head()
    engine = create_engine(sql_backend.url)
    try:
        with engine.connect() as connection:
            assert _differences(connection, prefix) == []
            assert inspect(connection).has_table(f"{prefix}alembic_version")
    finally:
        engine.dispose()


def test_the_comparison_sees_a_difference(sql_backend: SQLBackend, prefix: str) -> None:
    # The test above can fail: an index the metadata does not have is reported.
    migrations.upgrade(sql_backend.url, table_prefix=prefix)
    engine = create_engine(sql_backend.url)
    try:
        with engine.begin() as connection:
            connection.execute(text(f"CREATE INDEX ix_{prefix}extra ON {prefix}memories (updated_at)"))
        with engine.connect() as connection:
            assert [d[0] for d in _differences(connection, prefix)] == ["remove_index"]  # type: ignore[index]
    finally:
        engine.dispose()


def test_create_schema_equals_the_migrations(sql_backend: SQLBackend, prefix: str) -> None:
    with SQLChatMemoryStore(sql_backend.url, table_prefix=prefix) as store:
        store.create_schema()
        with store.engine.connect() as connection:
            assert _differences(connection, prefix) == []
        assert migrations.current(store.engine, table_prefix=prefix) == migrations.head()


def test_prefixes_migrate_on_their_own(sql_backend: SQLBackend, prefix: str) -> None:
    migrations.upgrade(sql_backend.url, table_prefix=prefix)
    other = sql_backend.fresh_prefix()
    assert migrations.current(sql_backend.url, table_prefix=other) is None


# --------------------------------------------------------------------------------- upgrades keep data

Seeder = Callable[[Connection, str], dict[str, list[ChatMessage]]]


def seed_0001_initial(connection: Connection, prefix: str) -> dict[str, list[ChatMessage]]:
    """Rows in the shape of 0001_initial, written with plain SQL; returns what the store must read back."""
    expected: dict[str, list[ChatMessage]] = {
        "plain": [UserMessage("hello"), UserMessage("again")],
        "用户 🦜": [UserMessage("\x00 kept")],
        "empty": [],
    }
    for number, (memory_id, messages) in enumerate(expected.items()):
        key = memory_id.encode()
        connection.execute(
            text(
                f"INSERT INTO {prefix}memories (memory_id, version, incarnation, next_seq, created_at, updated_at, "
                "expires_at) VALUES (:id, :version, :incarnation, :next_seq, :now, :now, NULL)"
            ),
            {
                "id": key,
                "version": 10 + number,
                "incarnation": number,
                "next_seq": 5 + len(messages),
                "now": "2026-01-01 00:00:00",
            },
        )
        for offset, message in enumerate(messages):
            connection.execute(
                text(f"INSERT INTO {prefix}messages (memory_id, seq, payload) VALUES (:id, :seq, :payload)"),
                {"id": key, "seq": 5 + offset, "payload": dumps_message(message)},
            )
    return expected


def seed_0002_recent_writes(connection: Connection, prefix: str) -> dict[str, list[ChatMessage]]:
    """Rows in the shape of 0002_recent_writes: those of 0001 plus a remembered write per memory."""
    expected = seed_0001_initial(connection, prefix)
    connection.execute(text(f"UPDATE {prefix}memories SET recent_writes = :entry"), {"entry": "ab" * 8 + "0" * 16})
    return expected


def seed_0003_history(connection: Connection, prefix: str) -> dict[str, list[ChatMessage]]:
    """Rows in the shape of 0003_history: those of 0002, and a history beside one window.

    "plain" gets a history row before its window (below ``window_start``) and one marked evicted inside
    it: neither is read as part of the window.
    """
    expected = seed_0002_recent_writes(connection, prefix)
    insert = text(
        f"INSERT INTO {prefix}messages (memory_id, seq, payload, written_at, evicted) "
        "VALUES (:id, :seq, :payload, :now, :evicted)"
    )
    for seq, evicted in ((4, None), (7, 1)):
        row = {"id": b"plain", "seq": seq, "payload": dumps_message(UserMessage("gone")), "evicted": evicted}
        connection.execute(insert, {**row, "now": "2026-01-01 00:00:00"})
    connection.execute(
        text(f"UPDATE {prefix}memories SET window_start = 5, next_seq = 8 WHERE memory_id = :id"), {"id": b"plain"}
    )
    return expected


SEEDERS: dict[str, Seeder] = {
    "0001_initial": seed_0001_initial,
    "0002_recent_writes": seed_0002_recent_writes,
    "0003_history": seed_0003_history,
}
"""For each revision: put data in its shape. Every revision but the newest needs one to test its upgrade."""


def test_the_store_needs_the_newest_revision() -> None:
    # The store learns its revision from the schema module, never from the migrations.
    assert REQUIRED_SCHEMA_REVISION == migrations.head() == migrations.revisions()[-1]


def test_every_revision_has_a_seeder() -> None:
    assert set(migrations.revisions()) <= set(SEEDERS)
    assert migrations.revisions()[0] == "0001_initial"


@pytest.mark.parametrize("start", ["empty", *migrations.revisions()[:-1]])
def test_upgrading_from_each_earlier_state_keeps_the_data(sql_backend: SQLBackend, prefix: str, start: str) -> None:
    engine = create_engine(sql_backend.url)
    try:
        if start == "empty":
            # Nothing to keep yet: upgrade, then write data in the newest shape and read it through the store.
            migrations.upgrade(engine, table_prefix=prefix)
            start = migrations.head()
        else:
            migrations.upgrade(engine, table_prefix=prefix, revision=start)
        with engine.begin() as connection:
            expected = SEEDERS[start](connection, prefix)
        migrations.upgrade(engine, table_prefix=prefix)
        assert migrations.current(engine, table_prefix=prefix) == migrations.head()
        with SQLChatMemoryStore(engine, table_prefix=prefix) as store:
            for memory_id, messages in expected.items():
                snapshot = store.load(memory_id)
                assert snapshot.messages == messages
                assert snapshot.version > 0
                version = store.save(memory_id, [*messages, UserMessage("after upgrade")], snapshot.version)
                assert version > snapshot.version
                assert store.get_messages(memory_id) == [*messages, UserMessage("after upgrade")]
            assert set(store.memory_ids()) == set(expected)
    finally:
        engine.dispose()


# ----------------------------------------------------------------------------------------- the command


def test_cli_migrate(sql_backend: SQLBackend, prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert migrations.cli_migrate(sql_backend.url, table_prefix=prefix) == 0
    assert f"to {migrations.head()}" in capsys.readouterr().out
    assert migrations.cli_migrate(sql_backend.url, table_prefix=prefix) == 0
    assert "already at" in capsys.readouterr().out
    assert migrations.cli_migrate(sql_backend.url, table_prefix="not a prefix") == 1
    assert "table_prefix" in capsys.readouterr().err


def test_cli_migrate_reports_an_unreachable_database(capsys: pytest.CaptureFixture[str]) -> None:
    assert migrations.cli_migrate("sqlite:////nonexistent-dir/for/chatmemory.db") == 1
    assert "chatmemory migrate:" in capsys.readouterr().err


def test_downgrading_0003_history_keeps_exactly_the_windows(sql_backend: SQLBackend, prefix: str) -> None:
    from alembic import command

    from chatmemory.migrations import _config, _connection
    from chatmemory.stores.sql.schema import schema_lock

    migrations.upgrade(sql_backend.url, table_prefix=prefix)
    system = SystemMessage("s")
    with SQLChatMemoryStore(sql_backend.url, table_prefix=prefix, history=True) as store:
        window: list[ChatMessage] = [system, *(UserMessage(f"m{i}") for i in range(4))]
        store.update_messages("pinned", window)
        for turn in range(3):
            window = [system, *window[2:], UserMessage(f"t{turn}")]
            store.update_messages("pinned", window)
        middle = [UserMessage(f"x{i}") for i in range(6)]
        store.update_messages("middle", middle)
        middle = [middle[0], middle[2], middle[4], middle[5]]
        store.update_messages("middle", middle)
    config = _config(prefix)
    with _connection(sql_backend.url) as connection, schema_lock(connection, prefix):
        config.attributes["connection"] = connection
        command.downgrade(config, "0002_recent_writes")
    engine = create_engine(sql_backend.url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(f"SELECT memory_id, payload FROM {prefix}messages ORDER BY memory_id, seq")
            ).all()
    finally:
        engine.dispose()
    kept: dict[bytes, list[ChatMessage]] = {}
    for memory_id, payload in rows:
        kept.setdefault(bytes(memory_id), []).append(loads_message(bytes(payload)))
    assert kept == {b"pinned": window, b"middle": middle}
