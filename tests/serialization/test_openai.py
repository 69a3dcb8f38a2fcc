"""OpenAI Chat Completions message dicts: shapes, what cannot be carried, round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SerializationError,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from chatmemory.serialization import from_openai, to_openai

from .strategies import arguments, texts


def test_a_tool_calling_conversation() -> None:
    messages: list[ChatMessage] = [
        SystemMessage("Be brief."),
        UserMessage("Weather in Munich?", name="klaus"),
        AiMessage(tool_execution_requests=[ToolExecutionRequest("call_1", "weather", '{ "city":"München" }')]),
        ToolExecutionResultMessage("call_1", "weather", "sunny"),
        AiMessage("Sunny."),
    ]
    dicts = to_openai(messages)
    assert dicts == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Munich?", "name": "klaus"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{ "city":"München" }'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]
    assert from_openai(dicts) == messages


def test_content_parts() -> None:
    message = UserMessage(
        [
            TextContent("look"),
            ImageContent(url="https://example.com/a.png", detail_level="HIGH"),
            ImageContent(base64_data="aGVsbG8=", mime_type="image/png"),
            AudioContent(base64_data="UklGRg==", mime_type="audio/wav"),
            AudioContent(base64_data="SUQz", mime_type="audio/mpeg"),
            PdfFileContent(base64_data="JVBERi0=", mime_type="application/pdf"),
        ]
    )
    [converted] = to_openai([message], pdf_filename="report.pdf")
    assert converted == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "report.pdf"}},
        ],
    }
    assert from_openai([converted]) == [message]


def test_pdf_without_mime_type_is_sent_as_application_pdf() -> None:
    [converted] = to_openai([UserMessage([PdfFileContent(base64_data="JVBERi0=")])])
    assert converted["content"][0]["file"] == {
        "file_data": "data:application/pdf;base64,JVBERi0=",
        "filename": "document.pdf",
    }


def test_developer_role_and_text_part_lists_are_read() -> None:
    assert from_openai(
        [
            {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "kind."}]},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "refusal": None,
                "audio": None,
                "function_call": None,
                "annotations": [],
            },
            {"role": "user", "content": [{"type": "file", "file": {"file_data": "JVBERi0=", "filename": "x.pdf"}}]},
        ]
    ) == [SystemMessage("Be kind."), AiMessage("ok"), UserMessage([PdfFileContent(base64_data="JVBERi0=")])]


def test_thinking_is_dropped_unless_a_field_is_named() -> None:
    message = AiMessage("answer", thinking="because")
    assert to_openai([message]) == [{"role": "assistant", "content": "answer"}]
    converted = to_openai([message], thinking_field="reasoning_content")
    assert converted == [{"role": "assistant", "content": "answer", "reasoning_content": "because"}]
    assert from_openai(converted, thinking_field="reasoning_content") == [message]
    with pytest.raises(SerializationError, match="reasoning_content"):
        from_openai(converted)


def test_attributes_tool_names_and_error_flags_are_not_sent() -> None:
    dicts = to_openai(
        [
            UserMessage("hi", attributes={"k": 1}),
            AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", "{}")], attributes={"sig": "x"}),
            ToolExecutionResultMessage("c", "f", "boom", is_error=True, attributes={"ms": 3}),
        ]
    )
    assert dicts[0] == {"role": "user", "content": "hi"}
    assert "attributes" not in dicts[1]
    assert dicts[2] == {"role": "tool", "tool_call_id": "c", "content": "boom"}


def test_custom_messages_raise_unless_skipped() -> None:
    messages: list[ChatMessage] = [UserMessage("a"), CustomMessage({"x": 1}), AiMessage("b")]
    with pytest.raises(SerializationError, match="skip_custom"):
        to_openai(messages)
    assert to_openai(messages, skip_custom=True) == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
    ]


UNSENDABLE: list[ChatMessage] = [
    UserMessage([VideoContent(url="https://example.com/v.mp4")]),
    UserMessage([AudioContent(url="https://example.com/a.wav", mime_type="audio/wav")]),
    UserMessage([AudioContent(base64_data="AA==")]),
    UserMessage([AudioContent(base64_data="AA==", mime_type="video/mp4")]),
    UserMessage([PdfFileContent(url="https://example.com/d.pdf")]),
    UserMessage([PdfFileContent(url="https://example.com/d.pdf", base64_data="JVBERi0=")]),
    UserMessage([ImageContent(base64_data="aGVsbG8=")]),
    UserMessage([ImageContent(url="https://example.com/a.png", base64_data="aGVsbG8=", mime_type="image/png")]),
    UserMessage([ImageContent(base64_data="aGVsbG8=", mime_type="image/png,evil")]),
    UserMessage([ImageContent(url="https://example.com/a.png", detail_level="ULTRA")]),
    UserMessage([ImageContent(url="https://example.com/a.png", detail_level="MEDIUM")]),
    AiMessage(tool_execution_requests=[ToolExecutionRequest(None, "f", "{}")]),
    ToolExecutionResultMessage(None, "f", "x"),
    "not a message",  # type: ignore[list-item]
]


@pytest.mark.parametrize("message", UNSENDABLE)
def test_what_chat_completions_cannot_carry_raises(message: ChatMessage) -> None:
    with pytest.raises(SerializationError):
        to_openai([message])


UNREADABLE: list[Any] = [
    None,
    "user: hi",
    {"content": "x"},
    {"role": "function", "name": "f", "content": "x"},
    {"role": "robot", "content": "x"},
    {"role": "system", "content": None},
    {"role": "system", "content": 5},
    {"role": "system", "content": "x", "name": "boss"},
    {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
    {"role": "user"},
    {"role": "user", "content": {"text": "x"}},
    {"role": "user", "content": []},
    {"role": "user", "content": "x", "name": 3},
    {"role": "user", "content": ["x"]},
    {"role": "user", "content": [{"type": "video", "video": {}}]},
    {"role": "user", "content": [{"type": "text"}]},
    {"role": "user", "content": [{"type": "image_url", "image_url": "https://x"}]},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"detail": "low"}}]},
    {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA=="}}]},
    {"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]},
    {"role": "assistant", "content": "x", "refusal": "I can't"},
    {"role": "assistant", "content": "x", "name": "bot"},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    {"role": "assistant", "content": None, "tool_calls": {}},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "f", "input": "x"}}],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}],
    },
    {"role": "tool", "tool_call_id": "c", "content": "x", "name": 3},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "medium"}}]},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "LOW"}}]},
    {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA==", "format": "flac"}}]},
    {"role": "tool", "content": "x"},
]


@pytest.mark.parametrize("item", UNREADABLE)
def test_what_chatmemory_cannot_hold_raises(item: Any) -> None:
    with pytest.raises(SerializationError):
        from_openai([item])


def test_a_tool_message_takes_the_name_of_the_latest_call_with_its_id() -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "lookup", "arguments": ""}}],
    }
    assert from_openai([call, {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r"}]}])[
        1
    ] == ToolExecutionResultMessage("c", "lookup", "r")


# --------------------------------------------------------------------------------- representable subset

plain_urls = texts.filter(lambda url: not url.startswith("data:"))
mime_types = st.from_regex(r"\A[a-z]{1,8}/[a-z0-9.+-]{1,12}\Z")
detail_levels = st.none() | st.sampled_from(["LOW", "HIGH", "AUTO", "ORIGINAL"])
user_parts = st.one_of(
    st.builds(TextContent, texts),
    st.builds(lambda url, detail: ImageContent(url=url, detail_level=detail), plain_urls, detail_levels),
    st.builds(
        lambda data, mime, detail: ImageContent(base64_data=data, mime_type=mime, detail_level=detail),
        texts,
        mime_types,
        detail_levels,
    ),
    st.builds(
        lambda data, mime: AudioContent(base64_data=data, mime_type=mime),
        texts,
        st.sampled_from(["audio/wav", "audio/mpeg"]),
    ),
    st.builds(lambda data, mime: PdfFileContent(base64_data=data, mime_type=mime), texts, mime_types),
)


@st.composite
def representable_conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """Conversations whose every field Chat Completions carries: tool results answer earlier calls."""
    conversation: list[ChatMessage] = []
    calls: list[ToolExecutionRequest] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["system", "user", "ai", "tool"]))
        if kind == "system":
            conversation.append(SystemMessage(draw(texts)))
        elif kind == "user":
            contents = draw(st.lists(user_parts, min_size=1, max_size=4))
            conversation.append(UserMessage(contents, name=draw(st.none() | texts)))
        elif kind == "ai":
            requests = [
                ToolExecutionRequest(f"call_{len(calls) + i}", draw(texts), draw(arguments))
                for i in range(draw(st.integers(0, 3)))
            ]
            calls.extend(requests)
            conversation.append(AiMessage(draw(st.none() | texts), requests, thinking=draw(st.none() | texts)))
        elif calls:
            call = draw(st.sampled_from(calls))
            conversation.append(ToolExecutionResultMessage(call.id, call.name, draw(texts)))
    return conversation


@settings(max_examples=200, deadline=None)
@given(representable_conversations())
def test_round_trip_of_the_representable_subset(conversation: list[ChatMessage]) -> None:
    dicts = to_openai(conversation, thinking_field="reasoning_content")
    assert from_openai(dicts, thinking_field="reasoning_content") == conversation
    for original, converted in zip(conversation, dicts, strict=True):
        if isinstance(original, AiMessage) and original.tool_execution_requests:
            sent = [call["function"]["arguments"] for call in converted["tool_calls"]]
            assert sent == [request.arguments for request in original.tool_execution_requests]
