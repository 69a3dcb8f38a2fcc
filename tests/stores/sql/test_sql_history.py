"""The SQL store's history on each SQL server, sync and asyncio: what is recorded, kept, expired and trimmed."""

from __future__ import annotations

import datetime
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from sqlalchemy import text

from chatmemory import (
    ConcurrentUpdateError,
    HistoryNotEnabledError,
    MessageWindowChatMemory,
    SystemMessage,
    UserMessage,
)
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLStore
from chatmemory.core.history import HistoryEntry
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends.sqlite import SQLBackend


@pytest.fixture
def store(sql_backend: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = sql_backend.make_store(history=True)
    yield made
    sql_backend.close_store(made)


def texts(*words: str) -> list[ChatMessage]:
    return [UserMessage(word) for word in words]


def everything(store: SQLChatMemoryStore, memory_id: str, page: int = 100) -> list[HistoryEntry]:
    entries: list[HistoryEntry] = []
    after = None
    while True:
        got = store.history(memory_id, after=after, limit=page)
        entries += got.entries
        if got.next_after is None:
            return entries
        after = got.next_after


def rows(store: SQLChatMemoryStore, memory_id: str) -> int:
    with store.engine.connect() as connection:
        statement = text(f"SELECT count(*) FROM {store._tables.messages.name} WHERE memory_id = :id")
        return int(connection.execute(statement, {"id": memory_id.encode()}).scalar_one())


def test_a_thousand_turns_keep_every_message_while_the_window_stays_bounded(store: SQLChatMemoryStore) -> None:
    memory = MessageWindowChatMemory("long", max_messages=20, store=store)
    memory.add(SystemMessage("be brief"))
    said = [UserMessage(f"turn {turn}") for turn in range(1000)]
    for message in said:
        memory.add(message)
    window = store.get_messages("long")
    assert len(window) == 20 and window[0] == SystemMessage("be brief") and window[-1] == said[-1]
    entries = everything(store, "long", page=137)
    assert [entry.message for entry in entries] == [SystemMessage("be brief"), *said]
    sequences = [entry.sequence for entry in entries]
    assert sequences == sorted(set(sequences)) and sequences[0] >= 1
    assert rows(store, "long") == 1001  # nothing deleted, nothing doubled
    newest = store.history("long", limit=3, reverse=True)
    assert newest.messages == said[:-4:-1] and newest.next_after == sequences[-3]


def test_what_a_write_adds_is_recorded_once_with_one_write_time(store: SQLChatMemoryStore) -> None:
    before = datetime.datetime.now(datetime.timezone.utc)
    version = store.save("m", texts("a", "b"), 0)
    version = store.save("m", texts("b", "c", "d"), version)
    store.save("m", texts("b", "c", "d"), version)  # changes nothing: records nothing
    entries = everything(store, "m")
    assert [entry.message for entry in entries] == texts("a", "b", "c", "d")
    assert entries[0].written_at == entries[1].written_at < entries[2].written_at == entries[3].written_at
    for entry in entries:
        assert entry.written_at.tzinfo is datetime.timezone.utc
        assert abs(entry.written_at - before) < datetime.timedelta(minutes=5)  # the server's clock


def test_a_rewrite_is_recorded_as_what_it_is(store: SQLChatMemoryStore) -> None:
    store.update_messages("m", texts("a", "b"))
    store.update_messages("m", [SystemMessage("new"), *texts("a", "b")])
    assert store.history("m").messages == [*texts("a", "b"), SystemMessage("new"), *texts("a", "b")]
    assert store.get_messages("m") == [SystemMessage("new"), *texts("a", "b")]


def test_a_stale_writer_records_only_what_it_adds(sql_backend: SQLBackend, store: SQLChatMemoryStore) -> None:
    other = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix, history=True)
    try:
        store.update_messages("m", texts("a", "b"))
        other.update_messages("m", texts("a", "b", "c"))
        store.update_messages("m", texts("b", "c", "d"))  # its snapshot is stale: it reads under the lock
        assert store.history("m").messages == texts("a", "b", "c", "d")
        assert other.get_messages("m") == texts("b", "c", "d")
        # A write that loses its version records nothing.
        version = store.load("m").version
        other.save("m", texts("c", "d", "e"), version)
        with pytest.raises(ConcurrentUpdateError):
            store.save("m", texts("c", "d", "lost"), version)
        assert store.history("m").messages == texts("a", "b", "c", "d", "e")
    finally:
        other.close()


