"""Chat Completions dicts checked against the real ``openai`` SDK: its request types, client and parse helpers.

Only the network is replaced (an ``httpx.MockTransport``); everything else is the installed SDK.
"""

from __future__ import annotations

import json
from typing import Any, get_args, get_type_hints

import httpx
import openai
import pytest
from hypothesis import given, settings
from openai.types.chat import (
    ChatCompletionContentPartParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)
from openai.types.chat.chat_completion_content_part_image_param import ImageURL
from pydantic import BaseModel

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    ImageContent,
    SerializationError,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.serialization import from_openai, langchain4j, to_openai
from chatmemory.serialization import openai as chat_completions

from .sdk_types import assert_conforms
from .test_openai import representable_conversations

SDK_DETAILS: tuple[str, ...] = get_args(get_type_hints(ImageURL)["detail"])


def _client(reply: dict[str, Any], sent: list[dict[str, Any]]) -> openai.OpenAI:
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=reply)

    return openai.OpenAI(api_key="test", http_client=httpx.Client(transport=httpx.MockTransport(handle)), max_retries=0)


def _completion(message: dict[str, Any], finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message, "logprobs": None}],
    }


def assert_sdk_accepts(dicts: list[dict[str, Any]]) -> None:
    """Every message, content part and tool call is one the SDK's request types define, key for key."""
    for message in dicts:
        assert_conforms(ChatCompletionMessageParam, message)
        if isinstance(message.get("content"), list):
            for part in message["content"]:
                assert_conforms(ChatCompletionContentPartParam, part)
        for call in message.get("tool_calls", ()):
            assert_conforms(ChatCompletionMessageFunctionToolCallParam, call)


def test_the_sdk_types_are_strict_enough_to_catch_an_unknown_key() -> None:
    with pytest.raises(AssertionError):
        assert_sdk_accepts([{"role": "tool", "tool_call_id": "c", "content": "x", "name": "weather"}])
    with pytest.raises(AssertionError):
        assert_sdk_accepts([{"role": "user", "content": [{"type": "text", "text": "x", "mime_type": "text/plain"}]}])


@settings(max_examples=150, deadline=None)
@given(representable_conversations())
def test_every_written_message_part_and_call_is_an_sdk_type(conversation: list[ChatMessage]) -> None:
    assert_sdk_accepts(to_openai(conversation))


class Weather(BaseModel):
    city: str
    celsius: int


class GetWeather(BaseModel):
    city: str


def test_a_parse_result_reads_with_parsed_fields_dropped() -> None:
    """Issue 13.7: ``parsed`` and ``function.parsed_arguments`` are copies the parse helpers add."""
    reply = _completion(
        {
            "role": "assistant",
            "content": '{"city":"Munich","celsius":21}',
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "GetWeather", "arguments": '{"city":"Munich"}'},
                }
            ],
        },
        finish_reason="tool_calls",
    )
    sent: list[dict[str, Any]] = []
    history = to_openai([SystemMessage("Be brief."), UserMessage("Weather in Munich?")])
    completion = _client(reply, sent).chat.completions.parse(
        model="gpt-test", messages=history, response_format=Weather, tools=[openai.pydantic_function_tool(GetWeather)]
    )
    assert sent[0]["messages"] == history
    # The SDK's generic parsed message warns when dumped (its "parsed" field is typed None): its issue, not ours.
    dumped = completion.choices[0].message.model_dump(warnings=False)
    assert dumped["parsed"] == {"city": "Munich", "celsius": 21}
    assert dumped["tool_calls"][0]["function"]["parsed_arguments"] == {"city": "Munich"}
    assert from_openai([dumped]) == [
        AiMessage('{"city":"Munich","celsius":21}', [ToolExecutionRequest("call_1", "GetWeather", '{"city":"Munich"}')])
    ]


def test_a_tool_message_name_is_the_tool_name() -> None:
    """Issue 13.8: what LangChain's convert_to_openai_messages writes for every ToolMessage."""
    assert from_openai([{"role": "tool", "tool_call_id": "c", "content": "sunny", "name": "weather"}]) == [
        ToolExecutionResultMessage("c", "weather", "sunny")
    ]


