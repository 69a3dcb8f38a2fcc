"""``restore_history`` on every backend whose store puts history entries back (SupportsHistoryRestore).

Sync on every backend, asyncio on every backend with an asyncio store; a store that cannot restore yet
is skipped with its name.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Iterator

import pytest

from chatmemory import HistoryNotEnabledError, InMemoryChatMemoryStore, SerializationError, UserMessage
from chatmemory.aio.store import SupportsHistoryRestore as AsyncSupportsHistoryRestore
from chatmemory.core.history import HistoryEntry, SupportsHistoryRestore, UnrestorableHistoryError

WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)


def entries(*sequences: int) -> list[HistoryEntry]:
    return [HistoryEntry(s, UserMessage(f"m{s}"), WHEN + datetime.timedelta(seconds=s)) for s in sequences]


@pytest.fixture
def restoring(backend) -> Iterator[SupportsHistoryRestore]:
    store = backend.make_store(history=True)
    try:
        if not isinstance(store, SupportsHistoryRestore):
            pytest.skip(f"{type(store).__name__} cannot restore history yet")
        yield store
    finally:
        backend.close_store(store)


@pytest.fixture
async def async_restoring(async_backend) -> AsyncIterator[AsyncSupportsHistoryRestore]:
    store = await async_backend.make_store(history=True)
    try:
        if not isinstance(store, AsyncSupportsHistoryRestore):
            pytest.skip(f"{type(store).__name__} cannot restore history yet")
        yield store
    finally:
        await async_backend.close_store(store)


def test_restore_adds_only_missing_entries_and_changes_none(restoring) -> None:
    store = restoring
    assert store.restore_history("m", entries(3, 4), window=[UserMessage("m4")]) == 2
    changed = [HistoryEntry(4, UserMessage("other"), WHEN)]
    assert store.restore_history("m", [*entries(1, 2, 3), *changed, *entries(5)]) == 3
    assert store.history("m").entries == entries(1, 2, 3, 4, 5)
    assert store.restore_history("m", entries(1, 2, 3, 4, 5)) == 0
    assert store.history("m").entries == entries(1, 2, 3, 4, 5)
    assert store.get_messages("m") == [UserMessage("m4")]


def test_restore_with_a_window_writes_it_only_where_there_is_none(restoring) -> None:
    store = restoring
    assert store.restore_history("m", entries(3, 4), window=[UserMessage("m4")]) == 2
    assert store.get_messages("m") == [UserMessage("m4")]
    assert store.load("m").version > 0
    assert store.history("m").entries == entries(3, 4)  # the window's write recorded nothing more
    assert store.restore_history("m", entries(3, 4), window=[UserMessage("x")]) == 0
    assert store.get_messages("m") == [UserMessage("m4")]
    store.update_messages("m", [UserMessage("m4"), UserMessage("new")])
    after = store.history("m").entries
    assert after[:2] == entries(3, 4)
    assert after[2].sequence > 4 and after[2].message == UserMessage("new")


def test_writes_after_a_restore_into_a_written_memory_number_after_it(restoring) -> None:
    store = restoring
    store.update_messages("m", [UserMessage("m1")])
    first = store.history("m").entries[0].sequence
    store.restore_history("m", [HistoryEntry(first + 1, UserMessage("back"), WHEN)])
    store.update_messages("m", [UserMessage("m1"), UserMessage("next")])
    sequences = [entry.sequence for entry in store.history("m").entries]
    assert sequences == sorted(set(sequences)) and len(sequences) == 3


def test_a_bad_restore_changes_nothing(restoring) -> None:
    store = restoring
    with pytest.raises(ValueError, match="strictly increase"):
        store.restore_history("m", entries(2, 1))
    with pytest.raises(ValueError, match="positive"):
        store.restore_history("m", entries(0))
    with pytest.raises(ValueError, match="aware"):
        store.restore_history("m", [HistoryEntry(1, UserMessage("q"), WHEN.replace(tzinfo=None))])
    with pytest.raises(TypeError, match="HistoryEntry"):
        store.restore_history("m", [UserMessage("q")])
    unencodable = HistoryEntry(2, UserMessage("\ud800"), WHEN)  # a lone surrogate: no JSON holds it
    with pytest.raises(SerializationError):
        store.restore_history("m", [*entries(1), unencodable], window=[UserMessage("m1")])
    assert store.history("m").entries == []
    assert store.get_messages("m") == []


def test_a_store_without_history_refuses(backend) -> None:
    store = backend.make_store()
    try:
        if not isinstance(store, SupportsHistoryRestore):
            pytest.skip(f"{type(store).__name__} cannot restore history yet")
        with pytest.raises(HistoryNotEnabledError):
            store.restore_history("m", entries(1))
    finally:
        backend.close_store(store)


def test_a_history_alone_where_the_store_keeps_it_beside_the_window(backend) -> None:
    store = backend.make_store(history=True)
    try:
        if not isinstance(store, SupportsHistoryRestore):
            pytest.skip(f"{type(store).__name__} cannot restore history yet")
        if backend.name not in ("mongodb", "sqlite", "postgres", "mysql"):
            assert store.restore_history("m", entries(1)) == 1
            assert store.get_messages("m") == []
            return
        with pytest.raises(UnrestorableHistoryError, match="restore it with its window"):
            store.restore_history("m", entries(1))
        assert store.history("m").entries == []
        store.update_messages("plain", [UserMessage("p")])  # written with history: it has one to add to
        assert store.restore_history("plain", entries(5)) == 1
    finally:
        backend.close_store(store)


def test_gaps_where_the_store_allows_them() -> None:
    store = InMemoryChatMemoryStore(history=True)
    assert store.restore_history("m", entries(2, 5)) == 2
    assert store.restore_history("m", entries(1, 9)) == 2
    assert [entry.sequence for entry in store.history("m").entries] == [1, 2, 5, 9]
    store.restore_history("a", entries(1000))
    store.update_messages("b", [UserMessage("b")])
    assert store.history("b").entries[0].sequence > 1000  # one counter for the store, moved past it


@pytest.mark.redis
def test_redis_refuses_gaps_and_writes_nothing(backend) -> None:
    if not backend.name.startswith("redis"):
        pytest.skip("the consecutive numbering is Redis's")
    store = backend.make_store(history=True)
    try:
        with pytest.raises(UnrestorableHistoryError, match="consecutive"):
            store.restore_history("m", entries(1, 3), window=[UserMessage("m3")])
        assert store.history("m").entries == [] and store.get_messages("m") == []
        store.restore_history("m", entries(5, 6))
        with pytest.raises(UnrestorableHistoryError, match="5 to 6"):
            store.restore_history("m", entries(8))
        with pytest.raises(UnrestorableHistoryError, match="5 to 6"):
            store.restore_history("m", entries(2, 3))
        assert store.restore_history("m", entries(2, 3, 4, 5, 6, 7)) == 4
        assert [entry.sequence for entry in store.history("m").entries] == [2, 3, 4, 5, 6, 7]
    finally:
        backend.close_store(store)


async def test_the_asyncio_store_restores_as_the_sync_one(async_restoring) -> None:
    store = async_restoring
    assert await store.restore_history("m", entries(1, 2), window=[UserMessage("m2")]) == 2
    assert await store.restore_history("m", entries(1, 2, 3)) == 1
    assert (await store.history("m")).entries == entries(1, 2, 3)  # type: ignore[attr-defined]
    assert await store.get_messages("m") == [UserMessage("m2")]  # type: ignore[attr-defined]


@pytest.mark.mongodb
def test_a_mongodb_store_that_cached_the_head_numbers_after_a_restore_by_another(backend) -> None:
    if backend.name != "mongodb":
        pytest.skip("the MongoDB head and its cached hseq")
    from chatmemory.stores.mongodb import MongoChatMemoryStore

    writer = backend.make_store(history=True)
    collection = writer._collection
    restorer = MongoChatMemoryStore(
        collection.database.client, database=collection.database.name, collection=collection.name, history=True
    )
    try:
        writer.update_messages("m", [UserMessage("a")])  # the writer caches the head: hseq 1
        version = writer.load("m").version
        assert restorer.restore_history("m", entries(2, 3)) == 2
        assert restorer.load("m").version > version  # writers that cached the head read it again
        writer.update_messages("m", [UserMessage("a"), UserMessage("b")])
        history = writer.history("m").entries
        assert [entry.sequence for entry in history] == [1, 2, 3, 4]
        assert history[1:3] == entries(2, 3) and history[3].message == UserMessage("b")
    finally:
        restorer.close()
        backend.close_store(writer)


SQL = ("sqlite", "postgres", "mysql")


def test_a_sql_window_not_among_the_entries_goes_after_them(backend) -> None:
    if backend.name not in SQL:
        pytest.skip("the SQL rows hold windows and histories together")
    store = backend.make_store(history=True)
    try:
        assert store.restore_history("m", entries(1, 2), window=[UserMessage("x")]) == 2
        assert store.get_messages("m") == [UserMessage("x")]
        assert store.history("m").entries == entries(1, 2)  # the window's row is no history entry
        with pytest.raises(UnrestorableHistoryError, match=r"sequences \[3\] hold messages written without history"):
            store.restore_history("m", entries(3))
        store.update_messages("m", [UserMessage("x"), UserMessage("y")])
        after = store.history("m").entries
        assert after[:2] == entries(1, 2) and after[2].sequence > 3 and after[2].message == UserMessage("y")
    finally:
        backend.close_store(store)


def test_a_sql_store_that_cached_the_memory_numbers_after_a_restore_by_another(backend) -> None:
    if backend.name not in SQL:
        pytest.skip("the SQL head and its cached next_seq")
    from chatmemory.stores.sql import SQLChatMemoryStore

    writer = backend.make_store(history=True)
    restorer = SQLChatMemoryStore(backend.url, table_prefix=writer.table_prefix, history=True)
    try:
        writer.update_messages("m", [UserMessage("a")])  # the writer caches the memory: its next row is 1
        version = writer.load("m").version
        assert restorer.restore_history("m", entries(2, 3)) == 2
        assert restorer.load("m").version > version  # writers that cached the memory read it again
        writer.update_messages("m", [UserMessage("a"), UserMessage("b")])
        history = writer.history("m").entries
        assert [entry.sequence for entry in history] == [1, 2, 3, 4]
        assert history[1:3] == entries(2, 3) and history[3].message == UserMessage("b")
        assert writer.get_messages("m") == [UserMessage("a"), UserMessage("b")]  # restored rows stay out of it
    finally:
        restorer.close()
        backend.close_store(writer)


def test_a_window_with_gaps_among_its_entries_is_restored_as_it_was(restoring) -> None:
    store = restoring
    window = [UserMessage("m1"), UserMessage("m3"), UserMessage("m5")]  # what evictions from the middle leave
    assert store.restore_history("m", entries(1, 2, 3, 4, 5), window=window) == 5
    assert store.get_messages("m") == window
    assert store.history("m").entries == entries(1, 2, 3, 4, 5)
    store.update_messages("m", [*window, UserMessage("m6")])
    assert store.get_messages("m") == [*window, UserMessage("m6")]
    assert [entry.message for entry in store.history("m").entries][-1] == UserMessage("m6")


@pytest.mark.parametrize("window", [["m4"], ["elsewhere"]], ids=["tail-of-history", "not-in-history"])
def test_restore_into_an_encrypted_store_seals_and_reads_back(backend, window: list[str]) -> None:
    from chatmemory.encryption import Keyring
    from support.backends import WITHOUT_ENCRYPTION

    if backend.name in WITHOUT_ENCRYPTION:
        pytest.skip(f"{backend.name} has no encryption=")
    import os

    store = backend.make_store(history=True, encryption=Keyring({"k": os.urandom(32)}, "k"))
    try:
        if not isinstance(store, SupportsHistoryRestore):
            pytest.skip(f"{type(store).__name__} cannot restore history yet")
        messages = [UserMessage(text) for text in window]
        assert store.restore_history("m", entries(1, 2, 3, 4), window=messages) == 4
        assert store.get_messages("m") == messages
        assert [entry.message for entry in store.history("m").entries] == [
            entry.message for entry in entries(1, 2, 3, 4)
        ]
    finally:
        backend.close_store(store)
