"""LangChain messages: the real langchain-core types, a real ``@tool``, round trips and what cannot be held."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core import messages as lc
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.tools import ToolException, tool

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    CustomMessage,
    ImageContent,
    MessageWindowChatMemory,
    PdfFileContent,
    SerializationError,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from chatmemory.integrations.langchain import from_langchain, to_langchain
from chatmemory.serialization import from_openai
from serialization.strategies import attributes, json_values, texts


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def broken(city: str) -> str:
    """A weather service that is down."""
    raise ToolException(f"no service for {city}")


broken.handle_tool_error = True


def test_a_real_tool_result_reads_with_its_tool_name() -> None:
    result = weather.invoke({"type": "tool_call", "id": "call_1", "name": "weather", "args": {"city": "Munich"}})
    assert isinstance(result, lc.ToolMessage)
    assert from_langchain([result]) == [ToolExecutionResultMessage("call_1", "weather", "sunny in Munich")]


def test_a_failed_tool_result_reads_as_an_error() -> None:
    result = broken.invoke({"type": "tool_call", "id": "call_2", "name": "broken", "args": {"city": "Munich"}})
    assert isinstance(result, lc.ToolMessage)
    assert result.status == "error"
    [message] = from_langchain([result])
    assert message == ToolExecutionResultMessage("call_2", "broken", "no service for Munich", is_error=True)
    [back] = to_langchain([message])
    assert isinstance(back, lc.ToolMessage)
    assert (back.status, back.name, back.tool_call_id) == ("error", "broken", "call_2")


def test_an_ai_message_with_tool_calls() -> None:
    ai = lc.AIMessage(
        content="",
        tool_calls=[{"type": "tool_call", "id": "call_1", "name": "weather", "args": {"city": "München"}}],
        response_metadata={"model_name": "gpt-test", "finish_reason": "tool_calls"},
    )
    [message] = from_langchain([ai])
    assert message == AiMessage(
        None,
        [ToolExecutionRequest("call_1", "weather", '{"city":"München"}')],
        attributes={"model_name": "gpt-test", "finish_reason": "tool_calls"},
    )
    [back] = to_langchain([message])
    assert isinstance(back, lc.AIMessage)
    assert back.tool_calls == ai.tool_calls
    assert back.response_metadata == ai.response_metadata


def test_a_tool_loop_through_a_window_memory() -> None:
    """A LangChain model asks for a tool, the real tool answers; the memory holds it all and gives it back."""
    call = lc.AIMessage(
        content="", tool_calls=[{"type": "tool_call", "id": "c1", "name": "weather", "args": {"city": "Rome"}}]
    )
    model = GenericFakeChatModel(messages=iter([call, lc.AIMessage(content="It is sunny in Rome.")]))
    memory = MessageWindowChatMemory("lc-loop", max_messages=10)
    memory.add(SystemMessage("Be brief."))
    memory.add(UserMessage("Weather in Rome?", name="klaus"))
    answer = model.invoke(to_langchain(memory.messages()))
    memory.add(*from_langchain([answer]))
    assert isinstance(answer, lc.AIMessage)
    for tool_call in answer.tool_calls:
        memory.add(*from_langchain([weather.invoke(tool_call)]))
    memory.add(*from_langchain([model.invoke(to_langchain(memory.messages()))]))
    history = to_langchain(memory.messages())
    assert [type(message) for message in history] == [
        lc.SystemMessage,
        lc.HumanMessage,
        lc.AIMessage,
        lc.ToolMessage,
        lc.AIMessage,
    ]
    assert history[1].name == "klaus"
    assert history[3].name == "weather"
    assert history[3].content == "sunny in Rome"
    assert history[4].content == "It is sunny in Rome."


def test_langchains_openai_messages_carry_the_tool_name() -> None:
    """Issue 13.8: convert_to_openai_messages writes a tool message's name, which from_openai now reads."""
    converted = lc.convert_to_openai_messages(
        [
            lc.AIMessage(content="", tool_calls=[{"type": "tool_call", "id": "c", "name": "weather", "args": {}}]),
            lc.ToolMessage(content="sunny", tool_call_id="c", name="weather"),
        ]
    )
    assert converted[1]["name"] == "weather"
    assert from_openai([converted[1]]) == [ToolExecutionResultMessage("c", "weather", "sunny")]


def test_reasoning_reads_as_thinking() -> None:
    blocks = lc.AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "first"},
            {"type": "reasoning", "reasoning": "then"},
            {"type": "text", "text": "42"},
        ]
    )
    kwargs = lc.AIMessage(content="42", additional_kwargs={"reasoning_content": "because"})
    assert from_langchain([blocks, kwargs]) == [
        AiMessage("42", thinking="first\n\nthen"),
        AiMessage("42", thinking="because"),
    ]
    [back] = to_langchain([AiMessage("42", thinking="because")])
    assert back.content == [{"type": "reasoning", "reasoning": "because"}, {"type": "text", "text": "42"}]


