"""open_store: a URL picks the store class, importing only that store's module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chatmemory import InMemoryChatMemoryStore, UserMessage, open_store
from chatmemory.stores.url import STORE_SCHEMES, UrlStore


@pytest.mark.parametrize("url", ["memory://", "MEMORY://", "Memory://anything"])
def test_memory_urls_in_any_case(url: str) -> None:
    with open_store(url) as store:
        assert isinstance(store, InMemoryChatMemoryStore)
        store.update_messages("m", [UserMessage("x")])
        assert store.get_messages("m") == [UserMessage("x")]
    assert store.closed


def test_options_reach_the_constructor() -> None:
    store = open_store("memory://", ttl=5)
    assert isinstance(store, InMemoryChatMemoryStore)
    assert store.ttl == 5.0


@pytest.mark.parametrize("url", ["nosuch://x", "localhost:6379", "", "redis"])
def test_unknown_or_missing_schemes_are_value_errors(url: str) -> None:
    with pytest.raises(ValueError):
        open_store(url)


@pytest.mark.parametrize(
    ("scheme", "target"),
    [
        ("unix", "chatmemory.stores.redis:RedisChatMemoryStore"),
        ("rediss+cluster", "chatmemory.stores.redis:RedisChatMemoryStore"),
        ("postgresql", "chatmemory.stores.sql:SQLChatMemoryStore"),
        ("mariadb", "chatmemory.stores.sql:SQLChatMemoryStore"),
        ("mongodb+srv", "chatmemory.stores.mongodb:MongoChatMemoryStore"),
    ],
)
def test_scheme_table(scheme: str, target: str) -> None:
    assert STORE_SCHEMES[scheme] == target


def test_a_memory_url_imports_no_driver() -> None:
    code = (
        "import sys, chatmemory; chatmemory.open_store('memory://'); "
        "print(sorted(m for m in ('redis', 'sqlalchemy', 'pymongo', 'psycopg', 'pymysql') if m in sys.modules))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"


# One URL per store class; building a store does no I/O, so no server is needed to check its type.
CLASS_URLS = {
    "chatmemory.stores.memory:InMemoryChatMemoryStore": "memory://",
    "chatmemory.stores.redis:RedisChatMemoryStore": "redis://127.0.0.1:1/0",
    "chatmemory.stores.langchain4j_redis:LangChain4jRedisChatMemoryStore": "redis+langchain4j://127.0.0.1:1/0",
    "chatmemory.stores.sql:SQLChatMemoryStore": "sqlite:///{tmp}/url-store.db",
    "chatmemory.stores.mongodb:MongoChatMemoryStore": "mongodb://127.0.0.1:1/",
}


def test_every_store_class_has_a_url_here() -> None:
    assert set(CLASS_URLS) == set(STORE_SCHEMES.values())


@pytest.mark.parametrize("url", sorted(CLASS_URLS.values()))
def test_every_store_a_url_names_is_a_url_store(url: str, tmp_path: Path) -> None:
    url = url.format(tmp=tmp_path)
    with open_store(url) as store:
        assert isinstance(store, UrlStore)
        assert store.keeps_history is False
        assert store.ttl is None
    assert store.closed


def test_a_class_without_a_url_store_method_is_no_url_store() -> None:
    class NoHistory:
        def get_messages(self, memory_id: str) -> list[object]:
            return []

    assert not isinstance(NoHistory(), UrlStore)
