"""History on the asyncio MongoDB store: the same plans as the sync store, executed with ``AsyncMongoClient``."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from pymongo import AsyncMongoClient, MongoClient

from chatmemory import ConcurrentUpdateError, HistoryNotEnabledError, SystemMessage, UserMessage, aio
from chatmemory.aio.stores.mongodb import MongoChatMemoryStore as AsyncStore
from chatmemory.core.history import HistoryEntry
from chatmemory.stores.mongodb import MongoChatMemoryStore as SyncStore
from chatmemory.stores.mongodb.layout import COPY_AT_GROUPS
from chatmemory.stores.mongodb.plan import MongoPlanner
from support.backends.mongodb import DATABASE, mongodb_url

pytestmark = [pytest.mark.mongodb, pytest.mark.asyncio]


@pytest.fixture(scope="module")
def sync_client() -> Iterator[MongoClient[Any]]:
    made: MongoClient[Any] = MongoClient(mongodb_url(), serverSelectionTimeoutMS=10_000, retryWrites=False)
    yield made
    made.close()


@pytest.fixture
def collection_name(sync_client: MongoClient[Any]) -> Iterator[str]:
    name = f"history_{uuid.uuid4().hex[:12]}"
    yield name
    sync_client[DATABASE].drop_collection(name)
    sync_client[DATABASE].drop_collection(f"{name}_history")


@pytest_asyncio.fixture
async def async_client() -> AsyncIterator[AsyncMongoClient[Any]]:
    made: AsyncMongoClient[Any] = AsyncMongoClient(mongodb_url(), serverSelectionTimeoutMS=10_000, retryWrites=False)
    yield made
    await made.close()


@pytest.fixture
def make(async_client: AsyncMongoClient[Any], collection_name: str) -> Any:
    def build(**options: Any) -> AsyncStore:
        options.setdefault("history", True)
        return AsyncStore(async_client, database=DATABASE, collection=collection_name, **options)

    return build


async def _all(store: AsyncStore, memory_id: str, page: int = 100) -> list[HistoryEntry]:
    entries: list[HistoryEntry] = []
    after = None
    while True:
        got = await store.history(memory_id, after=after, limit=page)
        entries += got.entries
        if got.next_after is None:
            return entries
        after = got.next_after


def _texts(entries: list[HistoryEntry]) -> list[str]:
    return [entry.message.text for entry in entries]  # type: ignore[attr-defined]


async def test_a_thousand_turns_keep_every_message_while_the_window_stays_bounded(make: Any) -> None:
    store = make()
    assert isinstance(store, aio.SupportsHistory) and store.keeps_history
    memory = aio.MessageWindowChatMemory("long", store=store, max_messages=10, always_keep_system_message_first=True)
    await memory.add(SystemMessage("be brief"))
    for turn in range(1000):
        await memory.add(UserMessage(f"m{turn}"))
    assert len(await store.get_messages("long")) == 10
    entries = await _all(store, "long", page=250)
    assert _texts(entries) == ["be brief", *(f"m{turn}" for turn in range(1000))]
    sequences = [entry.sequence for entry in entries]
    assert sequences == sorted(set(sequences))
    newest = await store.history("long", reverse=True, limit=2)
    assert _texts(newest.entries) == ["m999", "m998"]


async def test_concurrent_tasks_record_each_message_once_and_losers_nothing(make: Any) -> None:
    stores = [make() for _ in range(3)]
    await stores[0].update_messages("m", [UserMessage("start")])
    lost = 0

    async def write(store: AsyncStore, writer: int) -> None:
        nonlocal lost
        for turn in range(10):
            while True:
                snapshot = await store.load("m")
                try:
                    await store.save("m", [*snapshot.messages, UserMessage(f"{writer}-{turn}")][-4:], snapshot.version)
                    break
                except ConcurrentUpdateError:
                    lost += 1

    await asyncio.gather(*(write(store, index) for index, store in enumerate(stores)))
    texts = _texts(await _all(stores[1], "m", page=8))
    assert sorted(texts) == sorted(["start", *(f"{w}-{t}" for w in range(3) for t in range(10))])


async def test_a_crashed_copy_is_merged_by_readers_and_copied_by_the_next_write(make: Any) -> None:
    store, other = make(), make()
    await store.update_messages("m", [UserMessage("a")])
    state = await store._load_state("m")
    assert state is not None
    plan = MongoPlanner(None, store._history).save("m", [UserMessage("a"), UserMessage("b")], state.version, state)
    assert await store.collection.find_one_and_update(plan.filter, plan.update) is not None
    assert _texts((await other.history("m")).entries) == ["a", "b"]
    for turn in range(COPY_AT_GROUPS):
        snapshot = await other.load("m")
        await other.save("m", [*snapshot.messages, UserMessage(f"c{turn}")], snapshot.version)
    assert _texts(await _all(store, "m")) == ["a", "b", *(f"c{turn}" for turn in range(COPY_AT_GROUPS))]
    assert store.history_collection is not None
    # a, the crashed b and the first six turns: copied once eight groups were staged
    assert await store.history_collection.count_documents({"m": "m"}) == COPY_AT_GROUPS


async def test_sync_and_async_stores_share_one_history(make: Any, sync_client: Any, collection_name: str) -> None:
    store = make()
    sync = SyncStore(sync_client, database=DATABASE, collection=collection_name, history=True)
    await store.update_messages("m", [UserMessage("a")])
    snapshot = sync.load("m")
    sync.save("m", [*snapshot.messages, UserMessage("b")], snapshot.version)
    assert _texts((await store.history("m")).entries) == ["a", "b"]


async def test_delete_and_trim(make: Any) -> None:
    store = make()
    await store.update_messages("m", [UserMessage("a")])
    await store.update_messages("n", [UserMessage("x")])
    await store.delete_messages("m")
    assert (await store.history("m")).entries == []
    assert await store.trim_history(older_than=datetime.timedelta(0), memory_id="n") == 1
    assert (await store.history("n")).entries == []
    assert await store.get_messages("n") == [UserMessage("x")]


async def test_a_store_without_history_refuses_history_calls(make: Any) -> None:
    store = make(history=False)
    with pytest.raises(HistoryNotEnabledError, match=r"aio\.MongoChatMemoryStore"):
        await store.history("m")
    with pytest.raises(HistoryNotEnabledError):
        await store.trim_history(older_than=datetime.timedelta(0))
    with pytest.raises(TypeError):
        await store.history("m", after="1")


async def test_with_history_ttl_the_history_outlives_the_window(make: Any) -> None:
    store = make(ttl=1, history_ttl=30)
    await store.update_messages("m", [UserMessage("a")])
    await asyncio.sleep(1.3)
    assert await store.get_messages("m") == []
    await store.update_messages("m", [UserMessage("b")])
    assert _texts((await store.history("m")).entries) == ["a", "b"]
