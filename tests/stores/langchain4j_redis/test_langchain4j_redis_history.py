"""History on the LangChain4j Redis layout: the history key shares the memory key's slot whatever the key,
the memory key still holds exactly LangChain4j's JSON, Java's plain writes in between are recorded against
what Java wrote, listing and deletion see the history right, and a store without history is unchanged."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from chatmemory import ConcurrentUpdateError, HistoryNotEnabledError, UserMessage
from chatmemory.core.errors import Operation
from chatmemory.core.store import validate_memory_id
from chatmemory.serialization import langchain4j
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.base.turns import LockOptions
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.langchain4j_redis.commands import Get, Script
from chatmemory.stores.langchain4j_redis.keys import (
    HISTORY_MARK,
    any_history_pattern,
    history_key,
    history_pattern,
    key,
    legacy_history_key,
    memory_id_of_history_key,
    write_ids_key,
)
from chatmemory.stores.langchain4j_redis.operations import Operations
from chatmemory.stores.langchain4j_redis.plan import (
    WRITE_HISTORY_SCRIPT_SHA,
    KnownValues,
    Planner,
    VersionBook,
    digest,
    encode,
)
from chatmemory.stores.redis import Redis, RedisCluster
from support.backends.langchain4j_redis import drop_prefix
from support.backends.redis import raw_client

BRACES = st.sampled_from([b"{", b"}", b"{}", b"a", b":", b"\xff", b"x}y", b"{t}"])
keys = st.lists(st.one_of(BRACES, st.binary(max_size=4)), max_size=8).map(b"".join)


@given(memory_key=keys)
def test_a_history_key_is_in_the_memory_keys_slot_and_forms_no_other_hash_tag(memory_key: bytes) -> None:
    found = history_key(memory_key)
    assert found.startswith(memory_key + HISTORY_MARK)
    assert key_slot(found) == key_slot(memory_key)


def _valid(memory_id: str) -> bool:
    try:
        validate_memory_id(memory_id)
    except (ValueError, TypeError):
        return False
    return True


@given(memory_id=st.text(min_size=1, max_size=12).filter(_valid))
def test_a_history_key_maps_back_to_its_memory_id(memory_id: str) -> None:
    memory_key = key(b"p{:", memory_id)
    assert memory_id_of_history_key(history_key(memory_key), b"p{:") == memory_id
    assert memory_id_of_history_key(memory_key, b"p{:") is None


def test_the_history_pattern_takes_the_prefix_literally() -> None:
    assert history_pattern(b"a*[") == b"a\\*\\[*" + HISTORY_MARK + b"*"
    assert any_history_pattern(b"a*[") == b"a\\*\\[*chatmemory-history*"  # this store's and the old name


@pytest.fixture(params=["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def client(request: pytest.FixtureRequest) -> Iterator[Redis | RedisCluster]:
    with raw_client(request.param) as made:
        yield made


@pytest.fixture
def prefix(client: Redis | RedisCluster) -> Iterator[str]:
    made = f"lc4j-history:{uuid.uuid4().hex[:10]}:"
    yield made
    drop_prefix(client, made)


@pytest.fixture
def store(client: Redis | RedisCluster, prefix: str) -> Iterator[LangChain4jRedisChatMemoryStore]:
    with LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history=True, ttl=60) as made:
        yield made


def _java_set(
    client: Redis | RedisCluster, store: LangChain4jRedisChatMemoryStore, memory_id: str, texts: list[str]
) -> None:
    """What LangChain4j's RedisChatMemoryStore.updateMessages sends: a plain SET of its JSON."""
    client.set(store.key_of(memory_id), langchain4j.dumps([UserMessage(text) for text in texts]).encode())


def test_the_memory_key_holds_langchain4j_json_and_java_writes_are_recorded_against_what_java_wrote(
    client: Redis | RedisCluster, store: LangChain4jRedisChatMemoryStore
) -> None:
    store.update_messages("m", [UserMessage("a"), UserMessage("b")])
    assert client.get(store.key_of("m")) == encode([UserMessage("a"), UserMessage("b")])
    _java_set(client, store, "m", ["b", "java"])  # Java evicts a, appends "java"
    store.update_messages("m", [UserMessage("java"), UserMessage("py")])
    snapshot = store.load("m")
    store.save("m", [*snapshot.messages, UserMessage("saved")], snapshot.version)
    entries = store.history("m").entries
    assert [entry.message for entry in entries] == [UserMessage(t) for t in ("a", "b", "py", "saved")]
    assert [entry.sequence for entry in entries] == [1, 2, 3, 4]
    assert list(store.memory_ids()) == ["m"]
    assert store.get_messages("m") == [UserMessage(t) for t in ("java", "py", "saved")]


