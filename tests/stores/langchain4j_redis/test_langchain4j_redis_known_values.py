"""The messages a LangChain4j-layout store knows by the SHA-1 of the value they came from (no server)."""

from __future__ import annotations

from chatmemory import AiMessage, UserMessage
from chatmemory.stores.langchain4j_redis.plan import KnownValues, digest, encode


def test_the_messages_come_back_only_for_the_value_they_were_remembered_with() -> None:
    known = KnownValues(4)
    messages = [UserMessage("a"), AiMessage("b")]
    value = encode(messages)
    known.put("m", digest(value), messages)
    assert known.get("m", digest(value)) == tuple(messages)
    assert known.get("m", digest(encode([UserMessage("a")]))) is None  # another writer's value
    assert known.get("other", digest(value)) is None


def test_a_later_value_replaces_the_one_remembered() -> None:
    known = KnownValues(4)
    first, second = [UserMessage("a")], [UserMessage("a"), UserMessage("b")]
    known.put("m", digest(encode(first)), first)
    known.put("m", digest(encode(second)), second)
    assert known.get("m", digest(encode(first))) is None
    assert known.get("m", digest(encode(second))) == tuple(second)


def test_forgotten_and_least_recent_memories_are_not_known() -> None:
    known = KnownValues(2)
    for memory_id in ("a", "b", "c"):
        known.put(memory_id, digest(memory_id.encode()), [UserMessage(memory_id)])
    assert known.get("a", digest(b"a")) is None  # the least recently used went first
    known.forget("b")
    assert known.get("b", digest(b"b")) is None
    assert known.get("c", digest(b"c")) == (UserMessage("c"),)
    known.clear()
    assert known.get("c", digest(b"c")) is None
