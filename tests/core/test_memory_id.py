"""Memory ids: str, int or UUID, bounded, opaque."""

from __future__ import annotations

import uuid

import pytest

from chatmemory import (
    MAX_MEMORY_ID_LENGTH,
    ChatMemoryProvider,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    UserMessage,
    validate_memory_id,
)


@pytest.mark.parametrize(("given", "expected"), [("abc", "abc"), (42, "42"), (0, "0"), (-7, "-7"), ("é会🙂", "é会🙂")])
def test_str_and_int_accepted(given: object, expected: str) -> None:
    assert validate_memory_id(given) == expected


@pytest.mark.parametrize(
    "bad", [None, b"abc", {"a": 1}, ["a"], 1.0, True, False, ("a",), object()], ids=lambda v: type(v).__name__
)
def test_other_types_raise_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="memory id"):
        validate_memory_id(bad)


def test_empty_and_too_long_raise_value_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        validate_memory_id("")
    with pytest.raises(ValueError, match="255"):
        validate_memory_id("x" * (MAX_MEMORY_ID_LENGTH + 1))
    assert MAX_MEMORY_ID_LENGTH == 255
    assert validate_memory_id("x" * 255) == "x" * 255
    # Characters, not bytes: 255 four-byte characters are fine.
    assert validate_memory_id("🙂" * 255) == "🙂" * 255


ADVERSARIAL = [
    "*",
    "a:b",
    "{a}",
    "'; DROP TABLE x;--",
    '{"$ne": 1}',
    "{$ne: 1}",
    "%",
    "_",
    "a\x00b",
    " ",
    "..",
    "/",
    "\\",
    "key*",
    "[abc]",
    "?",
    "$where",
    "NULL",
]


@pytest.mark.parametrize("memory_id", ADVERSARIAL)
def test_adversarial_strings_are_literal_ids(memory_id: str) -> None:
    assert validate_memory_id(memory_id) == memory_id
    memory = MessageWindowChatMemory(memory_id, max_messages=3)
    memory.add(UserMessage(memory_id))
    assert memory.id == memory_id
    assert memory.messages() == [UserMessage(memory_id)]


def test_memory_converts_int_ids() -> None:
    assert MessageWindowChatMemory(7, max_messages=1).id == "7"
    with pytest.raises(TypeError):
        MessageWindowChatMemory(None, max_messages=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["\ud800", "user-\udfff", "\udc80abc"])
def test_lone_surrogates_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="surrogate"):
        validate_memory_id(text)


def test_uuid_is_its_canonical_string() -> None:
    session = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert validate_memory_id(session) == "12345678-1234-5678-1234-567812345678"
    store = InMemoryChatMemoryStore()
    MessageWindowChatMemory(session, max_messages=3, store=store).add(UserMessage("by uuid"))
    assert MessageWindowChatMemory(str(session), max_messages=3, store=store).messages() == [UserMessage("by uuid")]
    assert store.get_messages(session) == [UserMessage("by uuid")]  # type: ignore[arg-type]
    assert ChatMemoryProvider(lambda i: MessageWindowChatMemory(i, max_messages=3, store=store))(session).id == str(
        session
    )
