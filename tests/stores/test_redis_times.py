"""Operators' times on Redis: a memory's last write (server clock, kept in its metadata) and its expiry
(both keys at once), on a server and a cluster, blocking and asyncio."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

from chatmemory import StoreError, UserMessage
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncStore
from chatmemory.memory_times import SupportsExpiryAt, SupportsMemoryTimes
from chatmemory.stores.redis import Redis, RedisChatMemoryStore, RedisCluster
from chatmemory.stores.redis.outcomes import times_of
from chatmemory.stores.redis.plan import times_call
from chatmemory.stores.redis.scripts import TIMES
from support.backends.redis import cluster_url, drop_prefix, fresh_prefix, raw_client, redis_url

WINDOW = [UserMessage("a"), UserMessage("b")]
SECOND = datetime.timedelta(seconds=1)


@pytest.fixture(params=["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def client(request: pytest.FixtureRequest) -> Iterator[Redis | RedisCluster]:
    with raw_client(request.param) as made:
        yield made


@pytest.fixture
def prefix(client: Redis | RedisCluster) -> Iterator[str]:
    chosen = fresh_prefix()
    yield chosen
    drop_prefix(client, chosen)


def _server_now(client: Redis | RedisCluster) -> datetime.datetime:
    seconds, micros = client.time()
    return datetime.datetime.fromtimestamp(seconds + micros / 1e6, datetime.timezone.utc)


def test_the_last_write_is_the_server_clock_kept_in_the_metadata_not_the_version(
    client: Redis | RedisCluster, prefix: str
) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix)
    assert isinstance(store, SupportsMemoryTimes)
    assert isinstance(store, SupportsExpiryAt)
    assert store.memory_times("m") is None
    store.update_messages("m", WINDOW)
    times = store.memory_times("m")
    assert times is not None
    assert times.last_write is not None
    assert abs(times.last_write - _server_now(client)) < SECOND
    assert times.expires_at is None
    meta, _ = store.keys_of("m")
    client.hset(meta, "version", "1")  # a version says nothing of time
    assert store.memory_times("m") == times
    client.hdel(meta, "written")  # written by an earlier version of the store: unknown, not guessed
    assert store.memory_times("m") == type(times)(None, None)


def _server_ms(client: Redis | RedisCluster) -> datetime.datetime:
    """The server clock now, cut to the millisecond (as a write keeps it)."""
    now = _server_now(client)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@pytest.mark.parametrize("history", [False, True], ids=["window", "history"])
def test_every_write_keeps_the_millisecond_the_server_clock_read(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    # Each kind of write the script makes: a first write (the whole list), then diffs (without history,
    # the common turn's short path), each between two readings of the server clock.
    store = RedisChatMemoryStore(client, key_prefix=prefix, ttl=600, history=history)
    window = list(WINDOW)
    for turn in range(6):
        window.append(UserMessage(f"turn {turn}"))
        before = _server_ms(client)
        store.update_messages("m", window[-4:])
        after = _server_ms(client)
        times = store.memory_times("m")
        assert times is not None and times.last_write is not None
        assert before <= times.last_write <= after, (turn, before, times.last_write, after)
        assert times.expires_at == times.last_write + datetime.timedelta(seconds=600)
        if history:
            entry = store.history("m", reverse=True, limit=1).entries[0]
            assert entry.written_at == times.last_write


def test_the_expiry_is_the_servers_for_a_store_with_a_ttl(client: Redis | RedisCluster, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, ttl=600)
    store.update_messages("m", WINDOW)
    times = store.memory_times("m")
    assert times is not None and times.last_write is not None and times.expires_at is not None
    assert abs(times.expires_at - times.last_write - datetime.timedelta(seconds=600)) < SECOND


def test_expire_at_sets_and_clears_both_keys_together(client: Redis | RedisCluster, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, ttl=600)
    store.update_messages("m", WINDOW)
    keys = store.keys_of("m")
    when = _server_now(client) + datetime.timedelta(hours=3)
    store.expire_at("m", when)
    expected_ms = int(when.timestamp() * 1000)
    assert [client.pexpiretime(key) for key in keys] == [expected_ms] * 2
    times = store.memory_times("m")
    assert times is not None and times.expires_at is not None
    assert abs(times.expires_at - when) < datetime.timedelta(milliseconds=1)
    store.expire_at("m", None)
    assert [client.pttl(key) for key in keys] == [-1, -1]
    assert store.memory_times("m") == type(times)(times.last_write, None)
    store.update_messages("m", [*WINDOW, UserMessage("c")])  # the next write slides it by the ttl again
    assert all(0 < client.pttl(key) <= 600_000 for key in keys)
    store.expire_at("m", _server_now(client) - SECOND)
    assert client.exists(*keys) == 0
    assert store.get_messages("m") == []
    store.expire_at("nobody", when)
    assert client.exists(*store.keys_of("nobody")) == 0
    with pytest.raises(ValueError, match="aware datetime"):
        store.expire_at("m", datetime.datetime(2030, 1, 1))  # naive on purpose


def test_a_damaged_memory_still_tells_what_is_left(client: Redis | RedisCluster, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix)
    meta, messages = store.keys_of("m")
    client.rpush(messages, b"record")
    client.pexpire(messages, 60_000)
    times = store.memory_times("m")  # its metadata was evicted: no write time, the list's expiry
    assert times is not None and times.last_write is None and times.expires_at is not None
    client.delete(messages)
    client.set(meta, b"not a hash")
    assert store.memory_times("m") == type(times)(None, None)


def test_before_redis_7_the_expiry_comes_from_pttl_and_the_clock(client: Redis | RedisCluster, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, ttl=600)
    store.update_messages("m", WINDOW)
    call = times_call(store._key_space, "m")
    # The same script where PEXPIRETIME is an unknown command, as on Redis 5 and 6.
    older = TIMES.source.replace("'PEXPIRETIME'", "'PEXPIRETIME-BEFORE-7'")
    times = times_of(call, client.eval(older, 2, call.keys.meta, call.keys.messages))
    exact = store.memory_times("m")
    assert times is not None and exact is not None and times.expires_at is not None and exact.expires_at is not None
    assert times.last_write == exact.last_write
    # The script judges expiry at its start and reads TIME as it runs: the sum is late by the time between
    # (a millisecond or so; more if the server is descheduled in between on a loaded machine).
    assert datetime.timedelta(0) <= times.expires_at - exact.expires_at <= datetime.timedelta(milliseconds=100)
    store.expire_at("m", None)
    assert times_of(call, client.eval(older, 2, call.keys.meta, call.keys.messages)) == store.memory_times("m")


def test_a_closed_store_refuses(prefix: str) -> None:
    store = RedisChatMemoryStore(redis_url(), key_prefix=prefix)
    store.close()
    with pytest.raises(StoreError):
        store.memory_times("m")
    with pytest.raises(StoreError):
        store.expire_at("m", None)


@pytest.mark.asyncio
async def test_the_asyncio_store_tells_and_sets_the_same_times(client: Redis | RedisCluster, prefix: str) -> None:
    url = redis_url() if isinstance(client, Redis) else cluster_url()
    blocking = RedisChatMemoryStore(client, key_prefix=prefix, ttl=600)
    async with AsyncStore(url, key_prefix=prefix, ttl=600) as store:
        assert await store.memory_times("m") is None
        await store.update_messages("m", WINDOW)
        times = await store.memory_times("m")
        assert times is not None and times == blocking.memory_times("m")
        assert times.last_write is not None and abs(times.last_write - _server_now(client)) < SECOND
        when = _server_now(client) + datetime.timedelta(hours=1)
        await store.expire_at("m", when)
        assert blocking.memory_times("m") == type(times)(
            times.last_write, when.replace(microsecond=when.microsecond // 1000 * 1000)
        )
        await store.expire_at("m", None)
        assert [client.pttl(key) for key in blocking.keys_of("m")] == [-1, -1]
    with pytest.raises(StoreError):
        await store.memory_times("m")
