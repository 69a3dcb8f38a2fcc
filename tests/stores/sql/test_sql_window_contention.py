"""Window memories on the SQL store: an uncontended add stays optimistic, contended async adds queue on the lock.

The threads-and-processes contention test is in ``test_sql_reliability.py`` (issue 10, item 6).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import event

from chatmemory import MessageWindowChatMemory, SupportsLockedUpdate, UserMessage, aio
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLStore
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends.sqlite import SQLBackend


@pytest.fixture
def store(sql_backend: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = sql_backend.make_store()
    yield made
    sql_backend.close_store(made)


@pytest_asyncio.fixture
async def async_store(sql_backend: SQLBackend, store: SQLChatMemoryStore) -> AsyncIterator[AsyncSQLStore]:
    async with AsyncSQLStore(sql_backend.url, table_prefix=store.table_prefix) as made:
        yield made


class Statements:
    """The statements a store's engine sends while recording."""

    def __init__(self, store: SQLChatMemoryStore) -> None:
        self.engine = store.engine
        self.sent: list[str] = []
        event.listen(self.engine, "before_cursor_execute", self._before)

    def _before(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self.sent.append(statement)

    def take(self) -> list[str]:
        sent, self.sent = self.sent, []
        return sent

    def stop(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._before)


def test_the_sql_stores_offer_the_locked_update(store: SQLChatMemoryStore, async_store: AsyncSQLStore) -> None:
    assert isinstance(store, SupportsLockedUpdate)
    assert isinstance(async_store, aio.SupportsLockedUpdate)


def test_an_uncontended_add_is_one_load_and_one_save(store: SQLChatMemoryStore) -> None:
    memory = MessageWindowChatMemory("quiet", max_messages=3, store=store)
    for word in ("a", "b", "c"):
        memory.add(UserMessage(word))
    # The same turn done by hand with load and save, on a twin memory in the same state.
    twin = MessageWindowChatMemory("twin", max_messages=3, store=store)
    for word in ("a", "b", "c"):
        twin.add(UserMessage(word))
    statements = Statements(store)
    try:
        memory.add(UserMessage("d"))
        by_memory = statements.take()
        snapshot = store.load("twin")
        store.save("twin", [*snapshot.messages[1:], UserMessage("d")], snapshot.version)
        by_hand = statements.take()
    finally:
        statements.stop()
    assert by_memory == by_hand
    assert store.get_messages("quiet") == store.get_messages("twin") == [UserMessage(w) for w in "bcd"]


async def test_contending_tasks_through_their_own_memories_lose_and_double_nothing(
    async_store: AsyncSQLStore,
) -> None:
    full = os.environ.get("CHATMEMORY_CONTENTION_FULL") == "1"
    tasks, adds = (16, 100) if full else (8, 25)

    async def writer(name: str) -> None:
        # Two attempts: the optimistic one, then the locked one, which cannot conflict.
        memory = aio.MessageWindowChatMemory("contended", max_messages=100_000, store=async_store, max_attempts=2)
        for index in range(adds):
            await memory.add(UserMessage(f"{name}-{index}"))

    await asyncio.gather(*(writer(f"a{task}") for task in range(tasks)))
    stored = [message.text for message in await async_store.get_messages("contended")]  # type: ignore[attr-defined]
    expected = [f"a{task}-{index}" for task in range(tasks) for index in range(adds)]
    assert sorted(stored) == sorted(expected)
    for task in range(tasks):
        mine = [entry for entry in stored if entry.startswith(f"a{task}-")]
        assert mine == [f"a{task}-{index}" for index in range(adds)]
