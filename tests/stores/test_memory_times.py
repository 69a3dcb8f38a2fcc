"""One memory's write and expiry times in the in-memory stores, sync and async, on a controlled clock."""

from __future__ import annotations

import datetime

import pytest

from chatmemory import InMemoryChatMemoryStore, UserMessage, aio
from chatmemory.memory_times import SupportsExpiryAt, SupportsMemoryTimes

UTC = datetime.timezone.utc
WINDOW = [UserMessage("a")]
CLOSE = datetime.timedelta(seconds=1)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def now() -> datetime.datetime:
    return datetime.datetime.now(UTC)


def test_the_ttl_shows_and_the_expiry_follows_the_store_clock() -> None:
    clock = Clock()
    store = InMemoryChatMemoryStore(ttl=60, clock=clock)
    assert isinstance(store, SupportsMemoryTimes) and isinstance(store, SupportsExpiryAt)
    assert store.memory_times("m") is None
    store.update_messages("m", WINDOW)
    times = store.memory_times("m")
    assert times is not None and times.last_write is not None and times.expires_at is not None
    assert abs(times.last_write - now()) < CLOSE
    assert abs(times.expires_at - (now() + datetime.timedelta(seconds=60))) < CLOSE
    store.expire_at("m", now() + datetime.timedelta(seconds=10))
    clock.now += 9
    assert store.get_messages("m") == WINDOW
    clock.now += 2
    assert store.get_messages("m") == []
    assert store.memory_times("m") is None


def test_none_keeps_it_the_next_write_slides_it_and_the_past_expires_it() -> None:
    clock = Clock()
    store = InMemoryChatMemoryStore(ttl=60, clock=clock)
    store.write_raw("m", [b'{"v":1}'])
    store.expire_at("m", None)
    clock.now += 3600
    times = store.memory_times("m")
    assert times is not None and times.expires_at is None
    store.update_messages("m", WINDOW)
    times = store.memory_times("m")
    assert times is not None and times.expires_at is not None
    store.expire_at("m", datetime.datetime(1, 1, 1, tzinfo=UTC))
    assert list(store.memory_ids()) == []
    store.expire_at("m", None)  # an expired memory stays expired; nothing is created
    store.expire_at("nobody", now())
    assert store.load("m").version == 0 and store.memory_times("nobody") is None
    with pytest.raises(ValueError, match="aware datetime"):
        store.expire_at("m", datetime.datetime(2030, 1, 1))  # naive: refused


@pytest.mark.asyncio
async def test_the_async_twin_tells_and_sets_the_same() -> None:
    store = aio.InMemoryChatMemoryStore()
    await store.update_messages("m", WINDOW)
    times = await store.memory_times("m")
    assert times is not None and times.expires_at is None
    later = now() + datetime.timedelta(hours=1)
    await store.expire_at("m", later)
    times = await store.memory_times("m")
    assert times is not None and times.expires_at is not None
    assert abs(times.expires_at - later) < CLOSE
    await store.expire_at("m", now() - CLOSE)
    assert await store.get_messages("m") == []
