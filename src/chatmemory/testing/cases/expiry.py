"""Memories expire, and every write slides the expiry (stores built by make_ttl_store)."""

from __future__ import annotations

import time

from chatmemory.aio.store import SupportsVersioning
from chatmemory.core.messages import AiMessage, SystemMessage, ToolExecutionRequest, UserMessage
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.cases.margins import TooLate, late, with_slower_clock_when_late
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
        # Margins of 0.8 s: judged only if each write came inside the last one's lifetime, else the case
        # runs again slower (see margins.py).
        async def case(scale: float, attempt: int) -> None:
            ttl = 2.0 * scale
            ttl_store = await contract.ttl_store(ttl)
            memory = contract.memory(
                f"{memory_id}-{attempt}", store=ttl_store, max_messages=4, always_keep_system_message_first=True
            )
            last_write = time.monotonic()
            await memory.add(SystemMessage("s"), UserMessage("0"))
            came_late = False
            for turn in range(1, 4):
                await contract.sleep(1.2 * scale)
                started = time.monotonic()
                await memory.add(UserMessage(str(turn)))
                came_late = came_late or late(last_write, ttl)
                last_write = started
            # 3.6 s after the first write, 1.2 s after the last: alive, with every message (none half-expired).
            window = await memory.messages()
            expected = [SystemMessage("s"), UserMessage("1"), UserMessage("2"), UserMessage("3")]
            if window != expected and (came_late or late(last_write, ttl)):
                raise TooLate
            assert window == expected
            await contract.sleep(3.0 * scale)
            assert await memory.messages() == []

        await with_slower_clock_when_late(case, "a write came after the last one's lifetime")

    async def test_tool_calls_round_trip_through_expiring_store(self, contract: ContractDriver, memory_id: str) -> None:
        ttl_store = await contract.ttl_store(2.0)
        messages = [AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", ODD_ARGUMENTS[2])])]
        await ttl_store.update_messages(memory_id, messages)
        assert await ttl_store.get_messages(memory_id) == messages
