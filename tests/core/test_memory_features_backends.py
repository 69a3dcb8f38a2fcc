"""The summary, pop and on_evict over every store backend: the marker round-trips, a restart reads it back."""

from __future__ import annotations

from chatmemory import (
    AiMessage,
    ChatMemoryStore,
    ChatMessage,
    MessageWindowChatMemory,
    SummarizingChatMemory,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core.summary import is_summary


def summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
    kinds = "".join(type(message).__name__[0] for message in evicted)
    return f"{previous or ''}{kinds}."


def test_a_summary_survives_a_restart_on_every_store(store: ChatMemoryStore) -> None:
    call = AiMessage(None, [ToolExecutionRequest("c1", "weather", "{}")])
    first = SummarizingChatMemory("s", max_messages=4, summarizer=summarize, store=store)
    first.add(SystemMessage("be brief"), UserMessage("q1"), call, ToolExecutionResultMessage("c1", "weather", "sun"))
    first.add(AiMessage("sunny"), UserMessage("q2"))
    assert first.summary() == "UAT."
    # A new memory object (a restarted process) on the same store finds the summary by its marker.
    second = SummarizingChatMemory("s", max_messages=4, summarizer=summarize, store=store)
    window = second.messages()
    assert window[0] == SystemMessage("be brief") and is_summary(window[1])
    second.add(AiMessage("ok"))
    assert second.summary() == "UAT.A."
    assert [is_summary(m) for m in store.get_messages("s")] == [False, True, False, False]
    assert second.pop() == [AiMessage("ok")]
    assert second.pop() == [UserMessage("q2")]
    assert second.pop() == []
    assert second.summary() == "UAT.A."


def test_on_evict_and_pop_on_every_store(store: ChatMemoryStore) -> None:
    evicted: list[ChatMessage] = []
    memory = MessageWindowChatMemory(
        "w", max_messages=3, store=store, on_evict=lambda memory_id, messages: evicted.extend(messages)
    )
    for i in range(6):
        memory.add(UserMessage(str(i)))
    assert evicted == [UserMessage(str(i)) for i in range(3)]
    assert memory.pop() == [UserMessage("5")]
    assert memory.messages() == [UserMessage("3"), UserMessage("4")]
