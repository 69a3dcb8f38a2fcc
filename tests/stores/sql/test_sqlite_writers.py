"""The writers of one SQLite file in one process queue before they begin, instead of polling SQLite's lock.

Without the queue a ``BEGIN IMMEDIATE`` that finds the write lock taken is sent all the same and then
polls in ``sqlite3``'s busy handler, sleeping up to 100 ms at a time, so under many writers one can lose
for a second and more. These tests pin what the queue promises: a write waits for the transaction under
way before it sends anything of its own (across stores on the file, sync and asyncio), the turn comes
back after every way a transaction ends, a write that waits for itself fails after the busy timeout
rather than hanging, and which databases have a queue at all.
"""

from __future__ import annotations

import asyncio
import pathlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.engine import make_url

from chatmemory import StoreError, UserMessage
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLStore
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.engine import SQLITE_BUSY_TIMEOUT_SECONDS, WriterQueue, writer_queue, writer_queue_for

pytestmark = pytest.mark.sqlite


def texts(*words: str) -> list[ChatMessage]:
    return [UserMessage(word) for word in words]


@pytest.fixture
def url(tmp_path: pathlib.Path) -> str:
    return f"sqlite:///{tmp_path / 'chat.db'}"


@pytest.fixture
def store(url: str) -> Iterator[SQLChatMemoryStore]:
    with SQLChatMemoryStore(url) as made:
        made.create_schema()
        yield made


class Statements:
    """Every statement the connections of the engines it traces send, as (thread, first word), in order.

    Recorded by ``sqlite3``'s trace callback, set on each connection as the pool opens it: nothing listens
    to the engine's cursor events, so the store sends on the pooled connection, as it does in use.
    """

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def trace(self, engine: Any) -> None:
        """Record what ``engine``'s connections send (call before the engine opens its first)."""

        def record(sql: str) -> None:
            with self._lock:
                self.sent.append((threading.current_thread().name, sql.split()[0].upper()))

        event.listen(
            engine.pool, "connect", lambda dbapi_connection, _record: dbapi_connection.set_trace_callback(record)
        )

    def of(self, prefix: str) -> list[str]:
        """What the threads whose names start with ``prefix`` sent."""
        return [statement for name, statement in list(self.sent) if name.startswith(prefix)]

    def first(self, prefix: str, statement: str, start: int = 0) -> int:
        """Where a thread named ``prefix``... first sent ``statement``, from ``start`` on."""
        for index, (name, sent) in enumerate(list(self.sent)):
            if index >= start and name.startswith(prefix) and sent == statement:
                return index
        raise AssertionError(f"no {statement} from {prefix} threads in {self.sent}")


