"""The store contract, sync and asyncio, on PostgreSQL with the message table hash-partitioned by memory_id.

Its own module rather than a line in tests/conftest.py's BACKENDS: partitioning changes where rows live,
which is what the contract checks; the other suites would only run again on the same SQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

import pytest
from sqlalchemy import text

from chatmemory import ChatMemoryStore, aio
from chatmemory.aio.stores.sql import SQLChatMemoryStore as AsyncSQLChatMemoryStore
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.schema import partitions_on
from chatmemory.testing import (
    AsyncChatMemoryStoreContract,
    AsyncHistoryStoreFactory,
    AsyncRawWriter,
    AsyncTtlStoreFactory,
    ChatMemoryStoreContract,
    HistoryStoreFactory,
    RawWriter,
    TtlStoreFactory,
)
from support.backends import postgres_partitioned
from support.backends.postgres_partitioned import PARTITIONS, AsyncPartitionedSQLBackend, PartitionedSQLBackend

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def backend() -> Iterator[PartitionedSQLBackend]:
    opened = postgres_partitioned.open_backend()
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def async_backend() -> AsyncPartitionedSQLBackend:
    return postgres_partitioned.open_async_backend()


class TestPartitionedStoreContract(ChatMemoryStoreContract):
    @pytest.fixture
    def store(self, backend: PartitionedSQLBackend) -> Iterator[ChatMemoryStore]:
        made = backend.make_store()
        yield made
        backend.close_store(made)

    @pytest.fixture
    def write_raw(self, backend: PartitionedSQLBackend, store: ChatMemoryStore) -> RawWriter:
        def write(memory_id: str, records: Sequence[bytes]) -> None:
            backend.write_raw(store, memory_id, records)

        return write

    @pytest.fixture
    def make_ttl_store(self, backend: PartitionedSQLBackend) -> Iterator[TtlStoreFactory]:
        made: list[ChatMemoryStore] = []

        def make(seconds: float) -> ChatMemoryStore:
            made.append(backend.make_store(ttl=seconds))
            return made[-1]

        yield make
        for each in made:
            backend.close_store(each)

    @pytest.fixture
    def make_history_store(self, backend: PartitionedSQLBackend) -> Iterator[HistoryStoreFactory]:
        made: list[ChatMemoryStore] = []

        def make(ttl: float | None = None, history_ttl: float | None = None) -> ChatMemoryStore:
            made.append(backend.make_store(history=True, ttl=ttl, history_ttl=history_ttl))
            return made[-1]

        yield make
        for each in made:
            backend.close_store(each)


class TestAsyncPartitionedStoreContract(AsyncChatMemoryStoreContract):
    @pytest.fixture
    async def store(self, async_backend: AsyncPartitionedSQLBackend) -> AsyncIterator[aio.ChatMemoryStore]:
        made = await async_backend.make_store()
        yield made
        await async_backend.close_store(made)

    @pytest.fixture
    def write_raw(self, async_backend: AsyncPartitionedSQLBackend, store: aio.ChatMemoryStore) -> AsyncRawWriter:
        async def write(memory_id: str, records: Sequence[bytes]) -> None:
            await async_backend.write_raw(store, memory_id, records)

        return write

    @pytest.fixture
    async def make_ttl_store(self, async_backend: AsyncPartitionedSQLBackend) -> AsyncIterator[AsyncTtlStoreFactory]:
        made: list[aio.ChatMemoryStore] = []

        async def make(seconds: float) -> aio.ChatMemoryStore:
            made.append(await async_backend.make_store(ttl=seconds))
            return made[-1]

        yield make
        for each in made:
            await async_backend.close_store(each)

    @pytest.fixture
    async def make_history_store(
        self, async_backend: AsyncPartitionedSQLBackend
    ) -> AsyncIterator[AsyncHistoryStoreFactory]:
        made: list[aio.ChatMemoryStore] = []

        async def make(ttl: float | None = None, history_ttl: float | None = None) -> aio.ChatMemoryStore:
            made.append(await async_backend.make_store(history=True, ttl=ttl, history_ttl=history_ttl))
            return made[-1]

        yield make
        for each in made:
            await async_backend.close_store(each)


def test_the_backend_stores_are_partitioned(backend: PartitionedSQLBackend) -> None:
    store = backend.make_store()
    try:
        with store.engine.connect() as connection:
            assert partitions_on(connection, store.table_prefix) == PARTITIONS
    finally:
        backend.close_store(store)


async def test_the_asyncio_backend_stores_are_partitioned(async_backend: AsyncPartitionedSQLBackend) -> None:
    store = await async_backend.make_store()
    assert isinstance(store, AsyncSQLChatMemoryStore)
    try:
        async with store.engine.connect() as connection:
            found = await connection.run_sync(lambda sync: partitions_on(sync, store.table_prefix))
            assert found == PARTITIONS
            count = await connection.execute(
                text("SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass(:name)"),
                {"name": f"{store.table_prefix}messages"},
            )
            assert count.scalar() == PARTITIONS
    finally:
        await async_backend.close_store(store)


def test_a_sync_store_is_the_sql_store(backend: PartitionedSQLBackend) -> None:
    store = backend.make_store()
    try:
        assert isinstance(store, SQLChatMemoryStore)
        assert store.partitions == PARTITIONS
    finally:
        backend.close_store(store)
