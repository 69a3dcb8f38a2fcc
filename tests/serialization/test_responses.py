"""OpenAI Responses API items: exact round trips, the openai SDK's types, and what cannot be carried."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseInputItemParam

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
from chatmemory.serialization import from_responses, to_responses
from chatmemory.serialization.responses import ITEM_ATTRIBUTE, RECORD_ATTRIBUTE

from .sdk_types import assert_conforms
from .strategies import arguments, texts

TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Munich?"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Need the weather."}, {"type": "summary_text", "text": "Ask."}],
        "encrypted_content": "gAAAA-opaque",
        "status": "completed",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city":"Munich"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "phase": "final_answer",
        "content": [
            {"type": "output_text", "text": "Sunny.", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": " No forecast."},
        ],
    },
]


def assert_sdk_accepts(items: list[dict[str, Any]]) -> None:
    for item in items:
        assert_conforms(ResponseInputItemParam, item)


def test_a_tool_loop_with_reasoning_reads_as_messages() -> None:
    messages = from_responses(TURN)
    assert [type(message) for message in messages] == [UserMessage, AiMessage, ToolExecutionResultMessage, AiMessage]
    assert messages[0] == UserMessage("Weather in Munich?")
    call = messages[1]
    assert isinstance(call, AiMessage)
    assert call.thinking == "Need the weather.\n\nAsk."
    assert call.text is None
    assert call.tool_execution_requests == (ToolExecutionRequest("call_1", "weather", '{"city":"Munich"}'),)
    assert call.attributes[RECORD_ATTRIBUTE]["items"][0]["item"]["encrypted_content"] == "gAAAA-opaque"
    assert messages[2] == ToolExecutionResultMessage("call_1", "weather", "sunny")
    answer = messages[3]
    assert isinstance(answer, AiMessage)
    assert answer.text == "Sunny. No forecast."
    assert to_responses(messages) == TURN
    assert_sdk_accepts(to_responses(messages))


def test_items_no_message_holds_are_kept_whole() -> None:
    items: list[dict[str, Any]] = [
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_image", "file_id": "file-1", "detail": "auto"}]},
        {"type": "item_reference", "id": "msg_0"},
    ]
    messages = from_responses(items)
    assert messages == [CustomMessage({ITEM_ATTRIBUTE: item}) for item in items]
    assert to_responses(messages) == items
    with pytest.raises(SerializationError, match="Responses item 0"):
        from_responses(items, strict=True)


def test_the_system_role_is_chosen_by_the_caller() -> None:
    items = [{"role": "developer", "content": "Be brief."}]
    assert from_responses(items, system_role="developer") == [SystemMessage("Be brief.")]
    assert to_responses([SystemMessage("Be brief.")], system_role="developer") == items
    assert to_responses([SystemMessage("Be brief.")]) == [{"role": "system", "content": "Be brief."}]


def test_a_tool_output_name_is_kept_and_otherwise_taken_from_the_call() -> None:
    items = [
        {"type": "function_call", "call_id": "c", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "r", "name": "lookup_v2"},
        {"type": "function_call_output", "call_id": "c", "output": "r2"},
    ]
    messages = from_responses(items)
    assert [message.tool_name for message in messages[1:]] == ["lookup_v2", "lookup"]  # type: ignore[union-attr]
    assert to_responses(messages) == items


def test_a_changed_message_is_written_from_what_it_holds_now() -> None:
    [_, call, _, answer] = from_responses(TURN)
    assert isinstance(answer, AiMessage)
    edited = AiMessage("Rain.", attributes=answer.attributes)
    assert to_responses([edited]) == [{"role": "assistant", "content": "Rain."}]
    assert isinstance(call, AiMessage)
    no_thinking = AiMessage(None, call.tool_execution_requests, attributes=call.attributes)
    assert to_responses([no_thinking]) == [
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Munich"}'}
    ]


def test_user_content_parts() -> None:
    message = UserMessage(
        [
            TextContent("look"),
            ImageContent(url="https://ex.com/a.png", mime_type="image/png"),
            ImageContent(base64_data="aGVsbG8=", mime_type="image/png", detail_level="ULTRA_HIGH"),
            PdfFileContent(base64_data="JVBERi0="),
            PdfFileContent(url="https://ex.com/d.pdf"),
        ],
        name="klaus",
        attributes={"k": 1},
    )
    items = to_responses([message], pdf_filename="report.pdf")
    assert items == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "https://ex.com/a.png", "detail": "auto"},
                {"type": "input_image", "image_url": "data:image/png;base64,aGVsbG8=", "detail": "original"},
                {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "report.pdf"},
                {"type": "input_file", "file_url": "https://ex.com/d.pdf"},
            ],
        }
    ]
    assert_sdk_accepts(items)


UNSENDABLE: list[Any] = [
    UserMessage([AudioContent(base64_data="AA==", mime_type="audio/wav")]),
    UserMessage([VideoContent(url="https://ex.com/v.mp4")]),
    UserMessage([ImageContent(url="u", detail_level="MEDIUM")]),
    UserMessage([ImageContent(base64_data="aGVsbG8=")]),
    UserMessage([ImageContent(url="u", base64_data="aGVsbG8=", mime_type="image/png")]),
    UserMessage([PdfFileContent(url="u", base64_data="JVBERi0=")]),
    AiMessage(tool_execution_requests=[ToolExecutionRequest(None, "f", "{}")]),
    ToolExecutionResultMessage(None, "f", "x"),
    CustomMessage({"x": 1}),
    "not a message",
]


@pytest.mark.parametrize("message", UNSENDABLE)
def test_what_the_responses_api_cannot_carry_raises_naming_the_message(message: Any) -> None:
    with pytest.raises(SerializationError, match=r"message 1 \("):
        to_responses([SystemMessage("s"), message])


def test_custom_messages_without_an_item_can_be_skipped() -> None:
    assert to_responses([CustomMessage({"x": 1}), AiMessage("a")], skip_custom=True) == [
        {"role": "assistant", "content": "a"}
    ]


@pytest.mark.parametrize("item", [None, "hi", 3, {}, {"content": "x"}, {"type": 5}])
def test_what_is_no_responses_item_raises(item: Any) -> None:
    with pytest.raises(SerializationError, match="Responses item 1"):
        from_responses([{"role": "user", "content": "x"}, item])


# -------------------------------------------------------------------------------------- property tests

ids = st.text(alphabet="abcdef0123456789_", min_size=1, max_size=8)
statuses = st.sampled_from(["in_progress", "completed", "incomplete"])


def _maybe(draw: st.DrawFn, item: dict[str, Any], key: str, values: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        item[key] = draw(values)


@st.composite
def user_items(draw: st.DrawFn) -> dict[str, Any]:
    parts = st.one_of(
        st.builds(lambda text: {"type": "input_text", "text": text}, texts),
        st.builds(
            lambda url, detail: {"type": "input_image", "image_url": url, "detail": detail},
            texts | st.builds(lambda data: f"data:image/png;base64,{data}", ids),
            st.sampled_from(["low", "high", "auto", "original"]),
        ),
        st.builds(lambda data: {"type": "input_file", "file_data": f"data:application/pdf;base64,{data}"}, ids),
        st.builds(
            lambda data, name: {
                "type": "input_file",
                "file_data": f"data:application/pdf;base64,{data}",
                "filename": name,
            },
            ids,
            texts,
        ),
        st.builds(lambda url: {"type": "input_file", "file_url": url}, texts),
        st.builds(lambda file_id: {"type": "input_image", "file_id": file_id, "detail": "auto"}, ids),
    )
    item: dict[str, Any] = {"role": "user", "content": draw(texts | st.lists(parts, min_size=1, max_size=3))}
    _maybe(draw, item, "type", st.just("message"))
    return item


@st.composite
def reasoning_items(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": draw(ids),
        "summary": [{"type": "summary_text", "text": text} for text in draw(st.lists(texts, max_size=3))],
    }
    _maybe(draw, item, "encrypted_content", texts | st.none())
    _maybe(draw, item, "status", statuses)
    _maybe(
        draw, item, "content", st.lists(st.builds(lambda t: {"type": "reasoning_text", "text": t}, texts), max_size=2)
    )
    return item


@st.composite
def call_items(draw: st.DrawFn) -> dict[str, Any]:
    item = {"type": "function_call", "call_id": draw(ids), "name": draw(texts), "arguments": draw(arguments)}
    _maybe(draw, item, "id", ids)
    _maybe(draw, item, "status", statuses)
    return item


@st.composite
def output_items(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call_output", "call_id": draw(ids), "output": draw(texts)}
    _maybe(draw, item, "id", ids)
    _maybe(draw, item, "name", texts)
    _maybe(draw, item, "status", statuses)
    return item


@st.composite
def assistant_items(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"role": "assistant", "content": draw(texts)}
    parts = st.one_of(
        st.builds(lambda text: {"type": "output_text", "text": text, "annotations": []}, texts),
        st.builds(lambda text: {"type": "refusal", "refusal": text}, texts),
    )
    item = {"type": "message", "id": draw(ids), "role": "assistant", "status": draw(statuses)}
    item["content"] = draw(st.lists(parts, max_size=3))
    _maybe(draw, item, "phase", st.sampled_from(["commentary", "final_answer"]))
    return item


items_strategy = st.lists(
    st.one_of(
        user_items(),
        reasoning_items(),
        call_items(),
        output_items(),
        assistant_items(),
        st.builds(lambda text, role: {"role": role, "content": text}, texts, st.sampled_from(["system", "developer"])),
        st.builds(lambda item_id: {"type": "item_reference", "id": item_id}, ids),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(items_strategy)
def test_items_come_back_exactly(items: list[dict[str, Any]]) -> None:
    messages = from_responses(items)
    assert to_responses(messages) == items
    assert from_responses(to_responses(messages)) == messages
    assert_sdk_accepts(to_responses(messages))


@settings(max_examples=300, deadline=None)
@given(items_strategy)
def test_items_read_as_messages_unless_no_message_can_hold_them(items: list[dict[str, Any]]) -> None:
    kept_whole = [message for message in from_responses(items) if isinstance(message, CustomMessage)]
    for message in kept_whole:
        item = message.attributes[ITEM_ATTRIBUTE]
        assert (
            item.get("type") == "item_reference"
            or item.get("role") == "developer"
            or any(part.get("file_id") for part in item.get("content", []) if isinstance(part, dict))
        ), item


plain_urls = texts.filter(lambda url: not url.startswith("data:"))
user_parts = st.one_of(
    st.builds(TextContent, texts),
    st.builds(
        lambda url, detail: ImageContent(url=url, detail_level=detail),
        plain_urls,
        st.sampled_from(["LOW", "HIGH", "AUTO", "ORIGINAL"]),
    ),
    st.builds(lambda data: ImageContent(base64_data=data, mime_type="image/jpeg", detail_level="HIGH"), ids),
    st.builds(lambda data: PdfFileContent(base64_data=data, mime_type="application/pdf"), ids),
    st.builds(lambda url: PdfFileContent(url=url), plain_urls),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """Conversations whose fields the Responses API carries: tool results answer earlier calls.

    No two AiMessages are adjacent: the items of a model's answer are one turn, read as one AiMessage.
    """
    conversation: list[ChatMessage] = []
    calls: list[ToolExecutionRequest] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["system", "user", "ai", "tool"]))
        if kind == "system":
            conversation.append(SystemMessage(draw(texts)))
        elif kind == "user":
            conversation.append(UserMessage(draw(st.lists(user_parts, min_size=1, max_size=3))))
        elif kind == "ai" and not (conversation and isinstance(conversation[-1], AiMessage)):
            requests = [
                ToolExecutionRequest(f"call_{len(calls) + i}", draw(texts), draw(arguments))
                for i in range(draw(st.integers(0, 2)))
            ]
            text = draw(texts if not requests else st.none() | texts)
            calls.extend(requests)
            conversation.append(AiMessage(text, requests))
        elif calls:
            call = draw(st.sampled_from(calls))
            conversation.append(ToolExecutionResultMessage(call.id, call.name, draw(texts)))
    return conversation


def _without_records(message: ChatMessage) -> ChatMessage:
    if isinstance(message, UserMessage):
        return UserMessage(message.contents)
    return message


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_messages_round_trip(conversation: list[ChatMessage]) -> None:
    items = to_responses(conversation)
    assert_sdk_accepts(items)
    assert to_responses(from_responses(items)) == items
    assert [_without_records(message) for message in from_responses(items)] == conversation


# ------------------------------------------------------------------------------ the real openai client


def test_a_real_client_round_trip() -> None:
    """Items a Response returns, dumped as the Agents SDK does, come back exactly; the request is sent as built."""
    sent: list[dict[str, Any]] = []
    output = [*TURN[1:3], TURN[4]]
    reply = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-test",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "status": "completed",
    }

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=reply)

    client = openai.OpenAI(
        api_key="test", http_client=httpx.Client(transport=httpx.MockTransport(handle)), max_retries=0
    )
    history = to_responses([SystemMessage("Be brief."), UserMessage("Weather in Munich?")])
    response = client.responses.create(model="gpt-test", input=history)  # type: ignore[arg-type]
    assert sent[0]["input"] == history
    dumped = [item.model_dump(exclude_unset=True) for item in response.output]
    assert dumped == output
    messages = from_responses(dumped)
    assert [type(message) for message in messages] == [AiMessage]
    assert to_responses(messages) == dumped
