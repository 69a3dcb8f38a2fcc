"""The asyncio MongoDB store: same plans and layout as the sync store, cancellation-safe, owns what it builds."""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from pymongo import AsyncMongoClient, MongoClient

from chatmemory import (
    ConcurrentUpdateError,
    CorruptedMemoryError,
    StoreError,
    SystemMessage,
    UserMessage,
)
from chatmemory.aio.stores.mongodb import MongoChatMemoryStore as AsyncStore
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.mongodb import MongoChatMemoryStore as SyncStore
from support.backends.mongodb import DATABASE, mongodb_url

pytestmark = [pytest.mark.mongodb, pytest.mark.asyncio]


def _users(*numbers: int) -> list[UserMessage]:
    return [UserMessage(str(number)) for number in numbers]


@pytest.fixture(scope="module")
def url() -> str:
    return mongodb_url()


@pytest.fixture(scope="module")
def sync_client(url: str) -> Iterator[MongoClient[Any]]:
    made: MongoClient[Any] = MongoClient(url, serverSelectionTimeoutMS=10_000)
    yield made
    made.close()


@pytest.fixture
def collection_name(sync_client: MongoClient[Any]) -> Iterator[str]:
    name = f"memories_{uuid.uuid4().hex}"
    yield name
    sync_client[DATABASE].drop_collection(name)


@pytest_asyncio.fixture
async def async_client(url: str) -> AsyncIterator[AsyncMongoClient[Any]]:
    made: AsyncMongoClient[Any] = AsyncMongoClient(url, serverSelectionTimeoutMS=10_000)
    yield made
    await made.close()


@pytest.fixture
def make_async(async_client: AsyncMongoClient[Any], collection_name: str) -> Any:
    def make(**options: Any) -> AsyncStore:
        return AsyncStore(async_client, database=DATABASE, collection=collection_name, **options)

    return make


@pytest.fixture
def make_sync(sync_client: MongoClient[Any], collection_name: str) -> Any:
    def make(**options: Any) -> SyncStore:
        return SyncStore(sync_client, database=DATABASE, collection=collection_name, **options)

    return make


# ------------------------------------------------------------------------------------------ basics


async def test_round_trip_versions_and_conflicts(make_async: Any) -> None:
    store: AsyncStore = make_async()
    assert await store.get_messages("chat") == []
    assert (await store.load("chat")).version == 0
    version = await store.save("chat", [SystemMessage("s"), *_users(1, 2)], 0)
    snapshot = await store.load("chat")
    assert snapshot.messages == [SystemMessage("s"), *_users(1, 2)]
    assert snapshot.version == version
    newer = await store.save("chat", [SystemMessage("s"), *_users(2, 3)], version)  # a diff
    assert newer > version
    with pytest.raises(ConcurrentUpdateError):
        await store.save("chat", _users(9), version)
    await store.update_messages("chat", (message for message in _users(7, 8)))  # any iterable, once
    assert await store.get_messages("chat") == _users(7, 8)
    assert [record async for record in _ids(store)] == ["chat"]
    await store.delete_messages("chat")
    assert await store.get_messages("chat") == []


async def _ids(store: AsyncStore) -> AsyncIterator[str]:
    async for memory_id in store.memory_ids():
        yield memory_id


async def test_raw_records_and_corruption(make_async: Any) -> None:
    store: AsyncStore = make_async()
    await store.write_raw("chat", [b"\xff"])
    assert await store.read_raw("chat") == [b"\xff"]
    with pytest.raises(CorruptedMemoryError):
        await store.get_messages("chat")
    await store.update_messages("chat", _users(1))
    assert await store.read_raw("chat") == [dumps_message(UserMessage("1"))]


async def test_an_expired_memory_reads_as_empty(
    make_async: Any, sync_client: MongoClient[Any], collection_name: str
) -> None:
    store: AsyncStore = make_async(ttl=60)
    await store.update_messages("chat", _users(1))
    sync_client[DATABASE][collection_name].update_one(
        {"_id": "chat"}, [{"$set": {"expires_at": {"$add": ["$$NOW", -1000]}}}]
    )
    assert await store.get_messages("chat") == []


async def test_a_url_store_owns_its_client_and_refuses_use_after_aclose(url: str, collection_name: str) -> None:
    async with AsyncStore(url, database=DATABASE, collection=collection_name) as store:
        await store.update_messages("chat", _users(1))
    assert store.closed
    with pytest.raises(StoreError, match="closed"):
        await store.get_messages("chat")
    await store.aclose()  # idempotent


async def test_a_callers_client_stays_open(async_client: AsyncMongoClient[Any], make_async: Any) -> None:
    async with make_async() as store:
        await store.update_messages("chat", _users(1))
    assert await async_client[DATABASE].command("ping")


async def test_bad_arguments_fail_at_construction(async_client: AsyncMongoClient[Any]) -> None:
    with pytest.raises(ValueError, match="database name"):
        AsyncStore(async_client, database="bad.name")
    with pytest.raises(TypeError, match="AsyncMongoClient"):
        AsyncStore(MongoClient(connect=False))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- one layout, both APIs


async def test_sync_writes_async_reads_and_extends(make_sync: Any, make_async: Any) -> None:
    sync: SyncStore = make_sync()
    aio: AsyncStore = make_async()
    sync.update_messages("chat", [SystemMessage("s"), *_users(1, 2)])
    snapshot = await aio.load("chat")
    assert snapshot.messages == [SystemMessage("s"), *_users(1, 2)]
    await aio.save("chat", [*snapshot.messages[:1], *snapshot.messages[2:], UserMessage("3")], snapshot.version)
    assert sync.get_messages("chat") == [SystemMessage("s"), *_users(2, 3)]


