"""Anthropic Messages: thinking kept for replay, the anthropic SDK's types and client, what cannot be carried."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
from anthropic.types import ContentBlockParam, MessageParam, TextBlockParam
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
from chatmemory.serialization import from_anthropic, to_anthropic
from chatmemory.serialization.anthropic import RECORD_ATTRIBUTE

from .sdk_types import assert_conforms

try:  # the anthropic SDK moved from httpx to its fork httpx2, and refuses clients of the other one
    import httpx2 as http
except ImportError:  # pragma: no cover - older SDKs
    import httpx as http  # type: ignore[no-redef]
from .strategies import json_values, texts

LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Munich?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "The user wants weather.", "signature": "EqQBCgIYAhIM-sig-1"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy-opaque"},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "München"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "service down", "is_error": True},
            {"type": "text", "text": "Try again?"},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Retry.", "signature": "sig-2"},
            {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {}},
            {"type": "thinking", "thinking": "Interleaved.", "signature": "sig-3"},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "sunny"}]},
]


def assert_sdk_accepts(system: str | None, messages: list[dict[str, Any]]) -> None:
    if system is not None:
        assert_conforms(str, system)
    for message in messages:
        assert_conforms(MessageParam, message)
        if isinstance(message["content"], list):
            for block in message["content"]:
                assert_conforms(ContentBlockParam, block)


def test_a_tool_loop_with_extended_thinking_replays_block_for_block() -> None:
    messages = from_anthropic("Be brief.", LOOP)
    assert [type(message) for message in messages] == [
        SystemMessage,
        UserMessage,
        AiMessage,
        ToolExecutionResultMessage,
        UserMessage,
        AiMessage,
        ToolExecutionResultMessage,
    ]
    first = messages[2]
    assert isinstance(first, AiMessage)
    assert first.thinking == "The user wants weather."
    assert first.text == "Let me check."
    assert first.tool_execution_requests == (ToolExecutionRequest("toolu_1", "weather", '{"city":"München"}'),)
    assert messages[3] == ToolExecutionResultMessage("toolu_1", "weather", "service down", is_error=True)
    assert messages[4] == UserMessage("Try again?")
    second = messages[5]
    assert isinstance(second, AiMessage)
    assert second.thinking == "Retry.\n\nInterleaved."
    assert second.text is None
    system, written = to_anthropic(messages)
    assert system == "Be brief."
    assert written == LOOP
    assert_sdk_accepts(system, written)


def test_a_plain_answer_keeps_no_record() -> None:
    [message] = from_anthropic(
        None, [{"role": "assistant", "content": [{"type": "text", "text": "Hi", "citations": None}]}]
    )
    assert message == AiMessage("Hi")
    assert RECORD_ATTRIBUTE not in message.attributes


def test_a_changed_message_is_written_from_what_it_holds_now() -> None:
    message = from_anthropic(None, LOOP[:2])[1]
    assert isinstance(message, AiMessage)
    edited = AiMessage(
        "Other.", message.tool_execution_requests, thinking=message.thinking, attributes=message.attributes
    )
    _, written = to_anthropic([edited])
    assert written == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Other."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "München"}},
            ],
        }
    ]


def test_media_blocks() -> None:
    message = UserMessage(
        [
            TextContent("look"),
            ImageContent(url="https://ex.com/a.png", detail_level="HIGH"),
            ImageContent(base64_data="aGVsbG8=", mime_type="image/png"),
            PdfFileContent(base64_data="JVBERi0="),
            PdfFileContent(url="https://ex.com/d.pdf"),
        ]
    )
    system, written = to_anthropic([message])
    assert system is None
    assert written == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "url", "url": "https://ex.com/a.png"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
                {"type": "document", "source": {"type": "url", "url": "https://ex.com/d.pdf"}},
            ],
        }
    ]
    assert_sdk_accepts(system, written)
    assert from_anthropic(None, written) == [
        UserMessage(
            [
                TextContent("look"),
                ImageContent(url="https://ex.com/a.png"),
                ImageContent(base64_data="aGVsbG8=", mime_type="image/png"),
                PdfFileContent(base64_data="JVBERi0=", mime_type="application/pdf"),
                PdfFileContent(url="https://ex.com/d.pdf"),
            ]
        )
    ]


def test_system_text_blocks_and_several_system_messages() -> None:
    blocks: list[TextBlockParam] = [
        {"type": "text", "text": "Be "},
        {"type": "text", "text": "brief.", "cache_control": {"type": "ephemeral"}},
    ]
    assert from_anthropic(blocks, []) == [SystemMessage("Be brief.")]
    assert to_anthropic([SystemMessage("a"), UserMessage("u"), SystemMessage("b")])[0] == "a\n\nb"


UNSENDABLE: list[Any] = [
    UserMessage([AudioContent(base64_data="AA==", mime_type="audio/wav")]),
    UserMessage([VideoContent(url="https://ex.com/v.mp4")]),
    UserMessage([ImageContent(base64_data="aGVsbG8=")]),
    UserMessage([ImageContent(base64_data="aGVsbG8=", mime_type="image/tiff")]),
    UserMessage([ImageContent(url="u", base64_data="aGVsbG8=", mime_type="image/png")]),
    UserMessage([PdfFileContent(base64_data="aGVsbG8=", mime_type="text/plain")]),
    AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", "[1]")]),
    AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", "{oops")]),
    AiMessage(tool_execution_requests=[ToolExecutionRequest(None, "f", "{}")]),
    ToolExecutionResultMessage(None, "f", "x"),
    CustomMessage({"x": 1}),
    "not a message",
]


@pytest.mark.parametrize("message", UNSENDABLE)
def test_what_anthropic_cannot_carry_raises_naming_the_message(message: Any) -> None:
    with pytest.raises(SerializationError, match=r"message 1 \("):
        to_anthropic([UserMessage("u"), message])


def test_custom_messages_can_be_skipped_and_empty_messages_are_left_out() -> None:
    assert to_anthropic(
        [CustomMessage({"x": 1}), UserMessage(""), AiMessage(""), AiMessage("a")], skip_custom=True
    ) == (
        None,
        [{"role": "assistant", "content": [{"type": "text", "text": "a"}]}],
    )


def test_tool_arguments_become_input_and_come_back_compact() -> None:
    _, written = to_anthropic(
        [
            AiMessage(
                tool_execution_requests=[
                    ToolExecutionRequest("c", "f", '{ "a" : [1, 2] }'),
                    ToolExecutionRequest("d", "g", ""),
                ]
            )
        ]
    )
    assert [block["input"] for block in written[0]["content"]] == [{"a": [1, 2]}, {}]
    [message] = from_anthropic(None, written)
    assert isinstance(message, AiMessage)
    assert [request.arguments for request in message.tool_execution_requests] == ['{"a":[1,2]}', "{}"]


UNREADABLE: list[Any] = [
    None,
    {"role": "system", "content": "x"},
    {"role": "user"},
    {"role": "user", "content": 5},
    {"role": "user", "content": "x", "name": "klaus"},
    {"role": "user", "content": [{"type": "video"}]},
    {"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]},
    {
        "role": "user",
        "content": [{"type": "document", "source": {"type": "text", "data": "x", "media_type": "text/plain"}}],
    },
    {"role": "user", "content": [{"type": "document", "source": {"type": "url", "url": "u"}, "title": "T"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "is_error": "yes"}]},
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c",
                "content": [{"type": "image", "source": {"type": "url", "url": "u"}}],
            }
        ],
    },
    {"role": "user", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]},
    {"role": "assistant", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": "x"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]},
    {"role": "assistant", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]},
]


@pytest.mark.parametrize("message", UNREADABLE)
def test_what_chatmemory_cannot_hold_raises(message: Any) -> None:
    with pytest.raises(SerializationError, match="Anthropic message 1"):
        from_anthropic(None, [{"role": "user", "content": "x"}, message])


def test_a_system_prompt_with_other_blocks_raises() -> None:
    with pytest.raises(SerializationError, match="system"):
        from_anthropic([{"type": "image", "source": {"type": "url", "url": "u"}}], [])


# -------------------------------------------------------------------------------------- property tests

ids = st.text(alphabet="abcdef0123456789_", min_size=1, max_size=8)
non_empty = texts.filter(bool)
inputs = st.dictionaries(texts, json_values, max_size=3)


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


user_parts = st.one_of(
    st.builds(TextContent, non_empty),
    st.builds(lambda url: ImageContent(url=url), texts),
    st.builds(
        lambda data, mime: ImageContent(base64_data=data, mime_type=mime),
        ids,
        st.sampled_from(["image/jpeg", "image/png", "image/gif", "image/webp"]),
    ),
    st.builds(lambda data: PdfFileContent(base64_data=data, mime_type="application/pdf"), ids),
    st.builds(lambda url: PdfFileContent(url=url), texts),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """Conversations whose every field Anthropic carries: one leading system message, results answer calls."""
    conversation: list[ChatMessage] = [SystemMessage(draw(texts))] if draw(st.booleans()) else []
    calls: list[ToolExecutionRequest] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "ai", "tool"]))
        if kind == "user":
            conversation.append(UserMessage(draw(st.lists(user_parts, min_size=1, max_size=3))))
        elif kind == "ai":
            requests = [
                ToolExecutionRequest(f"toolu_{len(calls) + i}", draw(texts), _compact(draw(inputs)))
                for i in range(draw(st.integers(0, 2)))
            ]
            calls.extend(requests)
            conversation.append(AiMessage(draw(non_empty if not requests else st.none() | non_empty), requests))
        elif calls:
            call = draw(st.sampled_from(calls))
            conversation.append(
                ToolExecutionResultMessage(call.id, call.name, draw(texts), is_error=draw(st.booleans()))
            )
    return conversation


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_messages_round_trip(conversation: list[ChatMessage]) -> None:
    system, written = to_anthropic(conversation)
    assert_sdk_accepts(system, written)
    assert from_anthropic(system, written) == conversation


assistant_blocks = st.lists(
    st.one_of(
        st.builds(lambda text: {"type": "text", "text": text}, non_empty),
        st.builds(lambda text, signature: {"type": "thinking", "thinking": text, "signature": signature}, texts, ids),
        st.builds(lambda data: {"type": "redacted_thinking", "data": data}, ids),
        st.builds(
            lambda call_id, name, value: {"type": "tool_use", "id": call_id, "name": name, "input": value},
            ids,
            texts,
            inputs,
        ),
    ),
    min_size=1,
    max_size=5,
).filter(
    lambda blocks: (
        len({block["id"] for block in blocks if block["type"] == "tool_use"})
        == sum(block["type"] == "tool_use" for block in blocks)
    )
)


@settings(max_examples=300, deadline=None)
@given(assistant_blocks)
def test_assistant_blocks_come_back_exactly(blocks: list[dict[str, Any]]) -> None:
    messages = from_anthropic(None, [{"role": "assistant", "content": blocks}])
    _, written = to_anthropic(messages)
    assert written == [{"role": "assistant", "content": blocks}]
    assert_sdk_accepts(None, written)


# --------------------------------------------------------------------------- the real anthropic client


def test_a_real_client_round_trip() -> None:
    """A response's blocks, dumped, replay exactly; the request is sent as built."""
    sent: list[dict[str, Any]] = []
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": LOOP[1]["content"],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }

    def handle(request: http.Request) -> http.Response:
        sent.append(json.loads(request.content))
        return http.Response(200, json=reply)

    client = anthropic.Anthropic(
        api_key="test", http_client=http.Client(transport=http.MockTransport(handle)), max_retries=0
    )
    memory: list[ChatMessage] = [SystemMessage("Be brief."), UserMessage("Weather in Munich?")]
    system, messages = to_anthropic(memory)
    assert system is not None
    response = client.messages.create(model="claude-test", max_tokens=64, system=system, messages=messages)  # type: ignore[arg-type]
    assert sent[0]["system"] == "Be brief."
    assert sent[0]["messages"] == messages
    answer = {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in response.content]}
    memory += from_anthropic(None, [answer])
    memory.append(ToolExecutionResultMessage("toolu_1", "weather", "sunny"))
    system, messages = to_anthropic(memory)
    assert messages[1] == answer
    assert_sdk_accepts(system, messages)
    client.messages.create(model="claude-test", max_tokens=64, system=system, messages=messages)  # type: ignore[arg-type]
    assert sent[1]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants weather.",
        "signature": "EqQBCgIYAhIM-sig-1",
    }
