"""With a keyring, nothing a store keeps on its server holds a message's text: every key, row and document read raw."""

from __future__ import annotations

import os
from typing import Any

import bson
import pytest
from sqlalchemy import MetaData, select

from chatmemory import AiMessage, ChatMessage, MessageWindowChatMemory, SystemMessage, ToolExecutionRequest, UserMessage
from chatmemory.encryption import Keyring
from chatmemory.stores.mongodb import MongoChatMemoryStore
from chatmemory.stores.redis import RedisChatMemoryStore
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends import Backend


def _said(turn: int) -> list[ChatMessage]:
    return [
        UserMessage(f"passport number X{turn:07d}Q, born 1984-03-{turn % 28 + 1:02d}"),
        AiMessage(
            f"checking visa rules for holder {turn}",
            tool_execution_requests=[
                ToolExecutionRequest(id=f"c{turn}", name="visa", arguments=f'{{"passport": "X{turn:07d}Q"}}')
            ],
        ),
    ]


def _texts(messages: list[ChatMessage]) -> list[bytes]:
    found: list[bytes] = []
    for message in messages:
        if isinstance(message, (UserMessage, SystemMessage)):
            found.append(message.text.encode())
        elif isinstance(message, AiMessage):
            found.append((message.text or "").encode())
            found += [request.arguments.encode() for request in message.tool_execution_requests]
    return found


def _everything_redis(store: RedisChatMemoryStore, client: Any) -> list[bytes]:
    dumped: list[bytes] = []
    for key in client.scan_iter(match=RedisChatMemoryStore.key_pattern(store.key_prefix)):
        dumped.append(key)
        kind = client.type(key)
        if kind == b"list":
            dumped += client.lrange(key, 0, -1)
        elif kind == b"hash":
            dumped += [part for pair in client.hgetall(key).items() for part in pair]
        elif kind == b"string":
            dumped.append(client.get(key))
    return dumped


def _everything_sql(store: SQLChatMemoryStore) -> list[bytes]:
    metadata = MetaData()
    metadata.reflect(store.engine, only=lambda name, _: name.startswith(store.table_prefix))
    dumped: list[bytes] = []
    with store.engine.connect() as connection:
        for table in metadata.tables.values():
            for row in connection.execute(select(table)):
                dumped += [value if isinstance(value, bytes) else str(value).encode() for value in row]
    return dumped


def _everything_mongodb(store: MongoChatMemoryStore) -> list[bytes]:
    collections = [store.collection, store.history_collection]
    return [
        bson.encode(document) for collection in collections if collection is not None for document in collection.find()
    ]


def test_nothing_on_the_server_holds_a_text(backend: Backend) -> None:
    if backend.name in ("memory", "langchain4j_redis"):
        pytest.skip("keeps nothing on a server (memory) or has no encryption= (the LangChain4j layout)")
    store = backend.make_store(encryption=Keyring({"k": os.urandom(32)}, "k"), history=True)
    try:
        said: list[ChatMessage] = [SystemMessage("the visa desk assistant: confidential")]
        memory = MessageWindowChatMemory("traveller:ana@example.org", store=store, max_messages=5)
        memory.add(said[0])
        for turn in range(12):
            said += _said(turn)
            memory.add(*_said(turn))
        assert [entry.message for entry in store.history(memory.id, limit=100).entries] == said  # type: ignore[attr-defined]
        if isinstance(store, RedisChatMemoryStore):
            dumped = _everything_redis(store, store.client)
        elif isinstance(store, SQLChatMemoryStore):
            dumped = _everything_sql(store)
        else:
            assert isinstance(store, MongoChatMemoryStore)
            dumped = _everything_mongodb(store)
        assert dumped, "the store keeps something on its server"
        blob = b"\n".join(dumped)
        assert b"traveller:ana@example.org" in blob  # ids stay in clear (documented)
        for text in _texts(said):
            assert text not in blob, f"{text!r} is stored in clear"
    finally:
        backend.close_store(store)
