"""The native, versioned format: frozen golden files, bad input, round trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings

from chatmemory import (
    AiMessage,
    ChatMessage,
    CorruptedMemoryError,
    SerializationError,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UnsupportedFormatVersionError,
    UserMessage,
)
from chatmemory.serialization import (
    FORMAT_VERSION,
    dumps,
    dumps_message,
    loads,
    loads_message,
    message_from_dict,
    message_to_dict,
)

from .golden_messages import PAYLOADS, RECORDS
from .strategies import message_lists, messages

GOLDEN = Path(__file__).parent / "golden"


def _golden(version: int, name: str) -> bytes:
    return (GOLDEN / f"v{version}" / f"{name}.json").read_bytes().removesuffix(b"\n")


def test_every_golden_file_is_checked() -> None:
    assert {path.stem for path in (GOLDEN / "v1").glob("*.json")} == set(PAYLOADS) | set(RECORDS)


# ------------------------------------------------------------------------------------------ golden files


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_golden_payload_loads_to_the_messages(name: str) -> None:
    raw = _golden(1, name)
    assert loads(raw) == PAYLOADS[name]
    assert loads(raw.decode("utf-8")) == PAYLOADS[name]
    assert loads(bytearray(raw)) == PAYLOADS[name]
    assert loads(memoryview(raw)) == PAYLOADS[name]


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_dumps_reproduces_the_golden_payload(name: str) -> None:
    assert FORMAT_VERSION == 1, "a new format version needs golden files of its own; v1's stay as they are"
    written = dumps(PAYLOADS[name])
    assert orjson.loads(written) == orjson.loads(_golden(1, name))
    assert written == _golden(1, name)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_golden_record_loads_to_the_message(name: str) -> None:
    raw = _golden(1, name)
    assert loads_message(raw) == RECORDS[name]
    assert loads_message(raw.decode("utf-8")) == RECORDS[name]
    assert dumps_message(RECORDS[name]) == raw


def test_golden_arguments_are_byte_identical() -> None:
    [_, _, ai, *_] = loads(_golden(1, "conversation"))
    assert isinstance(ai, AiMessage)
    assert [request.arguments.encode("utf-8") for request in ai.tool_execution_requests] == [
        b'{ "city" : "\xe5\x8c\x97\xe4\xba\xac",\n  "unit":"celsius" }',
        b'{"city":"M\\u00fcnchen","x":1.0e0,"y":[ ]}',
        b'not json at all \x00 {{"',
        b"",
    ]


def test_defaults_are_left_out_and_tool_result_ids_are_kept() -> None:
    assert orjson.loads(dumps([UserMessage("hi"), AiMessage("a")])) == {
        "version": 1,
        "messages": [{"type": "user", "contents": [{"type": "text", "text": "hi"}]}, {"type": "ai", "text": "a"}],
    }
    assert message_to_dict(AiMessage(tool_execution_requests=[ToolExecutionRequest(None, "f", "")])) == {
        "type": "ai",
        "tool_execution_requests": [{"id": None, "name": "f", "arguments": ""}],
    }


# --------------------------------------------------------------------------------------------- versions


@pytest.mark.parametrize("newer", [FORMAT_VERSION + 1, 99, 2**62])
def test_newer_payload_raises_unsupported_version_naming_the_memory(newer: int) -> None:
    payload = orjson.dumps({"version": newer, "messages": []})
    with pytest.raises(UnsupportedFormatVersionError, match="'chat-42'") as caught:
        loads(payload, memory_id="chat-42")
    assert (caught.value.memory_id, caught.value.version, caught.value.supported) == ("chat-42", newer, FORMAT_VERSION)
    with pytest.raises(UnsupportedFormatVersionError) as unnamed:
        loads(payload)
    assert unnamed.value.memory_id is None


def test_newer_record_raises_unsupported_version_naming_the_memory() -> None:
    record = orjson.dumps({"v": FORMAT_VERSION + 1, "type": "system", "text": "x", "new_field": 1})
    with pytest.raises(UnsupportedFormatVersionError, match="'chat-42'") as caught:
        loads_message(record, memory_id="chat-42")
    assert caught.value.version == FORMAT_VERSION + 1


# ------------------------------------------------------------------------------------------- bad input

BAD_PAYLOADS: list[Any] = [
    b"",
    b"\x00\x01garbage",
    b"\xff\xfe\xfd",
    "not json",
    '{"version": 1, "messages": [',
    '"\ud800"',
    "null",
    "[]",
    "42",
    '{"messages": []}',
    '{"version": 1}',
    '{"version": 1, "messages": [], "extra": true}',
    '{"version": "1", "messages": []}',
    '{"version": 1.0, "messages": []}',
    '{"version": true, "messages": []}',
    '{"version": 0, "messages": []}',
    '{"version": -3, "messages": []}',
    '{"version": null, "messages": []}',
    '{"version": 1, "messages": {}}',
    '{"version": 1, "messages": "abc"}',
    '{"version": 1, "messages": [null]}',
    '{"version": 1, "messages": [[]]}',
    '{"version": 1, "messages": [{}]}',
    '{"version": 1, "messages": [{"type": "robot"}]}',
    '{"version": 1, "messages": [{"type": "SYSTEM", "text": "x"}]}',
    '{"version": 1, "messages": [{"type": 1}]}',
    '{"version": 1, "messages": [{"type": "system"}]}',
    '{"version": 1, "messages": [{"type": "system", "text": null}]}',
    '{"version": 1, "messages": [{"type": "system", "text": 5}]}',
    '{"version": 1, "messages": [{"type": "system", "text": "x", "attributes": {}}]}',
    '{"version": 1, "messages": [{"type": "system", "text": "x", "surprise": 1}]}',
    '{"version": 1, "messages": [{"type": "user"}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": []}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": "hi"}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": {"type": "text", "text": "x"}}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "text"}]}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "text", "text": 1}]}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "gif", "url": "u"}]}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "image"}]}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "image", "url": 3}]}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "audio", "url": "u", "detail_level": ""}]}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "text", "text": "x", "url": "u"}]}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": ["x"]}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "text", "text": "x"}], "name": 7}]}',
    '{"version": 1, "messages": [{"type": "user", "contents": [{"type": "text", "text": "x"}], "attributes": []}]}',
    '{"version": 1, "messages": [{"type": "ai", "text": 1}]}',
    '{"version": 1, "messages": [{"type": "ai", "thinking": ["x"]}]}',
    '{"version": 1, "messages": [{"type": "ai", "tool_execution_requests": {}}]}',
    '{"version": 1, "messages": [{"type": "ai", "tool_execution_requests": ["call"]}]}',
    '{"version": 1, "messages": [{"type": "ai", "tool_execution_requests": [{"name": "f"}]}]}',
    '{"version": 1, "messages": [{"type": "ai", "tool_execution_requests": [{"name": "f", "arguments": {}}]}]}',
    '{"version": 1, "messages": [{"type": "ai", "tool_execution_requests": [{"id": 1, "name": "f","arguments":""}]}]}',
    '{"version": 1, "messages": [{"type": "ai", "tool_execution_requests": [{"name": "f", "arguments": "", "x": 1}]}]}',
    '{"version": 1, "messages": [{"type": "tool_result", "tool_name": "t"}]}',
    '{"version": 1, "messages": [{"type": "tool_result", "text": "t"}]}',
    '{"version": 1, "messages": [{"type": "tool_result", "tool_name": "t", "text": "x", "is_error": 1}]}',
    '{"version": 1, "messages": [{"type": "tool_result", "tool_name": "t", "text": "x", "is_error": "true"}]}',
    '{"version": 1, "messages": [{"type": "custom"}]}',
    '{"version": 1, "messages": [{"type": "custom", "attributes": null}]}',
    '{"version": 1, "messages": [{"type": "custom", "attributes": [1]}]}',
]


@pytest.mark.parametrize("data", BAD_PAYLOADS)
def test_bad_payload_raises_corrupted_memory_naming_the_id(data: str | bytes) -> None:
    with pytest.raises(CorruptedMemoryError, match="'chat-9'") as caught:
        loads(data, memory_id="chat-9")
    assert caught.value.memory_id == "chat-9"
    assert caught.value.__cause__ is None or isinstance(caught.value.__cause__, SerializationError)


@pytest.mark.parametrize("data", BAD_PAYLOADS)
def test_bad_payload_raises_corrupted_memory_without_an_id(data: str | bytes) -> None:
    with pytest.raises(CorruptedMemoryError) as caught:
        loads(data)
    assert caught.value.memory_id is None


def _record(payload: str) -> bytes:
    """The single-message record holding the one (bad) message of a ``{"version": 1, "messages": [m]}`` payload."""
    [message] = orjson.loads(payload)["messages"]
    return orjson.dumps({"v": 1, **message})


BAD_RECORDS: list[Any] = [
    b"",
    b"\xff",
    "{",
    "[]",
    '"text"',
    '{"type": "system", "text": "x"}',
    '{"v": "1", "type": "system", "text": "x"}',
    '{"v": 0, "type": "system", "text": "x"}',
    '{"v": null, "type": "system", "text": "x"}',
    '{"v": 1}',
    *(_record(payload) for payload in BAD_PAYLOADS if isinstance(payload, str) and '"messages": [{' in payload),
]


@pytest.mark.parametrize("data", BAD_RECORDS)
def test_bad_record_raises_corrupted_memory_naming_the_id(data: str | bytes) -> None:
    with pytest.raises(CorruptedMemoryError, match="'chat-9'"):
        loads_message(data, memory_id="chat-9")


@pytest.mark.parametrize("data", [None, 42, 1.5, ["a"], {"version": 1, "messages": []}])
def test_input_of_the_wrong_type_raises_corrupted_memory(data: Any) -> None:
    with pytest.raises(CorruptedMemoryError):
        loads(data, memory_id="m")
    with pytest.raises(CorruptedMemoryError):
        loads_message(data, memory_id="m")


@pytest.mark.parametrize("data", [None, [], "x", {"type": "robot"}, {"type": "system", "text": 1}])
def test_message_from_dict_raises_corrupted_memory(data: Any) -> None:
    with pytest.raises(CorruptedMemoryError):
        message_from_dict(data)


def test_text_json_cannot_carry_raises_serialization_error() -> None:
    # A lone surrogate is a valid Python str but has no UTF-8 form, so no JSON writer can store it.
    for broken in (SystemMessage("\ud800"), AiMessage(attributes={"k": "\udfff"})):
        with pytest.raises(SerializationError):
            dumps([broken])
        with pytest.raises(SerializationError):
            dumps_message(broken)


class _TaggedUserMessage(UserMessage):
    """An application's subclass: encoded as the message type it derives from."""


