"""chatmemory.aio.open_store: the same schemes as the sync one, served by the asyncio stores."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chatmemory import StoreError, UserMessage
from chatmemory.aio import InMemoryChatMemoryStore, open_store
from chatmemory.aio.url import ASYNC_STORE_SCHEMES, UrlStore
from chatmemory.stores.url import STORE_SCHEMES
from chatmemory.stores.url import UrlStore as SyncUrlStore


async def test_memory_url_and_closing() -> None:
    async with open_store("Memory://", ttl=5) as store:
        assert isinstance(store, InMemoryChatMemoryStore)
        assert store.ttl == 5.0
        await store.update_messages("m", [UserMessage("x")])
        assert await store.get_messages("m") == [UserMessage("x")]
        assert await store.read_raw("m") != []
    with pytest.raises(StoreError, match="closed"):
        await store.get_messages("m")
    await store.aclose()


def test_every_sync_scheme_has_its_asyncio_store() -> None:
    assert set(ASYNC_STORE_SCHEMES) == set(STORE_SCHEMES)
    assert ASYNC_STORE_SCHEMES["redis+cluster"] == "chatmemory.aio.stores.redis:RedisChatMemoryStore"
    assert ASYNC_STORE_SCHEMES["postgresql"] == "chatmemory.aio.stores.sql:SQLChatMemoryStore"
    assert ASYNC_STORE_SCHEMES["mongodb+srv"] == "chatmemory.aio.stores.mongodb:MongoChatMemoryStore"


@pytest.mark.parametrize("url", ["nosuch://x", "localhost:6379", ""])
def test_unknown_schemes_are_value_errors(url: str) -> None:
    with pytest.raises(ValueError):
        open_store(url)


def test_importing_chatmemory_aio_imports_no_driver() -> None:
    code = (
        "import sys, chatmemory.aio; chatmemory.aio.open_store('memory://'); "
        "print(sorted(m for m in ('redis', 'sqlalchemy', 'pymongo', 'psycopg', 'aiosqlite', 'asyncmy') "
        "if m in sys.modules))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"


# One URL per asyncio store class; building one does no I/O, so no server is needed to check its type.
CLASS_URLS = {
    "chatmemory.aio.stores.memory:InMemoryChatMemoryStore": "memory://",
    "chatmemory.aio.stores.redis:RedisChatMemoryStore": "redis://127.0.0.1:1/0",
    "chatmemory.aio.stores.langchain4j_redis:LangChain4jRedisChatMemoryStore": "redis+langchain4j://127.0.0.1:1/0",
    "chatmemory.aio.stores.sql:SQLChatMemoryStore": "sqlite:///{tmp}/url-store.db",
    "chatmemory.aio.stores.mongodb:MongoChatMemoryStore": "mongodb://127.0.0.1:1/",
}


def test_every_asyncio_store_class_has_a_url_here() -> None:
    assert set(CLASS_URLS) == set(ASYNC_STORE_SCHEMES.values())


@pytest.mark.parametrize("url", sorted(CLASS_URLS.values()))
async def test_every_asyncio_store_a_url_names_is_a_url_store(url: str, tmp_path: Path) -> None:
    url = url.format(tmp=tmp_path)
    async with open_store(url) as store:
        assert isinstance(store, UrlStore)
        assert not isinstance(store, SyncUrlStore)
        assert store.keeps_history is False
    assert store.closed
