"""Memories expire, and every write slides the expiry (stores built by make_ttl_store)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from chatmemory.core.memory import MessageWindowChatMemory
from chatmemory.core.messages import AiMessage, SystemMessage, ToolExecutionRequest, UserMessage
from chatmemory.core.store import ChatMemoryStore, SupportsVersioning
from chatmemory.testing.cases.hooks import TtlStoreFactory, texts
from chatmemory.testing.conversation import ODD_ARGUMENTS


class ExpiryCases:
    """Memories expire, and every write slides the expiry (stores built by make_ttl_store)."""

    @pytest.fixture
    def ttl_store(self, make_ttl_store: TtlStoreFactory | None) -> Iterator[ChatMemoryStore]:
        if make_ttl_store is None:
            pytest.skip("no make_ttl_store fixture: TTL cases need one")
        yield make_ttl_store(2.0)

    def test_data_expires(self, ttl_store: ChatMemoryStore, memory_id: str) -> None:
        ttl_store.update_messages(memory_id, texts(3))
        assert ttl_store.get_messages(memory_id) == texts(3)
        time.sleep(3.0)
        assert ttl_store.get_messages(memory_id) == []
        if isinstance(ttl_store, SupportsVersioning):
            assert ttl_store.load(memory_id).version == 0 or ttl_store.load(memory_id).messages == []

    def test_every_write_slides_the_expiry(self, ttl_store: ChatMemoryStore, memory_id: str) -> None:
        memory = MessageWindowChatMemory(
            memory_id, store=ttl_store, max_messages=4, always_keep_system_message_first=True
        )
        memory.add(SystemMessage("s"), UserMessage("0"))
        for turn in range(1, 4):
            time.sleep(1.2)
            memory.add(UserMessage(str(turn)))
        # 3.6 s after the first write, 1.2 s after the last: alive, with every message (none half-expired).
        assert memory.messages() == [SystemMessage("s"), UserMessage("1"), UserMessage("2"), UserMessage("3")]
        time.sleep(3.0)
        assert memory.messages() == []

    def test_tool_calls_round_trip_through_expiring_store(self, ttl_store: ChatMemoryStore, memory_id: str) -> None:
        messages = [AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", ODD_ARGUMENTS[2])])]
        ttl_store.update_messages(memory_id, messages)
        assert ttl_store.get_messages(memory_id) == messages
