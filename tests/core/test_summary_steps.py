"""The summarizing memory's steps driven by hand, and its writers racing on one store."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from chatmemory import (
    ChatMemory,
    ChatMessage,
    ConcurrentUpdateError,
    InMemoryChatMemoryStore,
    Snapshot,
    SummarizingChatMemory,
    UserMessage,
)
from chatmemory.core.memory_steps import Load, Save, Sleep, Summarize, WindowRules
from chatmemory.core.summary import SummaryRules, summarizing_add_steps, summary_message
from chatmemory.stores.base import RetryPolicy


def u(text: str) -> UserMessage:
    return UserMessage(text)


def never(previous: str | None, evicted: list[ChatMessage]) -> str:
    raise AssertionError("the steps are driven by hand")


def rules(limit: int = 3) -> SummaryRules:
    return SummaryRules(WindowRules("m", limit, "max_messages", lambda message: 1, None, False), never, "")


def test_the_summarizer_runs_between_the_read_and_the_conditional_write() -> None:
    steps = summarizing_add_steps(rules(), [u("c"), u("d")], versioned=True, retry=RetryPolicy())
    assert next(steps) == Load("m")
    step = steps.send(Snapshot([u("a"), u("b")], 4))
    assert isinstance(step, Summarize) and (step.previous, step.evicted) == (None, [u("a"), u("b")])
    assert steps.send("ab") == Save("m", [summary_message("ab", ""), u("c"), u("d")], 4)
    with pytest.raises(StopIteration) as done:
        steps.send(5)
    assert done.value.value.evicted == [u("a"), u("b")]


def test_a_retry_summarizes_only_what_was_not_summarized_yet() -> None:
    steps = summarizing_add_steps(rules(), [u("c"), u("d")], versioned=True, retry=RetryPolicy(budget=5))
    next(steps)
    steps.send(Snapshot([u("a"), u("b")], 4))
    steps.send("ab")
    assert isinstance(steps.throw(ConcurrentUpdateError("m", 4)), Sleep)
    assert steps.send(None) == Load("m")
    step = steps.send(Snapshot([u("a"), u("b"), u("x")], 5))
    assert isinstance(step, Summarize) and (step.previous, step.evicted) == ("ab", [u("x")])
    assert steps.send("abx") == Save("m", [summary_message("abx", ""), u("c"), u("d")], 5)


def test_a_retry_that_evicts_the_same_messages_does_not_call_the_summarizer() -> None:
    steps = summarizing_add_steps(rules(2), [u("c")], versioned=True, retry=RetryPolicy(budget=5))
    next(steps)
    assert isinstance(steps.send(Snapshot([u("a"), u("b")], 1)), Summarize)
    steps.send("ab")
    steps.throw(ConcurrentUpdateError("m", 1))
    steps.send(None)
    # Another writer changed only the version (an equal window): the summary made before is reused.
    assert steps.send(Snapshot([u("a"), u("b")], 2)) == Save("m", [summary_message("ab", ""), u("c")], 2)


def test_racing_writers_lose_nothing_and_summarize_nothing_twice() -> None:
    store = InMemoryChatMemoryStore()

    def summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
        time.sleep(0.001)  # a slow model widens the window for conflicts
        said = [m.text for m in evicted if isinstance(m, UserMessage)]
        return " ".join([*([previous] if previous else []), *said])

    def writer(name: str) -> None:
        memory = SummarizingChatMemory("m", max_messages=4, summarizer=summarize, store=store)
        assert isinstance(memory, ChatMemory)
        for i in range(25):
            memory.add(u(f"{name}{i}"))

    threads = [threading.Thread(target=writer, args=(name,)) for name in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    memory = SummarizingChatMemory("m", max_messages=4, summarizer=summarize, store=store)
    summary = memory.summary()
    assert summary is not None
    window = [m.text for m in memory.messages()[1:] if isinstance(m, UserMessage)]
    seen = Counter(summary.split() + window)
    assert seen == Counter(f"{name}{i}" for name in "abcd" for i in range(25))
    # Each writer's messages stay in the order it added them.
    for name in "abcd":
        order = [int(word[1:]) for word in summary.split() + window if word[0] == name]
        assert order == sorted(order)
