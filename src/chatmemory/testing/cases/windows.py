"""Sliding windows and window memories driven through the store, against an in-memory reference."""

from __future__ import annotations

import pytest

from chatmemory.core.memory import MessageWindowChatMemory, TokenWindowChatMemory
from chatmemory.core.messages import SystemMessage
from chatmemory.core.store import ChatMemoryStore
from chatmemory.stores.memory import InMemoryChatMemoryStore
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.conversation import scripted_turns


class WindowCases:
    """Sliding windows and window memories driven through the store, against an in-memory reference."""

    def test_sliding_window_of_1000_updates_leaves_the_last_window(
        self, store: ChatMemoryStore, memory_id: str
    ) -> None:
        messages = texts(1000)
        window = 20
        for end in range(1, 1001):
            store.update_messages(memory_id, messages[max(0, end - window) : end])
            if end % 250 == 0:
                assert store.get_messages(memory_id) == messages[end - window : end]
        assert store.get_messages(memory_id) == messages[-window:]

    def test_sliding_window_behind_a_system_message(self, store: ChatMemoryStore, memory_id: str) -> None:
        system = SystemMessage("stay")
        messages = texts(200)
        for end in range(1, 201):
            store.update_messages(memory_id, [system, *messages[max(0, end - 9) : end]])
        assert store.get_messages(memory_id) == [system, *messages[-9:]]

    @pytest.mark.parametrize("always_keep_system_message_first", [False, True], ids=["system-in-place", "system-first"])
    def test_window_memory_over_300_turns_matches_the_reference(
        self, store: ChatMemoryStore, memory_id: str, always_keep_system_message_first: bool
    ) -> None:
        options = {"max_messages": 12, "always_keep_system_message_first": always_keep_system_message_first}
        memory = MessageWindowChatMemory(memory_id, store=store, **options)  # type: ignore[arg-type]
        reference = MessageWindowChatMemory(memory_id, store=InMemoryChatMemoryStore(), **options)  # type: ignore[arg-type]
        for turn, added in enumerate(scripted_turns(300)):
            memory.add(*added)
            reference.add(*added)
            assert memory.messages() == reference.messages(), f"after turn {turn}"

    def test_token_window_memory_matches_the_reference(self, store: ChatMemoryStore, memory_id: str) -> None:
        memory = TokenWindowChatMemory(memory_id, store=store, max_tokens=180)
        reference = TokenWindowChatMemory(memory_id, store=InMemoryChatMemoryStore(), max_tokens=180)
        for turn, added in enumerate(scripted_turns(60)):
            memory.add(*added)
            reference.add(*added)
            assert memory.messages() == reference.messages(), f"after turn {turn}"
