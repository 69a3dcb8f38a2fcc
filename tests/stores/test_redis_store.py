"""Redis store specifics: key layout, hash slots, listing with glob characters, TTL over every key,
client ownership, and how driver errors and damaged keys surface. The contract suite covers the rest."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from redis.cluster import key_slot

from chatmemory import (
    CorruptedMemoryError,
    MessageWindowChatMemory,
    StoreError,
    SystemMessage,
    UserMessage,
    open_store,
)
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.redis import Redis, RedisChatMemoryStore, RedisCluster
from chatmemory.testing import ADVERSARIAL_IDS
from support.backends.redis import cluster_url, drop_prefix, fresh_prefix, redis_url

BRACE_IDS = ("{", "}", "{}", "}{", "a{b}c", "{a}", "%7B", "%7Ba%7D", "%", "{*}:meta", "a}:meta")


@pytest.fixture(scope="module")
def client() -> Iterator[Redis]:
    made = Redis.from_url(redis_url())
    yield made
    made.close()


@pytest.fixture
def prefix(client: Redis) -> Iterator[str]:
    chosen = fresh_prefix()
    yield chosen
    drop_prefix(client, chosen)


@pytest.fixture
def store(client: Redis, prefix: str) -> RedisChatMemoryStore:
    return RedisChatMemoryStore(client, key_prefix=prefix)


def _texts(count: int, tag: str = "m") -> list[UserMessage]:
    return [UserMessage(f"{tag} {index}") for index in range(count)]


# ------------------------------------------------------------------------------------------- keys


@pytest.mark.parametrize("memory_id", [*ADVERSARIAL_IDS, *BRACE_IDS])
def test_both_keys_of_a_memory_share_one_slot_whatever_the_id(store: RedisChatMemoryStore, memory_id: str) -> None:
    meta, messages = store.keys_of(memory_id)
    assert key_slot(meta) == key_slot(messages)
    # The hash tag is the escaped id alone: no brace of the id opens or closes it.
    tag = meta[meta.index(b"{") + 1 : meta.index(b"}")]
    assert b"{" not in tag
    assert key_slot(meta) == key_slot(tag)


def test_ids_with_braces_are_distinct_memories(store: RedisChatMemoryStore) -> None:
    for index, memory_id in enumerate(BRACE_IDS):
        store.update_messages(memory_id, [UserMessage(f"for {index}")])
    for index, memory_id in enumerate(BRACE_IDS):
        assert store.get_messages(memory_id) == [UserMessage(f"for {index}")]
    assert sorted(store.memory_ids()) == sorted(BRACE_IDS)


def test_listing_takes_ids_and_prefix_literally(client: Redis) -> None:
    # One prefix is a glob that would match the other's keys if it leaked into the SCAN pattern.
    base = f"cmtest:{uuid.uuid4().hex[:12]}:"
    globbing = RedisChatMemoryStore(client, key_prefix=base + "*")
    plain = RedisChatMemoryStore(client, key_prefix=base + "x")
    try:
        plain.update_messages("other", _texts(1))
        ids = ["*", "?", "[a-z]", "\\", "a*b"]
        for memory_id in ids:
            globbing.update_messages(memory_id, _texts(1))
        assert sorted(globbing.memory_ids()) == sorted(ids)
        assert list(plain.memory_ids()) == ["other"]
    finally:
        drop_prefix(client, base + "*")
        drop_prefix(client, base + "x")


def test_listing_skips_keys_this_store_did_not_write(client: Redis, store: RedisChatMemoryStore, prefix: str) -> None:
    store.update_messages("mine", _texts(1))
    client.hset(prefix.encode() + b"{bad}x}:meta", "version", "1")
    client.hset(prefix.encode() + b"{50%}:meta", "version", "1")
    assert list(store.memory_ids()) == ["mine"]


# -------------------------------------------------------------------------------------------- TTL


def _expiries(client: Redis, store: RedisChatMemoryStore, memory_id: str) -> list[int]:
    return [int(client.execute_command("PEXPIRETIME", key)) for key in store.keys_of(memory_id)]


def test_every_write_gives_every_key_the_same_expiry(client: Redis, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, ttl=60)
    memory = MessageWindowChatMemory("m", store=store, max_messages=3, always_keep_system_message_first=True)
    memory.add(SystemMessage("be brief"))
    seen: list[int] = []
    for turn in range(6):  # full writes, then diffs behind the system message
        memory.add(UserMessage(f"turn {turn}"))
        meta_expiry, list_expiry = _expiries(client, store, "m")
        assert meta_expiry == list_expiry > 0
        seen.append(meta_expiry)
        time.sleep(0.002)
    assert seen == sorted(seen) and seen[0] < seen[-1]  # each write slid the expiry


def test_a_list_emptied_and_refilled_keeps_the_memory_expiry(client: Redis, prefix: str) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, ttl=60)
    version = store.save("m", _texts(2), 0)
    version = store.save("m", [], version)
    store.save("m", _texts(1, "again"), version)
    meta_expiry, list_expiry = _expiries(client, store, "m")
    assert meta_expiry == list_expiry > 0


def test_a_store_without_ttl_makes_the_whole_memory_permanent(client: Redis, prefix: str) -> None:
    expiring = RedisChatMemoryStore(client, key_prefix=prefix, ttl=60)
    permanent = RedisChatMemoryStore(client, key_prefix=prefix)
    expiring.update_messages("m", _texts(2))
    permanent.update_messages("m", _texts(3))
    assert _expiries(client, permanent, "m") == [-1, -1]


def test_reads_slide_the_expiry_only_when_asked(client: Redis, prefix: str) -> None:
    writer = RedisChatMemoryStore(client, key_prefix=prefix, ttl=60)
    plain_reader = RedisChatMemoryStore(client, key_prefix=prefix, ttl=60)
    sliding_reader = RedisChatMemoryStore(client, key_prefix=prefix, ttl=60, refresh_ttl_on_read=True)
    writer.update_messages("m", _texts(2))
    written = _expiries(client, writer, "m")
    time.sleep(0.01)
    assert plain_reader.get_messages("m") == _texts(2)
    assert _expiries(client, writer, "m") == written
    assert sliding_reader.get_messages("m") == _texts(2)
    slid = _expiries(client, writer, "m")
    assert slid[0] == slid[1] > written[0]


@pytest.mark.parametrize("ttl", [0, -1])
def test_ttl_must_be_positive(client: Redis, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        RedisChatMemoryStore(client, ttl=ttl)


# --------------------------------------------------------------------------------- caching, diffs


def test_a_store_sees_writes_made_through_another(client: Redis, prefix: str) -> None:
    first = RedisChatMemoryStore(client, key_prefix=prefix)
    second = RedisChatMemoryStore(client, key_prefix=prefix)
    first.update_messages("m", _texts(3, "a"))
    assert second.get_messages("m") == _texts(3, "a")
    second.update_messages("m", _texts(3, "a")[1:] + _texts(1, "b"))
    assert first.get_messages("m") == _texts(3, "a")[1:] + _texts(1, "b")
    second.delete_messages("m")
    assert first.get_messages("m") == []


@pytest.mark.parametrize("snapshot_cache_size", [0, 1, 1024])
@pytest.mark.parametrize("system_first", [False, True])
def test_window_matches_a_plain_list_whatever_the_cache(
    client: Redis, prefix: str, snapshot_cache_size: int, system_first: bool
) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, snapshot_cache_size=snapshot_cache_size)
    memory = MessageWindowChatMemory("m", store=store, max_messages=5, always_keep_system_message_first=system_first)
    other = MessageWindowChatMemory("other", store=store, max_messages=5)
    expected: list[UserMessage | SystemMessage] = [SystemMessage("sys")]
    memory.add(SystemMessage("sys"))
    for turn in range(12):
        memory.add(UserMessage(f"u{turn}"), UserMessage(f"v{turn}"))
        other.add(UserMessage(f"o{turn}"))  # evicts this memory's snapshot from a cache of one
        expected += [UserMessage(f"u{turn}"), UserMessage(f"v{turn}")]
        while len(expected) > 5:
            expected.pop(1 if isinstance(expected[0], SystemMessage) else 0)
        assert store.get_messages("m") == expected == memory.messages()
    raw = client.lrange(store.keys_of("m")[1], 0, -1)
    assert len(raw) == 5


def test_a_cached_snapshot_of_another_incarnation_is_never_diffed_against(
    client: Redis, store: RedisChatMemoryStore, prefix: str
) -> None:
    # Same version, different incarnation (what a server clock set back could produce): the diff is
    # refused by the script and the whole list is written instead.
    version = store.save("m", _texts(4), 0)
    client.hset(store.keys_of("m")[0], mapping={"incarnation": b"someone else", "length": 2})
    client.delete(store.keys_of("m")[1])
    client.rpush(store.keys_of("m")[1], *(dumps_message(m) for m in _texts(2, "other")))
    new_version = store.save("m", [*_texts(4)[1:], UserMessage("next")], version)
    assert new_version > version
    reader = RedisChatMemoryStore(client, key_prefix=prefix, snapshot_cache_size=0)
    assert reader.get_messages("m") == [*_texts(4)[1:], UserMessage("next")]


def test_cache_size_must_not_be_negative(client: Redis) -> None:
    with pytest.raises(ValueError, match="snapshot_cache_size"):
        RedisChatMemoryStore(client, snapshot_cache_size=-1)


# ----------------------------------------------------------------------- damage and driver errors


def test_metadata_that_is_not_a_version_is_corruption(client: Redis, store: RedisChatMemoryStore) -> None:
    store.update_messages("m", _texts(1))
    client.hset(store.keys_of("m")[0], "version", "banana")
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        store.get_messages("m")
    store.delete_messages("m")
    assert store.get_messages("m") == []


def test_a_message_list_without_metadata_is_corruption(client: Redis, store: RedisChatMemoryStore) -> None:
    client.rpush(store.keys_of("m")[1], b"{}")
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        store.get_messages("m")
    store.update_messages("m", _texts(1))
    assert store.get_messages("m") == _texts(1)


def test_an_unreachable_server_is_a_store_error() -> None:
    with RedisChatMemoryStore("redis://127.0.0.1:1/0?socket_connect_timeout=1") as store:
        with pytest.raises(StoreError) as raised:
            store.get_messages("m")
        assert raised.value.__cause__ is not None
        with pytest.raises(StoreError):
            list(store.memory_ids())


# --------------------------------------------------------------------------------- construction


def test_a_client_decoding_responses_is_refused() -> None:
    decoding = Redis.from_url(redis_url(), decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses=False"):
            RedisChatMemoryStore(decoding)
    finally:
        decoding.close()


def test_anything_but_a_url_or_client_is_refused() -> None:
    with pytest.raises(TypeError, match="Redis URL"):
        RedisChatMemoryStore(42)  # type: ignore[arg-type]


def _connected_names(client: Redis) -> set[str]:
    return {entry["name"] for entry in client.client_list()}


def test_open_store_owns_the_client_it_builds(client: Redis) -> None:
    prefix, name = fresh_prefix(), f"cmtest-{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in redis_url() else "?"
    store = open_store(f"{redis_url()}{separator}client_name={name}", key_prefix=prefix, ttl=30)
    try:
        assert isinstance(store, RedisChatMemoryStore)
        assert store.ttl == 30
        store.update_messages("m", _texts(2))
        assert store.get_messages("m") == _texts(2)
        assert name in _connected_names(client)
    finally:
        drop_prefix(client, prefix)
        store.close()
    # The server drops a closed connection from CLIENT LIST once its event loop reads the close.
    deadline = time.monotonic() + 5
    while name in _connected_names(client) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert name not in _connected_names(client)


def test_a_client_passed_in_stays_open(client: Redis, prefix: str) -> None:
    with RedisChatMemoryStore(client, key_prefix=prefix) as store:
        store.update_messages("m", _texts(1))
    assert client.ping()


# -------------------------------------------------------------------------------------- cluster


@pytest.mark.redis_cluster
def test_cluster_url_opens_a_cluster_store_that_lists_every_primary() -> None:
    prefix = fresh_prefix()
    store = open_store(cluster_url(), key_prefix=prefix)
    assert isinstance(store, RedisChatMemoryStore)
    cluster = store.client
    assert isinstance(cluster, RedisCluster)
    try:
        ids = [f"memory {index}" for index in range(40)]
        for memory_id in ids:
            store.update_messages(memory_id, _texts(1, memory_id))
        primaries = {cluster.get_node_from_key(store.keys_of(memory_id)[0]).name for memory_id in ids}
        assert len(primaries) == len(cluster.get_primaries()) > 1
        assert sorted(store.memory_ids()) == sorted(ids)
    finally:
        drop_prefix(cluster, prefix)
        store.close()


def test_scripts_are_loaded_again_after_the_server_forgets_them(client: Redis, store: RedisChatMemoryStore) -> None:
    # What a restarted server looks like to a store that ran its scripts before: NOSCRIPT, then EVAL.
    store.update_messages("m", _texts(2))
    client.script_flush()
    assert store.get_messages("m") == _texts(2)
    client.script_flush()
    store.update_messages("m", _texts(3))
    assert store.load("m").messages == _texts(3)


def test_a_missing_extra_names_the_class_and_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "import chatmemory\n"
        "import chatmemory.stores.redis.plan, chatmemory.stores.redis.operations  # no driver needed\n"
        "try:\n    from chatmemory.stores.redis import RedisChatMemoryStore\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.startswith(
        "MissingDependencyError RedisChatMemoryStore requires the 'redis' extra: pip install 'llm-window-memory[redis]'"
    ), result.stdout


@pytest.mark.parametrize("damaged", ["meta", "messages"])
def test_a_key_of_the_wrong_type_reads_as_corrupted_and_an_update_replaces_it(
    client: Redis, prefix: str, damaged: str
) -> None:
    store = RedisChatMemoryStore(client, key_prefix=prefix, snapshot_cache_size=0)
    store.update_messages("m", _texts(2))
    meta, messages = store.keys_of("m")
    key = meta if damaged == "meta" else messages
    ttl = client.pttl(key)
    client.delete(key)
    client.set(key, b"not what the store wrote")
    if ttl > 0:
        client.pexpire(key, ttl)
    with pytest.raises(CorruptedMemoryError) as raised:
        store.get_messages("m")
    assert raised.value.memory_id == "m"
    with pytest.raises(CorruptedMemoryError):
        MessageWindowChatMemory("m", max_messages=5, store=store).add(UserMessage("would overwrite"))
    assert client.get(key) == b"not what the store wrote"
    store.update_messages("m", _texts(1, "fixed"))
    assert store.get_messages("m") == _texts(1, "fixed")


def test_a_cluster_url_naming_a_standalone_server_is_a_store_error() -> None:
    host_port = redis_url().split("://", 1)[1].split("/", 1)[0]
    with pytest.raises(StoreError) as raised:
        RedisChatMemoryStore(f"redis+cluster://{host_port}")
    assert raised.value.__cause__ is not None
