"""A token window with the exact estimator holds what the API would count, filled to its budget."""

from __future__ import annotations

import random

import pytest

from chatmemory import (
    AiMessage,
    ChatMessage,
    OpenAITokenCountEstimator,
    TokenWindowChatMemory,
    ToolExecutionResultMessage,
)
from core.tokens.conversation import api_prompt_tokens, turn
from core.tokens.reference import reference_encoding

pytest.importorskip("bpe_openai")


def _evicted(before: list[ChatMessage], after: list[ChatMessage]) -> list[ChatMessage]:
    """The messages of ``before`` missing from ``after``, matched from the newest end.

    Equal messages recur in a conversation, so membership by value would miss an evicted copy.
    """
    evicted: list[ChatMessage] = []
    kept = list(after)
    for message in reversed(before):
        if kept and kept[-1] == message:
            kept.pop()
        else:
            evicted.append(message)
    assert not kept, "the window is not a subsequence of what it held"
    return evicted[::-1]


def _last_eviction(evicted: list[ChatMessage]) -> list[ChatMessage]:
    """The newest message evicted for room, with the tool results that left with it."""
    victim = next(message for message in reversed(evicted) if not isinstance(message, ToolExecutionResultMessage))
    group = [victim]
    if isinstance(victim, AiMessage):
        ids = {request.id for request in victim.tool_execution_requests}
        group += [m for m in evicted if isinstance(m, ToolExecutionResultMessage) and m.id in ids]
    return group


@pytest.mark.parametrize(("encoding_name", "max_tokens"), [("o200k_base", 1500), ("cl100k_base", 800)])
def test_the_window_fits_the_budget_and_fills_it_over_a_thousand_turns(encoding_name: str, max_tokens: int) -> None:
    reference = reference_encoding(encoding_name)
    estimator = OpenAITokenCountEstimator(encoding_name)
    memory = TokenWindowChatMemory("long", max_tokens=max_tokens, token_count_estimator=estimator)
    rng = random.Random(1000)
    window: list[ChatMessage] = []
    full = 0
    for index in range(1000):
        for message in turn(index, rng):
            memory.add(message)
            before, window = [*window, message], memory.messages()
            real = api_prompt_tokens(reference, window)
            assert real <= max_tokens
            evicted = _evicted(before, window)
            if any(not isinstance(m, ToolExecutionResultMessage) for m in evicted):
                # The last message to go could not have stayed: the window is as full as it can be.
                group = _last_eviction(evicted)
                assert real + api_prompt_tokens(reference, group) - 3 > max_tokens
                full += 1
    assert full > 1000  # the budget was reached on most adds
