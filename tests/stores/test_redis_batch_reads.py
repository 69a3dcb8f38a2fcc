"""Batch reads on Redis: one run of ``stored.lua`` per memory tells what the read and the times scripts tell.

Each memory of a batch is read by one script run (records, version, last write and expiry together), on
a server and a cluster; damaged memories come back with their records and what is left of their times.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

from chatmemory import StoreError, UserMessage
from chatmemory.stores.redis import Redis, RedisChatMemoryStore, RedisCluster
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.outcomes import stored_of
from chatmemory.stores.redis.plan import stored_call
from chatmemory.stores.redis.scripts import STORED
from support.backends.redis import drop_prefix, fresh_prefix, raw_client

WINDOW = [UserMessage("a"), UserMessage("b")]
HOUR = datetime.timedelta(hours=1)


@pytest.fixture(params=["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def client(request: pytest.FixtureRequest) -> Iterator[Redis | RedisCluster]:
    with raw_client(request.param) as made:
        yield made


@pytest.fixture
def store(client: Redis | RedisCluster) -> Iterator[RedisChatMemoryStore]:
    prefix = fresh_prefix()
    yield RedisChatMemoryStore(client, key_prefix=prefix)
    drop_prefix(client, prefix)


def test_each_memory_is_what_the_read_and_the_times_scripts_tell(store: RedisChatMemoryStore) -> None:
    store.update_messages("kept", WINDOW)
    store.update_messages("expiring", WINDOW[:1])
    store.expire_at("expiring", datetime.datetime.now(datetime.timezone.utc) + HOUR)
    kept, expiring, absent = store.read_batch(["kept", "expiring", "absent"])
    assert absent is None
    for memory_id, stored in (("kept", kept), ("expiring", expiring)):
        assert stored is not None and stored.damage is None
        assert stored.records == store.read_raw(memory_id)
        assert stored.version == store.load(memory_id).version
        assert stored.times == store.memory_times(memory_id)
    assert kept is not None and kept.times is not None and kept.times.expires_at is None
    assert expiring is not None and expiring.times is not None and expiring.times.expires_at is not None


def test_damaged_memories_come_with_their_records_and_what_is_left_of_their_times(
    client: Redis | RedisCluster, store: RedisChatMemoryStore
) -> None:
    store.update_messages("versionless", WINDOW)
    meta, _ = store.keys_of("versionless")
    client.hdel(meta, "version")  # the metadata is there, its write time too, its version is not
    _, messages = store.keys_of("listed")
    client.rpush(messages, b"record")  # a list whose metadata was evicted
    client.pexpire(messages, 60_000)
    versionless, listed = store.read_batch(["versionless", "listed"])
    assert versionless is not None and versionless.damage == "its metadata has no version"
    assert versionless.records == store.read_raw("versionless") and versionless.version == 0
    assert versionless.times == store.memory_times("versionless")
    assert versionless.times is not None and versionless.times.last_write is not None
    assert listed is not None and listed.damage and listed.records == [b"record"]
    assert listed.times == store.memory_times("listed")
    assert listed.times is not None and listed.times.last_write is None and listed.times.expires_at is not None


def test_before_redis_7_the_expiry_comes_from_pttl_and_the_clock(
    client: Redis | RedisCluster, store: RedisChatMemoryStore
) -> None:
    store.update_messages("m", WINDOW)
    store.expire_at("m", datetime.datetime.now(datetime.timezone.utc) + HOUR)
    call = stored_call(store._key_space, "m")
    # The same script where PEXPIRETIME is an unknown command, as on Redis 5 and 6.
    older = STORED.source.replace("'PEXPIRETIME'", "'PEXPIRETIME-BEFORE-7'")
    stored = stored_of(call, client.eval(older, 2, call.keys.meta, call.keys.messages))
    exact = store.memory_times("m")
    assert stored is not None and stored.times is not None and exact is not None
    assert stored.times.last_write == exact.last_write
    assert stored.times.expires_at is not None and exact.expires_at is not None
    # Late by the time between the script's start and its TIME (see the times script's test).
    assert datetime.timedelta(0) <= stored.times.expires_at - exact.expires_at <= datetime.timedelta(milliseconds=100)


@pytest.mark.parametrize(
    "reply",
    [1, [b"m", b"x", b"1", b"", b"", []], [b"m", b"1", b"1", b"soon", b"", []], [b"c", b"why", b"", b""], [b"?"]],
)
def test_a_reply_the_script_never_gives_is_a_store_error(reply: object) -> None:
    call = stored_call(KeySpace("p:"), "m")
    with pytest.raises(StoreError, match="stored"):
        stored_of(call, reply)
