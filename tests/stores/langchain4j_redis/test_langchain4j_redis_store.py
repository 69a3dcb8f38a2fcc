"""What only the LangChain4j Redis store does: LangChain4j's exact JSON under ``key_prefix + id``, Java writers.

A "Java write" here is what LangChain4j's ``RedisChatMemoryStore`` sends: a plain ``SET key json`` of
``ChatMessageSerializer.messagesToJson`` output (the shared vectors in tests/serialization/vectors/langchain4j).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from chatmemory import (
    AiMessage,
    ConcurrentUpdateError,
    CorruptedMemoryError,
    ImageContent,
    MessageWindowChatMemory,
    PdfFileContent,
    SerializationError,
    TextContent,
    UserMessage,
    aio,
    open_store,
)
from chatmemory.serialization import langchain4j
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.redis import Redis
from serialization.test_langchain4j import EXPECTED, VECTORS, _message
from support.backends.langchain4j_redis import drop_prefix
from support.backends.redis import redis_url

pytestmark = pytest.mark.redis

LEGACY = {name for name, specs in EXPECTED.items() if any("note" in spec for spec in specs)}


@pytest.fixture(scope="module")
def client() -> Iterator[Redis]:
    made = Redis.from_url(redis_url())
    yield made
    made.close()


@pytest.fixture
def prefix(client: Redis) -> Iterator[str]:
    made = f"lc4j-test:{uuid.uuid4().hex[:10]}:"
    yield made
    drop_prefix(client, made)


@pytest.fixture
def store(client: Redis, prefix: str) -> Iterator[LangChain4jRedisChatMemoryStore]:
    with LangChain4jRedisChatMemoryStore(client, key_prefix=prefix) as made:
        yield made


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_java_memory_is_read_extended_and_stays_langchain4j_json(
    client: Redis, prefix: str, store: LangChain4jRedisChatMemoryStore, name: str
) -> None:
    java_json = (VECTORS / name).read_bytes()
    client.set(f"{prefix}user-7", java_json)  # what LangChain4j's RedisChatMemoryStore writes

    expected = [_message(spec) for spec in EXPECTED[name]]
    assert store.get_messages("user-7") == expected
    memory = MessageWindowChatMemory("user-7", max_messages=50, store=store)
    memory.add(UserMessage("and now?"), AiMessage("still sunny"))

    added = [UserMessage("and now?"), AiMessage("still sunny")]
    stored = client.get(f"{prefix}user-7")
    assert stored is not None
    # Still LangChain4j's messagesToJson: exactly what the codec writes, with no chatmemory record in it.
    assert stored.decode("utf-8") == langchain4j.dumps(memory.messages())
    document = orjson.loads(stored)
    assert document[-2:] == [
        {"contents": [{"text": "and now?", "type": "TEXT"}], "type": "USER"},
        {"text": "still sunny", "toolExecutionRequests": [], "attributes": {}, "type": "AI"},
    ]
    if name in LEGACY:
        # A lone tool result whose call is not in the memory: the window drops it, as it drops any orphan.
        assert memory.messages() == added
    else:
        assert memory.messages() == [*expected, *added]
        assert document[: len(expected)] == orjson.loads(java_json)


def test_a_python_writer_never_overwrites_a_java_write_it_has_not_seen(
    client: Redis, prefix: str, store: LangChain4jRedisChatMemoryStore
) -> None:
    store.update_messages("m", [UserMessage("hi")])
    snapshot = store.load("m")
    java = langchain4j.dumps([UserMessage("hi"), AiMessage("from java")])
    client.set(f"{prefix}m", java)
    with pytest.raises(ConcurrentUpdateError):
        store.save("m", [*snapshot.messages, AiMessage("from python")], snapshot.version)
    assert client.get(f"{prefix}m") == java.encode()
    # Another store object (another process) holds no version of this store's.
    other = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix)
    with pytest.raises(ConcurrentUpdateError):
        other.save("m", [UserMessage("x")], store.load("m").version)


def test_a_window_memory_retries_over_a_java_write_and_keeps_it(
    client: Redis, prefix: str, store: LangChain4jRedisChatMemoryStore
) -> None:
    memory = MessageWindowChatMemory("m", max_messages=10, store=store)
    memory.add(UserMessage("python 1"))
    original_load = store.load
    interfered: list[bool] = []

    def load_then_java_writes(memory_id: str) -> Any:
        snapshot = original_load(memory_id)
        if not interfered:
            interfered.append(True)
            client.set(f"{prefix}m", langchain4j.dumps([*snapshot.messages, AiMessage("java answer")]))
        return snapshot

    store.load = load_then_java_writes  # type: ignore[method-assign]
    memory.add(UserMessage("python 2"))
    assert store.get_messages("m") == [UserMessage("python 1"), AiMessage("java answer"), UserMessage("python 2")]


def test_every_message_comes_back_exact_and_java_changes_win(
    client: Redis, prefix: str, store: LangChain4jRedisChatMemoryStore
) -> None:
    message = UserMessage(
        [
            TextContent("look"),
            ImageContent(url="https://x/a.png"),
            ImageContent(url="https://x/b.png", detail_level="original"),
            PdfFileContent(base64_data="JVBERi0="),
        ],
        attributes={"tenant": "t"},
    )
    store.update_messages("m", [message])
    assert store.get_messages("m") == [message]
    document = orjson.loads(client.get(f"{prefix}m") or b"")
    parts = document[0]["contents"]
    assert [parts[1]["detailLevel"], parts[2]["detailLevel"], parts[3]["pdfFile"]["mimeType"]] == [
        "LOW",
        "ULTRA_HIGH",
        "application/pdf",
    ]
    assert document[0]["attributes"] == {
        "tenant": "t",
        "chatmemory.contentAsGiven": {
            "1": {"detail_level": None},
            "2": {"detail_level": "original"},
            "3": {"mime_type": None},
        },
    }
    # A Java service that changed the first image's detail level: its value is read, not the kept one.
    parts[1]["detailLevel"] = "HIGH"
    client.set(f"{prefix}m", orjson.dumps(document))
    (read,) = store.get_messages("m")
    assert isinstance(read, UserMessage)
    assert [getattr(part, "detail_level", None) for part in read.contents] == [None, "HIGH", "original", None]
    assert read.attributes == {"tenant": "t"}
    with pytest.raises(SerializationError, match="reserved"):
        store.update_messages("m", [UserMessage("x", attributes={"chatmemory.contentAsGiven": {}})])


def test_damaged_values_raise_naming_the_memory_and_are_not_overwritten(
    client: Redis, prefix: str, store: LangChain4jRedisChatMemoryStore
) -> None:
    for damaged in (b"\xff not json", b'{"type": "USER"}', b'[{"type": "ALIEN"}]'):
        client.set(f"{prefix}bad", damaged)
        with pytest.raises(CorruptedMemoryError, match="'bad'"):
            store.get_messages("bad")
        with pytest.raises(CorruptedMemoryError):
            MessageWindowChatMemory("bad", max_messages=5, store=store).add(UserMessage("would overwrite"))
        assert client.get(f"{prefix}bad") == damaged
    client.delete(f"{prefix}bad")
    client.rpush(f"{prefix}bad", b"a list, not a string")
    with pytest.raises(CorruptedMemoryError, match="not a string"):
        store.load("bad")
    store.delete_messages("bad")
    store.update_messages("bad", [UserMessage("repaired")])
    assert store.get_messages("bad") == [UserMessage("repaired")]


def test_writes_set_the_expiry_and_listing_sees_string_keys_only(client: Redis, prefix: str) -> None:
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, ttl=60)
    store.save("a", [UserMessage("x")], 0)
    store.update_messages("b", [UserMessage("y")])
    assert 0 < client.pttl(f"{prefix}a") <= 60_000
    assert 0 < client.pttl(f"{prefix}b") <= 60_000
    client.hset(f"{prefix}other", "field", "a hash of another library")
    assert sorted(store.memory_ids()) == ["a", "b"]


def test_open_store_takes_the_prefix_and_ttl_from_the_url(client: Redis, prefix: str) -> None:
    url = redis_url().replace("redis://", "redis+langchain4j://", 1)
    with open_store(f"{url}?key_prefix={prefix}&ttl=30") as store:
        assert isinstance(store, LangChain4jRedisChatMemoryStore)
        assert (store.key_prefix, store.ttl) == (prefix, 30.0)
        store.update_messages("u", [UserMessage("by url")])
    assert orjson.loads(client.get(f"{prefix}u") or b"") == [
        {"contents": [{"text": "by url", "type": "TEXT"}], "type": "USER"}
    ]


async def test_the_asyncio_store_shares_the_memory(client: Redis, prefix: str) -> None:
    url = redis_url().replace("redis://", "redis+langchain4j://", 1)
    async with aio.open_store(f"{url}?key_prefix={prefix}") as store:
        client.set(f"{prefix}shared", (VECTORS / "ai_tool_calls.json").read_bytes())
        memory = aio.MessageWindowChatMemory("shared", max_messages=20, store=store)
        await memory.add(AiMessage("done"))
        assert [m async for m in store.memory_ids()] == ["shared"]
    with LangChain4jRedisChatMemoryStore(client, key_prefix=prefix) as sync_store:
        assert sync_store.get_messages("shared")[-1] == AiMessage("done")


def test_bad_arguments_fail_at_construction(client: Redis) -> None:
    with pytest.raises(TypeError, match="use '' for no prefix"):
        LangChain4jRedisChatMemoryStore(client, key_prefix=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"redis\.Redis"):
        LangChain4jRedisChatMemoryStore(42)  # type: ignore[arg-type]
    decoding = Redis.from_url(redis_url(), decode_responses=True)
    with pytest.raises(ValueError, match="decode_responses=False"):
        LangChain4jRedisChatMemoryStore(decoding)
    decoding.close()
    with pytest.raises(ValueError, match="ttl"):
        LangChain4jRedisChatMemoryStore(client, ttl=0)
    with pytest.raises(ValueError, match="version_book_size"):
        LangChain4jRedisChatMemoryStore(client, version_book_size=0)


def test_rediss_urls_name_this_store_too() -> None:
    from chatmemory.stores.url import STORE_SCHEMES

    assert STORE_SCHEMES["rediss+langchain4j"] == STORE_SCHEMES["redis+langchain4j"]


def test_a_server_that_does_not_know_the_script_runs_it_with_eval(
    monkeypatch: pytest.MonkeyPatch, store: LangChain4jRedisChatMemoryStore
) -> None:
    import chatmemory.stores.langchain4j_redis.operations as module

    monkeypatch.setattr(module, "WRITE_SCRIPT_SHA", "0" * 40)  # a script no server has cached
    version = store.save("m", [UserMessage("via EVAL")], 0)
    assert store.load("m") == type(store.load("m"))([UserMessage("via EVAL")], version)