async def test_async_writes_sync_reads_and_extends(make_sync: Any, make_async: Any) -> None:
    sync: SyncStore = make_sync()
    aio: AsyncStore = make_async()
    await aio.update_messages("chat", _users(1, 2))
    snapshot = sync.load("chat")
    assert snapshot.messages == _users(1, 2)
    sync.save("chat", [*snapshot.messages[1:], UserMessage("3")], snapshot.version)
    assert await aio.get_messages("chat") == _users(2, 3)
    assert await aio.read_raw("chat") == sync.read_raw("chat")


async def test_concurrent_sync_and_async_writers_lose_nothing(make_sync: Any, make_async: Any) -> None:
    threads, tasks, adds = 3, 6, 15
    errors: list[BaseException] = []

    def append_sync(worker: int) -> None:
        store: SyncStore = make_sync()
        try:
            for index in range(adds):
                while True:
                    snapshot = store.load("chat")
                    try:
                        store.save("chat", [*snapshot.messages, UserMessage(f"t{worker}:{index}")], snapshot.version)
                        break
                    except ConcurrentUpdateError:
                        continue
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    async def append_async(store: AsyncStore, worker: int) -> None:
        for index in range(adds):
            while True:
                snapshot = await store.load("chat")
                try:
                    await store.save("chat", [*snapshot.messages, UserMessage(f"a{worker}:{index}")], snapshot.version)
                    break
                except ConcurrentUpdateError:
                    await asyncio.sleep(0)

    running = [threading.Thread(target=append_sync, args=(worker,)) for worker in range(threads)]
    for thread in running:
        thread.start()
    aio: AsyncStore = make_async()
    await asyncio.gather(*(append_async(aio, worker) for worker in range(tasks)))
    await asyncio.to_thread(lambda: [thread.join() for thread in running])
    assert not errors, errors[0]
    texts = [message.text for message in await aio.get_messages("chat")]  # type: ignore[union-attr]
    assert len(texts) == len(set(texts)) == (threads + tasks) * adds
    for prefix in [f"t{worker}" for worker in range(threads)] + [f"a{worker}" for worker in range(tasks)]:
        assert [text for text in texts if text.startswith(f"{prefix}:")] == [f"{prefix}:{i}" for i in range(adds)]


# ------------------------------------------------------------------------------------- cancellation


async def test_a_cancelled_write_leaves_the_old_or_the_new_list(make_async: Any) -> None:
    store: AsyncStore = make_async()
    old = _users(*range(20))
    await store.update_messages("chat", old)
    # A command cancelled in flight may still be applied by the server after the task has gone (as with
    # any database); what must hold is that every list ever stored is one a writer wrote whole.
    whole = [old]
    outcomes = set()
    # Cancel after 0, 1, 2, ... loop iterations: before the command is sent, while it is in flight, after.
    for steps in range(12):
        snapshot = await store.load("chat")
        new = [*snapshot.messages[1:], UserMessage(f"new {steps}")]
        whole.append(new)
        task = asyncio.create_task(store.save("chat", new, snapshot.version))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
            outcomes.add("written")
        except asyncio.CancelledError:
            outcomes.add("cancelled")
        except ConcurrentUpdateError:
            outcomes.add("conflict")  # an earlier cancelled write landed after this one's read
        assert await store.get_messages("chat") in whole
    assert "cancelled" in outcomes
    await asyncio.sleep(0.2)
    assert await store.get_messages("chat") in whole
    # The pool still works and the next turn from a fresh read goes through.
    snapshot = await store.load("chat")
    await store.save("chat", [*snapshot.messages, UserMessage("after")], snapshot.version)
    assert (await store.get_messages("chat"))[-1] == UserMessage("after")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is new in Python 3.11")
async def test_a_write_under_asyncio_timeout_is_whole_or_absent(make_async: Any) -> None:
    store: AsyncStore = make_async()
    await store.update_messages("chat", _users(1, 2, 3))
    whole = [_users(1, 2, 3)]
    for budget in (0.0, 0.0005, 0.001, 0.002, 0.005, 0.05):
        snapshot = await store.load("chat")
        new = [*snapshot.messages, UserMessage(f"t{budget}")]
        whole.append(new)
        try:
            async with asyncio.timeout(budget):
                await store.save("chat", new, snapshot.version)
        except (TimeoutError, ConcurrentUpdateError):
            pass
        assert await store.get_messages("chat") in whole
    await asyncio.sleep(0.2)
    assert await store.get_messages("chat") in whole


# --------------------------------------------------------------------------------- many tasks, few connections


async def test_commands_are_admitted_in_turn_when_the_pool_runs_short(url: str, collection_name: str) -> None:
    # One connection and four tasks: a task that just had its turn queues behind the others, so each
    # round of turns is every task's once. PyMongo's pool alone gives the connection back to the task
    # that returned it, and the first task would take all its turns before the others took one.
    client: AsyncMongoClient[Any] = AsyncMongoClient(url, maxPoolSize=1, serverSelectionTimeoutMS=10_000)
    try:
        store = AsyncStore(client, database=DATABASE, collection=collection_name)
        order: list[tuple[int, int]] = []

        async def task(number: int) -> None:
            for turn in range(4):
                await store.update_messages(
                    f"t{number}", [UserMessage(f"t{number} {index}") for index in range(turn + 1)]
                )
                order.append((number, turn))

        await asyncio.gather(*(task(number) for number in range(4)))
        assert order == [(number, turn) for turn in range(4) for number in range(4)]
        for number in range(4):
            assert await store.get_messages(f"t{number}") == [UserMessage(f"t{number} {index}") for index in range(4)]
    finally:
        await client.close()
