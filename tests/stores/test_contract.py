"""The store contract suite, sync and async, run against every backend in tests/conftest.py (A)SYNC_BACKENDS."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

import pytest

from chatmemory import ChatMemoryStore, aio
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
from support.backends import AsyncBackend, Backend


class TestStoreContract(ChatMemoryStoreContract):
    @pytest.fixture
    def store(self, backend: Backend) -> Iterator[ChatMemoryStore]:
        made = backend.make_store()
        yield made
        backend.close_store(made)

    @pytest.fixture
    def write_raw(self, backend: Backend, store: ChatMemoryStore) -> RawWriter:
        def write(memory_id: str, records: Sequence[bytes]) -> None:
            backend.write_raw(store, memory_id, records)

        return write

    @pytest.fixture
    def make_ttl_store(self, backend: Backend) -> Iterator[TtlStoreFactory]:
        made: list[ChatMemoryStore] = []

        def make(seconds: float) -> ChatMemoryStore:
            made.append(backend.make_store(ttl=seconds))
            return made[-1]

        yield make
        for each in made:
            backend.close_store(each)

    @pytest.fixture
    def make_history_store(self, backend: Backend) -> Iterator[HistoryStoreFactory]:
        made: list[ChatMemoryStore] = []

        def make(ttl: float | None = None, history_ttl: float | None = None) -> ChatMemoryStore:
            made.append(backend.make_store(history=True, ttl=ttl, history_ttl=history_ttl))
            return made[-1]

        yield make
        for each in made:
            backend.close_store(each)


class TestAsyncStoreContract(AsyncChatMemoryStoreContract):
    @pytest.fixture
    async def store(self, async_backend: AsyncBackend) -> AsyncIterator[aio.ChatMemoryStore]:
        made = await async_backend.make_store()
        yield made
        await async_backend.close_store(made)

    @pytest.fixture
    def write_raw(self, async_backend: AsyncBackend, store: aio.ChatMemoryStore) -> AsyncRawWriter:
        async def write(memory_id: str, records: Sequence[bytes]) -> None:
            await async_backend.write_raw(store, memory_id, records)

        return write

    @pytest.fixture
    async def make_ttl_store(self, async_backend: AsyncBackend) -> AsyncIterator[AsyncTtlStoreFactory]:
        made: list[aio.ChatMemoryStore] = []

        async def make(seconds: float) -> aio.ChatMemoryStore:
            made.append(await async_backend.make_store(ttl=seconds))
            return made[-1]

        yield make
        for each in made:
            await async_backend.close_store(each)

    @pytest.fixture
    async def make_history_store(self, async_backend: AsyncBackend) -> AsyncIterator[AsyncHistoryStoreFactory]:
        made: list[aio.ChatMemoryStore] = []

        async def make(ttl: float | None = None, history_ttl: float | None = None) -> aio.ChatMemoryStore:
            made.append(await async_backend.make_store(history=True, ttl=ttl, history_ttl=history_ttl))
            return made[-1]

        yield make
        for each in made:
            await async_backend.close_store(each)
