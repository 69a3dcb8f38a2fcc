"""ChatMemoryProvider: one memory object per id, also under concurrent first use."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from chatmemory import ChatMemory, ChatMemoryProvider, InMemoryChatMemoryStore, MessageWindowChatMemory, UserMessage


def test_one_object_per_id_and_int_ids_normalised() -> None:
    store = InMemoryChatMemoryStore()
    built: Counter[str] = Counter()

    def factory(memory_id: str) -> ChatMemory:
        built[memory_id] += 1
        return MessageWindowChatMemory(memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(factory)
    first = provider("user-1")
    assert provider("user-1") is first
    assert provider.get("user-1") is first
    assert provider(42) is provider("42")
    assert provider(42).id == "42"
    assert provider("user-2") is not first
    assert built == Counter({"user-1": 1, "42": 1, "user-2": 1})
    first.add(UserMessage("hi"))
    assert provider("user-2").messages() == []


def test_forget_drops_the_object_not_the_messages() -> None:
    store = InMemoryChatMemoryStore()
    provider = ChatMemoryProvider(lambda memory_id: MessageWindowChatMemory(memory_id, max_messages=5, store=store))
    first = provider("a")
    first.add(UserMessage("kept"))
    provider.forget("a")
    provider.forget("never-seen")
    second = provider("a")
    assert second is not first
    assert second.messages() == [UserMessage("kept")]


def test_invalid_ids_are_rejected_before_the_factory() -> None:
    calls: list[str] = []
    provider = ChatMemoryProvider(
        lambda memory_id: (
            calls.append(memory_id)
            or MessageWindowChatMemory(  # type: ignore[func-returns-value]
                memory_id, max_messages=1
            )
        )
    )
    for bad in (None, b"x", 1.0, True):
        with pytest.raises(TypeError):
            provider(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        provider("")
    assert calls == []


def test_concurrent_first_use_builds_one_object() -> None:
    built: Counter[str] = Counter()
    entered = threading.Event()

    def slow_factory(memory_id: str) -> ChatMemory:
        built[memory_id] += 1
        entered.set()
        # Widen the race: other threads ask while this build is under way.
        threading.Event().wait(0.01)
        return MessageWindowChatMemory(memory_id, max_messages=5)

    provider = ChatMemoryProvider(slow_factory)
    barrier = threading.Barrier(16)
    results: list[ChatMemory] = []
    lock = threading.Lock()

    def ask(index: int) -> None:
        barrier.wait()
        memory = provider("shared" if index % 2 else 7)
        with lock:
            results.append(memory)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert entered.is_set()
    assert built == Counter({"shared": 1, "7": 1})
    assert len({id(memory) for memory in results}) == 2
    assert len(results) == 16


def test_factory_error_caches_nothing() -> None:
    attempts: list[str] = []

    def flaky(memory_id: str) -> ChatMemory:
        attempts.append(memory_id)
        if len(attempts) == 1:
            raise RuntimeError("boom")
        return MessageWindowChatMemory(memory_id, max_messages=1)

    provider = ChatMemoryProvider(flaky)
    with pytest.raises(RuntimeError):
        provider("a")
    assert provider("a") is provider("a")
    assert attempts == ["a", "a"]


def test_max_memories_keeps_the_most_recently_used() -> None:
    store = InMemoryChatMemoryStore()
    built: list[str] = []

    def factory(memory_id: str) -> MessageWindowChatMemory:
        built.append(memory_id)
        return MessageWindowChatMemory(memory_id, max_messages=5, store=store)

    provider = ChatMemoryProvider(factory, max_memories=2)
    a = provider("a")
    a.add(UserMessage("kept in the store"))
    provider("b")
    assert provider("a") is a  # a is now the most recent
    provider("c")  # b goes
    assert provider("a") is a
    assert built == ["a", "b", "c"]
    provider("b")
    assert built == ["a", "b", "c", "b"]
    assert provider("a").messages() == [UserMessage("kept in the store")]
    with pytest.raises(ValueError):
        ChatMemoryProvider(factory, max_memories=0)