@pytest.fixture
def waiting(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The names of the threads that asked for a file's turn (and may be waiting for it)."""
    asked: set[str] = set()
    enter = WriterQueue.enter

    def noted(queue: WriterQueue, statement: str, stop: threading.Event | None = None) -> Any:
        asked.add(threading.current_thread().name)
        return enter(queue, statement, stop)

    monkeypatch.setattr(WriterQueue, "enter", noted)
    return asked


def until(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


async def _until_async(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.005)


def _hold_a_transaction(store: SQLChatMemoryStore, inside: threading.Event, go: threading.Event) -> None:
    def change(messages: list[ChatMessage]) -> list[ChatMessage]:
        inside.set()
        assert go.wait(10)
        return [*messages, UserMessage("held")]

    store.modify("held", change)


def test_a_write_waits_for_the_transaction_under_way_before_it_begins(url: str, waiting: set[str]) -> None:
    # Two stores on one file: the second store's write sends nothing of its own (no BEGIN) until the first
    # store's transaction has committed, although it asked to write while the transaction was open.
    statements = Statements()
    with SQLChatMemoryStore(url) as first, SQLChatMemoryStore(url) as second:
        statements.trace(first.engine)
        statements.trace(second.engine)
        first.create_schema()
        second.update_messages("warm", texts("a"))  # its schema checked, its connection open
        assert second._executor.session()._on_pooled()  # statements go to the pooled connection, as in use
        inside, go = threading.Event(), threading.Event()
        with (
            ThreadPoolExecutor(1, thread_name_prefix="holder") as holders,
            ThreadPoolExecutor(1, thread_name_prefix="writer") as writers,
        ):
            held = holders.submit(_hold_a_transaction, first, inside, go)
            assert inside.wait(10)
            written = writers.submit(second.update_messages, "waits", texts("b"))
            until(lambda: any(name.startswith("writer") for name in waiting) or "BEGIN" in statements.of("writer"))
            assert "BEGIN" not in statements.of("writer")  # not even its BEGIN IMMEDIATE while the other is open
            go.set()
            held.result(10)
            written.result(10)
        assert statements.first("holder", "COMMIT") < statements.first("writer", "BEGIN")
        assert second.get_messages("waits") == texts("b")
        assert first.get_messages("held") == texts("held")


def test_an_asyncio_store_on_the_file_queues_behind_a_sync_one(url: str, waiting: set[str]) -> None:
    # The asyncio store runs SQLite operations on worker threads with a sync engine of the same file: its
    # writes take the same turn.
    statements = Statements()
    inside, go = threading.Event(), threading.Event()

    async def write_while_held(store: SQLChatMemoryStore) -> int:
        async with AsyncSQLStore(url) as aio_store:
            assert aio_store._thread_engine is not None  # a sqlite:// URL runs on worker threads
            statements.trace(aio_store._thread_engine)
            await aio_store.update_messages("warm", texts("a"))
            with ThreadPoolExecutor(1, thread_name_prefix="holder") as holders:
                held = holders.submit(_hold_a_transaction, store, inside, go)
                assert await asyncio.to_thread(inside.wait, 10)
                held_from = len(statements.sent)
                waiting.clear()
                writing = asyncio.ensure_future(aio_store.update_messages("waits", texts("b")))
                await asyncio.wait_for(
                    _until_async(lambda: bool(waiting) or "BEGIN" in statements.of("chatmemory-sqlite")), 10
                )
                assert "BEGIN" not in [sql for _, sql in statements.sent[held_from:]]
                go.set()
                await writing
                held.result(10)
            assert await aio_store.get_messages("waits") == texts("b")
            return held_from

    with SQLChatMemoryStore(url) as store:
        statements.trace(store.engine)
        store.create_schema()
        held_from = asyncio.run(write_while_held(store))
    assert statements.first("holder", "COMMIT") < statements.first("chatmemory-sqlite", "BEGIN", held_from)


def test_the_turn_comes_back_however_a_transaction_ends(url: str, store: SQLChatMemoryStore) -> None:
    queue = writer_queue(make_url(url), 30.0)
    assert queue is not None
    store.update_messages("m", texts("a"))  # committed
    assert not queue.busy

    def failing(messages: list[ChatMessage]) -> list[ChatMessage]:
        assert queue.busy  # the change runs inside the transaction, in the queue's turn
        raise RuntimeError("the change failed")

    with pytest.raises(RuntimeError):
        store.modify("m", failing)  # rolled back
    assert not queue.busy
    store.modify("m", lambda messages: None)  # nothing to write
    assert not queue.busy
    store.delete_messages("m")
    assert not queue.busy
    assert store.get_messages("m") == []


def test_a_write_that_waits_for_itself_fails_after_the_busy_timeout(tmp_path: pathlib.Path) -> None:
    # A change that writes the same file through another store would wait for its own transaction: it
    # fails when the busy timeout runs out, as SQLite's own wait would, and the first write goes on. (So
    # it did before the queue: this pins that waiting for the turn never hangs.)
    url = f"sqlite:///{tmp_path / 'self.db'}"
    options = {"connect_args": {"timeout": 0.2}}
    with (
        SQLChatMemoryStore(url, engine_options=options) as first,
        SQLChatMemoryStore(url, engine_options=options) as second,
    ):
        first.create_schema()
        second.update_messages("other", texts("x"))
        failures: list[StoreError] = []

        def change(messages: list[ChatMessage]) -> list[ChatMessage]:
            started = time.monotonic()
            with pytest.raises(StoreError) as raised:
                second.update_messages("other", texts("y"))
            failures.append(raised.value)
            assert time.monotonic() - started < 10  # it gave up, it did not hang
            return [*messages, UserMessage("mine")]

        first.modify("m", change)
        assert "database is locked" in str(failures[0])
        assert first.get_messages("m") == texts("mine")
        assert second.get_messages("other") == texts("x")
        second.update_messages("other", texts("z"))  # the turn came back
        assert second.get_messages("other") == texts("z")


def test_writers_take_their_connection_before_their_turn(tmp_path: pathlib.Path) -> None:
    # One connection, eight threads writing one memory (diffs that find it moved on are tried again under
    # the lock): writers queue for the turn holding their connection, so the one whose turn it is never
    # waits for the pool. Any wait for each other would sit out the 5 s timeouts.
    options = {"pool_size": 1, "max_overflow": 0, "pool_timeout": 5, "connect_args": {"timeout": 5}}
    with SQLChatMemoryStore(f"sqlite:///{tmp_path / 'one.db'}", engine_options=options) as store:
        store.create_schema()
        store.update_messages("shared", texts("start"))

        def write(number: int) -> None:
            for turn in range(20):
                store.update_messages("shared", texts("start", f"{number}-{turn}"))

        started = time.monotonic()
        with ThreadPoolExecutor(8) as threads:
            for done in [threads.submit(write, number) for number in range(8)]:
                done.result(60)
        assert time.monotonic() - started < 5  # no write sat out a timeout
        last = store.get_messages("shared")
        assert last[0] == UserMessage("start") and len(last) == 2


async def test_a_cancelled_asyncio_write_stops_waiting_for_its_turn(
    url: str, store: SQLChatMemoryStore, waiting: set[str]
) -> None:
    # Cancelled while it waits for the turn, it has begun nothing: the call ends while the other
    # transaction is still open, the write never runs, and the turn goes on to the next writer.
    queue = writer_queue(make_url(url), 30.0)
    assert queue is not None
    inside, go = threading.Event(), threading.Event()
    async with AsyncSQLStore(url) as aio_store:
        await aio_store.update_messages("m", texts("a"))
        with ThreadPoolExecutor(1, thread_name_prefix="holder") as holders:
            held = holders.submit(_hold_a_transaction, store, inside, go)
            try:
                assert await asyncio.to_thread(inside.wait, 10)
                waiting.clear()
                writing = asyncio.ensure_future(aio_store.update_messages("m", texts("a", "b")))
                await asyncio.wait_for(_until_async(lambda: bool(waiting)), 10)
                writing.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(writing), 5)
                assert queue.busy and not held.done()  # it returned before the turn came
            finally:
                go.set()
            held.result(10)
        assert not queue.busy
        assert await aio_store.get_messages("m") == texts("a")  # the cancelled write never ran
        await aio_store.update_messages("m", texts("a", "c"))  # the turn came back
        assert await aio_store.get_messages("m") == texts("a", "c")


def test_an_endless_busy_timeout_waits_for_ever(tmp_path: pathlib.Path) -> None:
    # A lock's wait cannot be told an infinite timeout: the turn is then awaited without one.
    options = {"connect_args": {"timeout": float("inf")}}
    with SQLChatMemoryStore(f"sqlite:///{tmp_path / 'endless.db'}", engine_options=options) as store:
        store.create_schema()
        store.update_messages("m", texts("a"))
        store.update_messages("m", texts("a", "b"))
        assert store.get_messages("m") == texts("a", "b")


def test_which_databases_have_a_queue(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "q.db"
    first = writer_queue(make_url(f"sqlite:///{path}"), 30.0)
    assert first is not None
    # One turn per file, however the URL names it; each store waits by its own busy timeout.
    same = writer_queue(make_url(f"sqlite:///{tmp_path}/./q.db"), 0.5)
    assert same is not None and same.turn is first.turn and same.timeout == 0.5
    uri = writer_queue(make_url(f"sqlite:///file:{path}?mode=rwc&uri=true"), 30.0)
    assert uri is not None and uri.turn is first.turn
    other = writer_queue(make_url(f"sqlite:///{tmp_path / 'other.db'}"), 30.0)
    assert other is not None and other.turn is not first.turn
    # Nothing to share in memory.
    assert writer_queue(make_url("sqlite://"), 30.0) is None
    assert writer_queue(make_url("sqlite:///:memory:"), 30.0) is None
    assert writer_queue(make_url("sqlite:///file:mem?mode=memory&uri=true"), 30.0) is None
    # Only a store that made its engine (and so knows its busy timeout) queues.
    engine = create_engine(f"sqlite:///{path}")
    try:
        assert writer_queue_for(engine, None) is None
        made = writer_queue_for(engine, {"connect_args": {"timeout": 2}})
        assert made is not None and made.turn is first.turn and made.timeout == 2.0
        default = writer_queue_for(engine, {})
        assert default is not None and default.timeout == SQLITE_BUSY_TIMEOUT_SECONDS
    finally:
        engine.dispose()
