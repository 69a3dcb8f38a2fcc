"""``restore_history`` on the stores that can put history entries back (SupportsHistoryRestore), sync and asyncio."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from chatmemory import HistoryNotEnabledError, InMemoryChatMemoryStore, SerializationError, UserMessage
from chatmemory.aio import InMemoryChatMemoryStore as AsyncInMemoryChatMemoryStore
from chatmemory.aio.store import SupportsHistoryRestore as AsyncSupportsHistoryRestore
from chatmemory.core.history import HistoryEntry, SupportsHistoryRestore

WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)


def entries(*sequences: int) -> list[HistoryEntry]:
    return [HistoryEntry(s, UserMessage(f"m{s}"), WHEN + datetime.timedelta(seconds=s)) for s in sequences]


def test_restore_adds_only_missing_entries_and_changes_none() -> None:
    store = InMemoryChatMemoryStore(history=True)
    assert isinstance(store, SupportsHistoryRestore)
    assert store.restore_history("m", entries(2, 5)) == 2
    changed = [HistoryEntry(5, UserMessage("other"), WHEN)]
    assert store.restore_history("m", [*entries(1), *changed, *entries(9)]) == 2
    assert store.history("m").entries == entries(1, 2, 5, 9)
    assert store.restore_history("m", entries(1, 2, 5, 9)) == 0
    assert store.get_messages("m") == []  # no window was asked for


def test_restore_with_a_window_writes_it_only_where_there_is_none() -> None:
    store = InMemoryChatMemoryStore(history=True)
    assert store.restore_history("m", entries(3, 4), window=[UserMessage("m4")]) == 2
    assert store.get_messages("m") == [UserMessage("m4")]
    assert store.history("m").entries == entries(3, 4)  # the window's write recorded nothing more
    store.restore_history("m", entries(3, 4), window=[UserMessage("x")])
    assert store.get_messages("m") == [UserMessage("m4")]
    store.update_messages("m", [UserMessage("m4"), UserMessage("new")])
    after = store.history("m").entries
    assert after[:2] == entries(3, 4) and after[2].sequence > 4


def test_later_writes_number_after_the_restored_entries_in_every_memory() -> None:
    store = InMemoryChatMemoryStore(history=True)
    store.restore_history("a", entries(1000))
    store.update_messages("b", [UserMessage("b")])
    assert store.history("b").entries[0].sequence > 1000


def test_a_bad_restore_changes_nothing() -> None:
    store = InMemoryChatMemoryStore(history=True)
    with pytest.raises(ValueError, match="strictly increase"):
        store.restore_history("m", entries(2, 1))
    with pytest.raises(ValueError, match="positive"):
        store.restore_history("m", entries(0))
    with pytest.raises(ValueError, match="aware"):
        store.restore_history("m", [HistoryEntry(1, UserMessage("q"), WHEN.replace(tzinfo=None))])
    with pytest.raises(TypeError, match="HistoryEntry"):
        store.restore_history("m", [UserMessage("q")])  # type: ignore[list-item]
    unencodable = HistoryEntry(2, UserMessage("\ud800"), WHEN)  # a lone surrogate: no JSON holds it
    with pytest.raises(SerializationError):
        store.restore_history("m", [*entries(1), unencodable])
    assert store.history("m").entries == []
    with pytest.raises(HistoryNotEnabledError):
        InMemoryChatMemoryStore().restore_history("m", entries(1))


def test_the_asyncio_store_restores_as_the_sync_one() -> None:
    async def scenario() -> None:
        store = AsyncInMemoryChatMemoryStore(history=True)
        assert isinstance(store, AsyncSupportsHistoryRestore)
        assert await store.restore_history("m", entries(1, 2), window=[UserMessage("m2")]) == 2
        assert await store.restore_history("m", entries(1, 2, 3)) == 1
        assert (await store.history("m")).entries == entries(1, 2, 3)
        assert await store.get_messages("m") == [UserMessage("m2")]

    asyncio.run(scenario())