def test_a_subclass_of_a_message_type_is_encoded_as_that_type() -> None:
    message = _TaggedUserMessage("hi", attributes={"k": 1})
    assert message_to_dict(message) == message_to_dict(UserMessage("hi", attributes={"k": 1}))
    assert dumps([message]) == dumps([UserMessage("hi", attributes={"k": 1})])
    assert dumps_message(message) == dumps_message(UserMessage("hi", attributes={"k": 1}))


def test_dumps_rejects_what_is_not_a_message() -> None:
    with pytest.raises(SerializationError):
        dumps(["hello"])  # type: ignore[list-item]
    with pytest.raises(SerializationError):
        dumps_message({"type": "system", "text": "x"})  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ round trips


@settings(max_examples=200, deadline=None)
@given(message_lists)
def test_dumps_loads_round_trip(items: list[ChatMessage]) -> None:
    written = dumps(items)
    assert loads(written) == items
    assert loads(written.decode("utf-8")) == items
    assert dumps(loads(written)) == written


@settings(max_examples=200, deadline=None)
@given(messages)
def test_dumps_message_loads_message_round_trip(message: ChatMessage) -> None:
    record = dumps_message(message)
    assert loads_message(record, memory_id="m") == message
    assert loads_message(record.decode("utf-8")) == message
    assert message_from_dict(message_to_dict(message)) == message