def test_a_tool_message_answering_no_known_call_has_no_tool_name() -> None:
    assert from_openai([{"role": "tool", "tool_call_id": "c", "content": "sunny"}]) == [
        ToolExecutionResultMessage("c", None, "sunny")
    ]


def test_the_sdk_detail_values_are_the_ones_tested() -> None:
    assert set(SDK_DETAILS) == {"auto", "low", "high", "original"}


@pytest.mark.parametrize("detail", SDK_DETAILS)
def test_every_sdk_detail_value_reads_and_writes_back(detail: str) -> None:
    """Issue 13.9: "original" used to read as ORIGINAL and then be refused by to_openai."""
    sent = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "https://ex.com/a.png", "detail": detail}}],
    }
    messages = from_openai([sent])
    assert messages == [UserMessage([ImageContent(url="https://ex.com/a.png", detail_level=detail.upper())])]
    assert to_openai(messages) == [sent]
    assert_sdk_accepts([sent])


def test_original_survives_a_trip_through_langchain4j_json() -> None:
    sent = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "original"}}]}
    through_java = langchain4j.loads(langchain4j.dumps(from_openai([sent])))
    assert through_java == [UserMessage([ImageContent(url="u", detail_level="ULTRA_HIGH")])]
    assert to_openai(through_java) == [sent]


def test_medium_has_no_chat_completions_value() -> None:
    with pytest.raises(SerializationError, match="'MEDIUM'"):
        to_openai([UserMessage([ImageContent(url="u", detail_level="MEDIUM")])])


@pytest.mark.parametrize("mime_type", ["audio/ogg", "audio/flac", "audio/webm", "audio/mp4", "audio/aac", "audio/FLAC"])
def test_audio_the_api_does_not_take_is_refused_naming_the_message(mime_type: str) -> None:
    """Issue 13.10: only wav and mp3 are input_audio formats."""
    messages: list[ChatMessage] = [
        SystemMessage("s"),
        UserMessage([AudioContent(base64_data="AA==", mime_type=mime_type)]),
    ]
    with pytest.raises(SerializationError, match=rf"message 1 \(UserMessage\).*{mime_type}.*wav.*mp3"):
        to_openai(messages)


@pytest.mark.parametrize(
    ("mime_type", "audio_format"), [("audio/wav", "wav"), ("audio/mpeg", "mp3"), ("audio/x-wav", "wav")]
)
def test_wav_and_mp3_are_sent(mime_type: str, audio_format: str) -> None:
    [sent] = to_openai([UserMessage([AudioContent(base64_data="AA==", mime_type=mime_type)])])
    assert sent["content"] == [{"type": "input_audio", "input_audio": {"data": "AA==", "format": audio_format}}]
    assert_sdk_accepts([sent])


def test_the_mime_type_of_an_image_by_url_is_a_documented_drop() -> None:
    """Issue 13.11: Chat Completions has no place for it (only a data: URL carries one)."""
    assert "``mime_type`` when the image" in (chat_completions.__doc__ or "")
    sent = to_openai([UserMessage([ImageContent(url="https://ex.com/a.png", mime_type="image/png")])])
    assert sent == [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://ex.com/a.png"}}]}]
    assert_sdk_accepts(sent)
    assert from_openai(sent) == [UserMessage([ImageContent(url="https://ex.com/a.png")])]
    inline = ImageContent(base64_data="aGVsbG8=", mime_type="image/png")
    assert from_openai(to_openai([UserMessage([inline])])) == [UserMessage([inline])]


def test_the_client_sends_the_dicts_unchanged() -> None:
    sent: list[dict[str, Any]] = []
    history = to_openai(
        [
            UserMessage([ImageContent(url="https://ex.com/a.png", detail_level="ORIGINAL")], name="klaus"),
            AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", "{ }")]),
            ToolExecutionResultMessage("c", "f", "ok"),
        ]
    )
    _client(_completion({"role": "assistant", "content": "done"}), sent).chat.completions.create(
        model="gpt-test", messages=history
    )
    assert sent[0]["messages"] == history