def test_modify_records_what_it_adds(store: SQLChatMemoryStore) -> None:
    store.update_messages("m", texts("a"))
    store.modify("m", lambda messages: [*messages, UserMessage("b")])
    store.modify("m", lambda messages: messages[1:])
    assert store.history("m").messages == texts("a", "b") and store.get_messages("m") == texts("b")


def test_evictions_anywhere_read_back_exactly_from_every_store(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    cold = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix, snapshot_cache_size=0)
    try:
        window = texts(*"abcdefgh")
        store.update_messages("m", window)
        for keep in ([0, 2, 3, 5, 7], [0, 1, 3], [1, 2], [0]):
            window = [*(window[index] for index in keep), UserMessage(f"after {keep}")]
            store.update_messages("m", window)
            assert cold.get_messages("m") == store.get_messages("m") == window
        assert len(store.history("m").entries) == 12
    finally:
        cold.close()


def test_a_raw_write_records_nothing_and_keeps_the_history(store: SQLChatMemoryStore) -> None:
    store.update_messages("m", texts("a"))
    store.write_raw("m", [dumps_message(UserMessage("raw"))])
    assert store.get_messages("m") == texts("raw")
    assert store.history("m").messages == texts("a")


def test_delete_removes_window_and_history(store: SQLChatMemoryStore) -> None:
    store.update_messages("m", texts("a", "b"))
    store.update_messages("m", texts("b", "c"))
    store.delete_messages("m")
    assert store.history("m").entries == [] and rows(store, "m") == 0
    store.update_messages("m", texts("x"))
    assert store.history("m").messages == texts("x")


def test_an_unknown_memory_has_an_empty_history(store: SQLChatMemoryStore) -> None:
    page = store.history("nobody")
    assert page.entries == [] and page.next_after is None


def test_trim_deletes_old_rows_outside_the_window_and_unrecords_the_window(store: SQLChatMemoryStore) -> None:
    version = store.save("m", texts("a", "b", "c"), 0)
    store.save("m", texts("c", "d"), version)
    store.update_messages("other", texts("x", "y"))
    store.update_messages("other", texts("y"))
    assert store.trim_history(older_than=datetime.timedelta(hours=1)) == 0
    assert rows(store, "m") == 4
    assert store.trim_history(older_than=datetime.timedelta(0), memory_id="m") == 4
    assert rows(store, "m") == 2  # a and b went; c and d are the window, no longer history entries
    assert store.history("m").entries == [] and store.get_messages("m") == texts("c", "d")
    assert store.history("other").messages == texts("x", "y")
    store.update_messages("m", texts("c", "d", "e"))
    assert store.history("m").messages == texts("e")
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    assert store.trim_history(older_than=future) == 3  # e, x, y
    assert store.get_messages("other") == texts("y") and store.get_messages("m") == texts("c", "d", "e")
    assert rows(store, "other") == 1


def test_without_a_history_ttl_the_history_expires_with_the_window(sql_backend: SQLBackend) -> None:
    store = sql_backend.make_store(history=True, ttl=1)
    try:
        store.update_messages("m", texts("a", "b"))
        store.update_messages("m", texts("b"))
        time.sleep(1.3)
        assert store.history("m").entries == []
        store.update_messages("m", texts("new"))
        assert store.history("m").messages == texts("new")
    finally:
        sql_backend.close_store(store)


def test_a_history_ttl_keeps_the_history_past_the_window(sql_backend: SQLBackend) -> None:
    store = sql_backend.make_store(history=True, ttl=1, history_ttl=60)
    try:
        store.update_messages("m", texts("a", "b"))
        store.update_messages("m", texts("b"))
        time.sleep(1.3)
        assert store.get_messages("m") == []
        assert store.purge_expired() == 0  # the head row stays until the history expires
        assert store.history("m").messages == texts("a", "b")
        store.update_messages("m", texts("new"))  # a new window, the same history
        assert store.get_messages("m") == texts("new")
        entries = store.history("m").entries
        assert [entry.message for entry in entries] == texts("a", "b", "new")
        assert entries[-1].sequence > entries[1].sequence
        store.expire_at("m", datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc))
        assert store.history("m").messages == texts("a", "b", "new")
    finally:
        sql_backend.close_store(store)


