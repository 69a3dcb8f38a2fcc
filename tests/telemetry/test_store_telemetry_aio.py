"""Every asyncio store's operations as spans, metrics and log lines, on real servers.

The twin of test_store_telemetry.py (the asyncio in-memory store runs the blocking one's code, spans included).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from pymongo import AsyncMongoClient, monitoring

from chatmemory import AiMessage, ConcurrentUpdateError, UserMessage, aio
from chatmemory.aio.stores.mongodb import MongoChatMemoryStore
from chatmemory.aio.stores.redis import RedisChatMemoryStore
from chatmemory.aio.stores.sql import SQLChatMemoryStore
from support.backends import AsyncBackend, langchain4j_redis
from support.backends.mongodb import DATABASE, mongodb_url
from support.tcp_proxy import TcpProxy
from telemetry.recording import BACKEND_NAMES, Recorded

MEMORY_ID = "user-42@example.com"
FIRST = [UserMessage("m0"), AiMessage("m1"), UserMessage("m2")]
LATER = [*FIRST[1:], AiMessage("m3")]


async def _turns(store: aio.ChatMemoryStore) -> int:
    await store.update_messages(MEMORY_ID, FIRST)
    snapshot = await store.load(MEMORY_ID)
    assert await store.get_messages(MEMORY_ID) == FIRST
    version = await store.save(MEMORY_ID, LATER, snapshot.version)
    assert [memory_id async for memory_id in store.memory_ids()] == [MEMORY_ID]
    await store.delete_messages(MEMORY_ID)
    return version


async def test_each_operation_is_one_span_with_its_figures(
    async_backend: AsyncBackend, async_store: aio.ChatMemoryStore, recorded: Recorded
) -> None:
    version = await _turns(async_store)
    spans = recorded.finished()
    names = ["update", "load", "get", "save", "list", "delete"]
    assert [span.name for span in spans] == [f"chatmemory {name}" for name in names]
    update, load, get, save, listed, delete = (dict(span.attributes) for span in spans)
    for span, name in zip(spans, names, strict=True):
        assert span.kind is SpanKind.CLIENT
        assert span.status.status_code is StatusCode.UNSET
        assert span.attributes["chatmemory.backend"] == BACKEND_NAMES[async_backend.name]
        assert span.attributes["chatmemory.operation"] == name
        assert "chatmemory.memory_id" not in span.attributes
    for attributes in (update, load, get, save, delete):
        assert attributes["chatmemory.attempts"] == 1
    assert update["chatmemory.messages.appended"] == 3
    assert update["chatmemory.bytes"] > 0
    assert load["chatmemory.version"] == get["chatmemory.version"] == update["chatmemory.version"]
    assert save["chatmemory.version"] == version > load["chatmemory.version"]
    assert save["chatmemory.messages.appended"] == 1
    assert save["chatmemory.messages.evicted"] == 1
    assert 0 < save["chatmemory.bytes"] < update["chatmemory.bytes"]
    assert listed["chatmemory.items"] == 1


async def test_a_stale_save_is_a_conflict_counted_once(
    async_backend: AsyncBackend, async_store: aio.ChatMemoryStore, recorded: Recorded
) -> None:
    await async_store.update_messages(MEMORY_ID, FIRST)
    version = (await async_store.load(MEMORY_ID)).version
    await async_store.save(MEMORY_ID, LATER, version)
    with pytest.raises(ConcurrentUpdateError):
        await async_store.save(MEMORY_ID, FIRST, version)
    span = recorded.finished()[-1]
    assert span.name == "chatmemory save"
    assert span.attributes["chatmemory.outcome"] == "conflict"
    assert span.attributes["chatmemory.conflicts"] == 1
    backend_name = BACKEND_NAMES[async_backend.name]
    assert recorded.value("chatmemory.conflicts", backend=backend_name, operation="save") == 1


async def test_no_memory_id_on_spans_or_metrics_without_the_opt_in(
    async_store: aio.ChatMemoryStore, recorded: Recorded
) -> None:
    await _turns(async_store)
    await async_store.update_messages(MEMORY_ID, FIRST)
    with pytest.raises(ConcurrentUpdateError):
        await async_store.save(MEMORY_ID, FIRST, 1)
    text = recorded.everything()
    assert "ConcurrentUpdateError" in text
    assert "user-42" not in text
    recorded.opt_in()
    await async_store.load(MEMORY_ID)
    assert recorded.finished()[-1].attributes["chatmemory.memory_id"] == MEMORY_ID


async def test_a_debug_line_per_operation(
    async_store: aio.ChatMemoryStore, recorded: Recorded, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="chatmemory"):
        await async_store.update_messages(MEMORY_ID, FIRST)
    (line,) = [record for record in caplog.records if record.levelno == logging.DEBUG]
    assert line.name.startswith(("chatmemory.stores.", "chatmemory.aio.stores."))
    text = line.getMessage()
    assert f"update memory={MEMORY_ID!r} version=" in text
    assert " attempts=1 " in text


def _twin(store: aio.ChatMemoryStore) -> aio.ChatMemoryStore:
    if isinstance(store, SQLChatMemoryStore):
        return SQLChatMemoryStore(store.engine, table_prefix=store.table_prefix)
    if isinstance(store, RedisChatMemoryStore):
        return RedisChatMemoryStore(store.client, key_prefix=store._options.key_prefix)
    pytest.skip("a store whose unconditional writes send the whole list never retries them")


async def test_a_write_whose_cached_snapshot_went_stale_is_sent_again(
    async_backend: AsyncBackend, async_store: aio.ChatMemoryStore, recorded: Recorded
) -> None:
    other = _twin(async_store)
    await async_store.update_messages(MEMORY_ID, FIRST)
    await other.update_messages(MEMORY_ID, LATER)
    await async_store.update_messages(MEMORY_ID, [*FIRST, UserMessage("m4")])
    await other.aclose()
    span = recorded.finished()[-1]
    assert span.name == "chatmemory update"
    assert span.attributes["chatmemory.attempts"] == 2
    assert span.attributes["chatmemory.messages.appended"] == 4
    backend_name = BACKEND_NAMES[async_backend.name]
    assert recorded.value("chatmemory.retries", backend=backend_name, operation="update") == 1
    assert await async_store.get_messages(MEMORY_ID) == [*FIRST, UserMessage("m4")]


class _LoseWriteReply(monitoring.CommandListener):
    """Cuts the connection instead of forwarding the reply to the next write command."""

    def __init__(self, proxy: TcpProxy) -> None:
        self.proxy = proxy
        self.armed = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.armed and event.command_name in {"findAndModify", "update"}:
            self.armed = False
            # The command goes through; its answer does not come back. Only this command's: the key that
            # opens its body (BSON string element) marks its connection, not the monitor's.
            self.proxy.cut_reply_to(b"\x02" + event.command_name.encode() + b"\x00")

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
async def lossy_mongodb_store() -> AsyncIterator[tuple[_LoseWriteReply, MongoChatMemoryStore]]:
    parsed = urlsplit(mongodb_url())
    with TcpProxy(parsed.hostname or "127.0.0.1", parsed.port or 27017) as proxy:
        listener = _LoseWriteReply(proxy)
        client: AsyncMongoClient[Any] = AsyncMongoClient(
            f"mongodb://{proxy.host}:{proxy.port}/?directConnection=true",
            retryWrites=False,
            serverSelectionTimeoutMS=5_000,
            heartbeatFrequencyMS=60_000,
            serverMonitoringMode="poll",
            event_listeners=[listener],
        )
        store = MongoChatMemoryStore(client, database=DATABASE, collection="telemetry_lost_replies_aio")
        await store.collection.drop()
        yield listener, store
        await store.collection.drop()
        await client.close()


@pytest.mark.mongodb
async def test_a_mongodb_write_whose_reply_was_lost_is_a_retry(lossy_mongodb_store: Any, recorded: Recorded) -> None:
    lose, store = lossy_mongodb_store
    await store.update_messages(MEMORY_ID, FIRST)
    lose.armed = True
    await store.update_messages(MEMORY_ID, LATER)
    span = recorded.finished()[-1]
    assert span.attributes["chatmemory.attempts"] == 2
    assert recorded.value("chatmemory.retries", backend="mongodb", operation="update") == 1
    assert await store.get_messages(MEMORY_ID) == LATER


@pytest.fixture(
    params=[
        pytest.param("open_async_backend", id="redis", marks=pytest.mark.redis),
        pytest.param("open_async_cluster_backend", id="redis_cluster", marks=pytest.mark.redis_cluster),
    ]
)
async def langchain4j_store(request: pytest.FixtureRequest) -> AsyncIterator[aio.ChatMemoryStore]:
    opened = getattr(langchain4j_redis, request.param)()
    store = await opened.make_store()
    yield store
    await opened.close_store(store)


async def test_langchain4j_redis_operations_are_spans(
    langchain4j_store: aio.ChatMemoryStore, recorded: Recorded
) -> None:
    await _turns(langchain4j_store)
    spans = recorded.finished()
    assert [span.name for span in spans] == [
        f"chatmemory {name}" for name in ["update", "load", "get", "save", "list", "delete"]
    ]
    update, load, _, save, listed, _ = (dict(span.attributes) for span in spans)
    assert {span.attributes["chatmemory.backend"] for span in spans} == {"langchain4j-redis"}
    assert update["chatmemory.bytes"] == load["chatmemory.bytes"] > 0
    assert save["chatmemory.messages.appended"] == 3
    assert listed["chatmemory.items"] == 1
    assert MEMORY_ID not in recorded.everything()
    await langchain4j_store.update_messages(MEMORY_ID, FIRST)
    version = (await langchain4j_store.load(MEMORY_ID)).version
    await langchain4j_store.save(MEMORY_ID, LATER, version)
    with pytest.raises(ConcurrentUpdateError):
        await langchain4j_store.save(MEMORY_ID, FIRST, version)
    assert recorded.value("chatmemory.conflicts", backend="langchain4j-redis", operation="save") == 1


async def test_sql_modify_and_purge_are_spans(async_store: aio.ChatMemoryStore, recorded: Recorded) -> None:
    if not isinstance(async_store, SQLChatMemoryStore):
        pytest.skip("modify and purge_expired are the SQL store's")
    version = await async_store.modify(MEMORY_ID, lambda messages: [*messages, *FIRST])
    assert await async_store.purge_expired() == 0
    modify, purge = recorded.finished()
    assert modify.name == "chatmemory modify"
    assert modify.attributes["chatmemory.version"] == version
    assert modify.attributes["chatmemory.messages.appended"] == 3
    assert purge.attributes["chatmemory.items"] == 0
