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
from chatmemory.serialization import from_openai, langchain4j

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


def _as_read_back(message: ChatMessage) -> ChatMessage:
    """What LangChain4j JSON gives back for ``message``: detail levels by name, PDFs with a MIME type."""
    if not isinstance(message, UserMessage):
        return message
    contents: list[Any] = []
    for part in message.contents:
        if isinstance(part, ImageContent):
            level = langchain4j.detail_level_name(part.detail_level)
            part = ImageContent(part.url, part.base64_data, part.mime_type, detail_level=level)
        elif isinstance(part, PdfFileContent) and part.mime_type is None:
            part = PdfFileContent(part.url, part.base64_data, "application/pdf")
        contents.append(part)
    return UserMessage(contents, name=message.name, attributes=message.attributes)


def _nameable(message: ChatMessage) -> bool:
    if not isinstance(message, UserMessage):
        return True
    return all(
        part.detail_level is None or part.detail_level.upper() in {*langchain4j.DETAIL_LEVELS, "ORIGINAL"}
        for part in message.contents
        if isinstance(part, ImageContent)
    )


@settings(max_examples=200, deadline=None)
@given(message_lists.map(lambda messages: [message for message in messages if _nameable(message)]))
def test_round_trip_of_arbitrary_messages(messages: list[ChatMessage]) -> None:
    encoded = langchain4j.dumps(messages)
    expected = [_as_read_back(message) for message in messages]
    assert langchain4j.loads(encoded) == expected
    assert langchain4j.loads(encoded.encode("utf-8")) == expected
    assert langchain4j.dumps(expected) == encoded


BAD_INPUTS = [
    b"",
    b"\xff\xfe",
    "{",
    '{"type":"SYSTEM","text":"x"}',
    "[1]",
    "[[]]",
    '[{"text":"x"}]',
    '[{"type":"ROBOT","text":"x"}]',
    '[{"type":"SYSTEM"}]',
    '[{"type":"SYSTEM","text":5}]',
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
    '[{"type":"USER","contents":[{"type":"IMAGE","image":{"url":"u"},"detailLevel":"ULTRA"}]}]',
    '[{"type":"USER","contents":[{"type":"IMAGE","image":{"url":"u"},"detailLevel":5}]}]',
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


# ------------------------------------------------------------------ what LangChain4j itself writes and reads


def _image_parts(encoded: str) -> list[dict[str, Any]]:
    return [
        part for message in orjson.loads(encoded) for part in message.get("contents", []) if part["type"] == "IMAGE"
    ]


def test_an_image_without_a_detail_level_is_written_as_low() -> None:
    """Issue 13.1: LangChain4j refuses an IMAGE without detailLevel; ImageContent.from(url) means LOW."""
    by_url = ImageContent(url="https://ex.com/a.png")
    inline = ImageContent(base64_data="aGVsbG8=", mime_type="image/png")
    [from_chat_completions] = _from_openai_image("https://ex.com/a.png")
    encoded = langchain4j.dumps([UserMessage([by_url, inline]), UserMessage([from_chat_completions])])
    assert _image_parts(encoded) == [
        {"image": {"url": "https://ex.com/a.png"}, "detailLevel": "LOW", "type": "IMAGE"},
        {"image": {"base64Data": "aGVsbG8=", "mimeType": "image/png"}, "detailLevel": "LOW", "type": "IMAGE"},
        {"image": {"url": "https://ex.com/a.png"}, "detailLevel": "LOW", "type": "IMAGE"},
    ]
    assert langchain4j.loads(encoded)[0] == UserMessage(
        [
            ImageContent(url="https://ex.com/a.png", detail_level="LOW"),
            ImageContent(base64_data="aGVsbG8=", mime_type="image/png", detail_level="LOW"),
        ]
    )


def _from_openai_image(url: str) -> list[ImageContent]:
    """The image part ``from_openai`` makes of the most common Chat Completions image."""
    [message] = from_openai([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}])
    assert isinstance(message, UserMessage)
    return [part for part in message.contents if isinstance(part, ImageContent)]


