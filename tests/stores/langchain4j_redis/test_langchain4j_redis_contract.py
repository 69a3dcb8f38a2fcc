"""The store contract, sync and asyncio, on the LangChain4j Redis layout: standalone server and Redis Cluster.

No ``write_raw`` hook: the layout has no message records, so the corruption cases that plant native records
do not apply; test_langchain4j_redis_store.py checks damaged values instead.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from chatmemory.testing import AsyncChatMemoryStoreContract, ChatMemoryStoreContract
from support.backends import langchain4j_redis

_BACKENDS = [
    pytest.param("open_backend", id="redis", marks=pytest.mark.redis),
    pytest.param("open_cluster_backend", id="redis_cluster", marks=pytest.mark.redis_cluster),
]
_ASYNC_BACKENDS = [
    pytest.param("open_async_backend", id="redis", marks=pytest.mark.redis),
    pytest.param("open_async_cluster_backend", id="redis_cluster", marks=pytest.mark.redis_cluster),
]


@pytest.fixture(scope="module", params=_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[langchain4j_redis.LangChain4jRedisBackend]:
    opened = getattr(importlib.import_module("support.backends.langchain4j_redis"), request.param)()
    yield opened
    opened.close()


@pytest.fixture(scope="module", params=_ASYNC_BACKENDS)
def async_backend(request: pytest.FixtureRequest) -> langchain4j_redis.AsyncLangChain4jRedisBackend:
    backend: langchain4j_redis.AsyncLangChain4jRedisBackend = getattr(langchain4j_redis, request.param)()
    return backend


class TestLangChain4jRedisContract(ChatMemoryStoreContract):
    @pytest.fixture
    def store(self, backend: langchain4j_redis.LangChain4jRedisBackend) -> Iterator[Any]:
        made = backend.make_store()
        yield made
        backend.close_store(made)

    @pytest.fixture
    def make_ttl_store(self, backend: langchain4j_redis.LangChain4jRedisBackend) -> Iterator[Any]:
        made: list[Any] = []

        def make(seconds: float) -> Any:
            made.append(backend.make_store(ttl=seconds))
            return made[-1]

        yield make
        for store in made:
            backend.close_store(store)

    @pytest.fixture
    def make_history_store(self, backend: langchain4j_redis.LangChain4jRedisBackend) -> Iterator[Any]:
        made: list[Any] = []

        def make(ttl: float | None = None, history_ttl: float | None = None) -> Any:
            made.append(backend.make_store(history=True, ttl=ttl, history_ttl=history_ttl))
            return made[-1]

        yield make
        for store in made:
            backend.close_store(store)


class TestAsyncLangChain4jRedisContract(AsyncChatMemoryStoreContract):
    @pytest.fixture
    async def store(self, async_backend: langchain4j_redis.AsyncLangChain4jRedisBackend) -> AsyncIterator[Any]:
        made = await async_backend.make_store()
        yield made
        await async_backend.close_store(made)

    @pytest.fixture
    async def make_ttl_store(self, async_backend: langchain4j_redis.AsyncLangChain4jRedisBackend) -> AsyncIterator[Any]:
        made: list[Any] = []

        async def make(seconds: float) -> Any:
            made.append(await async_backend.make_store(ttl=seconds))
            return made[-1]

        yield make
        for store in made:
            await async_backend.close_store(store)

    @pytest.fixture
    async def make_history_store(
        self, async_backend: langchain4j_redis.AsyncLangChain4jRedisBackend
    ) -> AsyncIterator[Any]:
        made: list[Any] = []

        async def make(ttl: float | None = None, history_ttl: float | None = None) -> Any:
            made.append(await async_backend.make_store(history=True, ttl=ttl, history_ttl=history_ttl))
            return made[-1]

        yield make
        for store in made:
            await async_backend.close_store(store)