def test_a_save_that_loses_to_a_java_write_records_nothing(
    client: Redis | RedisCluster, store: LangChain4jRedisChatMemoryStore
) -> None:
    store.update_messages("m", [UserMessage("a")])
    snapshot = store.load("m")
    _java_set(client, store, "m", ["a", "java"])
    with pytest.raises(ConcurrentUpdateError):
        store.save("m", [*snapshot.messages, UserMessage("lost")], snapshot.version)
    assert store.history("m").messages == [UserMessage("a")]


def test_delete_removes_the_key_and_its_history_and_trim_never_touches_the_value(
    client: Redis | RedisCluster, store: LangChain4jRedisChatMemoryStore, prefix: str
) -> None:
    store.update_messages("m", [UserMessage("a")])
    store.update_messages("n", [UserMessage("b")])
    memory_history = history_key(store.key_of("m"))
    assert 0 < client.pttl(memory_history) <= 60_000
    assert store.trim_history(older_than=datetime.timedelta(0)) == 2
    assert store.get_messages("m") == [UserMessage("a")] and store.history("n").entries == []
    store.update_messages("m", [UserMessage("a"), UserMessage("c")])
    LangChain4jRedisChatMemoryStore(client, key_prefix=prefix).delete_messages("m")
    assert client.exists(store.key_of("m"), memory_history) == 0


def test_a_store_without_history_writes_no_history_key(client: Redis | RedisCluster, prefix: str) -> None:
    plain = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix)
    plain.update_messages("m", [UserMessage("a")])
    snapshot = plain.load("m")
    plain.save("m", [*snapshot.messages, UserMessage("b")], snapshot.version)
    assert client.exists(history_key(plain.key_of("m"))) == 0 and not plain.keeps_history
    with pytest.raises(HistoryNotEnabledError, match="LangChain4jRedisChatMemoryStore"):
        plain.history("m")
    with pytest.raises(ValueError, match="history=True"):
        LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history_ttl=60)


# ------------------------------------------------------------------------- steps, without a server


def _steps() -> Operations:
    return Operations(Planner(b"p:", 60_000, LockOptions(), history=True), VersionBook(8), KnownValues(8))


def _recorded(command: object) -> list[bytes]:
    assert isinstance(command, Script) and command.sha == WRITE_HISTORY_SCRIPT_SHA
    assert command.keys == (b"p:m", history_key(b"p:m"), write_ids_key(b"p:m"), legacy_history_key(b"p:m"))
    return list(command.args[5:])


def test_a_save_after_a_load_needs_no_read_and_records_what_it_appends() -> None:
    steps = _steps()
    old = [UserMessage("a"), UserMessage("b")]
    value = encode(old)
    steps.known.put("m", digest(value), old)
    version = steps.book.read("m", digest(value))
    step = steps.save("m", [UserMessage("b"), UserMessage("c")], version)
    command = next(step)
    assert _recorded(command) == [dumps_message(UserMessage("c"))] and command.args[0] == digest(value)
    with pytest.raises(StopIteration) as done:
        step.send(1)
    assert done.value.value > version


def test_a_save_of_a_value_not_known_reads_it_and_refuses_if_it_changed() -> None:
    steps = _steps()
    value = encode([UserMessage("a")])
    version = steps.book.read("m", digest(value))  # read by another path: its messages are not known
    step = steps.save("m", [UserMessage("a"), UserMessage("b")], version)
    assert next(step) == Get(b"p:m", Operation.WRITE, "m")
    with pytest.raises(ConcurrentUpdateError):
        step.send(encode([UserMessage("java")]))
    step = steps.save("m", [UserMessage("a"), UserMessage("b")], version)
    next(step)
    assert _recorded(step.send(value)) == [dumps_message(UserMessage("b"))]


def test_an_update_retries_from_a_fresh_read_until_its_compare_and_set_lands() -> None:
    steps = _steps()
    step = steps.update("m", [UserMessage("a"), UserMessage("b")])
    assert next(step) == Get(b"p:m", Operation.WRITE, "m")
    assert _recorded(step.send(None)) == [dumps_message(UserMessage(t)) for t in "ab"]
    assert step.send(0) == Get(b"p:m", Operation.WRITE, "m")  # Java wrote meanwhile
    command = step.send(encode([UserMessage("a")]))
    assert _recorded(command) == [dumps_message(UserMessage("b"))]
    with pytest.raises(StopIteration):
        step.send(1)
    assert steps.known.get("m", digest(encode([UserMessage("a"), UserMessage("b")]))) is not None
