"""The asyncio summary, pop and on_evict over every asyncio store backend."""

from __future__ import annotations

from chatmemory import AiMessage, ChatMessage, SystemMessage, UserMessage, aio
from chatmemory.aio import MessageWindowChatMemory, SummarizingChatMemory
from chatmemory.core.summary import is_summary


async def summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
    return f"{previous or ''}{len(evicted)}."


async def test_summary_pop_and_on_evict_on_every_store(async_store: aio.ChatMemoryStore, memory_id: str) -> None:
    seen: list[ChatMessage] = []

    async def on_evict(memory_id: str, evicted: list[ChatMessage]) -> None:
        seen.extend(evicted)

    first = SummarizingChatMemory(memory_id, max_messages=3, summarizer=summarize, store=async_store, on_evict=on_evict)
    await first.add(SystemMessage("s"), UserMessage("a"), AiMessage("b"), UserMessage("c"))
    assert seen == [UserMessage("a"), AiMessage("b")]
    restarted = SummarizingChatMemory(memory_id, max_messages=3, summarizer=summarize, store=async_store)
    assert await restarted.summary() == "2."
    await restarted.add(AiMessage("d"))
    assert await restarted.summary() == "2.1."
    window = await restarted.messages()
    assert window[0] == SystemMessage("s") and is_summary(window[1]) and window[2:] == [AiMessage("d")]
    assert await restarted.pop() == [AiMessage("d")]
    plain = MessageWindowChatMemory(memory_id + "-w", max_messages=2, store=async_store)
    await plain.add(UserMessage("x"), UserMessage("y"))
    assert await plain.pop() == [UserMessage("y")]
    assert await plain.messages() == [UserMessage("x")]
