"""The asyncio memories: same arguments and behaviour as the sync ones, awaited."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import chatmemory
import chatmemory.aio
from chatmemory import AiMessage, ChatMessage, ConcurrentUpdateError, Snapshot, SystemMessage, UserMessage
from chatmemory.aio import InMemoryChatMemoryStore, MessageWindowChatMemory, TokenWindowChatMemory
from chatmemory.stores.base import RetryPolicy
from chatmemory.testing import scripted_turns


def u(text: str) -> UserMessage:
    return UserMessage(text)


async def test_add_messages_set_clear() -> None:
    memory = MessageWindowChatMemory("m", max_messages=3)
    assert isinstance(memory, chatmemory.aio.ChatMemory)
    assert isinstance(memory.store, InMemoryChatMemoryStore)
    await memory.add(SystemMessage("s"), u("a"), u("b"))
    await memory.add(u("c"))
    assert await memory.messages() == [SystemMessage("s"), u("b"), u("c")]
    await memory.set(iter([u("x"), u("y")]))
    assert await memory.messages() == [u("x"), u("y")]
    await memory.clear()
    assert await memory.messages() == []
    await memory.add()
    assert await memory.store.get_messages("m") == []


@pytest.mark.parametrize("first", [False, True])
async def test_same_windows_as_the_sync_memories(first: bool) -> None:
    options: dict[str, Any] = {"always_keep_system_message_first": first}
    pairs = [
        (
            MessageWindowChatMemory("m", max_messages=9, **options),
            chatmemory.MessageWindowChatMemory(max_messages=9, **options),
        ),
        (
            TokenWindowChatMemory("m", max_tokens=150, **options),
            chatmemory.TokenWindowChatMemory(max_tokens=150, **options),
        ),
    ]
    for asynchronous, synchronous in pairs:
        for turn, added in enumerate(scripted_turns(40)):
            await asynchronous.add(*added)
            synchronous.add(*added)
            assert await asynchronous.messages() == synchronous.messages(), turn


async def test_dynamic_limit_is_read_on_every_operation() -> None:
    limit = [4]
    memory = MessageWindowChatMemory(max_messages=lambda: limit[0])
    await memory.add(*(u(str(i)) for i in range(4)))
    limit[0] = 2
    assert await memory.messages() == [u("2"), u("3")]


class _ConflictingStore(InMemoryChatMemoryStore):
    """Another writer gets in between every load and save."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    async def load(self, memory_id: str) -> Snapshot:
        snapshot = await super().load(memory_id)
        await self.update_messages(memory_id, [*snapshot.messages, AiMessage("interloper")])
        return snapshot

    async def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        self.saves += 1
        return await super().save(memory_id, messages, expected_version)


async def test_conflicts_are_retried_until_the_budget_is_spent() -> None:
    store = _ConflictingStore()
    memory = MessageWindowChatMemory("m", max_messages=1000, store=store, retry=RetryPolicy(budget=0.05))
    with pytest.raises(ConcurrentUpdateError, match="'m'") as raised:
        await memory.add(u("mine"))
    assert raised.value.attempts == store.saves > 1
    assert u("mine") not in await store.get_messages("m")


@pytest.mark.parametrize("cls", [MessageWindowChatMemory, TokenWindowChatMemory])
async def test_bad_stores_fail_at_construction(cls: Any) -> None:
    limit = {"max_messages": 3} if cls is MessageWindowChatMemory else {"max_tokens": 30}
    with pytest.raises(TypeError, match=r"chatmemory\.aio\.open_store\('redis://h/0'\)"):
        cls(store="redis://h/0", **limit)
    with pytest.raises(TypeError, match="is a sync store"):
        cls(store=chatmemory.InMemoryChatMemoryStore(), **limit)
    with pytest.raises(TypeError, match="TiktokenTokenCountEstimator"):
        TokenWindowChatMemory(max_tokens=3, token_count_estimator="gpt-4o")  # type: ignore[arg-type]


async def test_a_token_is_counted_once_per_message() -> None:
    counted: list[ChatMessage] = []

    class Counting:
        def estimate_message(self, message: ChatMessage) -> int:
            counted.append(message)
            return 1

    memory = TokenWindowChatMemory(max_tokens=5, token_count_estimator=Counting())
    for index in range(20):
        await memory.add(u(str(index)))
        await memory.messages()
    assert len(counted) == len(set(counted)) == 20
