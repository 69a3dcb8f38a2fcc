"""Sliding windows and window memories driven through the store, against an in-memory reference."""

from __future__ import annotations

from typing import Any

import pytest

from chatmemory.core.memory import MessageWindowChatMemory, TokenWindowChatMemory
from chatmemory.core.messages import SystemMessage
from chatmemory.stores.memory import InMemoryChatMemoryStore
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.conversation import scripted_turns
from chatmemory.testing.driver import ContractDriver


class WindowCases:
    """Sliding windows and window memories driven through the store, against an in-memory reference."""

    async def test_sliding_window_of_1000_updates_leaves_the_last_window(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = contract.store
        messages = texts(1000)
        window = 20
        for end in range(1, 1001):
            await store.update_messages(memory_id, messages[max(0, end - window) : end])
            if end % 250 == 0:
                assert await store.get_messages(memory_id) == messages[end - window : end]
        assert await store.get_messages(memory_id) == messages[-window:]

    async def test_sliding_window_behind_a_system_message(self, contract: ContractDriver, memory_id: str) -> None:
        system = SystemMessage("stay")
        messages = texts(200)
        for end in range(1, 201):
            await contract.store.update_messages(memory_id, [system, *messages[max(0, end - 9) : end]])
        assert await contract.store.get_messages(memory_id) == [system, *messages[-9:]]

    @pytest.mark.parametrize("always_keep_system_message_first", [False, True], ids=["system-in-place", "system-first"])
    async def test_window_memory_over_300_turns_matches_the_reference(
        self, contract: ContractDriver, memory_id: str, always_keep_system_message_first: bool
    ) -> None:
        options: dict[str, Any] = {
            "max_messages": 12,
            "always_keep_system_message_first": always_keep_system_message_first,
        }
        memory = contract.memory(memory_id, **options)
        reference = MessageWindowChatMemory(memory_id, store=InMemoryChatMemoryStore(), **options)
        for turn, added in enumerate(scripted_turns(300)):
            await memory.add(*added)
            reference.add(*added)
            assert await memory.messages() == reference.messages(), f"after turn {turn}"

    async def test_token_window_memory_matches_the_reference(self, contract: ContractDriver, memory_id: str) -> None:
        memory = contract.token_memory(memory_id, max_tokens=180)
        reference = TokenWindowChatMemory(memory_id, store=InMemoryChatMemoryStore(), max_tokens=180)
        for turn, added in enumerate(scripted_turns(60)):
            await memory.add(*added)
            reference.add(*added)
            assert await memory.messages() == reference.messages(), f"after turn {turn}"