@settings(max_examples=200, deadline=None)
@given(message_lists)
def test_payloads_and_records_hold_exactly_the_message_objects(items: list[ChatMessage]) -> None:
    # dumps and dumps_message write the commonest messages inline; this holds them to message_to_dict.
    plain = [message_to_dict(message) for message in items]
    assert dumps(items) == orjson.dumps({"version": FORMAT_VERSION, "messages": plain})
    assert dumps(iter(items)) == dumps(items)
    for message, data in zip(items, plain, strict=True):
        assert dumps_message(message) == orjson.dumps({"v": FORMAT_VERSION, **data})


@pytest.mark.parametrize(
    "message",
    [
        UserMessage("hi"),
        UserMessage("hi", name="n"),
        UserMessage("hi", attributes={"k": 1}),
        UserMessage(["a", "b"]),
        AiMessage(),
        AiMessage(""),
        AiMessage("a", thinking="t"),
        AiMessage("a", attributes={"k": 1}),
        AiMessage(tool_execution_requests=[ToolExecutionRequest("i", "f", "{}")]),
    ],
    ids=repr,
)
def test_each_shape_of_the_commonest_messages_is_written_as_message_to_dict_says(message: ChatMessage) -> None:
    data = message_to_dict(message)
    assert dumps([message]) == orjson.dumps({"version": FORMAT_VERSION, "messages": [data]})
    assert dumps_message(message) == orjson.dumps({"v": FORMAT_VERSION, **data})
    assert loads(dumps([message])) == [message]
    assert loads_message(dumps_message(message)) == message


def test_a_tool_result_without_a_tool_name_round_trips_and_the_field_stays_required() -> None:
    message = ToolExecutionResultMessage(None, None, "sunny")
    encoded = dumps([message])
    assert orjson.loads(encoded)["messages"][0]["tool_name"] is None
    assert loads(encoded) == [message]
    with pytest.raises(SerializationError):
        loads('{"version": 1, "messages": [{"type": "tool_result", "text": "x"}]}')