def test_purge_removes_expired_histories(sql_backend: SQLBackend) -> None:
    store = sql_backend.make_store(history=True, ttl=1)
    try:
        store.update_messages("m", texts("a", "b"))
        store.update_messages("m", texts("b"))
        time.sleep(1.3)
        assert store.purge_expired() == 1
        assert rows(store, "m") == 0
    finally:
        sql_backend.close_store(store)


def test_a_store_without_history_refuses_after_checking_the_arguments(sql_backend: SQLBackend) -> None:
    store = sql_backend.make_store()
    try:
        assert not store.keeps_history
        with pytest.raises(ValueError, match="limit"):
            store.history("m", limit=0)
        with pytest.raises(TypeError):
            store.trim_history(older_than=5)  # type: ignore[arg-type]
        with pytest.raises(HistoryNotEnabledError, match="SQLChatMemoryStore"):
            store.history("m")
        with pytest.raises(HistoryNotEnabledError):
            store.trim_history(older_than=datetime.timedelta(days=1))
    finally:
        sql_backend.close_store(store)


def test_history_options_are_checked_at_construction(sql_backend: SQLBackend) -> None:
    with pytest.raises(ValueError, match="history=True"):
        SQLChatMemoryStore(sql_backend.url, history_ttl=60)
    with pytest.raises(ValueError, match="at least ttl"):
        SQLChatMemoryStore(sql_backend.url, history=True, ttl=60, history_ttl=10)
    with SQLChatMemoryStore(sql_backend.url, history=True, history_ttl=datetime.timedelta(days=1)) as store:
        assert store.keeps_history and store.history_ttl == 86_400 and "history=True" in repr(store)


def test_a_store_without_history_reads_a_window_written_with_history(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    plain = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix)
    try:
        system = SystemMessage("s")
        window = [system, *texts("a", "b")]
        store.update_messages("m", window)
        window = [system, *texts("b", "c")]
        store.update_messages("m", window)
        assert plain.get_messages("m") == window
        window = [system, *texts("c", "d")]
        # A store without history deletes what it evicts (b) and records nothing (d); older history rows
        # stay out of the window.
        plain.update_messages("m", window)
        assert store.get_messages("m") == plain.get_messages("m") == window
        assert store.history("m").messages == [system, *texts("a", "c")]
    finally:
        plain.close()


# ------------------------------------------------------------------------------------------ asyncio


@pytest_asyncio.fixture
async def async_store(sql_backend: SQLBackend, store: SQLChatMemoryStore) -> AsyncIterator[AsyncSQLStore]:
    async with AsyncSQLStore(sql_backend.url, table_prefix=store.table_prefix, history=True) as made:
        yield made


@pytest.mark.asyncio
async def test_the_asyncio_store_keeps_the_same_history(async_store: AsyncSQLStore, store: SQLChatMemoryStore) -> None:
    assert async_store.keeps_history
    version = 0
    window: list[ChatMessage] = [SystemMessage("s")]
    for turn in range(30):
        window = [window[0], *window[1:][-4:], UserMessage(f"t{turn}")]
        version = await async_store.save("m", window, version)
    assert await async_store.get_messages("m") == store.get_messages("m") == window
    store.update_messages("m", [*window, UserMessage("sync")])
    page = await async_store.history("m", limit=20)
    assert len(page.entries) == 20 and page.next_after == page.entries[-1].sequence
    rest = await async_store.history("m", after=page.next_after)
    assert [entry.message for entry in page.entries + rest.entries] == [
        SystemMessage("s"),
        *(UserMessage(f"t{turn}") for turn in range(30)),
        UserMessage("sync"),
    ]
    assert await async_store.trim_history(older_than=datetime.timedelta(0), memory_id="m") == 32
    assert (await async_store.history("m")).entries == []
    assert await async_store.get_messages("m") == [*window, UserMessage("sync")]
    await async_store.delete_messages("m")
    assert (await async_store.history("m", reverse=True)).entries == []


@pytest.mark.asyncio
async def test_the_asyncio_store_without_history_refuses(sql_backend: SQLBackend, store: SQLChatMemoryStore) -> None:
    async with AsyncSQLStore(sql_backend.url, table_prefix=store.table_prefix) as plain:
        assert not plain.keeps_history
        with pytest.raises(HistoryNotEnabledError):
            await plain.history("m")
        with pytest.raises(HistoryNotEnabledError):
            await plain.trim_history(older_than=datetime.timedelta(0))
