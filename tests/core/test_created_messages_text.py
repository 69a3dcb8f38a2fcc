"""``.text`` reads on every message this library creates: the summary message, and what each converter reads.

A user message of several text parts (the summary message holds a framing line and the summary; the
converters read a request's text blocks one part each) reads as its parts joined by a newline; only a
message that holds media raises, naming the part to read ``.contents`` for.
"""

from __future__ import annotations

import json

import pytest

from chatmemory import (
    AiMessage,
    ChatMessage,
    InMemoryChatMemoryStore,
    SummarizingChatMemory,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    aio,
)
from chatmemory.core.summary import DEFAULT_SUMMARY_PREFIX, is_summary, summary_message
from chatmemory.serialization import from_anthropic, from_openai, from_responses, langchain4j


def every_text(messages: list[ChatMessage]) -> list[str | None]:
    """``.text`` of each message (a custom message has none); raises what ``.text`` raises."""
    return [getattr(message, "text", None) for message in messages]


def _summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
    return f"{len(evicted)} earlier messages"


def test_the_summary_message_reads_as_the_framing_line_and_the_summary() -> None:
    assert summary_message("they fly Friday").text == f"{DEFAULT_SUMMARY_PREFIX}\nthey fly Friday"
    assert summary_message("they fly Friday", "").text == "they fly Friday"


def test_every_message_of_a_summarizing_window_reads_as_text() -> None:
    memory = SummarizingChatMemory("m", max_messages=4, summarizer=_summarize, store=InMemoryChatMemoryStore())
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest(id="c", name="t", arguments="{}")])
    for added in [
        [SystemMessage("Be brief."), UserMessage("I fly to Lisbon.")],
        [call, ToolExecutionResultMessage("c", "t", "ok")],
        [AiMessage("Noted."), UserMessage("Trams?"), AiMessage("Yes.")],
    ]:
        memory.add(*added)
        texts = every_text(memory.messages())
    window = memory.messages()
    assert any(is_summary(message) for message in window)
    assert f"{DEFAULT_SUMMARY_PREFIX}\n" in "".join(text or "" for text in texts)


async def test_every_message_of_an_asyncio_summarizing_window_reads_as_text() -> None:
    memory = aio.SummarizingChatMemory("m", max_messages=3, summarizer=_summarize)
    await memory.add(SystemMessage("s"), UserMessage("q1"), AiMessage("a1"), UserMessage("q2"), AiMessage("a2"))
    window = await memory.messages()
    summary = next(message for message in window if is_summary(message))
    assert isinstance(summary, UserMessage)
    assert summary.text == f"{DEFAULT_SUMMARY_PREFIX}\n{await memory.summary()}"
    every_text(window)


TWO_TEXTS = [TextContent("first"), TextContent("second")]


@pytest.mark.parametrize(
    "read",
    [
        lambda: from_openai(
            [{"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]}]
        ),
        lambda: from_anthropic(
            None,
            [{"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]}],
        ),
        lambda: from_responses(
            [
                {
                    "role": "user",
                    "content": [{"type": "input_text", "text": "first"}, {"type": "input_text", "text": "second"}],
                }
            ]
        ),
        lambda: langchain4j.loads(
            json.dumps(
                [
                    {
                        "contents": [{"text": "first", "type": "TEXT"}, {"text": "second", "type": "TEXT"}],
                        "type": "USER",
                    }
                ]
            )
        ),
    ],
    ids=["openai", "anthropic", "responses", "langchain4j"],
)
def test_a_user_message_of_two_text_parts_read_by_a_converter_reads_as_text(read: object) -> None:
    assert callable(read)
    (message,) = read()
    assert isinstance(message, UserMessage) and message.contents == tuple(TWO_TEXTS)
    assert message.text == "first\nsecond"