def test_multimodal_blocks() -> None:
    message = UserMessage(
        [
            TextContent("look"),
            ImageContent(url="https://ex.com/a.png", detail_level="HIGH"),
            ImageContent(base64_data="aGVsbG8=", mime_type="image/png"),
            AudioContent(base64_data="UklGRg==", mime_type="audio/wav"),
            VideoContent(url="https://ex.com/v.mp4"),
            PdfFileContent(base64_data="JVBERi0="),
        ],
        name="klaus",
        attributes={"k": [1, 2]},
    )
    [human] = to_langchain([message])
    assert isinstance(human, lc.HumanMessage)
    assert human.content == [
        {"type": "text", "text": "look"},
        {"type": "image", "url": "https://ex.com/a.png", "extras": {"detail": "high"}},
        {"type": "image", "base64": "aGVsbG8=", "mime_type": "image/png"},
        {"type": "audio", "base64": "UklGRg==", "mime_type": "audio/wav"},
        {"type": "video", "url": "https://ex.com/v.mp4"},
        {"type": "file", "base64": "JVBERi0=", "mime_type": "application/pdf"},
    ]
    assert human.name == "klaus"
    [back] = from_langchain([human])
    assert isinstance(back, UserMessage)
    assert back.contents[-1] == PdfFileContent(base64_data="JVBERi0=", mime_type="application/pdf")
    assert back.contents[:-1] == message.contents[:-1]
    assert back.attributes == {"k": [1, 2]}


def test_older_and_provider_content_formats_are_read() -> None:
    human = lc.HumanMessage(
        content=[
            "plain",
            {"type": "image_url", "image_url": {"url": "https://ex.com/a.png", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
            {"type": "image", "source_type": "url", "url": "https://ex.com/b.png"},
        ]
    )
    assert from_langchain([human]) == [
        UserMessage(
            [
                TextContent("plain"),
                ImageContent(url="https://ex.com/a.png", detail_level="LOW"),
                ImageContent(base64_data="/9j/", mime_type="image/jpeg"),
                ImageContent(url="https://ex.com/b.png"),
            ]
        )
    ]


def test_arguments_that_are_not_a_json_object_travel_as_invalid_tool_calls() -> None:
    message = AiMessage(
        tool_execution_requests=[ToolExecutionRequest("a", "f", "{oops"), ToolExecutionRequest("b", "g", "")]
    )
    [ai] = to_langchain([message])
    assert isinstance(ai, lc.AIMessage)
    assert ai.tool_calls == [{"type": "tool_call", "id": "b", "name": "g", "args": {}}]
    assert [(call["id"], call["args"]) for call in ai.invalid_tool_calls] == [("a", "{oops")]
    assert from_langchain([ai]) == [
        AiMessage(
            tool_execution_requests=[ToolExecutionRequest("b", "g", "{}"), ToolExecutionRequest("a", "f", "{oops")]
        )
    ]


UNSENDABLE: list[Any] = [CustomMessage({"x": 1}), ToolExecutionResultMessage(None, "f", "x"), "not a message"]


@pytest.mark.parametrize("message", UNSENDABLE)
def test_what_langchain_cannot_carry_raises_naming_the_message(message: Any) -> None:
    with pytest.raises(SerializationError, match=r"message 1 \("):
        to_langchain([SystemMessage("s"), message])


def test_custom_messages_can_be_skipped() -> None:
    assert to_langchain([CustomMessage({"x": 1})], skip_custom=True) == []


UNREADABLE: list[Any] = [
    lc.ChatMessage(role="critic", content="x"),
    lc.FunctionMessage(name="f", content="x"),
    lc.HumanMessage(content=[{"type": "image", "file_id": "file-1"}]),
    lc.HumanMessage(content="x", response_metadata={"when": object()}),
    lc.AIMessage(content=[{"type": "image", "url": "u"}]),
    lc.AIMessage(
        content="",
        invalid_tool_calls=[{"type": "invalid_tool_call", "id": "c", "name": None, "args": "x", "error": None}],
    ),
    lc.ToolMessage(content=[{"type": "image", "url": "u"}], tool_call_id="c"),
    lc.SystemMessage(content=[{"type": "image", "url": "u"}]),
    "not a message",
]


@pytest.mark.parametrize("message", UNREADABLE)
def test_what_chatmemory_cannot_hold_raises(message: Any) -> None:
    with pytest.raises(SerializationError, match="LangChain message 1"):
        from_langchain([lc.HumanMessage(content="x"), message])


def test_a_missing_extra_names_the_module_and_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "import chatmemory\n"
        "try:\n    import chatmemory.integrations.langchain\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.startswith(
        "MissingDependencyError chatmemory.integrations.langchain requires the 'langchain' extra: "
        "pip install 'llm-window-memory[langchain]'"
    ), result.stdout


# -------------------------------------------------------------------------------------- property test

non_empty = texts.filter(bool)
parts = st.one_of(
    st.builds(TextContent, texts),
    st.builds(
        lambda url, level: ImageContent(url=url, detail_level=level),
        texts,
        st.none() | st.sampled_from(["LOW", "MEDIUM", "HIGH", "AUTO", "ULTRA_HIGH", "ORIGINAL"]),
    ),
    st.builds(lambda data, mime: ImageContent(base64_data=data, mime_type=mime), texts, texts),
    st.builds(lambda data, mime: AudioContent(base64_data=data, mime_type=mime), texts, texts),
    st.builds(lambda url: VideoContent(url=url), texts),
    st.builds(lambda data: PdfFileContent(base64_data=data, mime_type="application/pdf"), texts),
)


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


requests = st.builds(
    lambda call_id, name, args: ToolExecutionRequest(call_id, name, _compact(args)),
    st.none() | texts,
    texts,
    st.dictionaries(texts, json_values, max_size=3),
)
messages = st.one_of(
    st.builds(SystemMessage, texts),
    st.builds(UserMessage, st.lists(parts, min_size=1, max_size=3), st.none() | texts, attributes),
    st.builds(AiMessage, st.none() | non_empty, st.lists(requests, max_size=2), st.none() | texts, attributes),
    st.builds(ToolExecutionResultMessage, texts, st.none() | texts, texts, st.booleans(), attributes),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(messages, max_size=5))
def test_messages_round_trip(conversation: list[ChatMessage]) -> None:
    assert from_langchain(to_langchain(conversation)) == conversation
