"""The store contract suite, sync and async, run against every backend in tests/conftest.py (A)SYNC_BACKENDS."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from chatmemory import ChatMemoryStore, aio
from chatmemory.testing import (
    AsyncChatMemoryStoreContract,
    AsyncEncryptedStoreFactory,
    AsyncHistoryStoreFactory,
    AsyncRawWriter,
    AsyncTtlStoreFactory,
    ChatMemoryStoreContract,
    EncryptedStoreFactory,
    HistoryStoreFactory,
    RawWriter,
    TtlStoreFactory,
)
from support.backends import WITHOUT_ENCRYPTION, AsyncBackend, Backend, same_namespace


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

    @pytest.fixture
    def make_encrypted_store(self, backend: Backend) -> Iterator[EncryptedStoreFactory | None]:
        if backend.name in WITHOUT_ENCRYPTION:
            yield None
            return
        made: list[ChatMemoryStore] = []

        def make(encryption: Any, history: bool = False) -> ChatMemoryStore:
            shared = same_namespace(made[0]) if made else {}
            made.append(backend.make_store(encryption=encryption, history=history, **shared))
            return made[-1]

        yield make
        for each in made[1:]:
            each.close()
        if made:
            backend.close_store(made[0])


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

    @pytest.fixture
    async def make_encrypted_store(
        self, async_backend: AsyncBackend
    ) -> AsyncIterator[AsyncEncryptedStoreFactory | None]:
        if async_backend.name in WITHOUT_ENCRYPTION:
            yield None
            return
        made: list[aio.ChatMemoryStore] = []

        async def make(encryption: Any, history: bool = False) -> aio.ChatMemoryStore:
            shared = same_namespace(made[0]) if made else {}
            made.append(await async_backend.make_store(encryption=encryption, history=history, **shared))
            return made[-1]

        yield make
        for each in made[1:]:
            await each.aclose()
            engine = getattr(each, "engine", None)
            if engine is not None:  # an engine passed in (the aiosqlite backend's) is the caller's to dispose of
                await engine.dispose()
        if made:
            await async_backend.close_store(made[0])
