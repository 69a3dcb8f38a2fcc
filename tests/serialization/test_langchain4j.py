"""LangChain4j ``ChatMessageSerializer`` JSON: the shared vectors, round trips and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    CorruptedMemoryError,
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
from chatmemory.serialization import langchain4j

from .strategies import message_lists

VECTORS = Path(__file__).parent / "vectors" / "langchain4j"
EXPECTED: dict[str, list[dict[str, Any]]] = json.loads((VECTORS / "expected.json").read_text(encoding="utf-8"))
_CONTENT_CLASSES = {cls.__name__: cls for cls in (ImageContent, AudioContent, VideoContent, PdfFileContent)}


def _content(spec: dict[str, Any]) -> Any:
    if spec["class"] == "TextContent":
        return TextContent(spec["text"])
    fields = {key: value for key, value in spec.items() if key != "class"}
    return _CONTENT_CLASSES[spec["class"]](**fields)


def _message(spec: dict[str, Any]) -> ChatMessage:
    """Build the message an ``expected.json`` entry describes."""
    kind = spec["class"]
    if kind == "SystemMessage":
        return SystemMessage(spec["text"])
    if kind == "UserMessage":
        return UserMessage(
            [_content(part) for part in spec["contents"]], name=spec.get("name"), attributes=spec.get("attributes")
        )
    if kind == "AiMessage":
        return AiMessage(
            text=spec["text"],
            tool_execution_requests=[ToolExecutionRequest(**request) for request in spec["tool_execution_requests"]],
            thinking=spec["thinking"],
            attributes=spec["attributes"],
        )
    if kind == "ToolExecutionResultMessage":
        return ToolExecutionResultMessage(
            spec["id"], spec["tool_name"], spec["text"], is_error=spec["is_error"], attributes=spec.get("attributes")
        )
    assert kind == "CustomMessage", kind
    return CustomMessage(spec["attributes"])


def test_every_vector_file_is_described() -> None:
    files = {path.name for path in VECTORS.glob("*.json")} - {"expected.json"}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vector_decodes_to_the_expected_messages(name: str) -> None:
    raw = (VECTORS / name).read_bytes()
    expected = [_message(spec) for spec in EXPECTED[name]]
    assert langchain4j.loads(raw) == expected
    assert langchain4j.loads(raw.decode("utf-8")) == expected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vector_encodes_back_to_the_file(name: str) -> None:
    raw = (VECTORS / name).read_bytes()
    encoded = langchain4j.dumps([_message(spec) for spec in EXPECTED[name]])
    assert isinstance(encoded, str)
    if any("note" in spec for spec in EXPECTED[name]):
        # A legacy input form: the current form is written, and it reads back to the same messages.
        assert langchain4j.loads(encoded) == langchain4j.loads(raw)
    else:
        assert orjson.loads(encoded) == orjson.loads(raw)


def test_legacy_tool_result_is_written_with_contents() -> None:
    [message] = langchain4j.loads((VECTORS / "tool_result_legacy_text.json").read_bytes())
    assert orjson.loads(langchain4j.dumps([message])) == [
        {
            "id": "12345",
            "toolName": "weather",
            "contents": [{"text": "sunny", "type": "TEXT"}],
            "attributes": {},
            "type": "TOOL_EXECUTION_RESULT",
        }
    ]


def test_arguments_survive_byte_for_byte() -> None:
    raw = (VECTORS / "ai_tool_calls.json").read_bytes()
    arguments = [
        request["arguments"] for item in orjson.loads(raw) for request in item.get("toolExecutionRequests", [])
    ]
    decoded = langchain4j.loads(raw)
    assert [
        request.arguments
        for message in decoded
        if isinstance(message, AiMessage)
        for request in message.tool_execution_requests
    ] == arguments
    encoded = langchain4j.dumps(decoded).encode("utf-8")
    for argument in arguments:
        # The JSON string literal of each argument appears verbatim in both the vector and our output.
        assert orjson.dumps(argument) in raw
        assert orjson.dumps(argument) in encoded


def test_media_contents_use_langchain4j_field_names() -> None:
    message = UserMessage(
        [
            AudioContent(base64_data="UklGRg==", mime_type="audio/wav"),
            VideoContent(url="https://example.com/v.mp4"),
            PdfFileContent(base64_data="JVBERi0=", mime_type="application/pdf"),
            ImageContent(url="https://example.com/i.png", detail_level="HIGH"),
        ]
    )
    assert orjson.loads(langchain4j.dumps([message])) == [
        {
            "contents": [
                {"audio": {"base64Data": "UklGRg==", "mimeType": "audio/wav"}, "type": "AUDIO"},
                {"video": {"url": "https://example.com/v.mp4"}, "type": "VIDEO"},
                {"pdfFile": {"base64Data": "JVBERi0=", "mimeType": "application/pdf"}, "type": "PDF"},
                {"image": {"url": "https://example.com/i.png"}, "detailLevel": "HIGH", "type": "IMAGE"},
            ],
            "type": "USER",
        }
    ]


def test_audio_binary_data_reads_as_base64() -> None:
    raw = '[{"contents":[{"audio":{"binaryData":"AAE=","mimeType":"audio/wav"},"type":"AUDIO"}],"type":"USER"}]'
    assert langchain4j.loads(raw) == [UserMessage(AudioContent(base64_data="AAE=", mime_type="audio/wav"))]


def test_explicit_nulls_and_false_are_accepted() -> None:
    raw = (
        '[{"name":null,"contents":[{"text":"x","type":"TEXT"}],"attributes":null,"type":"USER"},'
        '{"id":null,"toolName":"t","contents":[{"text":"r","type":"TEXT"}],"isError":false,'
        '"type":"TOOL_EXECUTION_RESULT"},{"text":null,"thinking":null,"toolExecutionRequests":null,"type":"AI"}]'
    )
    assert langchain4j.loads(raw) == [UserMessage("x"), ToolExecutionResultMessage(None, "t", "r"), AiMessage()]


@settings(max_examples=200, deadline=None)
@given(message_lists)
def test_round_trip_of_arbitrary_messages(messages: list[ChatMessage]) -> None:
    encoded = langchain4j.dumps(messages)
    assert langchain4j.loads(encoded) == messages
    assert langchain4j.loads(encoded.encode("utf-8")) == messages


BAD_INPUTS = [
    b"",
    b"\xff\xfe",
    "{",
    "null",
    '{"type":"SYSTEM","text":"x"}',
    "[1]",
    "[[]]",
    '[{"text":"x"}]',
    '[{"type":"ROBOT","text":"x"}]',
    '[{"type":"SYSTEM"}]',
    '[{"type":"SYSTEM","text":5}]',
    '[{"type":"SYSTEM","text":"x","extra":1}]',
    '[{"type":"USER","contents":[]}]',
    '[{"type":"USER","contents":"hi"}]',
    '[{"type":"USER","contents":[{"type":"TEXT"}]}]',
    '[{"type":"USER","contents":[{"type":"GIF","text":"x"}]}]',
    '[{"type":"USER","contents":[{"type":"IMAGE","image":{}}]}]',
    '[{"type":"USER","contents":[{"type":"IMAGE","image":"http://x"}]}]',
    '[{"type":"USER","contents":[{"type":"IMAGE","image":{"url":"u","revisedPrompt":"p"}}]}]',
    '[{"type":"USER","contents":[{"type":"PDF","pdf":{"url":"u"}}]}]',
    '[{"type":"USER","contents":[{"text":"x","type":"TEXT"}],"attributes":[]}]',
    '[{"type":"USER","contents":[{"text":"x","type":"TEXT"}],"name":7}]',
    '[{"type":"AI","toolExecutionRequests":[{"name":"f"}]}]',
    '[{"type":"AI","toolExecutionRequests":[{"name":"f","arguments":{}}]}]',
    '[{"type":"AI","toolExecutionRequests":[["f"]]}]',
    '[{"type":"AI","toolExecutionRequests":{}}]',
    '[{"type":"TOOL_EXECUTION_RESULT","toolName":"t"}]',
    '[{"type":"TOOL_EXECUTION_RESULT","toolName":"t","text":"a","contents":[{"text":"b","type":"TEXT"}]}]',
    '[{"type":"TOOL_EXECUTION_RESULT","toolName":"t","contents":[{"image":{"url":"u"},"type":"IMAGE"}]}]',
    '[{"type":"TOOL_EXECUTION_RESULT","toolName":"t","text":"a","isError":"yes"}]',
    '[{"type":"TOOL_EXECUTION_RESULT","text":"a"}]',
    '[{"type":"CUSTOM"}]',
    '[{"type":"CUSTOM","attributes":"x"}]',
]


@pytest.mark.parametrize("data", BAD_INPUTS)
def test_bad_input_raises_serialization_error(data: str | bytes) -> None:
    with pytest.raises(SerializationError) as caught:
        langchain4j.loads(data)
    assert not isinstance(caught.value, CorruptedMemoryError)
    with pytest.raises(CorruptedMemoryError, match="'chat-7'") as named:
        langchain4j.loads(data, memory_id="chat-7")
    assert named.value.memory_id == "chat-7"


@pytest.mark.parametrize("data", [None, 42, ["[]"], {"a": 1}])
def test_input_of_the_wrong_type_raises(data: Any) -> None:
    with pytest.raises(SerializationError):
        langchain4j.loads(data)


def test_unencodable_text_raises_serialization_error() -> None:
    with pytest.raises(SerializationError):
        langchain4j.dumps([SystemMessage("lone \ud800 surrogate")])


def test_dumps_rejects_what_is_not_a_message() -> None:
    with pytest.raises(SerializationError):
        langchain4j.dumps(["hello"])  # type: ignore[list-item]


def test_message_from_dict_and_to_dict_mirror_each_other() -> None:
    message = AiMessage("hi", [ToolExecutionRequest("c", "f", "{}")], thinking="t", attributes={"k": [1]})
    assert langchain4j.message_from_dict(langchain4j.message_to_dict(message)) == message
    with pytest.raises(SerializationError):
        langchain4j.message_from_dict({"type": "AI", "text": 1})
