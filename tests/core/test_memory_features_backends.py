"""The summary, pop and on_evict over every store backend: the marker round-trips, a restart reads it back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    ChatMemoryStore,
    ChatMessage,
    MessageWindowChatMemory,
    Snapshot,
    SummarizingChatMemory,
    SupportsLockedUpdate,
    SupportsSchema,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    open_store,
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


class _InterloperOnFirstLoad:
    """A SQL store (versioned, with a locked update) where another writer slips in after the first load."""

    def __init__(self, inner: Any, interloper: ChatMessage) -> None:
        self.inner = inner
        self.interloper = interloper
        self.loads = 0
        self.modifies = 0

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        return self.inner.get_messages(memory_id)  # type: ignore[no-any-return]

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        self.inner.update_messages(memory_id, messages)

    def delete_messages(self, memory_id: str) -> None:
        self.inner.delete_messages(memory_id)

    def load(self, memory_id: str) -> Snapshot:
        snapshot: Snapshot = self.inner.load(memory_id)
        self.loads += 1
        if self.loads == 1:
            self.inner.update_messages(memory_id, [*snapshot.messages, self.interloper])
        return snapshot

    def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        return self.inner.save(memory_id, messages, expected_version)  # type: ignore[no-any-return]

    def modify(self, memory_id: str, change: Callable[[list[ChatMessage]], Any]) -> int:
        self.modifies += 1
        return self.inner.modify(memory_id, change)  # type: ignore[no-any-return]


@pytest.mark.sqlite
def test_on_evict_after_the_locked_retry_sees_what_it_evicted(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    sql = open_store(f"sqlite:///{tmp_path / 'locked.db'}")
    assert isinstance(sql, SupportsSchema)
    sql.create_schema()
    try:
        store = _InterloperOnFirstLoad(sql, UserMessage("theirs"))
        assert isinstance(store, SupportsLockedUpdate)
        evicted: list[list[ChatMessage]] = []
        memory = MessageWindowChatMemory(
            "m", max_messages=2, store=store, on_evict=lambda memory_id, messages: evicted.append(messages)
        )
        sql.update_messages("m", [UserMessage("a"), UserMessage("b")])
        memory.add(UserMessage("mine"))
        assert store.modifies == 1  # the conflicting add queued on the lock
        # The optimistic attempt would have evicted a; the locked write evicted a and b.
        assert evicted == [[UserMessage("a"), UserMessage("b")]]
        assert memory.messages() == [UserMessage("theirs"), UserMessage("mine")]
    finally:
        sql.close()
