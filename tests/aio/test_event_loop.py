"""The library never blocks the event loop: debug mode reports no callback slower than 50 ms."""

from __future__ import annotations

import asyncio
import logging

import pytest

from chatmemory import AiMessage, SystemMessage, UserMessage, aio
from chatmemory.aio import MessageWindowChatMemory, TokenWindowChatMemory

SLOW_CALLBACK = 0.05


def _slow_callback_reports(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "asyncio" and record.getMessage().startswith("Executing")
    ]


async def _workload(store: aio.ChatMemoryStore, memory_id: str) -> None:
    async def conversation(index: int) -> None:
        memory = MessageWindowChatMemory(f"{memory_id}-{index}", max_messages=8, store=store)
        tokens = TokenWindowChatMemory(f"{memory_id}-t{index}", max_tokens=60, store=store)
        await memory.add(SystemMessage("be brief"))
        for turn in range(15):
            await memory.add(UserMessage(f"question {turn}"), AiMessage(f"answer {turn}"))
            await tokens.add(UserMessage(f"question {turn} " * 3))
            await memory.messages()
        await memory.set([UserMessage("reset")])
        await memory.clear()
        await tokens.clear()

    await asyncio.gather(*(conversation(index) for index in range(20)))
    if isinstance(store, aio.SupportsListing):
        async for _ in store.memory_ids():
            pass
    if isinstance(store, aio.SupportsRawRecords):
        await store.write_raw(memory_id, await store.read_raw(memory_id))


async def test_no_callback_of_the_library_is_slow(
    async_store: aio.ChatMemoryStore, memory_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = SLOW_CALLBACK
    caplog.set_level(logging.WARNING, logger="asyncio")
    try:
        await _workload(async_store, memory_id)
    finally:
        loop.set_debug(False)
    assert _slow_callback_reports(caplog) == []


async def test_a_blocking_store_is_reported(memory_id: str, caplog: pytest.LogCaptureFixture) -> None:
    """The check above can fail: a store that blocks the loop for 60 ms is caught."""
    import time

    class Blocking(aio.InMemoryChatMemoryStore):
        async def get_messages(self, memory_id: str) -> list:  # type: ignore[type-arg]
            time.sleep(SLOW_CALLBACK * 1.2)
            return await super().get_messages(memory_id)

    loop = asyncio.get_running_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = SLOW_CALLBACK
    caplog.set_level(logging.WARNING, logger="asyncio")
    try:
        await asyncio.create_task(MessageWindowChatMemory(memory_id, max_messages=3, store=Blocking()).messages())
    finally:
        loop.set_debug(False)
    assert len(_slow_callback_reports(caplog)) == 1