@pytest.mark.parametrize(
    ("foreign", "name"),
    [
        ("low", "LOW"),
        ("medium", "MEDIUM"),
        ("High", "HIGH"),
        ("auto", "AUTO"),
        ("ultra_high", "ULTRA_HIGH"),
        ("ORIGINAL", "ULTRA_HIGH"),
        ("original", "ULTRA_HIGH"),
    ],
)
def test_foreign_detail_levels_map_to_langchain4j_names_both_ways(foreign: str, name: str) -> None:
    """Issue 13.2: one mapping, used when writing and when reading."""
    written = langchain4j.dumps([UserMessage([ImageContent(url="https://ex.com/a.png", detail_level=foreign)])])
    assert _image_parts(written)[0]["detailLevel"] == name
    read = langchain4j.loads(
        f'[{{"contents":[{{"image":{{"url":"u"}},"detailLevel":"{foreign}","type":"IMAGE"}}],"type":"USER"}}]'
    )
    assert read == [UserMessage([ImageContent(url="u", detail_level=name)])]


def test_a_detail_level_without_a_langchain4j_name_is_refused_on_write() -> None:
    with pytest.raises(SerializationError, match=r"'ULTRA'.*LOW, MEDIUM, HIGH, AUTO, ULTRA_HIGH"):
        langchain4j.dumps([UserMessage([ImageContent(url="u", detail_level="ULTRA")])])


@pytest.mark.parametrize(
    "raw",
    [
        '[{"contents":[{"text":"sunny","type":"TEXT"}],"attributes":{},"type":"TOOL_EXECUTION_RESULT"}]',
        '[{"text":"sunny","attributes":{},"type":"TOOL_EXECUTION_RESULT"}]',
    ],
)
def test_a_tool_result_without_id_or_tool_name(raw: str) -> None:
    """Issue 13.3: LangChain4j's own test writes the first form, older versions the second."""
    [message] = langchain4j.loads(raw)
    assert message == ToolExecutionResultMessage(None, None, "sunny")
    assert orjson.loads(langchain4j.dumps([message])) == [
        {"contents": [{"text": "sunny", "type": "TEXT"}], "attributes": {}, "type": "TOOL_EXECUTION_RESULT"}
    ]


def test_null_reads_as_no_messages() -> None:
    """Issue 13.4: LangChain4j's messagesFromJson("null") is an empty list."""
    assert langchain4j.loads("null") == []
    assert langchain4j.loads(b"null", memory_id="chat-7") == []


def test_a_pdf_without_mime_type_reads_as_application_pdf() -> None:
    """Issue 13.5: LangChain4j's PdfFile fills in application/pdf."""
    raw = '[{"contents":[{"pdfFile":{"base64Data":"JVBERi0="},"type":"PDF"}],"type":"USER"}]'
    assert langchain4j.loads(raw) == [UserMessage(PdfFileContent(base64_data="JVBERi0=", mime_type="application/pdf"))]


def test_unknown_fields_are_ignored() -> None:
    """Issue 13.6: a newer LangChain4j adding fields (anywhere) must still load; the fields are not kept."""
    raw = (
        '[{"text":"x","priority":1,"type":"SYSTEM"},'
        '{"contents":[{"text":"t","lang":"de","type":"TEXT"},'
        '{"image":{"url":"u","width":3},"detailLevel":"HIGH","crop":{},"type":"IMAGE"}],"future":[1],"type":"USER"},'
        '{"text":"a","toolExecutionRequests":[{"id":"c","name":"f","arguments":"{}","kind":"x"}],'
        '"attributes":{},"usage":{"tokens":3},"type":"AI"},'
        '{"id":"c","toolName":"f","contents":[{"text":"r","type":"TEXT"}],"durationMs":5,"type":"TOOL_EXECUTION_RESULT"},'
        '{"attributes":{"k":1},"origin":"y","type":"CUSTOM"}]'
    )
    expected: list[ChatMessage] = [
        SystemMessage("x"),
        UserMessage([TextContent("t"), ImageContent(url="u", detail_level="HIGH")]),
        AiMessage("a", [ToolExecutionRequest("c", "f", "{}")]),
        ToolExecutionResultMessage("c", "f", "r"),
        CustomMessage({"k": 1}),
    ]
    assert langchain4j.loads(raw) == expected
    assert "priority" not in langchain4j.dumps(expected)


def test_fields_langchain4j_defines_but_chatmemory_cannot_hold_still_raise() -> None:
    raw = '[{"contents":[{"image":{"url":"u","revisedPrompt":"p"},"detailLevel":"LOW","type":"IMAGE"}],"type":"USER"}]'
    with pytest.raises(SerializationError, match="revisedPrompt"):
        langchain4j.loads(raw)
