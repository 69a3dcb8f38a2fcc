"""start_on="user": windows that open with a user message, as Anthropic's and Gemini's APIs want.

The argument is checked when a memory is built, on every window kind, sync and asyncio; property tests
check over arbitrary conversations that the window opens with a user message after every write, stays
within its limit, holds no orphaned tool result, and keeps what a window without the option keeps once
that window opens with a user message.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    ChatMessage,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SummarizingChatMemory,
    SystemMessage,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    aio,
)
from chatmemory.core.summary import is_summary
from chatmemory.core.window import START_ON, add_messages, check_start_on, count_one, evict, fit_window
from chatmemory.testing.cases.start_on import opens_with_user

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
    return f"{previous or ''}+{len(evicted)}"


SYNC_KINDS: dict[str, Any] = {
    "MessageWindowChatMemory": lambda **o: MessageWindowChatMemory("m", max_messages=5, **o),
    "TokenWindowChatMemory": lambda **o: TokenWindowChatMemory("m", max_tokens=100, **o),
    "SummarizingChatMemory": lambda **o: SummarizingChatMemory("m", max_messages=5, summarizer=_summarize, **o),
    "aio.MessageWindowChatMemory": lambda **o: aio.MessageWindowChatMemory("m", max_messages=5, **o),
    "aio.TokenWindowChatMemory": lambda **o: aio.TokenWindowChatMemory("m", max_tokens=100, **o),
    "aio.SummarizingChatMemory": lambda **o: aio.SummarizingChatMemory("m", max_messages=5, summarizer=_summarize, **o),
}


@pytest.mark.parametrize("kind", sorted(SYNC_KINDS))
@pytest.mark.parametrize("start_on", ["any", "user"])
def test_every_window_kind_takes_start_on(kind: str, start_on: str) -> None:
    memory = SYNC_KINDS[kind](start_on=start_on)
    assert memory.start_on == start_on


@pytest.mark.parametrize("kind", sorted(SYNC_KINDS))
@pytest.mark.parametrize("bad", ["human", "User", "", None, 1, ("user",)])
def test_an_unknown_start_on_is_refused_at_construction(kind: str, bad: object) -> None:
    with pytest.raises(ValueError, match=r"start_on must be 'any' or 'user'.*Anthropic") as raised:
        SYNC_KINDS[kind](start_on=bad)
    assert repr(bad) in str(raised.value)


def test_check_start_on() -> None:
    assert [check_start_on(value) for value in START_ON] == ["any", "user"]


SYSTEM = SystemMessage("s")
CALL = AiMessage(tool_execution_requests=[ToolExecutionRequest(id="c", name="t", arguments="{}")])
RESULT = ToolExecutionResultMessage("c", "t", "r")


@pytest.mark.parametrize(
    ("window", "limit", "kept"),
    [
        # Over the limit by one: q1 goes; a1 would open the window, so it goes too.
        ([SYSTEM, UserMessage("q1"), AiMessage("a1"), UserMessage("q2")], 3, [SYSTEM, UserMessage("q2")]),
        # Within the limit, an opening assistant turn still goes.
        ([SYSTEM, AiMessage("hello"), UserMessage("q")], 10, [SYSTEM, UserMessage("q")]),
        # A call at the head goes with its result; then a1; the system message stays wherever it sits.
        ([CALL, SYSTEM, RESULT, AiMessage("a1"), UserMessage("q")], 10, [SYSTEM, UserMessage("q")]),
        # No user message at all: only the system message is left.
        ([SYSTEM, AiMessage("a"), CALL, RESULT], 10, [SYSTEM]),
        ([AiMessage("a")], 10, []),
        ([UserMessage("q"), AiMessage("a")], 10, [UserMessage("q"), AiMessage("a")]),
    ],
)
def test_evict_with_start_on_user(window: list[ChatMessage], limit: int, kept: list[ChatMessage]) -> None:
    evicted, result = evict(list(window), limit, count_one, start_on="user")
    assert result == kept
    assert sorted(map(repr, evicted)) == sorted(repr(m) for m in window if m not in kept)


def test_add_and_fit_take_start_on() -> None:
    update = add_messages([SYSTEM, UserMessage("q1")], [AiMessage("a1"), UserMessage("q2")], limit=3, weight=count_one)
    assert update.messages == [SYSTEM, AiMessage("a1"), UserMessage("q2")]
    update = add_messages(
        [SYSTEM, UserMessage("q1")], [AiMessage("a1"), UserMessage("q2")], limit=3, weight=count_one, start_on="user"
    )
    assert update.messages == [SYSTEM, UserMessage("q2")]
    assert update.evicted == [UserMessage("q1"), AiMessage("a1")]
    fitted = fit_window([AiMessage("a"), UserMessage("q")], limit=5, weight=count_one, start_on="user")
    assert fitted.messages == [UserMessage("q")]


async def test_asyncio_memories_open_with_a_user_message() -> None:
    store = aio.InMemoryChatMemoryStore()
    memory = aio.MessageWindowChatMemory("m", max_messages=3, store=store, start_on="user")
    await memory.add(SYSTEM, UserMessage("q1"), AiMessage("a1"), UserMessage("q2"))
    assert await memory.messages() == [SYSTEM, UserMessage("q2")]
    summarizing = aio.SummarizingChatMemory("s", max_messages=4, summarizer=_summarize, store=store, start_on="user")
    await summarizing.add(SYSTEM, UserMessage("q1"), AiMessage("a1"), UserMessage("q2"), AiMessage("a2"))
    window = await summarizing.messages()
    assert [m for m in window if not is_summary(m)] == [SYSTEM, UserMessage("q2"), AiMessage("a2")]
    assert await summarizing.summary() == "+2"


# ------------------------------------------------------------------------------------------- properties


@st.composite
def batches(draw: st.DrawFn) -> list[list[ChatMessage]]:
    """Batches of messages (one ``add`` each): user and assistant turns, tool calls, results, system messages."""
    made: list[list[ChatMessage]] = []
    pending: list[str] = []
    number = 0
    for _ in range(draw(st.integers(1, 25))):
        batch: list[ChatMessage] = []
        for _ in range(draw(st.integers(1, 3))):
            number += 1
            kind = draw(st.sampled_from(["user", "ai", "ai", "call", "result", "result", "system"]))
            if kind == "user":
                batch.append(UserMessage(f"u{number}" + "x" * draw(st.integers(0, 30))))
            elif kind == "ai":
                batch.append(AiMessage(f"a{number}" + "y" * draw(st.integers(0, 30))))
            elif kind == "call":
                ids = [f"c{number}-{n}" for n in range(draw(st.integers(1, 2)))]
                pending.extend(ids)
                batch.append(AiMessage(tool_execution_requests=[ToolExecutionRequest(i, "t", "{}") for i in ids]))
            elif kind == "result":
                call_id = pending.pop(0) if pending and draw(st.booleans()) else f"stray{number}"
                batch.append(ToolExecutionResultMessage(call_id, "t", "r"))
            else:
                batch.append(SystemMessage(draw(st.sampled_from(["s1", "s2"]))))
        made.append(batch)
    return made


def _no_orphans(window: list[ChatMessage]) -> bool:
    asked: set[str | None] = set()
    for message in window:
        if isinstance(message, AiMessage):
            asked.update(request.id for request in message.tool_execution_requests)
        elif isinstance(message, ToolExecutionResultMessage) and message.id not in asked:
            return False
    return True


def _conversation(window: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in window if not isinstance(m, SystemMessage) and not is_summary(m)]


@PROPERTY_SETTINGS
@given(conversation=batches(), limit=st.integers(1, 8), first=st.booleans())
def test_a_message_window_with_start_on_user_always_opens_with_a_user_message(
    conversation: list[list[ChatMessage]], limit: int, first: bool
) -> None:
    options: dict[str, Any] = {"max_messages": limit, "always_keep_system_message_first": first}
    user = MessageWindowChatMemory("m", store=InMemoryChatMemoryStore(), start_on="user", **options)
    anything = MessageWindowChatMemory("m", store=InMemoryChatMemoryStore(), **options)
    added: list[ChatMessage] = []
    for batch in conversation:
        user.add(*batch)
        anything.add(*batch)
        added.extend(batch)
        window = user.messages()
        assert opens_with_user(window), window
        assert len(window) <= max(limit, 1) or _conversation(window) == []
        assert _no_orphans(window)
        # Every message kept was added, in the order it was added.
        position = 0
        for message in _conversation(window):
            position = next(n for n in range(position, len(added)) if added[n] is message) + 1
        # The option only ever evicts more: what it keeps, a window without it keeps too.
        others = _conversation(anything.messages())
        assert all(any(message is other for other in others) for message in _conversation(window))


@PROPERTY_SETTINGS
@given(conversation=batches(), tokens=st.integers(5, 60))
def test_a_token_window_with_start_on_user_always_opens_with_a_user_message(
    conversation: list[list[ChatMessage]], tokens: int
) -> None:
    memory = TokenWindowChatMemory("m", max_tokens=tokens, store=InMemoryChatMemoryStore(), start_on="user")
    for batch in conversation:
        memory.add(*batch)
        window = memory.messages()
        assert opens_with_user(window), window
        assert _no_orphans(window)
        if _conversation(window):
            assert memory.token_count_estimator.estimate_messages(window) <= tokens


@PROPERTY_SETTINGS
@given(conversation=batches(), limit=st.integers(2, 8))
def test_a_summarizing_window_with_start_on_user_opens_with_a_user_message_after_the_summary(
    conversation: list[list[ChatMessage]], limit: int
) -> None:
    summarized: list[ChatMessage] = []

    def summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
        summarized.extend(evicted)
        return f"{len(summarized)} messages"

    memory = SummarizingChatMemory(
        "m", max_messages=limit, summarizer=summarize, store=InMemoryChatMemoryStore(), start_on="user"
    )
    for batch in conversation:
        memory.add(*batch)
        window = memory.messages()
        assert opens_with_user(window), window
        assert _no_orphans(window)
        summaries = [m for m in window if is_summary(m)]
        assert len(summaries) <= 1
        if summaries:
            # The summary sits right after the system message (or first), and the user turn follows it.
            at = window.index(summaries[0])
            assert all(isinstance(m, SystemMessage) for m in window[:at])
            rest = _conversation(window)
            assert not rest or isinstance(rest[0], UserMessage)
        # Nothing evicted is both summarized and still in the window.
        assert not any(any(m is s for s in summarized) for m in _conversation(window))
