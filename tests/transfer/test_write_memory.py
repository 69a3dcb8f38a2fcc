"""The rules for writing one memory during import and copy, on every backend."""

from __future__ import annotations

import datetime

import pytest

from chatmemory import ConcurrentUpdateError, InMemoryChatMemoryStore, SystemMessage, UserMessage
from chatmemory.memory_times import MemoryTimes, SupportsExpiryAt, SupportsMemoryTimes
from chatmemory.transfer import ExportedMemory, MemoryExistsError, StoreSource, WriteOutcome, write_memory

NOW = datetime.datetime.now(datetime.timezone.utc)
WINDOW = [SystemMessage("s"), UserMessage("u")]


def test_create_leave_equal_refuse_other_replace_when_asked(store) -> None:
    memory = ExportedMemory("m", WINDOW)
    assert write_memory(store, memory, replace=False) is WriteOutcome.CREATED
    assert store.get_messages("m") == WINDOW
    assert write_memory(store, memory, replace=False) is WriteOutcome.UNCHANGED
    assert write_memory(store, memory, replace=True) is WriteOutcome.UNCHANGED
    other = ExportedMemory("m", [UserMessage("other")])
    with pytest.raises(MemoryExistsError, match=r"'m' already exists with other messages.*--replace"):
        write_memory(store, other, replace=False)
    assert store.get_messages("m") == WINDOW
    assert write_memory(store, other, replace=True) is WriteOutcome.REPLACED
    assert store.get_messages("m") == [UserMessage("other")]


def test_an_empty_memory_is_a_memory(store) -> None:
    assert write_memory(store, ExportedMemory("e", []), replace=False) is WriteOutcome.CREATED
    assert write_memory(store, ExportedMemory("e", []), replace=False) is WriteOutcome.UNCHANGED


def test_an_expired_export_is_not_written(store) -> None:
    gone = ExportedMemory("old", WINDOW, NOW - datetime.timedelta(seconds=1))
    assert write_memory(store, gone, replace=True, now=NOW) is WriteOutcome.EXPIRED
    assert store.get_messages("old") == []
    later = ExportedMemory("new", WINDOW, NOW + datetime.timedelta(hours=1))
    assert write_memory(store, later, replace=False, now=NOW) is WriteOutcome.CREATED


class Racing(InMemoryChatMemoryStore):
    """A store where another writer changes the memory between every read and write."""

    def load(self, memory_id):
        snapshot = super().load(memory_id)
        super().update_messages(memory_id, [UserMessage("someone else")])
        return snapshot


def test_a_memory_that_keeps_changing_is_given_up_with_the_attempts() -> None:
    store = Racing()
    store.update_messages("m", WINDOW)
    with pytest.raises(ConcurrentUpdateError) as raised:
        write_memory(store, ExportedMemory("m", [UserMessage("mine")]), replace=True)
    assert raised.value.attempts == 5


class Timed(InMemoryChatMemoryStore):
    """An in-memory store with the two optional time capabilities (as a store engineer would add them)."""

    def __init__(self) -> None:
        super().__init__()
        self.expiry: dict[str, datetime.datetime | None] = {}

    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        if not self.get_messages(memory_id):
            return None
        return MemoryTimes(NOW, self.expiry.get(memory_id))

    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        self.expiry[memory_id] = when


def test_the_expiry_travels_where_both_stores_can_tell_and_set_it() -> None:
    source, target = Timed(), Timed()
    assert isinstance(source, SupportsMemoryTimes)
    assert isinstance(target, SupportsExpiryAt)
    source.update_messages("m", WINDOW)
    source.expire_at("m", NOW + datetime.timedelta(hours=2))
    source.update_messages("forever", WINDOW)
    for memory_id in ("m", "forever"):
        read = StoreSource(source).read(memory_id)
        assert read is not None
        assert write_memory(target, read, replace=False) is WriteOutcome.CREATED
    assert target.expiry == {"m": NOW + datetime.timedelta(hours=2), "forever": None}


def test_a_source_without_times_exports_an_unknown_expiry(store) -> None:
    store.update_messages("m", WINDOW)
    read = StoreSource(store).read("m")
    assert read is not None
    assert read.messages == WINDOW
    if not isinstance(store, SupportsMemoryTimes):
        assert repr(read.expires_at) == "UNKNOWN_EXPIRY"
    assert StoreSource(store).read("nobody") is None


def test_memory_times_where_a_store_tells_them(store) -> None:
    if not isinstance(store, SupportsMemoryTimes):
        pytest.skip(f"{type(store).__name__} does not tell write and expiry times yet (SupportsMemoryTimes)")
    assert store.memory_times("nobody") is None
    before = datetime.datetime.now(datetime.timezone.utc)
    store.update_messages("m", WINDOW)
    after = datetime.datetime.now(datetime.timezone.utc)
    times = store.memory_times("m")
    assert times is not None
    assert times.last_write is not None
    slack = datetime.timedelta(seconds=5)  # the database's clock may differ a little from ours
    assert before - slack <= times.last_write <= after + slack
    assert times.expires_at is None  # the store has no ttl


def test_expire_at_where_a_store_can_set_it(store) -> None:
    if not isinstance(store, SupportsExpiryAt):
        pytest.skip(f"{type(store).__name__} cannot set one memory's expiry yet (SupportsExpiryAt)")
    store.expire_at("nobody", NOW + datetime.timedelta(hours=1))
    assert store.get_messages("nobody") == []
    store.update_messages("m", WINDOW)
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    store.expire_at("m", later)
    assert store.get_messages("m") == WINDOW
    if isinstance(store, SupportsMemoryTimes):
        times = store.memory_times("m")
        assert times is not None
        assert times.expires_at is not None
        assert abs(times.expires_at - later) < datetime.timedelta(seconds=1)
    store.expire_at("m", None)
    store.expire_at("m", datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1))
    assert store.get_messages("m") == []
