"""Writers of one LangChain4j memory that read the same value and write the same result: only one of them wins.

The compare-and-set tells a write sent again after a lost reply (same write id) from another writer that
wrote the very same value: two equal adds both stay, no message is handed to two ``pop()``s, and a Java
``SET`` in between is a conflict whatever it wrote. Each store object here stands for a process of its own
(its versions are its own). Sync and asyncio, on the standalone server and on Redis Cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from chatmemory import ConcurrentUpdateError, MessageWindowChatMemory, UserMessage, aio
from chatmemory.aio.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore as AsyncStore
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization import langchain4j
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.langchain4j_redis.commands import Script
from chatmemory.stores.langchain4j_redis.keys import write_ids_key
from chatmemory.stores.redis import Redis, RedisCluster
from chatmemory.stores.redis.aio import send_async
from chatmemory.stores.redis.executor import send
from support.backends.langchain4j_redis import drop_prefix
from support.backends.redis import cluster_url, redis_url

SERVERS = ["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)]
pytestmark = pytest.mark.redis

POPPERS, POPS, ADDERS, ADDS = 2, 30, 3, 20


def _url(kind: str) -> str:
    url: str = redis_url() if kind == "server" else cluster_url().replace("+cluster", "", 1)
    return url


@pytest.fixture(params=SERVERS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(kind: str) -> Iterator[Redis | RedisCluster]:
    made: Redis | RedisCluster = Redis.from_url(_url(kind)) if kind == "server" else RedisCluster.from_url(_url(kind))
    yield made
    made.close()


@pytest.fixture
def prefix(client: Redis | RedisCluster) -> Iterator[str]:
    made = f"lc4j-writers:{uuid.uuid4().hex[:10]}:"
    yield made
    drop_prefix(client, made)


@pytest.fixture(params=[False, True], ids=["plain", "history"])
def history(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _store(client: Redis | RedisCluster, prefix: str, history: bool) -> LangChain4jRedisChatMemoryStore:
    return LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, history=history)


# ----------------------------------------------------------------------------------------- one at a time


def test_two_writers_saving_the_same_value_at_the_same_version_the_second_conflicts(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    first, second = _store(client, prefix, history), _store(client, prefix, history)
    first.update_messages("m", [UserMessage("hi")])
    read_first, read_second = first.load("m"), second.load("m")
    result = [*read_first.messages, UserMessage("yes")]
    first.save("m", result, read_first.version)
    with pytest.raises(ConcurrentUpdateError):
        second.save("m", result, read_second.version)
    assert second.get_messages("m") == result
    if history:
        assert first.history("m").messages == [UserMessage("hi"), UserMessage("yes")]


def test_a_new_memory_saved_by_two_writers_at_version_0_is_written_once(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    first, second = _store(client, prefix, history), _store(client, prefix, history)
    first.save("m", [UserMessage("yes")], 0)
    with pytest.raises(ConcurrentUpdateError):
        second.save("m", [UserMessage("yes")], 0)
    if history:
        assert first.history("m").messages == [UserMessage("yes")]


def test_a_java_write_of_the_very_value_a_save_would_write_is_a_conflict_all_the_same(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    store = _store(client, prefix, history)
    store.update_messages("m", [UserMessage("hi")])
    snapshot = store.load("m")
    result = [*snapshot.messages, UserMessage("yes")]
    client.set(store.key_of("m"), langchain4j.dumps(result).encode())  # LangChain4j: a plain SET
    with pytest.raises(ConcurrentUpdateError):
        store.save("m", result, snapshot.version)
    again = store.load("m")
    store.save("m", [*again.messages, UserMessage("yes")], again.version)
    assert store.get_messages("m") == [UserMessage("hi"), UserMessage("yes"), UserMessage("yes")]


class _FirstSaveWaits:
    """The store, its first ``save`` held until the other writer's is due too: both adds read before either writes."""

    def __init__(self, store: LangChain4jRedisChatMemoryStore, barrier: threading.Barrier) -> None:
        self._store, self._barrier = store, barrier
        self._waited = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def save(self, memory_id: str, messages: list[ChatMessage], expected_version: int) -> int:
        if not self._waited:
            self._waited = True
            self._barrier.wait(10)
        return self._store.save(memory_id, messages, expected_version)


