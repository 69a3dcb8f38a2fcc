"""Every store's operations as spans, metrics and log lines, on real servers (the blocking stores).

The twin of test_store_telemetry_aio.py. Memory ids are personal data: they must appear on no span and no
metric unless the application opts in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from pymongo import MongoClient, monitoring

from chatmemory import (
    AiMessage,
    ChatMemoryStore,
    ConcurrentUpdateError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    Snapshot,
    StoreError,
    UserMessage,
)
from chatmemory.stores.base import RetryPolicy
from chatmemory.stores.base.facade import StoreTelemetry
from chatmemory.stores.mongodb import MongoChatMemoryStore
from chatmemory.stores.redis import RedisChatMemoryStore
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends import Backend, langchain4j_redis
from support.backends.mongodb import DATABASE, mongodb_url
from support.tcp_proxy import TcpProxy
from telemetry.recording import BACKEND_NAMES, Recorded

MEMORY_ID = "user-42@example.com"
FIRST = [UserMessage("m0"), AiMessage("m1"), UserMessage("m2")]
LATER = [*FIRST[1:], AiMessage("m3")]  # evicts the oldest, appends one


def _turns(store: ChatMemoryStore) -> int:
    store.update_messages(MEMORY_ID, FIRST)
    snapshot = store.load(MEMORY_ID)
    assert store.get_messages(MEMORY_ID) == FIRST
    version = store.save(MEMORY_ID, LATER, snapshot.version)
    assert list(store.memory_ids()) == [MEMORY_ID]
    store.delete_messages(MEMORY_ID)
    return version


def test_each_operation_is_one_span_with_its_figures(backend: Backend, store: ChatMemoryStore, recorded: Recorded):
    version = _turns(store)
    spans = recorded.finished()
    names = ["update", "load", "get", "save", "list", "delete"]
    assert [span.name for span in spans] == [f"chatmemory {name}" for name in names]  # get_messages: one span
    update, load, get, save, listed, delete = (dict(span.attributes) for span in spans)
    for span, name in zip(spans, names, strict=True):
        assert span.kind is SpanKind.CLIENT
        assert span.status.status_code is StatusCode.UNSET
        assert span.attributes["chatmemory.backend"] == BACKEND_NAMES[backend.name]
        assert span.attributes["chatmemory.operation"] == name
        assert span.attributes["chatmemory.outcome"] == "ok"
        assert "chatmemory.memory_id" not in span.attributes
    for attributes in (update, load, get, save, delete):
        assert attributes["chatmemory.attempts"] == 1
    assert update["chatmemory.messages.appended"] == 3
    assert update["chatmemory.bytes"] > 0
    assert update["chatmemory.version"] > 0
    assert load["chatmemory.version"] == get["chatmemory.version"] == update["chatmemory.version"]
    assert save["chatmemory.version"] == version > load["chatmemory.version"]
    assert save["chatmemory.messages.appended"] == 1  # a diff: one message sent, one evicted
    assert save["chatmemory.messages.evicted"] == 1
    assert 0 < save["chatmemory.bytes"] < update["chatmemory.bytes"]
    assert listed["chatmemory.items"] == 1
    (point,) = [
        point
        for point in recorded.points("chatmemory.operation.duration")
        if point.attributes["chatmemory.operation"] == "save"
    ]
    assert point.count == 1
    assert point.attributes["chatmemory.backend"] == BACKEND_NAMES[backend.name]


def test_a_read_without_a_cached_snapshot_counts_the_bytes_it_received(
    backend: Backend, store: ChatMemoryStore, recorded: Recorded
) -> None:
    if backend.name == "memory":
        pytest.skip("the in-memory store keeps messages, not records")
    store.update_messages(MEMORY_ID, FIRST)
    store.invalidate(MEMORY_ID)  # type: ignore[attr-defined]
    store.load(MEMORY_ID)
    load = recorded.finished()[-1]
    assert load.attributes["chatmemory.bytes"] == recorded.finished()[0].attributes["chatmemory.bytes"]


def test_a_stale_save_is_a_conflict_counted_once(backend: Backend, store: ChatMemoryStore, recorded: Recorded):
    store.update_messages(MEMORY_ID, FIRST)
    version = store.load(MEMORY_ID).version
    store.save(MEMORY_ID, LATER, version)
    with pytest.raises(ConcurrentUpdateError):
        store.save(MEMORY_ID, FIRST, version)
    span = recorded.finished()[-1]
    assert span.name == "chatmemory save"
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["chatmemory.outcome"] == "conflict"
    assert span.attributes["chatmemory.conflicts"] == 1
    backend_name = BACKEND_NAMES[backend.name]
    assert recorded.value("chatmemory.conflicts", backend=backend_name, operation="save") == 1
    assert recorded.value("chatmemory.retries") == 0


def test_no_memory_id_on_spans_or_metrics_without_the_opt_in(store: ChatMemoryStore, recorded: Recorded):
    _turns(store)
    store.update_messages(MEMORY_ID, FIRST)
    with pytest.raises(ConcurrentUpdateError) as raised:  # its message names the memory
        store.save(MEMORY_ID, FIRST, 1)
    assert MEMORY_ID in str(raised.value)
    text = recorded.everything()
    assert "ConcurrentUpdateError" in text
    assert MEMORY_ID not in text
    assert "user-42" not in text

    recorded.opt_in()
    store.load(MEMORY_ID)
    assert recorded.finished()[-1].attributes["chatmemory.memory_id"] == MEMORY_ID
    for point in recorded.points("chatmemory.operation.duration"):
        assert "chatmemory.memory_id" not in point.attributes  # never on metrics


def test_a_debug_line_per_operation_in_the_stores_module_logger(
    store: ChatMemoryStore, recorded: Recorded, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="chatmemory"):
        store.update_messages(MEMORY_ID, FIRST)
    (line,) = [record for record in caplog.records if record.levelno == logging.DEBUG]
    assert line.name == type(store).__module__
    assert line.name.startswith("chatmemory.stores.")
    text = line.getMessage()
    assert f"update memory={MEMORY_ID!r} version=" in text
    assert " bytes=" in text
    assert " attempts=1 " in text


# ------------------------------------------------------------------------------------------ retries


def _twin(store: ChatMemoryStore) -> ChatMemoryStore:
    """A second store on the same namespace, with its own snapshot cache."""
    if isinstance(store, SQLChatMemoryStore):
        return SQLChatMemoryStore(store.engine, table_prefix=store.table_prefix)
    if isinstance(store, RedisChatMemoryStore):
        return RedisChatMemoryStore(store.client, key_prefix=store._options.key_prefix)
    pytest.skip("a store whose unconditional writes send the whole list never retries them")


def test_a_write_whose_cached_snapshot_went_stale_is_sent_again(
    backend: Backend, store: ChatMemoryStore, recorded: Recorded
) -> None:
    other = _twin(store)
    store.update_messages(MEMORY_ID, FIRST)  # cached
    other.update_messages(MEMORY_ID, LATER)  # moves the memory on behind the first store's back
    store.update_messages(MEMORY_ID, [*FIRST, UserMessage("m4")])  # its diff is refused: the whole list goes
    other.close()
    span = recorded.finished()[-1]
    assert span.name == "chatmemory update"
    assert span.attributes["chatmemory.attempts"] == 2
    assert span.attributes["chatmemory.outcome"] == "ok"
    assert span.attributes["chatmemory.messages.appended"] == 4  # the last attempt's: the whole list
    backend_name = BACKEND_NAMES[backend.name]
    assert recorded.value("chatmemory.retries", backend=backend_name, operation="update") == 1
    assert store.get_messages(MEMORY_ID) == [*FIRST, UserMessage("m4")]


class _LoseWriteReply(monitoring.CommandListener):
    """Cuts the connection instead of forwarding the reply to the next write command."""

    def __init__(self) -> None:
        self.proxy: TcpProxy | None = None
        self.armed = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.armed and event.command_name in {"findAndModify", "update"}:
            assert self.proxy is not None
            self.armed = False
            # The command goes through; its answer does not come back. Only this command's: the key that
            # opens its body (BSON string element) marks its connection, not the monitor's.
            self.proxy.cut_reply_to(b"\x02" + event.command_name.encode() + b"\x00")

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
def lossy_mongodb_store() -> Iterator[tuple[_LoseWriteReply, MongoChatMemoryStore]]:
    """A MongoDB store whose connections go through a fault proxy (retryable writes off)."""
    parsed = urlsplit(mongodb_url())
    listener = _LoseWriteReply()
    with TcpProxy(parsed.hostname or "127.0.0.1", parsed.port or 27017) as proxy:
        listener.proxy = proxy
        client: MongoClient[Any] = MongoClient(
            f"mongodb://{proxy.host}:{proxy.port}/?directConnection=true",
            retryWrites=False,
            serverSelectionTimeoutMS=5_000,
            heartbeatFrequencyMS=60_000,
            serverMonitoringMode="poll",
            event_listeners=[listener],
        )
        store = MongoChatMemoryStore(client, database=DATABASE, collection="telemetry_lost_replies")
        store.collection.drop()
        yield listener, store
        store.collection.drop()
        client.close()


@pytest.mark.mongodb
def test_a_mongodb_write_whose_reply_was_lost_is_a_retry(lossy_mongodb_store: Any, recorded: Recorded) -> None:
    lose, store = lossy_mongodb_store
    store.update_messages(MEMORY_ID, FIRST)
    lose.armed = True
    store.update_messages(MEMORY_ID, LATER)  # the resend finds its write id
    span = recorded.finished()[-1]
    assert span.attributes["chatmemory.attempts"] == 2
    assert span.attributes["chatmemory.outcome"] == "ok"
    assert recorded.value("chatmemory.retries", backend="mongodb", operation="update") == 1
    assert store.get_messages(MEMORY_ID) == LATER


class _Flaky:
    """A store whose write conflicts until its retry policy gives up (the shared policy, no database)."""

    def __init__(self, budget: float) -> None:
        self.policy = RetryPolicy(budget=budget, base_delay=0.001, max_delay=0.001)

    @StoreTelemetry("example", "chatmemory.stores.example")("update")
    def update_messages(self, memory_id: str) -> None:
        attempts = self.policy.start()
        while attempts.backoff() is not None:
            pass
        raise StoreError("writing the memory", memory_id, f"conflicted on each of {attempts.count} attempts")


def test_retries_that_run_out_are_a_warning(recorded: Recorded, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="chatmemory"), pytest.raises(StoreError):
        _Flaky(budget=0.05).update_messages("m")
    span = recorded.finished()[-1]
    attempts = span.attributes["chatmemory.attempts"]
    assert attempts > 1
    assert recorded.value("chatmemory.retries", backend="example") == attempts - 1
    (warning,) = caplog.records
    assert warning.name == "chatmemory.stores.example"
    assert warning.getMessage().startswith(f"example update of memory 'm': retries exhausted after {attempts} attempts")


# ------------------------------------------------------------------------------------ LangChain4j Redis


@pytest.fixture(
    params=[
        pytest.param("open_backend", id="redis", marks=pytest.mark.redis),
        pytest.param("open_cluster_backend", id="redis_cluster", marks=pytest.mark.redis_cluster),
    ]
)
def langchain4j_store(request: pytest.FixtureRequest) -> Iterator[ChatMemoryStore]:
    opened = getattr(langchain4j_redis, request.param)()
    store = opened.make_store()
    yield store
    opened.close_store(store)
    opened.close()


def test_langchain4j_redis_operations_are_spans(langchain4j_store: ChatMemoryStore, recorded: Recorded) -> None:
    _turns(langchain4j_store)
    spans = recorded.finished()
    assert [span.name for span in spans] == [
        f"chatmemory {name}" for name in ["update", "load", "get", "save", "list", "delete"]
    ]
    update, load, _, save, listed, _ = (dict(span.attributes) for span in spans)
    assert {span.attributes["chatmemory.backend"] for span in spans} == {"langchain4j-redis"}
    assert update["chatmemory.messages.appended"] == 3  # one JSON value: the whole list each time
    assert update["chatmemory.bytes"] == load["chatmemory.bytes"] > 0
    assert save["chatmemory.messages.appended"] == 3
    assert save["chatmemory.version"] > load["chatmemory.version"]
    assert listed["chatmemory.items"] == 1
    assert MEMORY_ID not in recorded.everything()
    langchain4j_store.update_messages(MEMORY_ID, FIRST)
    version = langchain4j_store.load(MEMORY_ID).version
    langchain4j_store.save(MEMORY_ID, LATER, version)
    with pytest.raises(ConcurrentUpdateError):
        langchain4j_store.save(MEMORY_ID, FIRST, version)
    assert recorded.value("chatmemory.conflicts", backend="langchain4j-redis", operation="save") == 1


def test_sql_modify_and_purge_are_spans(backend: Backend, store: ChatMemoryStore, recorded: Recorded) -> None:
    if not isinstance(store, SQLChatMemoryStore):
        pytest.skip("modify and purge_expired are the SQL store's")
    version = store.modify(MEMORY_ID, lambda messages: [*messages, *FIRST])
    assert store.purge_expired() == 0
    modify, purge = recorded.finished()
    assert modify.name == "chatmemory modify"
    assert modify.attributes["chatmemory.version"] == version
    assert modify.attributes["chatmemory.messages.appended"] == 3
    assert purge.name == "chatmemory purge_expired"
    assert purge.attributes["chatmemory.items"] == 0


class _Contended(InMemoryChatMemoryStore):
    """Another writer adds a message between every read of the memory and the write that follows it."""

    def load(self, memory_id: str) -> Snapshot:
        snapshot = super().load(memory_id)
        super().update_messages(memory_id, [*snapshot.messages, UserMessage("other")])
        return snapshot


def test_a_memory_retrying_its_add_counts_its_retries_and_warns_when_it_gives_up(
    recorded: Recorded, caplog: pytest.LogCaptureFixture
) -> None:
    retry = RetryPolicy(budget=0.05, base_delay=0.001, max_delay=0.001)
    memory = MessageWindowChatMemory("m", max_messages=100, store=_Contended(), retry=retry)
    with caplog.at_level(logging.WARNING, logger="chatmemory"), pytest.raises(ConcurrentUpdateError) as raised:
        memory.add(UserMessage("mine"))
    attempts = raised.value.attempts
    assert attempts is not None and attempts > 1
    assert recorded.value("chatmemory.retries", operation="memory.add") == attempts - 1
    assert recorded.value("chatmemory.conflicts", backend="memory", operation="save") == attempts
    assert [record.getMessage() for record in caplog.records] == [
        f"memory 'm': add gave up after {attempts} attempts: other writers kept changing it"
    ]


def test_history_reads_and_trims_are_spans(backend: Backend, recorded: Recorded) -> None:
    import datetime

    store = backend.make_store(history=True)
    try:
        store.update_messages(MEMORY_ID, FIRST)
        recorded.spans.clear()  # only what follows
        assert len(store.history(MEMORY_ID, limit=2).entries) == 2
        removed = store.trim_history(older_than=datetime.timedelta(days=1))
        spans = recorded.finished()
        assert [span.name for span in spans] == ["chatmemory history", "chatmemory trim_history"]
        history, trim = (dict(span.attributes) for span in spans)
        assert history["chatmemory.items"] == 2
        assert trim["chatmemory.items"] == removed == 0
        assert all("chatmemory.memory_id" not in span.attributes for span in spans)
    finally:
        backend.close_store(store)


class _Refusing:
    """A store whose one-argument method (reported without packing its arguments) conflicts."""

    @StoreTelemetry("example", "chatmemory.stores.example")("delete")
    def delete_messages(self, memory_id: str) -> None:
        raise ConcurrentUpdateError(memory_id, 7)


def test_a_conflict_leaving_a_one_argument_method_is_counted(recorded: Recorded) -> None:
    with pytest.raises(ConcurrentUpdateError):
        _Refusing().delete_messages(memory_id="m")
    (span,) = recorded.finished()
    assert span.name == "chatmemory delete"
    assert span.attributes["chatmemory.outcome"] == "conflict"
    assert span.attributes["chatmemory.conflicts"] == 1
    assert recorded.value("chatmemory.conflicts", backend="example", operation="delete") == 1
