"""ChatMemoryChatStore as LlamaIndex's chat store contract asks, on every backend, sync and asyncio stores.

What llama-index-core's own ``SimpleChatStore`` tests check (adds per key, insertion at an index, deleting
a key, the last message, one at an index, an index out of range, the last of an emptied history, keys,
non-ASCII text), written here for the real class over real stores; plus what only a store adds: exact round
trips, concurrent positional edits that lose nothing, a ``ChatMemoryBuffer`` over it, errors.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest
from llama_index.core.base.llms.types import ThinkingBlock, ToolCallBlock
from llama_index.core.llms import ChatMessage, ImageBlock, MessageRole, TextBlock
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.storage.chat_store.base import BaseChatStore

from chatmemory import ChatMemoryStore, CustomMessage, InMemoryChatMemoryStore, SerializationError, UserMessage, aio
from chatmemory.integrations.llama_index import ChatMemoryChatStore


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


TOOL_TURN = [
    ChatMessage(role="system", content="Be brief."),
    ChatMessage(role="user", blocks=[TextBlock(text="What is this?"), ImageBlock(url="https://x.test/a.png")]),
    ChatMessage(
        role="assistant",
        blocks=[
            ThinkingBlock(content="look it up", additional_information={"signature": "c2ln"}),
            ToolCallBlock(tool_call_id="c1", tool_name="describe", tool_kwargs={"url": "https://x.test/a.png"}),
        ],
    ),
    ChatMessage(role="tool", content="a cat", additional_kwargs={"tool_call_id": "c1", "name": "describe"}),
    ChatMessage(role="assistant", content="A cat."),
]


def _dumps(messages: list[ChatMessage] | None) -> Any:
    return None if messages is None else [m.model_dump(mode="json") for m in messages]


# ------------------------------------------------------------------------------- the SimpleChatStore contract


def test_it_is_a_chat_store(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    assert isinstance(chat_store, BaseChatStore)
    assert chat_store.store is store
    assert chat_store.get_messages("nobody") == []
    assert chat_store.get_keys() == []


def test_adds_per_key_and_an_insertion_at_an_index(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.add_message("user1", user("hello"))
    chat_store.add_message("user1", user("world"))
    chat_store.add_message("user2", user("hello"))
    chat_store.add_message("user2", user("world"))
    assert chat_store.get_messages("user1") == [user("hello"), user("world")]
    assert chat_store.get_messages("user2") == [user("hello"), user("world")]
    assert chat_store.get_keys() == ["user1", "user2"]
    chat_store.add_message("user1", user("first"), idx=0)
    chat_store.add_message("user1", user("second"), idx=1)
    chat_store.add_message("user1", user("before last"), idx=-1)
    chat_store.add_message("user1", user("past the end"), idx=99)
    texts = [m.content for m in chat_store.get_messages("user1")]
    assert texts == ["first", "second", "hello", "before last", "world", "past the end"]
    assert chat_store.get_messages("user2") == [user("hello"), user("world")]


def test_deleting_a_key(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.set_messages("user1", [user("hello"), user("world")])
    chat_store.set_messages("user2", [user("hello"), user("world")])
    assert chat_store.delete_messages("user1") == [user("hello"), user("world")]
    assert chat_store.get_messages("user1") == []
    assert chat_store.get_messages("user2") == [user("hello"), user("world")]
    assert chat_store.get_keys() == ["user2"]
    assert chat_store.delete_messages("user1") is None  # an unknown key held nothing
    chat_store.set_messages("emptied", [])
    assert chat_store.delete_messages("emptied") == []


def test_deleting_the_last_message(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.add_message("user1", user("hello"))
    chat_store.add_message("user1", user("world"))
    assert chat_store.delete_last_message("user1") == user("world")
    assert chat_store.get_messages("user1") == [user("hello")]
    assert chat_store.delete_last_message("user1") == user("hello")
    assert chat_store.delete_last_message("user1") is None  # an existing, emptied history
    assert chat_store.delete_last_message("nobody") is None
    assert chat_store.get_keys() == ["user1"]


def test_deleting_the_message_at_an_index(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.set_messages("user1", [user("a"), user("b"), user("c"), user("d")])
    assert chat_store.delete_message("user1", 0) == user("a")
    assert chat_store.delete_message("user1", 1) == user("c")
    assert chat_store.delete_message("user1", -1) == user("d")
    assert chat_store.get_messages("user1") == [user("b")]


@pytest.mark.parametrize("index", [1, 5, -2, -50])
def test_an_index_out_of_range_deletes_nothing(store: ChatMemoryStore, index: int) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.add_message("user1", user("hello"))
    assert chat_store.delete_message("user1", index) is None
    assert chat_store.get_messages("user1") == [user("hello")]
    assert chat_store.delete_message("nobody", 0) is None
    assert store.get_messages("nobody") == []
    assert chat_store.get_keys() == ["user1"]


def test_non_ascii_text_is_kept_as_it_is(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.add_message("ハロー", user("ハロー héllo 👋"))
    assert ChatMemoryChatStore(store).get_messages("ハロー") == [user("ハロー héllo 👋")]
    assert chat_store.get_keys() == ["ハロー"]


def test_what_is_set_comes_back_equal(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.set_messages("exact", TOOL_TURN)
    again = ChatMemoryChatStore(store).get_messages("exact")
    assert _dumps(again) == _dumps(TOOL_TURN)
    assert again == TOOL_TURN
    # Kept as chat messages: other chatmemory code reads the conversation.
    stored = store.get_messages("exact")
    assert [type(m).__name__ for m in stored] == [
        "SystemMessage",
        "UserMessage",
        "AiMessage",
        "ToolExecutionResultMessage",
        "AiMessage",
    ]
    for index, message in enumerate(TOOL_TURN):  # each message alone, through add_message
        chat_store.add_message("one-by-one", message)
        assert _dumps([chat_store.get_messages("one-by-one")[index]]) == _dumps([message])
    gone = chat_store.delete_message("one-by-one", 2)
    assert gone is not None and _dumps([gone]) == _dumps([TOOL_TURN[2]])


def test_set_messages_replaces_the_key(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.set_messages("k", [user("a"), user("b")])
    chat_store.set_messages("k", [user("c")])
    assert chat_store.get_messages("k") == [user("c")]
    chat_store.set_messages("k", [])
    assert chat_store.get_messages("k") == []
    assert chat_store.get_keys() == ["k"]


async def test_the_async_forms_on_a_sync_store(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    await chat_store.async_add_message("k", user("b"))
    await chat_store.async_add_message("k", user("a"), idx=0)
    await chat_store.async_add_message("k", user("c"))
    assert await chat_store.aget_messages("k") == [user("a"), user("b"), user("c")]
    assert await chat_store.adelete_message("k", 1) == user("b")
    assert await chat_store.adelete_last_message("k") == user("c")
    assert await chat_store.aget_keys() == ["k"]
    await chat_store.aset_messages("k", TOOL_TURN)
    assert _dumps(await chat_store.aget_messages("k")) == _dumps(TOOL_TURN)
    assert _dumps(await chat_store.adelete_messages("k")) == _dumps(TOOL_TURN)
    assert await chat_store.aget_keys() == []


async def test_the_async_forms_on_an_asyncio_store(async_store: aio.ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(async_store)
    assert await chat_store.aget_messages("k") == []
    assert await chat_store.aget_keys() == []
    await chat_store.async_add_message("k", user("b"))
    await chat_store.async_add_message("k", user("a"), idx=0)
    await chat_store.async_add_message("k", user("c"))
    await chat_store.async_add_message("other", user("x"))
    assert await chat_store.aget_messages("k") == [user("a"), user("b"), user("c")]
    assert await chat_store.aget_keys() == ["k", "other"]
    assert await chat_store.adelete_message("k", 1) == user("b")
    assert await chat_store.adelete_message("k", 7) is None
    assert await chat_store.adelete_last_message("k") == user("c")
    assert await chat_store.adelete_last_message("k") == user("a")
    assert await chat_store.adelete_last_message("k") is None
    await chat_store.aset_messages("k", TOOL_TURN)
    assert _dumps(await ChatMemoryChatStore(async_store).aget_messages("k")) == _dumps(TOOL_TURN)
    assert _dumps(await chat_store.adelete_messages("k")) == _dumps(TOOL_TURN)
    assert await chat_store.adelete_messages("k") is None
    assert await chat_store.aget_keys() == ["other"]
    assert await async_store.get_messages("k") == []


async def test_sync_methods_on_an_asyncio_store_say_what_to_await(async_store: aio.ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(async_store)
    with pytest.raises(TypeError, match=r"kept in an asyncio store .*await aget_messages\(\.\.\.\) instead"):
        chat_store.get_messages("k")
    with pytest.raises(TypeError, match=r"await async_add_message\(\.\.\.\) instead of add_message"):
        chat_store.add_message("k", user("x"))
    with pytest.raises(TypeError, match="adelete_message"):
        chat_store.delete_message("k", 0)
    with pytest.raises(TypeError, match="aget_keys"):
        chat_store.get_keys()
    assert await async_store.get_messages("k") == []


# ------------------------------------------------------------------------------------------- LlamaIndex


def _words(text: str) -> list[str]:
    return text.split()


def test_a_chat_memory_buffer_keeps_its_history_here(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    memory = ChatMemoryBuffer.from_defaults(
        token_limit=5, chat_store=chat_store, chat_store_key="conversation", tokenizer_fn=_words
    )
    memory.put(user("one two"))
    memory.put(ChatMessage(role="assistant", content="three four"))
    memory.put(user("five six"))
    # The buffer's window is its own (a user message first, at most 5 words); the store keeps the whole conversation.
    assert [m.content for m in memory.get()] == ["five six"]
    assert [m.content for m in memory.get_all()] == ["one two", "three four", "five six"]
    again = ChatMemoryBuffer.from_defaults(
        token_limit=100, chat_store=ChatMemoryChatStore(store), chat_store_key="conversation", tokenizer_fn=_words
    )
    assert [m.content for m in again.get()] == ["one two", "three four", "five six"]
    memory.set([user("fresh")])
    assert [m.content for m in again.get_all()] == ["fresh"]
    memory.reset()
    assert again.get_all() == []
    assert store.get_messages("conversation") == []


async def test_a_chat_memory_buffer_over_an_asyncio_store(async_store: aio.ChatMemoryStore) -> None:
    memory = ChatMemoryBuffer.from_defaults(
        token_limit=100, chat_store=ChatMemoryChatStore(async_store), chat_store_key="c", tokenizer_fn=_words
    )
    # (Not aput_messages, nor aget: LlamaIndex runs those as the sync methods in a thread.)
    for message in [user("hello"), ChatMessage(role="assistant", content="hi"), user("again")]:
        await memory.aput(message)
    assert [m.content for m in await memory.aget_all()] == ["hello", "hi", "again"]
    await memory.aset([user("only")])
    assert [m.content for m in await memory.aget_all()] == ["only"]
    await memory.areset()
    assert await async_store.get_messages("c") == []


# --------------------------------------------------------------------------------------------- concurrency

SEEDS, TURNS = 80, 10


def _check_nothing_lost(stored: list[str], removed: list[str]) -> None:
    seeds = [f"seed-{n}" for n in range(SEEDS)]
    inserted = [f"e{w}-{t}" for w in range(2) for t in range(TURNS)]
    appended = [f"a{w}-{t}" for w in range(2) for t in range(TURNS)]
    # Every delete removed exactly one message, a different seed each time, from the front.
    assert sorted(removed) == sorted(seeds[: 2 * TURNS]), removed
    assert Counter(stored) == Counter(seeds[2 * TURNS :] + inserted + appended), "a message was lost or doubled"
    for writer in range(2):  # appends at the end, in each appender's order
        assert [t for t in stored if t.startswith(f"a{writer}-")] == [f"a{writer}-{t}" for t in range(TURNS)]


def test_concurrent_positional_edits_lose_nothing(store: ChatMemoryStore) -> None:
    ChatMemoryChatStore(store).set_messages("shared", [user(f"seed-{n}") for n in range(SEEDS)])
    removed: list[str] = []

    def edit(writer: int) -> None:
        chat_store = ChatMemoryChatStore(store)
        for turn in range(TURNS):
            middle = len(chat_store.get_messages("shared")) // 2
            chat_store.add_message("shared", user(f"e{writer}-{turn}"), idx=middle)
            gone = chat_store.delete_message("shared", 0)
            removed.append(str(gone.content if gone is not None else None))

    def append(writer: int) -> None:
        chat_store = ChatMemoryChatStore(store)
        for turn in range(TURNS):
            chat_store.add_message("shared", user(f"a{writer}-{turn}"))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(2) for work in (edit, append)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _check_nothing_lost([str(m.content) for m in ChatMemoryChatStore(store).get_messages("shared")], removed)


async def test_concurrent_positional_edits_lose_nothing_async(async_store: aio.ChatMemoryStore) -> None:
    await ChatMemoryChatStore(async_store).aset_messages("shared", [user(f"seed-{n}") for n in range(SEEDS)])
    removed: list[str] = []

    async def edit(writer: int) -> None:
        chat_store = ChatMemoryChatStore(async_store)
        for turn in range(TURNS):
            middle = len(await chat_store.aget_messages("shared")) // 2
            await chat_store.async_add_message("shared", user(f"e{writer}-{turn}"), idx=middle)
            gone = await chat_store.adelete_message("shared", 0)
            removed.append(str(gone.content if gone is not None else None))

    async def append(writer: int) -> None:
        chat_store = ChatMemoryChatStore(async_store)
        for turn in range(TURNS):
            await chat_store.async_add_message("shared", user(f"a{writer}-{turn}"))

    await asyncio.gather(*(work(n) for n in range(2) for work in (edit, append)))
    stored = [str(m.content) for m in await ChatMemoryChatStore(async_store).aget_messages("shared")]
    _check_nothing_lost(stored, removed)


# ----------------------------------------------------------------------------------------------- bad input


def test_a_message_that_cannot_be_held_writes_nothing(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    chat_store.add_message("k", user("kept"))
    bad = ChatMessage(role="user", content="x", additional_kwargs={"when": object()})
    with pytest.raises(SerializationError, match=r"chat store key 'k': LlamaIndex message 1 .*nothing was written"):
        chat_store.set_messages("k", [user("a"), bad])
    with pytest.raises(SerializationError, match=r"chat store key 'k': LlamaIndex message 0 .*nothing was written"):
        chat_store.add_message("k", bad)
    assert chat_store.get_messages("k") == [user("kept")]
    with pytest.raises(TypeError, match="set_messages takes a list of ChatMessage, not ChatMessage"):
        chat_store.set_messages("k", user("not a list"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="add_message takes a ChatMessage, not str"):
        chat_store.add_message("k", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="add_message takes an int position, not str"):
        chat_store.add_message("k", user("x"), idx="0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delete_message takes an int position, not float"):
        chat_store.delete_message("k", 0.0)  # type: ignore[arg-type]
    assert chat_store.get_messages("k") == [user("kept")]


def test_a_custom_message_of_other_code_is_named_and_never_deleted_unseen(store: ChatMemoryStore) -> None:
    store.update_messages("custom", [UserMessage("hi"), CustomMessage({"note": 1})])
    chat_store = ChatMemoryChatStore(store)
    with pytest.raises(SerializationError, match=r"chat store key 'custom': message 1 \(CustomMessage\)"):
        chat_store.get_messages("custom")
    with pytest.raises(SerializationError, match=r"message 0 \(CustomMessage\).*nothing was deleted"):
        chat_store.delete_last_message("custom")
    assert chat_store.delete_message("custom", 0) == user("hi")
    assert store.get_messages("custom") == [CustomMessage({"note": 1})]


class _Unversioned:
    def get_messages(self, memory_id: str) -> list[Any]:
        return []

    def update_messages(self, memory_id: str, messages: Any) -> None:
        pass

    def delete_messages(self, memory_id: str) -> None:
        pass


class _Unlisted(_Unversioned):
    def load(self, memory_id: str) -> Any:
        raise AssertionError

    def save(self, memory_id: str, messages: Any, expected_version: int) -> int:
        raise AssertionError


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"store": "redis://localhost:6379"}, TypeError, "takes a store object, not a URL"),
        ({"store": object()}, TypeError, "needs a ChatMemoryStore"),
        ({"store": _Unversioned()}, TypeError, "need a store with versioning.*_Unversioned has none"),
        ({"store": _Unlisted()}, TypeError, r"lists its memory ids \(SupportsListing: memory_ids\).*_Unlisted"),
        ({"max_attempts": 0}, ValueError, "max_attempts must be >= 1"),
        ({"retry": 3}, TypeError, "RetryPolicy"),
    ],
)
def test_bad_arguments_fail_when_the_chat_store_is_built(arguments: dict[str, Any], error: type, match: str) -> None:
    options = {"store": InMemoryChatMemoryStore(), **arguments}
    with pytest.raises(error, match=match):
        ChatMemoryChatStore(**options)


def test_a_bad_key_is_refused() -> None:
    chat_store = ChatMemoryChatStore(InMemoryChatMemoryStore())
    with pytest.raises(ValueError, match="must not be empty"):
        chat_store.add_message("", user("x"))
    with pytest.raises(TypeError, match="must be a str"):
        chat_store.get_messages(None)  # type: ignore[arg-type]


def test_roles_outside_the_four_come_back_as_given(store: ChatMemoryStore) -> None:
    chat_store = ChatMemoryChatStore(store)
    odd = [
        ChatMessage(role=MessageRole.DEVELOPER, content="dev"),
        ChatMessage(role=MessageRole.MODEL, content="gemini"),
        ChatMessage(role=MessageRole.CHATBOT, content="cohere"),
        ChatMessage(role=MessageRole.FUNCTION, content="42", additional_kwargs={"name": "f"}),
    ]
    chat_store.set_messages("odd", odd)
    assert chat_store.get_messages("odd") == odd
