"""The asyncio provider: one memory object per id, a plain factory, no lock held across an await."""

from __future__ import annotations

import asyncio

import pytest

from chatmemory import UserMessage
from chatmemory.aio import ChatMemory, ChatMemoryProvider, InMemoryChatMemoryStore, MessageWindowChatMemory


async def test_one_object_per_id_shared_by_concurrent_tasks() -> None:
    store = InMemoryChatMemoryStore()
    built: list[str] = []

    def factory(memory_id: str) -> ChatMemory:
        built.append(memory_id)
        return MessageWindowChatMemory(memory_id, max_messages=50, store=store)

    provider = ChatMemoryProvider(factory, max_memories=10)

    async def chat(task: int) -> None:
        await asyncio.sleep(0)
        await provider(f"user-{task % 3}").add(UserMessage(str(task)))

    await asyncio.gather(*(chat(task) for task in range(30)))
    assert sorted(built) == ["user-0", "user-1", "user-2"]
    assert len(await provider("user-1").messages()) == 10
    assert provider.max_memories == 10


async def test_async_factories_are_refused() -> None:
    async def factory(memory_id: str) -> ChatMemory:
        return MessageWindowChatMemory(memory_id, max_messages=5)

    with pytest.raises(TypeError, match="without awaiting"):
        ChatMemoryProvider(factory)  # type: ignore[arg-type]
    provider = ChatMemoryProvider(lambda memory_id: factory(memory_id))  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="returned an awaitable"):
        provider("a")
