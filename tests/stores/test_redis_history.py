"""The Redis store's history on a real server and on Redis Cluster: what is recorded by each write path,
paging, expiry with the window or its own history_ttl, trimming, deletion, conflicts and concurrency, the
commands a write runs with and without history, and the asyncio store on the same histories."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator

import pytest
from redis.cluster import key_slot

from chatmemory import (
    ConcurrentUpdateError,
    HistoryNotEnabledError,
    SystemMessage,
    UserMessage,
    open_store,
)
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncStore
from chatmemory.core.history import HistoryEntry
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.redis import Redis, RedisChatMemoryStore, RedisCluster
from chatmemory.testing import ADVERSARIAL_IDS
from support.backends.redis import cluster_url, drop_prefix, fresh_prefix, private_server, raw_client, redis_url

UTC = datetime.timezone.utc


def _texts(count: int, tag: str = "m") -> list[ChatMessage]:
    return [UserMessage(f"{tag} {index}") for index in range(count)]


@pytest.fixture(params=["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(kind: str) -> Iterator[Redis | RedisCluster]:
    with raw_client(kind) as made:
        yield made


@pytest.fixture
def prefix(client: Redis | RedisCluster) -> Iterator[str]:
    chosen = fresh_prefix()
    yield chosen
    drop_prefix(client, chosen)


@pytest.fixture
def store(client: Redis | RedisCluster, prefix: str) -> RedisChatMemoryStore:
    return RedisChatMemoryStore(client, key_prefix=prefix, history=True, ttl=60)


def _all(store: RedisChatMemoryStore, memory_id: str, limit: int = 100, reverse: bool = False) -> list[HistoryEntry]:
    entries: list[HistoryEntry] = []
    after = None
    while True:
        page = store.history(memory_id, after=after, limit=limit, reverse=reverse)
        entries += page.entries
        if page.next_after is None:
            return entries
        after = page.next_after


def _history_key(store: RedisChatMemoryStore, memory_id: str) -> bytes:
    return store._key_space.keys_of(memory_id).history


# ------------------------------------------------------------------------------------ recording


def test_a_thousand_turns_keep_every_message_in_history_while_the_window_stays_bounded(
    store: RedisChatMemoryStore,
) -> None:
    system = SystemMessage("be brief")
    said = _texts(1000, "turn")
    window: list[ChatMessage] = [system]
    for message in said:
        window = [system, *window[1:], message][-10:] if len(window) >= 10 else [*window, message]
        if window[0] is not system:
            window = [system, *window[-9:]]
        store.update_messages("m", window)
    assert len(store.get_messages("m")) == 10 and store.get_messages("m")[0] == system
    forward = _all(store, "m", limit=97)
    assert [entry.message for entry in forward] == [system, *said]
    sequences = [entry.sequence for entry in forward]
    assert sequences == sorted(set(sequences))
    backward = _all(store, "m", limit=101, reverse=True)
    assert backward == forward[::-1]


def test_each_write_records_what_it_appends_with_one_server_time(store: RedisChatMemoryStore) -> None:
    messages = _texts(6)
    store.update_messages("m", messages[:3])
    store.update_messages("m", messages[1:5])  # evicts m0, appends m3 and m4
    store.update_messages("m", messages[1:5])  # changes nothing: records nothing
    store.update_messages("m", [messages[5]])  # a rewrite: records the new window
    entries = _all(store, "m")
    assert [entry.message for entry in entries] == [*messages[:5], messages[5]]
    assert [entry.sequence for entry in entries] == [1, 2, 3, 4, 5, 6]
    assert len({entry.written_at for entry in entries[:3]}) == 1
    seconds, micros = store.client.time()  # type: ignore[misc]
    server_now = datetime.datetime.fromtimestamp(seconds + micros / 1e6, UTC)
    assert all(abs(entry.written_at - server_now) < datetime.timedelta(seconds=5) for entry in entries)
    assert entries[0].written_at <= entries[3].written_at <= entries[5].written_at


def test_a_store_without_a_cache_records_the_same(client: Redis | RedisCluster, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, history=True, snapshot_cache_size=0)
    messages = _texts(4)
    store.update_messages("m", messages[:2])
    store.update_messages("m", messages[1:4])
    version = store.load("m").version
    store.save("m", messages[2:4], version)
    assert [entry.message for entry in _all(store, "m")] == messages


def test_a_write_that_loses_a_conflict_records_nothing(client: Redis | RedisCluster, prefix: str) -> None:
    first = RedisChatMemoryStore(client, key_prefix=prefix, history=True)
    second = RedisChatMemoryStore(client, key_prefix=prefix, history=True)
    version = first.save("m", [UserMessage("a")], 0)
    second.save("m", [UserMessage("a"), UserMessage("b")], version)
    with pytest.raises(ConcurrentUpdateError):
        first.save("m", [UserMessage("a"), UserMessage("lost")], version)
    with pytest.raises(ConcurrentUpdateError):
        first.save("m", [UserMessage("lost")], 0)
    assert [entry.message for entry in _all(first, "m")] == [UserMessage("a"), UserMessage("b")]


def test_concurrent_writers_record_each_message_once(client: Redis | RedisCluster, prefix: str) -> None:
    stores = [RedisChatMemoryStore(client, key_prefix=prefix, history=True) for _ in range(4)]

    def writer(store: RedisChatMemoryStore, tag: str) -> None:
        for index in range(15):
            while True:
                snapshot = store.load("m")
                try:
                    store.save("m", [*snapshot.messages[-4:], UserMessage(f"{tag}{index}")], snapshot.version)
                    break
                except ConcurrentUpdateError:
                    continue

    threads = [threading.Thread(target=writer, args=(store, f"w{n}-")) for n, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = _all(stores[0], "m")
    texts = [entry.message.text for entry in entries]  # type: ignore[attr-defined]
    assert sorted(texts) == sorted(f"w{n}-{index}" for n in range(4) for index in range(15))
    assert [entry.sequence for entry in entries] == list(range(1, 61))
    # Each writer's messages are in its own order.
    for n in range(4):
        assert [t for t in texts if t.startswith(f"w{n}-")] == [f"w{n}-{index}" for index in range(15)]


def test_raw_records_are_not_recorded_and_a_damaged_memory_replaced_records_its_new_window(
    store: RedisChatMemoryStore,
) -> None:
    store.update_messages("m", [UserMessage("a")])
    store.write_raw("m", [dumps_message(UserMessage("planted")), b"not a record"])
    assert [entry.message for entry in _all(store, "m")] == [UserMessage("a")]
    store.client.hset(store.keys_of("m")[0], "version", "banana")
    store.invalidate("m")
    store.update_messages("m", [UserMessage("b"), UserMessage("c")])
    assert [entry.message for entry in _all(store, "m")] == [UserMessage(t) for t in "abc"]
    assert [entry.sequence for entry in _all(store, "m")] == [1, 2, 3]


# --------------------------------------------------------------------------------------- paging


def test_pages_go_by_sequence_both_ways(store: RedisChatMemoryStore) -> None:
    store.update_messages("m", _texts(5))
    assert [e.sequence for e in store.history("m", after=2, limit=2).entries] == [3, 4]
    assert store.history("m", after=2, limit=2).next_after == 4
    assert store.history("m", after=3, limit=2).next_after is None
    assert [e.sequence for e in store.history("m", after=4, limit=2, reverse=True).entries] == [3, 2]
    assert store.history("m", after=2, limit=1, reverse=True).next_after is None
    assert [e.sequence for e in store.history("m", after=99, reverse=True).entries] == [5, 4, 3, 2, 1]
    assert store.history("m", after=5).entries == [] and store.history("m", after=1, reverse=True).entries == []
    assert store.history("nobody").entries == [] and store.history("nobody").next_after is None


# --------------------------------------------------------------------------------------- expiry


def _expiry_ms(client: Redis | RedisCluster, key: bytes) -> int:
    return int(client.execute_command("PEXPIRETIME", key))  # type: ignore[no-untyped-call]


def test_without_history_ttl_the_history_expires_with_the_window(client: Redis | RedisCluster, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, history=True, ttl=60, refresh_ttl_on_read=True)
    store.update_messages("m", _texts(2))
    meta, _ = store.keys_of("m")
    assert _expiry_ms(client, _history_key(store, "m")) == _expiry_ms(client, meta) > 0
    time.sleep(0.01)
    before = _expiry_ms(client, meta)
    store.get_messages("m")  # slides both
    assert _expiry_ms(client, _history_key(store, "m")) == _expiry_ms(client, meta) > before
    store.expire_at("m", None)
    assert client.pttl(_history_key(store, "m")) == -1


def test_with_history_ttl_the_history_outlives_the_window_and_continues(
    client: Redis | RedisCluster, prefix: str
) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, history=True, ttl=30, history_ttl=600)
    store.update_messages("m", _texts(2))
    assert 590_000 < client.pttl(_history_key(store, "m")) <= 600_000
    store.expire_at("m", datetime.datetime(2000, 1, 1, tzinfo=UTC))  # the window goes, not the history
    assert store.get_messages("m") == [] and client.exists(_history_key(store, "m")) == 1
    store.update_messages("m", [UserMessage("again")])
    assert [e.sequence for e in _all(store, "m")] == [1, 2, 3]
    assert _all(store, "m")[-1].message == UserMessage("again")


def test_the_history_expires_for_real(client: Redis | RedisCluster, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, history=True, ttl=0.3)
    store.update_messages("m", _texts(2))
    time.sleep(0.6)
    assert store.history("m").entries == [] and client.exists(_history_key(store, "m")) == 0


def test_delete_removes_the_window_and_the_history_even_from_a_store_without_history(
    store: RedisChatMemoryStore, client: Redis | RedisCluster, prefix: str
) -> None:
    store.update_messages("m", _texts(2))
    RedisChatMemoryStore(client, key_prefix=prefix).delete_messages("m")
    assert client.exists(*store.keys_of("m"), _history_key(store, "m")) == 0
    store.update_messages("m", _texts(1))
    store.delete_messages("m")
    assert store.history("m").entries == []


# ----------------------------------------------------------------------------------------- trim


def test_trim_removes_old_entries_of_one_memory_or_all_and_never_the_window(store: RedisChatMemoryStore) -> None:
    store.update_messages("a", _texts(3, "a"))
    store.update_messages("b", _texts(2, "b"))
    time.sleep(0.05)
    cutoff = datetime.datetime.now(UTC)
    time.sleep(0.05)
    store.update_messages("a", _texts(4, "a"))
    assert store.trim_history(older_than=datetime.timedelta(hours=1)) == 0
    assert store.trim_history(older_than=cutoff, memory_id="a") == 3
    assert [e.message for e in _all(store, "a")] == [UserMessage("a 3")]
    assert [e.sequence for e in _all(store, "a")] == [4]
    assert store.trim_history(older_than=datetime.timedelta(0)) == 3
    assert _all(store, "a") == [] and _all(store, "b") == []
    assert store.get_messages("a") == _texts(4, "a") and store.get_messages("b") == _texts(2, "b")
    store.update_messages("a", [*_texts(4, "a"), UserMessage("next")])
    assert [e.sequence for e in _all(store, "a")] == [5]
    assert store.trim_history(older_than=cutoff, memory_id="nobody") == 0


# ----------------------------------------------------------------------------------- the options


def test_a_store_without_history_refuses_history_calls_after_checking_their_arguments(
    client: Redis | RedisCluster, prefix: str
) -> None:
    plain = RedisChatMemoryStore(client, key_prefix=prefix)
    assert not plain.keeps_history
    with pytest.raises(HistoryNotEnabledError, match="RedisChatMemoryStore"):
        plain.history("m")
    with pytest.raises(HistoryNotEnabledError):
        plain.trim_history(older_than=datetime.timedelta(0))
    with pytest.raises(ValueError, match="limit"):
        plain.history("m", limit=0)
    with pytest.raises(TypeError):
        plain.trim_history(older_than=3)  # type: ignore[arg-type]


def test_history_options_are_checked_at_construction(client: Redis | RedisCluster, prefix: str) -> None:
    with pytest.raises(ValueError, match="history=True"):
        RedisChatMemoryStore(client, key_prefix=prefix, history_ttl=60)
    with pytest.raises(ValueError, match="at least ttl"):
        RedisChatMemoryStore(client, key_prefix=prefix, history=True, ttl=60, history_ttl=30)
    with pytest.raises(TypeError):
        RedisChatMemoryStore(client, key_prefix=prefix, history="yes")  # type: ignore[arg-type]
    made = RedisChatMemoryStore(client, key_prefix=prefix, history=True, history_ttl=datetime.timedelta(days=1))
    assert made.keeps_history and "history=True" in repr(made)


def test_open_store_passes_the_history_options(kind: str) -> None:
    url = cluster_url() if kind == "cluster" else redis_url()
    made = open_store(url, history=True, history_ttl=120, key_prefix=fresh_prefix())
    try:
        assert isinstance(made, RedisChatMemoryStore) and made.keeps_history
    finally:
        made.close()


@pytest.mark.parametrize("memory_id", [*ADVERSARIAL_IDS, "{", "}", "a{b}c", "{*}:history"])
def test_the_history_key_shares_the_memory_slot_and_maps_back_to_its_id(
    store: RedisChatMemoryStore, memory_id: str
) -> None:
    keys = store._key_space.keys_of(memory_id)
    assert key_slot(keys.history) == key_slot(keys.meta)
    assert store._key_space.id_of_history_key(keys.history) == memory_id


# ---------------------------------------------------------------------------- commands per turn


def _commands(client: Redis) -> dict[str, int]:
    return {
        name.removeprefix("cmdstat_"): stats["calls"]
        for name, stats in client.info("commandstats").items()
        if not name.startswith("cmdstat_config")
    }


def test_a_turn_runs_seven_commands_in_its_script_and_with_history_three_more() -> None:
    with private_server() as client:
        counts = {}
        for history in (False, True):
            store = RedisChatMemoryStore(client, key_prefix=f"h{history}:", ttl=60, history=history)
            window = _texts(20)
            store.update_messages("m", window)
            store.get_messages("m")  # the read script is known to the server from here on
            client.config_resetstat()
            store.update_messages("m", [*window[1:], UserMessage("new")])
            written = _commands(client)
            client.config_resetstat()
            store.get_messages("m")
            counts[history] = (written, _commands(client))
        # Without history the append comes first and its reply is the list's length: no LLEN.
        plain_write = {"evalsha": 1, "time": 1, "hmget": 1, "ltrim": 1, "rpush": 1, "hset": 1, "pexpireat": 2}
        assert counts[False][0] == plain_write
        assert counts[True][0] == {**plain_write, "llen": 1, "rpush": 2, "pexpireat": 3}
        assert counts[False][1] == counts[True][1] == {"evalsha": 1, "hmget": 1, "llen": 1}


# -------------------------------------------------------------------------------------- asyncio


@pytest.mark.asyncio
async def test_the_asyncio_store_records_pages_trims_and_deletes_the_same_histories(
    kind: str, client: Redis | RedisCluster, prefix: str
) -> None:
    url = cluster_url() if kind == "cluster" else redis_url()
    blocking = RedisChatMemoryStore(client, key_prefix=prefix, history=True, ttl=60)
    async with AsyncStore(url, key_prefix=prefix, history=True, ttl=60) as store:
        assert store.keeps_history
        await store.update_messages("m", _texts(3))
        blocking.update_messages("m", _texts(5))
        await store.update_messages("m", [*_texts(5)[2:], UserMessage("async")])
        page = await store.history("m", after=4, limit=10)
        assert [e.sequence for e in page.entries] == [5, 6] and page.next_after is None
        assert [e.message for e in _all(blocking, "m")] == [*_texts(5), UserMessage("async")]
        newest = await store.history("m", limit=2, reverse=True)
        assert [e.sequence for e in newest.entries] == [6, 5] and newest.next_after == 5
        version = (await store.load("m")).version
        blocking.update_messages("m", [UserMessage("moved")])
        with pytest.raises(ConcurrentUpdateError):
            await store.save("m", [UserMessage("lost")], version)
        assert (await store.history("m", reverse=True, limit=1)).messages == [UserMessage("moved")]
        assert await store.trim_history(older_than=datetime.timedelta(0), memory_id="m") == 7
        await store.update_messages("other", _texts(2))
        assert await store.trim_history(older_than=datetime.timedelta(0)) == 2
        await store.delete_messages("m")
        assert client.exists(_history_key(blocking, "m")) == 0
    async with AsyncStore(url, key_prefix=prefix) as plain:
        with pytest.raises(HistoryNotEnabledError):
            await plain.history("m")