def test_two_window_memories_adding_equal_messages_keep_both(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    _store(client, prefix, history).update_messages("m", [UserMessage("hi")])
    barrier = threading.Barrier(2)
    memories = [
        MessageWindowChatMemory("m", max_messages=10, store=_FirstSaveWaits(_store(client, prefix, history), barrier))
        for _ in range(2)
    ]
    _run_all([lambda memory=memory: memory.add(UserMessage("yes")) for memory in memories])
    assert _store(client, prefix, history).get_messages("m") == [
        UserMessage("hi"),
        UserMessage("yes"),
        UserMessage("yes"),
    ]


# --------------------------------------------------------------------------- a write whose reply was lost


def _sent_twice(client: Redis | RedisCluster, command: object) -> object:
    """The script run, its reply lost, and run again with the same arguments (what the driver's retry sends)."""
    assert isinstance(command, Script)
    assert send(client, command) == 1
    return send(client, command)


def test_a_write_sent_again_after_a_lost_reply_is_known_as_written(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    store = _store(client, prefix, history)
    store.update_messages("m", [UserMessage("hi")])
    snapshot = store.load("m")
    result = [*snapshot.messages, UserMessage("once")]
    step = store._operations.save("m", result, snapshot.version)
    command = next(step)
    while not isinstance(command, Script):  # a history store may read the value first
        command = step.send(send(client, command))
    with pytest.raises(StopIteration) as done:
        step.send(_sent_twice(client, command))
    assert done.value.value > snapshot.version
    assert store.get_messages("m") == result
    if history:
        assert store.history("m").messages == [UserMessage("hi"), UserMessage("once")]
    assert client.lrange(write_ids_key(store.key_of("m")), 0, -1)[0] == command.args[2]


def test_a_write_sent_again_after_others_wrote_is_still_known_as_written_and_changes_nothing(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    store, other = _store(client, prefix, history), _store(client, prefix, history)
    snapshot = store.load("m")
    step = store._operations.save("m", [UserMessage("mine")], snapshot.version)
    command = next(step)
    assert isinstance(command, Script) and send(client, command) == 1  # the reply is lost
    for text in ("a", "b", "c"):  # others write meanwhile
        seen = other.load("m")
        other.save("m", [*seen.messages, UserMessage(text)], seen.version)
    with pytest.raises(StopIteration):
        step.send(send(client, command))  # the resend: done already, not a conflict, not written again
    expected = [UserMessage(t) for t in ("mine", "a", "b", "c")]
    assert other.get_messages("m") == expected
    if history:
        assert other.history("m").messages == expected


def test_a_write_with_another_id_and_the_same_arguments_is_not_taken_for_the_first(
    client: Redis | RedisCluster, prefix: str
) -> None:
    store = _store(client, prefix, False)
    step = store._operations.save("m", [UserMessage("yes")], 0)
    command = next(step)
    assert isinstance(command, Script) and send(client, command) == 1
    forged = command._replace(args=(*command.args[:2], b"another-write", *command.args[3:]))
    assert send(client, forged) == 0


# -------------------------------------------------------------------------------------- many at a time


def _run_all(targets: list[Any]) -> None:
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a writer did not finish within 60 s"


def _check_pops(added: Sequence[ChatMessage], popped: Sequence[ChatMessage], left: Sequence[ChatMessage]) -> None:
    assert len(set(popped)) == len(popped), "a message was returned by two pops"
    assert Counter([*popped, *left]) == Counter(added), "a message was lost or doubled"


def test_equal_adds_from_many_writers_all_stay(client: Redis | RedisCluster, prefix: str, history: bool) -> None:
    errors: list[BaseException] = []

    def adder() -> None:
        memory = MessageWindowChatMemory("m", max_messages=500, store=_store(client, prefix, history))
        try:
            for _ in range(ADDS):
                memory.add(UserMessage("yes"))
        except BaseException as exc:
            errors.append(exc)

    _run_all([adder] * ADDERS)
    assert errors == []
    assert _store(client, prefix, history).get_messages("m") == [UserMessage("yes")] * (ADDERS * ADDS)


def test_concurrent_pops_never_return_one_message_twice(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    added = [UserMessage(f"{adder}-{n}") for adder in range(ADDERS) for n in range(ADDS)]
    popped: list[ChatMessage] = []
    errors: list[BaseException] = []

    def adder(number: int) -> None:
        memory = MessageWindowChatMemory("m", max_messages=500, store=_store(client, prefix, history))
        try:
            for message in added[number * ADDS : (number + 1) * ADDS]:
                memory.add(message)
        except BaseException as exc:
            errors.append(exc)

    def popper() -> None:
        memory = MessageWindowChatMemory("m", max_messages=500, store=_store(client, prefix, history))
        for _ in range(POPS):
            with contextlib.suppress(ConcurrentUpdateError):  # pop() is not retried: the newest may be another's
                popped.extend(memory.pop())

    _run_all([*(lambda n=n: adder(n) for n in range(ADDERS)), *([popper] * POPPERS)])
    assert errors == []
    _check_pops(added, popped, _store(client, prefix, history).get_messages("m"))


# --------------------------------------------------------------------------------------------- asyncio


@pytest.fixture
async def async_stores(kind: str, prefix: str, history: bool) -> AsyncIterator[Any]:
    made: list[AsyncStore] = []

    def make() -> AsyncStore:
        url = _url(kind)
        client = AsyncRedis.from_url(url) if kind == "server" else AsyncRedisCluster.from_url(url)
        made.append(AsyncStore(client, key_prefix=prefix, history=history))
        return made[-1]

    yield make
    for store in made:
        await store.aclose()
        await store.client.aclose()


async def test_async_two_writers_of_the_same_value_the_second_conflicts(async_stores: Any) -> None:
    first, second = async_stores(), async_stores()
    await first.update_messages("m", [UserMessage("hi")])
    read_first, read_second = await first.load("m"), await second.load("m")
    result = [*read_first.messages, UserMessage("yes")]
    await first.save("m", result, read_first.version)
    with pytest.raises(ConcurrentUpdateError):
        await second.save("m", result, read_second.version)


async def test_async_a_write_sent_again_after_a_lost_reply_is_known_as_written(async_stores: Any) -> None:
    store, other = async_stores(), async_stores()
    client = store.client
    step = store._operations.save("m", [UserMessage("mine")], 0)
    command = next(step)
    assert isinstance(command, Script) and await send_async(client, command) == 1
    seen = await other.load("m")
    await other.save("m", [*seen.messages, UserMessage("a")], seen.version)
    with pytest.raises(StopIteration):
        step.send(await send_async(client, command))
    assert await other.get_messages("m") == [UserMessage("mine"), UserMessage("a")]


async def test_async_equal_adds_stay_and_concurrent_pops_never_return_one_message_twice(async_stores: Any) -> None:
    counter = itertools.count()
    added = [UserMessage(f"{adder}-{n}") for adder in range(ADDERS) for n in range(ADDS)]
    popped: list[ChatMessage] = []

    async def adder(number: int) -> None:
        memory = aio.MessageWindowChatMemory("m", max_messages=500, store=async_stores())
        for message in added[number * ADDS : (number + 1) * ADDS]:
            await memory.add(message)
            await memory.add(UserMessage("yes"))
            next(counter)

    async def popper() -> None:
        memory = aio.MessageWindowChatMemory("m", max_messages=500, store=async_stores())
        for _ in range(POPS):
            with contextlib.suppress(ConcurrentUpdateError):
                popped.extend(await memory.pop())

    tasks = [*(adder(n) for n in range(ADDERS)), *(popper() for _ in range(POPPERS))]
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    left = await async_stores().get_messages("m")
    yeses = [message for message in popped + left if message == UserMessage("yes")]
    assert len(yeses) == next(counter)  # every equal add stayed (in the window, or popped once)
    _check_pops(
        added,
        [message for message in popped if message != UserMessage("yes")],
        [message for message in left if message != UserMessage("yes")],
    )
