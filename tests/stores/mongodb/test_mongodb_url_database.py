"""Which database a MongoDB store uses: ``database=``, else the URL's path, else ``chatmemory``; sync and asyncio."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from pymongo import MongoClient

from chatmemory import UserMessage, aio
from chatmemory.stores.mongodb import MongoChatMemoryStore
from chatmemory.stores.url import open_store
from support.backends.mongodb import DATABASE, mongodb_url

pytestmark = pytest.mark.mongodb

WINDOW = [UserMessage("hello")]
OTHER_DATABASE = f"{DATABASE}_url"


def with_database(url: str, database: str) -> str:
    """``url`` naming ``database`` in its path (its query, e.g. ``replicaSet``, kept)."""
    return urlsplit(url)._replace(path=f"/{database}").geturl()


@pytest.fixture
def collection() -> Iterator[str]:
    """A fresh collection name, dropped afterwards from every database these tests write to."""
    name = f"urldb_{uuid.uuid4().hex}"
    yield name
    with MongoClient(mongodb_url()) as client:
        for database in (DATABASE, OTHER_DATABASE):
            client[database].drop_collection(name)


def stored_ids(database: str, collection: str) -> list[str]:
    with MongoClient(mongodb_url()) as client:
        return sorted(document["_id"] for document in client[database][collection].find({}, {"_id": 1}))


def test_the_url_database_is_used(collection: str) -> None:
    url = with_database(mongodb_url(), OTHER_DATABASE)
    with MongoChatMemoryStore(url, collection=collection) as store:
        assert store.collection.database.name == OTHER_DATABASE
        store.update_messages("m", WINDOW)
    assert stored_ids(OTHER_DATABASE, collection) == ["m"]
    with open_store(url, collection=collection) as opened:
        assert opened.get_messages("m") == WINDOW  # type: ignore[attr-defined]


def test_an_explicit_database_wins_over_the_url(collection: str) -> None:
    url = with_database(mongodb_url(), OTHER_DATABASE)
    with MongoChatMemoryStore(url, database=DATABASE, collection=collection) as store:
        store.update_messages("m", WINDOW)
    assert stored_ids(DATABASE, collection) == ["m"]
    assert stored_ids(OTHER_DATABASE, collection) == []


def test_without_either_the_default_database() -> None:
    url = with_database(mongodb_url(), "")
    for store in (MongoChatMemoryStore(url), MongoChatMemoryStore(url, database=None)):
        with store:
            assert store.collection.database.name == "chatmemory"


def test_a_client_passed_in_uses_the_database_of_its_url(collection: str) -> None:
    with MongoClient(with_database(mongodb_url(), OTHER_DATABASE)) as client:
        store = MongoChatMemoryStore(client, collection=collection)
        assert store.collection.database.name == OTHER_DATABASE
        assert MongoChatMemoryStore(client, database=DATABASE).collection.database.name == DATABASE
    with MongoClient(with_database(mongodb_url(), "")) as client:
        assert MongoChatMemoryStore(client).collection.database.name == "chatmemory"


def test_an_invalid_database_in_the_url_is_refused_when_built() -> None:
    from chatmemory import StoreError

    with pytest.raises(StoreError, match="connecting"):
        MongoChatMemoryStore(with_database(mongodb_url(), "a b"))


async def test_asyncio_the_same_order(collection: str) -> None:
    url = with_database(mongodb_url(), OTHER_DATABASE)
    store: Any = aio.open_store(url, collection=collection)
    try:
        assert store.collection.database.name == OTHER_DATABASE
        await store.update_messages("m", WINDOW)
    finally:
        await store.aclose()
    assert stored_ids(OTHER_DATABASE, collection) == ["m"]
    explicit: Any = aio.open_store(url, database=DATABASE, collection=collection)
    try:
        assert explicit.collection.database.name == DATABASE
        assert await explicit.get_messages("m") == []
    finally:
        await explicit.aclose()
    default: Any = aio.open_store(with_database(mongodb_url(), ""))
    try:
        assert default.collection.database.name == "chatmemory"
    finally:
        await default.aclose()
