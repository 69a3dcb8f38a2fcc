"""The keys of LangChain4j-layout memories: no memory's keys (value, history, write ids, lock) are another's.

Ids and prefixes are built from braces (hash tags), the history, write-id and lock names, the old
``:chatmemory-history`` suffix and ``0xFF``-like characters. Without a server: the keys of distinct
memories never coincide, each stays in its memory's slot, and only a memory key reads back as a memory id.
On the servers: deleting or writing one id never changes another, listing shows every memory and nothing
else, and a history kept where earlier stores kept it is found, continued, trimmed and deleted with its memory.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from chatmemory import CorruptedMemoryError, UserMessage
from chatmemory.core.store import validate_memory_id
from chatmemory.serialization import langchain4j
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.langchain4j_redis.keys import (
    history_key,
    key,
    legacy_history_key,
    lock_key,
    memory_id_of,
    memory_id_of_history_key,
    memory_id_of_legacy_history_key,
    write_ids_key,
)
from chatmemory.stores.redis import Redis, RedisCluster
from chatmemory.transfer.sources import LangChain4jRedisSource
from support.backends.langchain4j_redis import drop_prefix
from support.backends.redis import cluster_url, raw_client, redis_url

PIECES = st.sampled_from(
    [
        "{",
        "}",
        "{}",
        "{u}",
        "u",
        "victim",
        ":",
        ":chatmemory-history",
        "chatmemory-writes",
        "chatmemory-lock",
        "\u00ff",
        "ÿ{",
        "x}y",
    ]
)
ids = st.lists(st.one_of(PIECES, st.text(max_size=3)), min_size=1, max_size=6).map("".join).filter(bool)
prefixes = st.lists(st.one_of(PIECES, st.text(max_size=2)), max_size=3).map("".join)


def _valid(memory_id: str) -> bool:
    try:
        validate_memory_id(memory_id)
    except (TypeError, ValueError):
        return False
    return True


def _keys(prefix: bytes, memory_id: str) -> dict[str, bytes]:
    memory_key = key(prefix, memory_id)
    return {
        "value": memory_key,
        "history": history_key(memory_key),
        "write ids": write_ids_key(memory_key),
        "lock": lock_key(memory_key),
    }


# ------------------------------------------------------------------------------------------ no server


@given(prefix=prefixes, first=ids, second=ids)
@example(prefix="", first="{u}victim", second="{u}victim:chatmemory-history")
@example(prefix="p:", first="victim", second="victim:chatmemory-history")
@example(prefix="", first="victim", second="victim\u00ffchatmemory-lock")
@example(prefix="", first="{u}victim", second="{u}victim:chatmemory-lock")
def test_the_keys_of_two_memories_never_coincide(prefix: str, first: str, second: str) -> None:
    assume(first != second and _valid(first) and _valid(second))
    raw = prefix.encode("utf-8")
    mine, theirs = _keys(raw, first), _keys(raw, second)
    assert len(set(mine.values())) == 4  # value, history, write ids and lock of one memory are four keys
    assert not set(mine.values()) & set(theirs.values())


@given(prefix=prefixes, memory_id=ids)
@example(prefix="", memory_id="{u}victim")
@example(prefix="{", memory_id="}")
@example(prefix="", memory_id="{}x")
def test_every_key_of_a_memory_is_in_its_slot_and_only_the_value_lists_as_a_memory(prefix: str, memory_id: str) -> None:
    assume(_valid(memory_id))
    raw = prefix.encode("utf-8")
    keys = _keys(raw, memory_id)
    assert {key_slot(each) for each in keys.values()} == {key_slot(keys["value"])}
    assert key_slot(legacy_history_key(keys["value"])) == key_slot(keys["value"])
    assert memory_id_of(keys["value"], raw) == memory_id
    for name in ("history", "write ids", "lock"):
        assert memory_id_of(keys[name], raw) is None
    assert memory_id_of_history_key(keys["history"], raw) == memory_id
    for name in ("value", "write ids", "lock"):
        assert memory_id_of_history_key(keys[name], raw) is None
    assert memory_id_of_legacy_history_key(legacy_history_key(keys["value"]), raw) == memory_id


# --------------------------------------------------------------------------------------- on the servers


@pytest.fixture(
    scope="module",
    params=[pytest.param("server", marks=pytest.mark.redis), pytest.param("cluster", marks=pytest.mark.redis_cluster)],
)
def client(request: pytest.FixtureRequest) -> Iterator[Redis | RedisCluster]:
    with raw_client(request.param) as made:
        yield made


@pytest.fixture
def prefix(client: Redis | RedisCluster) -> Iterator[str]:
    made = f"lc4j-keys:{uuid.uuid4().hex[:10]}:"
    yield made
    drop_prefix(client, made)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(victim=ids, other=ids)
@example(victim="{u}victim", other="{u}victim:chatmemory-history")
@example(victim="victim", other="victim:chatmemory-history")
def test_writing_and_deleting_one_id_never_changes_another(
    client: Redis | RedisCluster, prefix: str, victim: str, other: str
) -> None:
    assume(victim != other and _valid(victim) and _valid(other))
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history=True)
    try:
        store.update_messages(victim, [UserMessage("a")])
        snapshot = store.load(victim)
        store.save(victim, [*snapshot.messages, UserMessage("b")], snapshot.version)
        store.modify(other, lambda messages: [*messages, UserMessage("other")])  # takes and gives back its lock
        assert set(store.memory_ids()) == {victim, other}
        assert store.history(other).messages == [UserMessage("other")]
        store.delete_messages(other)
        assert store.get_messages(victim) == [UserMessage("a"), UserMessage("b")]
        assert store.history(victim).messages == [UserMessage("a"), UserMessage("b")]
        assert list(store.memory_ids()) == [victim]
        assert store.get_messages(other) == [] and store.history(other).entries == []
    finally:
        store.delete_messages(victim)
        store.delete_messages(other)
    assert list(store.memory_ids()) == []


def test_a_memory_whose_id_ends_in_a_suffix_is_listed_and_its_neighbours_keys_are_not(
    client: Redis | RedisCluster, prefix: str
) -> None:
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history=True)
    names = ["{u}victim", "{u}victim:chatmemory-history", "victim\u00ffchatmemory-writes", "x:chatmemory-history"]
    for name in names:
        store.update_messages(name, [UserMessage(name)])
        snapshot = store.load(name)
        store.save(name, [*snapshot.messages, UserMessage("more")], snapshot.version)
    assert sorted(store.memory_ids()) == sorted(names)
    for name in names:
        assert store.get_messages(name) == [UserMessage(name), UserMessage("more")]
        assert store.history(name).messages == [UserMessage(name), UserMessage("more")]


# ------------------------------------------------------------------------- histories of earlier stores


def _legacy_history(client: Redis | RedisCluster, store: LangChain4jRedisChatMemoryStore, memory_id: str) -> bytes:
    """What a store before the 0xFF names left: the value, and its history at the ``:chatmemory-history`` key."""
    memory_key = store.key_of(memory_id)
    client.set(memory_key, langchain4j.dumps([UserMessage("a"), UserMessage("b")]).encode())
    old = legacy_history_key(memory_key)
    client.rpush(old, *(b"%d:1700000000000:%b" % (n, dumps_message(UserMessage(t))) for n, t in ((1, "a"), (2, "b"))))
    return old


@pytest.mark.parametrize("memory_id", ["{u}victim", "victim"])
def test_an_earlier_stores_history_is_read_continued_and_moved_once(
    client: Redis | RedisCluster, prefix: str, memory_id: str
) -> None:
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history=True)
    old = _legacy_history(client, store, memory_id)
    assert store.history(memory_id).messages == [UserMessage("a"), UserMessage("b")]
    assert client.exists(old) == 0 and client.llen(history_key(store.key_of(memory_id))) == 2

    other = LangChain4jRedisChatMemoryStore(client, key_prefix=f"{prefix}2:", history=True)
    old = _legacy_history(client, other, memory_id)
    snapshot = other.load(memory_id)
    other.save(memory_id, [*snapshot.messages, UserMessage("c")], snapshot.version)  # adopted by the write
    entries = other.history(memory_id).entries
    assert [entry.message for entry in entries] == [UserMessage(t) for t in "abc"]
    assert [entry.sequence for entry in entries] == [1, 2, 3]
    assert client.exists(old) == 0
    drop_prefix(client, f"{prefix}2:")


def test_an_earlier_stores_history_is_trimmed_and_deleted_with_its_memory_only(
    client: Redis | RedisCluster, prefix: str
) -> None:
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history=True)
    old = _legacy_history(client, store, "{u}victim")
    assert store.trim_history(older_than=datetime.timedelta(0)) == 2  # found by the scan of old names too
    assert client.exists(old) == 0 and store.history("{u}victim").entries == []

    old = _legacy_history(client, store, "{u}gone")
    # The old history key of "{u}gone" is the key of the memory "{u}gone:chatmemory-history": never both at once.
    assert old == store.key_of("{u}gone:chatmemory-history")
    store.delete_messages("{u}gone")
    assert client.exists(old, store.key_of("{u}gone")) == 0
    store.update_messages("{u}gone:chatmemory-history", [UserMessage("mine")])
    store.update_messages("{u}gone", [UserMessage("new")])
    store.delete_messages("{u}gone")  # a string at the old name is another memory: it stays
    assert store.get_messages("{u}gone:chatmemory-history") == [UserMessage("mine")]
    store.update_messages("{u}gone", [UserMessage("again")])
    assert store.history("{u}gone").messages == [UserMessage("again")]  # nothing of the deleted history


def test_a_memory_at_an_earlier_stores_history_key_reads_as_damaged_not_as_history(
    client: Redis | RedisCluster, prefix: str
) -> None:
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history=True)
    _legacy_history(client, store, "{u}victim")
    assert list(store.memory_ids()) == ["{u}victim"]  # a list is no memory
    with pytest.raises(CorruptedMemoryError, match="not a string"):
        store.get_messages("{u}victim:chatmemory-history")
    assert store.history("{u}victim").messages == [UserMessage("a"), UserMessage("b")]
    assert store.get_messages("{u}victim:chatmemory-history") == []


def test_the_keys_beside_a_memory_are_invisible_to_the_copy_source_too(
    client: Redis | RedisCluster, prefix: str
) -> None:
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history=True)
    for name in ("{u}victim", "victim"):
        snapshot = store.load(name)
        store.save(name, [UserMessage("a")], snapshot.version)
    assert client.exists(*(write_ids_key(store.key_of(name)) for name in ("{u}victim", "victim"))) == 2
    url = cluster_url() if isinstance(client, RedisCluster) else redis_url()
    source = LangChain4jRedisSource(url, key_prefix=prefix)
    try:
        assert sorted(source.memory_ids()) == ["victim", "{u}victim"] and source.skipped_keys == 0
    finally:
        source.close()
