"""Memories expire, and every write slides the expiry (stores built by make_ttl_store)."""

from __future__ import annotations

from chatmemory.aio.store import SupportsVersioning
from chatmemory.core.messages import AiMessage, SystemMessage, ToolExecutionRequest, UserMessage
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.conversation import ODD_ARGUMENTS
from chatmemory.testing.driver import ContractDriver


class ExpiryCases:
    """Memories expire, and every write slides the expiry (stores built by make_ttl_store)."""

    async def test_data_expires(self, contract: ContractDriver, memory_id: str) -> None:
        ttl_store = await contract.ttl_store(2.0)
        await ttl_store.update_messages(memory_id, texts(3))
        assert await ttl_store.get_messages(memory_id) == texts(3)
        await contract.sleep(3.0)
        assert await ttl_store.get_messages(memory_id) == []
        if isinstance(ttl_store, SupportsVersioning):
            snapshot = await ttl_store.load(memory_id)
            assert snapshot.version == 0 or snapshot.messages == []

    async def test_every_write_slides_the_expiry(self, contract: ContractDriver, memory_id: str) -> None:
        ttl_store = await contract.ttl_store(2.0)
        memory = contract.memory(memory_id, store=ttl_store, max_messages=4, always_keep_system_message_first=True)
        await memory.add(SystemMessage("s"), UserMessage("0"))
        for turn in range(1, 4):
            await contract.sleep(1.2)
            await memory.add(UserMessage(str(turn)))
        # 3.6 s after the first write, 1.2 s after the last: alive, with every message (none half-expired).
        assert await memory.messages() == [SystemMessage("s"), UserMessage("1"), UserMessage("2"), UserMessage("3")]
        await contract.sleep(3.0)
        assert await memory.messages() == []

    async def test_tool_calls_round_trip_through_expiring_store(self, contract: ContractDriver, memory_id: str) -> None:
        ttl_store = await contract.ttl_store(2.0)
        messages = [AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", ODD_ARGUMENTS[2])])]
        await ttl_store.update_messages(memory_id, messages)
        assert await ttl_store.get_messages(memory_id) == messages
