"""The asyncio memories' on_evict, on_oversized, pop(), history() and SummarizingChatMemory."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import pytest

import chatmemory
from chatmemory import (
    AiMessage,
    ChatMessage,
    ConcurrentUpdateError,
    HistoryNotEnabledError,
    MessageTooLargeError,
    Snapshot,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.aio import (
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SummarizingChatMemory,
    SupportsHistory,
    TokenWindowChatMemory,
)
from chatmemory.core.summary import is_summary, summary_text
from chatmemory.testing import scripted_turns


def u(text: str) -> UserMessage:
    return UserMessage(text)


class Chars:
    def estimate_message(self, message: ChatMessage) -> int:
        return len(message.text) if isinstance(message, UserMessage) and message.has_single_text() else 1


class ConflictingOnceStore(InMemoryChatMemoryStore):
    """Another writer slips ``interloper`` in between the first load and save."""

    def __init__(self, interloper: ChatMessage) -> None:
        super().__init__()
        self.interloper = interloper
        self.loads = 0
        self.saves = 0

    async def load(self, memory_id: str) -> Snapshot:
        snapshot = await super().load(memory_id)
        self.loads += 1
        if self.loads == 1:
            await self.update_messages(memory_id, [*snapshot.messages, self.interloper])
        return snapshot

    async def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        self.saves += 1
        return await super().save(memory_id, messages, expected_version)


# ------------------------------------------------------------------------------------------ on_evict


async def test_an_async_on_evict_is_awaited_once_per_write_with_what_the_successful_write_evicted() -> None:
    seen: list[tuple[str, list[ChatMessage]]] = []

    async def hook(memory_id: str, evicted: list[ChatMessage]) -> None:
        await asyncio.sleep(0)
        seen.append((memory_id, evicted))

    store = ConflictingOnceStore(u("theirs"))
    await store.update_messages("m", [u("a"), u("b")])
    memory = MessageWindowChatMemory("m", max_messages=2, store=store, on_evict=hook)
    await memory.add(u("mine"))
    assert store.saves == 2
    assert seen == [("m", [u("a"), u("b")])]


async def test_a_plain_on_evict_works_too_and_its_error_propagates_after_the_write() -> None:
    seen: list[list[ChatMessage]] = []
    memory = MessageWindowChatMemory("m", max_messages=1, on_evict=lambda memory_id, evicted: seen.append(evicted))
    await memory.add(u("a"), u("b"))
    assert seen == [[u("a")]]

    async def broken(memory_id: str, evicted: list[ChatMessage]) -> None:
        raise RuntimeError("archive down")

    failing = MessageWindowChatMemory("n", max_messages=1, on_evict=broken)
    with pytest.raises(RuntimeError, match="archive down") as raised:
        await failing.add(u("a"), u("b"))
    assert await failing.messages() == [u("b")]
    if sys.version_info >= (3, 11):
        assert "after the write succeeded" in "".join(raised.value.__notes__)


async def test_on_evict_may_add_to_the_same_memory_without_deadlock() -> None:
    memory: MessageWindowChatMemory
    seen: list[list[ChatMessage]] = []

    async def hook(memory_id: str, evicted: list[ChatMessage]) -> None:
        seen.append(evicted)
        if len(seen) == 1:
            await memory.add(u("note"))

    memory = MessageWindowChatMemory("m", max_messages=2, on_evict=hook)
    await asyncio.wait_for(memory.add(u("a"), u("b"), u("c")), 5)
    assert await memory.messages() == [u("c"), u("note")]


async def test_oversized_messages_reach_on_evict_or_are_refused() -> None:
    seen: list[list[ChatMessage]] = []
    memory = TokenWindowChatMemory(
        "m", max_tokens=5, token_count_estimator=Chars(), on_evict=lambda memory_id, evicted: seen.append(evicted)
    )
    await memory.add(u("far too long"))
    assert seen == [[u("far too long")]]
    strict = TokenWindowChatMemory("n", max_tokens=5, token_count_estimator=Chars(), on_oversized="raise")
    with pytest.raises(MessageTooLargeError, match="12 tokens"):
        await strict.add(u("ok"), u("far too long"))
    assert await strict.messages() == []
    with pytest.raises(ValueError, match="on_oversized"):
        TokenWindowChatMemory(max_tokens=5, on_oversized="drop")  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------------- pop


async def test_pop_removes_the_newest_message_or_tool_exchange() -> None:
    memory = MessageWindowChatMemory("m", max_messages=10)
    call = AiMessage(None, [ToolExecutionRequest("c1", "f", "{}")])
    result = ToolExecutionResultMessage("c1", "f", "ok")
    await memory.add(SystemMessage("s"), u("q"), call, result)
    assert await memory.pop() == [call, result]
    assert await memory.pop() == [u("q")]
    assert await memory.pop() == []
    assert await memory.messages() == [SystemMessage("s")]


async def test_a_pop_that_meets_another_writer_is_not_retried() -> None:
    store = ConflictingOnceStore(u("theirs"))
    await store.update_messages("m", [u("a")])
    memory = MessageWindowChatMemory("m", max_messages=5, store=store)
    with pytest.raises(ConcurrentUpdateError, match="'m'"):
        await memory.pop()
    assert await store.get_messages("m") == [u("a"), u("theirs")]


# ---------------------------------------------------------------------------------------- history


async def test_history_delegates_to_the_store_or_says_it_keeps_none() -> None:
    store = InMemoryChatMemoryStore(history=True)
    assert isinstance(store, SupportsHistory)
    memory = MessageWindowChatMemory("m", max_messages=2, store=store)
    added = [u(str(i)) for i in range(5)]
    for message in added:  # one at a time: a message evicted before its write never reaches the store
        await memory.add(message)
    assert await memory.messages() == added[-2:]
    assert (await memory.history()).messages == added
    page = await memory.history(after=None, limit=2, reverse=True)
    assert page.messages == [added[4], added[3]]
    assert (await memory.history(after=page.next_after, limit=5, reverse=True)).messages == added[2::-1]
    plain = MessageWindowChatMemory("m", max_messages=2, store=InMemoryChatMemoryStore())
    with pytest.raises(HistoryNotEnabledError, match="history=True"):
        await plain.history()
    with pytest.raises(TypeError, match="after"):
        await plain.history(after="x")  # type: ignore[arg-type]


async def test_a_summarizing_memory_keeps_every_message_in_the_history() -> None:
    store = InMemoryChatMemoryStore(history=True)
    memory = SummarizingChatMemory(
        "m", max_messages=3, summarizer=lambda previous, evicted: f"{len(evicted)}", store=store
    )
    added = [u(str(i)) for i in range(12)]
    for message in added:
        await memory.add(message)
    history = (await memory.history(limit=1000)).messages
    assert all(message in history for message in added)
    assert len(await memory.messages()) == 3


# ------------------------------------------------------------------------------------ summarizing


async def test_an_async_summarizer_is_awaited_and_the_summary_survives_a_restart() -> None:
    calls: list[tuple[str | None, int]] = []

    async def summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
        await asyncio.sleep(0)
        calls.append((previous, len(evicted)))
        return f"{previous or ''}+{len(evicted)}"

    store = InMemoryChatMemoryStore()
    memory = SummarizingChatMemory("m", max_messages=3, summarizer=summarize, store=store)
    await memory.add(SystemMessage("s"), u("a"), u("b"), u("c"))
    assert await memory.summary() == "+2"
    again = SummarizingChatMemory("m", max_messages=3, summarizer=summarize, store=store)
    await again.add(u("d"))
    assert calls == [(None, 2), ("+2", 1)]
    window = await again.messages()
    assert window[0] == SystemMessage("s") and is_summary(window[1]) and window[2:] == [u("d")]
    assert await again.pop() == [u("d")]
    assert await again.pop() == []


async def test_a_retry_reuses_the_summary_already_made() -> None:
    calls: list[list[ChatMessage]] = []

    def summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
        calls.append(evicted)
        return ",".join([*([previous] if previous else []), *(m.text for m in evicted if isinstance(m, UserMessage))])

    store = ConflictingOnceStore(u("theirs"))
    await store.update_messages("m", [u("a"), u("b")])
    memory = SummarizingChatMemory("m", max_messages=3, summarizer=summarize, store=store)
    await memory.add(u("c"), u("d"))
    assert calls == [[u("a"), u("b")], [u("theirs")]]
    assert await memory.summary() == "a,b,theirs"


async def test_same_windows_as_the_sync_summarizing_memory() -> None:
    def summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
        return f"{previous or ''}|{len(evicted)}"[-40:]

    asynchronous = SummarizingChatMemory("m", max_tokens=200, summarizer=summarize)
    synchronous = chatmemory.SummarizingChatMemory("m", max_tokens=200, summarizer=summarize)
    for turn, added in enumerate(scripted_turns(40)):
        await asynchronous.add(*added)
        synchronous.add(*added)
        assert await asynchronous.messages() == synchronous.messages(), turn
    summary = next(m for m in synchronous.messages() if is_summary(m))
    assert summary_text(summary) == await asynchronous.summary()  # type: ignore[arg-type]


async def test_summarizing_arguments_are_checked_at_construction() -> None:
    with pytest.raises(TypeError, match="exactly one of max_tokens or max_messages"):
        SummarizingChatMemory(summarizer=lambda previous, evicted: "")
    with pytest.raises(TypeError, match="takes a function"):
        SummarizingChatMemory(max_messages=3, summarizer="gpt-4o")  # type: ignore[arg-type]
