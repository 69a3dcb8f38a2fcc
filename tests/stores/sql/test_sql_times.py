"""One memory's write and expiry times in the SQL stores, sync and async: the cache, the ttl, the dialects."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

from chatmemory import UserMessage
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLStore
from chatmemory.memory_times import SupportsExpiryAt, SupportsMemoryTimes
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends.sqlite import SQLBackend

UTC = datetime.timezone.utc
SLACK = datetime.timedelta(seconds=5)  # the database's clock may differ a little from ours
WINDOW = [UserMessage("a"), UserMessage("b")]


@pytest.fixture
def store(sql_backend: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = sql_backend.make_store()
    yield made
    sql_backend.close_store(made)


def now() -> datetime.datetime:
    return datetime.datetime.now(UTC)


def test_an_expiry_set_elsewhere_is_not_hidden_by_a_cached_snapshot(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    other = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix)
    try:
        version = store.save("m", WINDOW, 0)
        assert store.load("m").messages == WINDOW  # cached here
        other.expire_at("m", now() - datetime.timedelta(seconds=1))
        assert store.load("m").version == 0
        assert store.get_messages("m") == []
        assert store.memory_times("m") is None
        assert list(store.memory_ids()) == []
        # Created afresh, as after its ttl ran out; the old version no longer matches.
        assert store.save("m", [UserMessage("new")], 0) > version
        assert other.get_messages("m") == [UserMessage("new")]
    finally:
        other.close()


def test_the_ttl_shows_and_an_expiry_of_none_keeps_the_memory_until_the_next_write(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    expiring = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix, ttl=3600)
    try:
        assert isinstance(expiring, SupportsMemoryTimes)
        assert isinstance(expiring, SupportsExpiryAt)
        expiring.update_messages("m", WINDOW)
        times = expiring.memory_times("m")
        assert times is not None and times.last_write is not None and times.expires_at is not None
        assert times.last_write.tzinfo is not None and times.expires_at.utcoffset() == datetime.timedelta(0)
        assert abs(times.expires_at - (now() + datetime.timedelta(hours=1))) < SLACK
        expiring.expire_at("m", None)
        times = expiring.memory_times("m")
        assert times is not None and times.expires_at is None
        expiring.update_messages("m", [UserMessage("c")])
        times = expiring.memory_times("m")
        assert times is not None and times.expires_at is not None  # the write slid it by the ttl again
    finally:
        expiring.close()


def test_any_time_zone_and_any_past_time(store: SQLChatMemoryStore) -> None:
    store.update_messages("m", WINDOW)
    tokyo = datetime.timezone(datetime.timedelta(hours=9))
    later = (now() + datetime.timedelta(days=3)).astimezone(tokyo)
    store.expire_at("m", later)
    times = store.memory_times("m")
    assert times is not None and times.expires_at is not None
    assert abs(times.expires_at - later) < datetime.timedelta(milliseconds=1)
    assert store.get_messages("m") == WINDOW
    store.expire_at("m", datetime.datetime(1, 1, 1, tzinfo=UTC))  # before any column type's range
    assert store.get_messages("m") == []
    store.expire_at("m", None)  # an expired memory stays expired until purged or written afresh
    assert store.get_messages("m") == []
    store.expire_at("gone", None)
    assert store.memory_times("gone") is None
    with pytest.raises(ValueError, match="aware datetime"):
        store.expire_at("m", datetime.datetime(2030, 1, 1))  # naive: refused


@pytest.mark.asyncio
async def test_the_async_store_tells_and_sets_the_same_times(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    async with AsyncSQLStore(sql_backend.url, table_prefix=store.table_prefix) as aio_store:
        assert await aio_store.memory_times("m") is None
        await aio_store.expire_at("m", now())
        assert await aio_store.get_messages("m") == []
        await aio_store.update_messages("m", WINDOW)
        times = await aio_store.memory_times("m")
        assert times is not None and times.last_write is not None and times.expires_at is None
        assert abs(times.last_write - now()) < SLACK
        later = now() + datetime.timedelta(hours=2)
        await aio_store.expire_at("m", later)
        assert store.memory_times("m") == await aio_store.memory_times("m")
        times = store.memory_times("m")
        assert times is not None and times.expires_at is not None
        assert abs(times.expires_at - later) < datetime.timedelta(milliseconds=1)
        assert (await aio_store.load("m")).messages == WINDOW  # cached
        store.expire_at("m", now() - datetime.timedelta(seconds=1))
        assert await aio_store.get_messages("m") == []
        with pytest.raises(ValueError, match="aware datetime"):
            await aio_store.expire_at("m", datetime.datetime(2030, 1, 1))


# A session time zone is PostgreSQL's (SQLite and MySQL DATETIME keep UTC): this case runs there only.
@pytest.mark.parametrize("sql_backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_a_postgresql_session_in_another_time_zone_keeps_the_instant(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    tokyo = SQLChatMemoryStore(
        sql_backend.url,
        table_prefix=store.table_prefix,
        engine_options={"connect_args": {"options": "-c timezone=Asia/Tokyo"}},
    )
    try:
        tokyo.update_messages("m", WINDOW)
        later = now() + datetime.timedelta(hours=1)
        tokyo.expire_at("m", later)
        for seen in (tokyo, store):
            times = seen.memory_times("m")
            assert times is not None and times.expires_at is not None and times.last_write is not None
            assert abs(times.expires_at - later) < datetime.timedelta(milliseconds=1)
            assert abs(times.last_write - now()) < SLACK
    finally:
        tokyo.close()
