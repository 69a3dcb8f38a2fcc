"""The MongoDB store: one collection per test store, every command checked against MongoDB 7.0.

The server is CHATMEMORY_TEST_MONGODB_URL (CI runs SecantusDB, a wire-protocol server), else a
``mongo:7`` container through testcontainers (a standalone mongod: no transactions, which the store
must not need anyway).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pymongo import MongoClient

from chatmemory import ChatMemoryStore, aio
from chatmemory.stores.mongodb import MongoChatMemoryStore
from support.mongo7_guard import Mongo7Guard
from support.servers import server_url

DATABASE = "chatmemory_test"
ENV_VAR = "CHATMEMORY_TEST_MONGODB_URL"
EXAMPLE = "mongodb://127.0.0.1:27017/"


def _start_mongo7() -> tuple[Any, str]:
    try:
        from testcontainers.community.mongodb import MongoDbContainer
    except ImportError:  # testcontainers before 4.14 kept the module at the top level
        from testcontainers.mongodb import MongoDbContainer
    container = MongoDbContainer("mongo:7")
    container.start()
    return container, container.get_connection_url()


def mongodb_url() -> str:
    """A URL of a MongoDB (or wire-compatible) server for tests, else skip."""
    return server_url("MongoDB", ENV_VAR, EXAMPLE, container=_start_mongo7)


class MongoBackend:
    name = "mongodb"

    def __init__(self, url: str) -> None:
        self.url = url
        self.guard = Mongo7Guard()
        options: dict[str, Any] = {"event_listeners": [self.guard], "serverSelectionTimeoutMS": 10_000}
        # SecantusDB spends about 10 ms on every retryable write (against under 1 ms without), which makes
        # the contract suite's thousands of writes minutes slower. The store does not depend on retryable
        # writes (a standalone mongod has none); tests/stores/test_mongodb_store.py keeps the default.
        with MongoClient(url, serverSelectionTimeoutMS=10_000) as probe:
            if "secantusVersion" in probe.server_info():
                options["retryWrites"] = False
        self.client: MongoClient[Any] = MongoClient(url, **options)

    def make_store(self, **options: Any) -> MongoChatMemoryStore:
        collection = options.pop("collection", None) or f"memories_{uuid.uuid4().hex}"
        return MongoChatMemoryStore(self.client, database=DATABASE, collection=collection, **options)

    def write_raw(self, store: ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(store, MongoChatMemoryStore)
        store.write_raw(memory_id, records)

    def close_store(self, store: ChatMemoryStore) -> None:
        assert isinstance(store, MongoChatMemoryStore)
        store.collection.drop()
        if store.history_collection is not None:
            store.history_collection.drop()
        store.close()
        self.guard.check()

    def close(self) -> None:
        self.client.close()


class AsyncMongoBackend:
    """The asyncio store built from the URL, as applications build it: it keeps a client per event loop."""

    name = "mongodb"

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        query = "&".join(
            f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in options.items()
        )
        self.url = url + ("&" if "?" in url else "?") + query if query else url

    async def make_store(self, **options: Any) -> aio.ChatMemoryStore:
        from chatmemory.aio.stores.mongodb import MongoChatMemoryStore as AsyncMongoChatMemoryStore

        collection = options.pop("collection", None) or f"memories_{uuid.uuid4().hex}"
        return AsyncMongoChatMemoryStore(self.url, database=DATABASE, collection=collection, **options)

    async def write_raw(self, store: aio.ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        assert isinstance(store, aio.SupportsRawRecords)
        await store.write_raw(memory_id, records)

    async def close_store(self, store: aio.ChatMemoryStore) -> None:
        from chatmemory.aio.stores.mongodb import MongoChatMemoryStore as AsyncMongoChatMemoryStore

        assert isinstance(store, AsyncMongoChatMemoryStore)
        database = store.collection.database
        for name in await database.list_collection_names():
            if name.startswith(store.collection.name):
                await database.drop_collection(name)
        await store.aclose()

    def close(self) -> None:
        pass


def open_backend() -> MongoBackend:
    return MongoBackend(mongodb_url())


def open_async_backend() -> AsyncMongoBackend:
    backend = open_backend()  # the same server and client options as the sync backend
    options: dict[str, Any] = {"serverSelectionTimeoutMS": 10_000}
    if backend.client.options.retry_writes is False:
        options["retryWrites"] = False
    backend.close()
    return AsyncMongoBackend(backend.url, options)
