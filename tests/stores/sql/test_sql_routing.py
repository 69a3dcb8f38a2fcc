"""Every statement the SQL store sends for one memory is routed by its memory_id (PostgreSQL, sync and asyncio).

A database distributed by ``memory_id`` (Citus: ``create_distributed_table(..., 'memory_id')``, the two
tables colocated) sends a statement to one node only if each table it touches is filtered by equality
on ``memory_id`` with one value (or joined on ``memory_id`` to one that is), and each row it inserts
names that value. These tests capture every statement the store sends (``before_cursor_execute``) for
each operation on one memory, turns of every shape included, and fail on any that is not routed so
(see :mod:`support.sql_routing`). The operations over many memories (listing, purging, trimming every
history, batch reads) are cross-memory by nature: a test shows the checker finds them unrouted.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, event

from chatmemory import AiMessage, ChatMessage, MessageWindowChatMemory, SystemMessage, UserMessage, aio
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLChatMemoryStore
from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends import postgres
from support.sql_routing import Captured, routing_faults

pytestmark = pytest.mark.postgres

_OPTIONS = [
    pytest.param({}, id="plain"),
    pytest.param({"history": True, "ttl": 3600, "history_ttl": 7200}, id="history-ttl"),
]


@pytest.fixture(scope="module")
def url() -> str:
    return postgres.open_backend().url


@contextmanager
def captured() -> Iterator[list[Captured]]:
    """Every statement any engine sends meanwhile (the asyncio store's engines are sync engines underneath)."""
    seen: list[Captured] = []

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen.append(Captured(statement, parameters))

    had_events = Engine.__dict__["_has_events"]
    event.listen(Engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", before)
        # A class-level listener marks the Engine class as having events for good; every engine made after
        # would take the store's path for engines with listeners (tests/stores/sql/test_sql_traffic.py).
        Engine._has_events = had_events


def _turn(index: int) -> list[ChatMessage]:
    return [UserMessage(f"question {index}"), AiMessage(f"answer {index}")]


def _tables(prefix: str) -> set[str]:
    return {f"{prefix}memories", f"{prefix}messages"}


Step = Callable[[], Any]


def _sync_steps(store: SQLChatMemoryStore, other: SQLChatMemoryStore, memory_id: str) -> list[tuple[str, Step]]:
    """Every single-memory operation, in an order that reaches each statement shape."""

    def stale_save() -> None:
        version = store.load(memory_id).version
        other.update_messages(memory_id, [SystemMessage("changed elsewhere")])  # store's snapshot is stale now
        with pytest.raises(ConcurrentUpdateError):
            store.save(memory_id, [SystemMessage("mine")], version)
        store.update_messages(memory_id, [SystemMessage("mine"), *_turn(0)])

    def window_turns() -> None:
        memory = MessageWindowChatMemory(memory_id, store=store, max_messages=5, always_keep_system_message_first=True)
        memory.add(SystemMessage("be brief"))
        for index in range(6):
            memory.add(*_turn(index))

    steps: list[tuple[str, Step]] = [
        ("load, absent", lambda: store.load(memory_id)),
        ("read_raw, absent", lambda: store.read_raw(memory_id)),
        ("memory_times, absent", lambda: store.memory_times(memory_id)),
        ("save creating", lambda: store.save(memory_id, [SystemMessage("s"), *_turn(0)], 0)),
        ("load", lambda: store.load(memory_id)),
        (
            "save appending",
            lambda: store.save(memory_id, [*store.get_messages(memory_id), *_turn(1)], store.load(memory_id).version),
        ),
        (
            "save appending many (arrays)",
            lambda: store.update_messages(
                memory_id, [*store.get_messages(memory_id), *(m for i in range(2, 8) for m in _turn(i))]
            ),
        ),
        ("update evicting a run", lambda: store.update_messages(memory_id, store.get_messages(memory_id)[-3:])),
        (
            "update evicting many (arrays)",
            lambda: store.update_messages(
                memory_id, [*store.get_messages(memory_id)[:1], *(m for i in range(8, 20) for m in _turn(i))][-2:]
            ),
        ),
        ("window memory turns", window_turns),
        ("stale snapshot and conflict", stale_save),
        ("modify", lambda: store.modify(memory_id, lambda messages: [*messages, *_turn(30)])),
        ("modify to nothing", lambda: store.modify(memory_id, lambda messages: None)),
        ("write_raw", lambda: store.write_raw(memory_id, store.read_raw(memory_id))),
        (
            "expire_at",
            lambda: store.expire_at(
                memory_id, datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
            ),
        ),
        ("expire_at None", lambda: store.expire_at(memory_id, None)),
        ("memory_times", lambda: store.memory_times(memory_id)),
        ("delete", lambda: store.delete_messages(memory_id)),
        ("modify creating", lambda: store.modify(memory_id, lambda messages: [*messages, *_turn(40)])),
        ("update creating", lambda: (store.delete_messages(memory_id), store.update_messages(memory_id, _turn(41)))),
    ]
    if store.keeps_history:
        steps += [
            ("history page", lambda: store.history(memory_id, limit=3)),
            ("history page after, reversed", lambda: store.history(memory_id, after=5, limit=3, reverse=True)),
            (
                "trim one memory's history",
                lambda: store.trim_history(older_than=datetime.timedelta(days=1), memory_id=memory_id),
            ),
        ]
    return steps


def _faults(label: str, statements: list[Captured], tables: set[str], memory_id: str) -> list[str]:
    found: list[str] = []
    touched = False
    for statement in statements:
        touched |= any(table in statement.sql for table in tables)
        shown = " ".join(statement.sql.split())[:400]
        found.extend(f"{label}: {fault}\n    {shown}" for fault in routing_faults(statement, tables, memory_id))
    if not touched:
        found.append(f"{label}: sent no statement on the store's tables (nothing was captured)")
    return found


def _fresh_id() -> str:
    return f"routed 'ü' {uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("options", _OPTIONS)
def test_every_statement_of_one_memory_is_routed_by_its_id(url: str, options: dict[str, Any]) -> None:
    prefix = f"r{uuid.uuid4().hex[:10]}_"
    store = SQLChatMemoryStore(url, table_prefix=prefix, **options)
    store.create_schema()
    other = SQLChatMemoryStore(url, table_prefix=prefix, **options)
    try:
        memory_id = _fresh_id()
        store.get_messages(_fresh_id())  # the schema check, once per store, before capturing
        other.get_messages(_fresh_id())
        faults: list[str] = []
        for label, step in _sync_steps(store, other, memory_id):
            with captured() as statements:
                step()
            faults += _faults(label, statements, _tables(prefix), memory_id)
        assert faults == [], "\n".join(faults)
    finally:
        other.close()
        store.drop_schema()
        store.close()


@pytest.mark.parametrize("options", _OPTIONS)
async def test_every_statement_of_one_memory_is_routed_by_its_id_asyncio(url: str, options: dict[str, Any]) -> None:
    prefix = f"r{uuid.uuid4().hex[:10]}_"
    store = AsyncSQLChatMemoryStore(url, table_prefix=prefix, **options)
    await store.create_schema()
    other = AsyncSQLChatMemoryStore(url, table_prefix=prefix, **options)
    memory_id = _fresh_id()

    async def stale_save() -> None:
        version = (await store.load(memory_id)).version
        await other.update_messages(memory_id, [SystemMessage("changed elsewhere")])
        with pytest.raises(ConcurrentUpdateError):
            await store.save(memory_id, [SystemMessage("mine")], version)
        await store.update_messages(memory_id, [SystemMessage("mine"), *_turn(0)])

    async def window_turns() -> None:
        memory = aio.MessageWindowChatMemory(
            memory_id, store=store, max_messages=5, always_keep_system_message_first=True
        )
        await memory.add(SystemMessage("be brief"))
        for index in range(6):
            await memory.add(*_turn(index))

    async def appending() -> None:
        snapshot = await store.load(memory_id)
        await store.save(memory_id, [*snapshot.messages, *_turn(1)], snapshot.version)

    async def appending_many() -> None:
        messages = await store.get_messages(memory_id)
        await store.update_messages(memory_id, [*messages, *(m for i in range(2, 8) for m in _turn(i))])

    async def evicting() -> None:
        await store.update_messages(memory_id, (await store.get_messages(memory_id))[-3:])

    async def write_raw() -> None:
        await store.write_raw(memory_id, await store.read_raw(memory_id))

    async def recreate() -> None:
        await store.delete_messages(memory_id)
        await store.update_messages(memory_id, _turn(41))

    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("load, absent", lambda: store.load(memory_id)),
        ("read_raw, absent", lambda: store.read_raw(memory_id)),
        ("memory_times, absent", lambda: store.memory_times(memory_id)),
        ("save creating", lambda: store.save(memory_id, [SystemMessage("s"), *_turn(0)], 0)),
        ("load", lambda: store.load(memory_id)),
        ("save appending", appending),
        ("save appending many (arrays)", appending_many),
        ("update evicting a run", evicting),
        ("window memory turns", window_turns),
        ("stale snapshot and conflict", stale_save),
        ("modify", lambda: store.modify(memory_id, lambda messages: [*messages, *_turn(30)])),
        ("write_raw", write_raw),
        ("expire_at", lambda: store.expire_at(memory_id, later)),
        ("expire_at None", lambda: store.expire_at(memory_id, None)),
        ("delete", lambda: store.delete_messages(memory_id)),
        ("modify creating", lambda: store.modify(memory_id, lambda messages: [*messages, *_turn(40)])),
        ("update creating", recreate),
    ]
    if store.keeps_history:
        steps += [
            ("history page", lambda: store.history(memory_id, limit=3)),
            ("history page after, reversed", lambda: store.history(memory_id, after=5, limit=3, reverse=True)),
            (
                "trim one memory's history",
                lambda: store.trim_history(older_than=datetime.timedelta(days=1), memory_id=memory_id),
            ),
        ]
    try:
        await store.get_messages(_fresh_id())
        await other.get_messages(_fresh_id())
        faults: list[str] = []
        for label, step in steps:
            with captured() as statements:
                await step()
            faults += _faults(label, statements, _tables(prefix), memory_id)
        assert faults == [], "\n".join(faults)
    finally:
        await other.aclose()
        await store.drop_schema()
        await store.aclose()


def test_operations_over_many_memories_are_not_routed(url: str) -> None:
    """Listing, purging, trimming every history and batch reads span memories: a distributed database fans them out."""
    prefix = f"r{uuid.uuid4().hex[:10]}_"
    store = SQLChatMemoryStore(url, table_prefix=prefix, history=True, ttl=3600)
    store.create_schema()
    try:
        memory_id = _fresh_id()
        store.update_messages(memory_id, _turn(0))
        cross: list[tuple[str, Step]] = [
            ("list by id", lambda: list(store.memory_ids())),
            ("list newest", lambda: list(store.memory_ids(order="newest"))),
            ("purge_expired", lambda: store.purge_expired()),
            ("trim every history", lambda: store.trim_history(older_than=datetime.timedelta(days=1))),
            ("read_batch", lambda: store.read_batch([memory_id, _fresh_id()])),
        ]
        for label, step in cross:
            with captured() as statements:
                step()
            assert _faults(label, statements, _tables(prefix), memory_id), f"{label} was found routed"
    finally:
        store.drop_schema()
        store.close()


# ------------------------------------------------------------------------------ the checker on its own

_TABLES = {"t_memories", "t_messages"}
_ID = {"p_id": b"m1"}


@pytest.mark.parametrize(
    ("sql", "parameters"),
    [
        ("SELECT t_memories.version FROM t_memories WHERE t_memories.memory_id = %(p_id)s", _ID),
        (
            "SELECT m.seq FROM t_memories AS h JOIN t_messages AS m ON m.memory_id = h.memory_id "
            "WHERE h.memory_id = %(p_id)s AND (h.expires_at IS NULL OR h.expires_at > now())",
            _ID,
        ),
        (
            "DELETE FROM t_messages WHERE NOT (EXISTS (SELECT 1 FROM t_memories WHERE "
            "t_memories.memory_id = t_messages.memory_id)) AND t_messages.memory_id = %(p_id)s",
            _ID,
        ),
        (
            "INSERT INTO t_messages (memory_id, seq) VALUES (%(memory_id)s, %(seq)s::BIGINT)",
            [{"memory_id": b"m1", "seq": 0}, {"memory_id": b"m1", "seq": 1}],
        ),
        ("COMMIT", {}),
    ],
    ids=["filtered", "joined", "correlated", "insert", "no-table"],
)
def test_the_checker_passes_routed_statements(sql: str, parameters: Any) -> None:
    assert routing_faults(Captured(sql, parameters), _TABLES, "m1") == []


@pytest.mark.parametrize(
    ("sql", "parameters"),
    [
        ("SELECT t_memories.version FROM t_memories", _ID),
        ("SELECT t_memories.version FROM t_memories WHERE t_memories.memory_id = %(p_id)s", {"p_id": b"m2"}),
        ("SELECT t_memories.version FROM t_memories WHERE t_memories.memory_id = %(p_id)s OR 1 = 1", _ID),
        ("SELECT t_memories.version FROM t_memories WHERE t_memories.memory_id IN (%(p_id)s)", _ID),
        ("SELECT t_memories.version FROM t_memories WHERE t_memories.version = %(p_id)s", _ID),
        (
            "SELECT m.seq FROM t_memories AS h JOIN t_messages AS m ON m.seq = h.next_seq WHERE h.memory_id = %(p_id)s",
            _ID,
        ),
        (
            "SELECT 1 FROM t_memories WHERE t_memories.memory_id = %(p_id)s UNION ALL "
            "SELECT 1 FROM t_messages WHERE t_messages.seq = 1",
            _ID,
        ),
        (
            "SELECT (SELECT max(t_messages.seq) FROM t_messages WHERE t_messages.memory_id = %(p_other)s) "
            "FROM t_memories WHERE t_memories.memory_id = %(p_id)s",
            {"p_id": b"m1", "p_other": b""},
        ),
        (
            "INSERT INTO t_messages (memory_id, seq) VALUES (%(memory_id)s, %(seq)s::BIGINT)",
            [{"memory_id": b"m1", "seq": 0}, {"memory_id": b"m2", "seq": 1}],
        ),
        ("SELECT 1 FROM other_table WHERE other_table.memory_id = %(p_id)s", _ID),
    ],
    ids=[
        "unfiltered",
        "other-id",
        "or",
        "in-list",
        "not-memory-id",
        "join-not-on-id",
        "union-branch",
        "subquery-other-id",
        "insert-other-id",
        "foreign-table",
    ],
)
def test_the_checker_finds_unrouted_statements(sql: str, parameters: Any) -> None:
    assert routing_faults(Captured(sql, parameters), _TABLES, "m1") != []


def test_asyncio_capture_sees_the_store(url: str) -> None:
    """The class-wide listener sees an asyncio store's statements (its engines are sync engines underneath)."""

    async def run() -> list[Captured]:
        store = AsyncSQLChatMemoryStore(url, table_prefix=f"r{uuid.uuid4().hex[:10]}_")
        try:
            with captured() as statements:
                await store.schema_revision()
            return statements
        finally:
            await store.aclose()

    assert asyncio.run(run())
