"""Property tests: on_evict sees exactly the messages that left the window, and a summarizer sees each once.

Conversations come from the window property tests' generator (tool calls with and without ids, system
messages replacing each other, custom messages). Every message there is distinct except system messages,
so "what left" is a plain multiset difference of the window before plus the batch, and the window after.
A replaced system message is not an eviction (the docs say so), so system messages are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatmemory import (
    ChatMessage,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SummarizingChatMemory,
    SystemMessage,
    TokenWindowChatMemory,
)
from chatmemory.core.summary import is_summary

from .test_window_properties import Conversation, WeightEstimator, conversations

PROPERTY_SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def non_system(messages: Sequence[ChatMessage]) -> Counter[ChatMessage]:
    return Counter(m for m in messages if not isinstance(m, SystemMessage) and not is_summary(m))


class Hook:
    def __init__(self) -> None:
        self.calls: list[list[ChatMessage]] = []

    def __call__(self, memory_id: str, evicted: list[ChatMessage]) -> None:
        assert memory_id == "p"
        self.calls.append(evicted)


def check_each_add(
    memory: MessageWindowChatMemory | TokenWindowChatMemory, hook: Hook, conversation: Conversation
) -> None:
    store = memory.store
    assert isinstance(store, InMemoryChatMemoryStore)
    gone_total: Counter[ChatMessage] = Counter()
    added_total: Counter[ChatMessage] = Counter()
    for batch in conversation.batches:
        before = store.get_messages("p")
        calls = len(hook.calls)
        memory.add(*batch)
        after = store.get_messages("p")
        left = non_system([*before, *batch]) - non_system(after)
        if left:
            assert len(hook.calls) == calls + 1, "one call per write that evicted something"
            assert Counter(hook.calls[-1]) == left
            assert not any(isinstance(m, SystemMessage) for m in hook.calls[-1])
        else:
            assert len(hook.calls) == calls, "no call when nothing left"
        gone_total += left
        added_total += non_system(batch)
    # Over the whole conversation: every message added is in the window or was handed to the hook once.
    handed = Counter(m for call in hook.calls for m in call)
    assert handed == gone_total
    assert handed + non_system(store.get_messages("p")) == added_total


@PROPERTY_SETTINGS
@given(conversations(), st.integers(1, 8), st.booleans())
def test_on_evict_sees_exactly_what_left_a_message_window(conversation: Conversation, limit: int, first: bool) -> None:
    hook = Hook()
    memory = MessageWindowChatMemory("p", max_messages=limit, always_keep_system_message_first=first, on_evict=hook)
    check_each_add(memory, hook, conversation)


@PROPERTY_SETTINGS
@given(conversations(), st.integers(1, 30))
def test_on_evict_sees_exactly_what_left_a_token_window(conversation: Conversation, limit: int) -> None:
    # Small budgets make oversized messages common: they must reach the hook too.
    hook = Hook()
    memory = TokenWindowChatMemory("p", max_tokens=limit, token_count_estimator=WeightEstimator(), on_evict=hook)
    check_each_add(memory, hook, conversation)


@PROPERTY_SETTINGS
@given(conversations(), st.integers(2, 8), st.booleans(), st.data())
def test_a_summarizer_sees_every_message_that_left_exactly_once(
    conversation: Conversation, limit: int, first: bool, data: st.DataObject
) -> None:
    headroom = data.draw(st.integers(0, limit - 1), label="headroom")
    summarized: list[ChatMessage] = []
    hook = Hook()

    def summarizer(previous: str | None, evicted: list[ChatMessage]) -> str:
        summarized.extend(evicted)
        return f"{len(summarized)} messages"

    memory = SummarizingChatMemory(
        "p",
        max_messages=limit,
        headroom=headroom,
        summarizer=summarizer,
        on_evict=hook,
        always_keep_system_message_first=first,
    )
    added: Counter[ChatMessage] = Counter()
    for batch in conversation.batches:
        memory.add(*batch)
        added += non_system(batch)
        window = memory.messages()
        assert len(window) <= limit or all(isinstance(m, SystemMessage) or is_summary(m) for m in window)
        summaries = [m for m in window if is_summary(m)]
        assert len(summaries) <= 1
        if summaries:
            at = window.index(summaries[0])
            assert at == (1 if isinstance(window[0], SystemMessage) else 0)
            follower = window[at + 1] if at + 1 < len(window) else None
            assert type(follower).__name__ != "ToolExecutionResultMessage", "a tool pair split by the summary"
    assert Counter(summarized) == Counter(m for call in hook.calls for m in call)
    assert Counter(summarized) + non_system(memory.messages()) == added
