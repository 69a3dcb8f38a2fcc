"""How the native format is read: one checking pass, no second check in constructors, named errors.

The current version is decoded straight into a typed schema and messages are built without their
constructors; everything else takes the checked path. These tests pin down that the two paths accept the
same payloads, that decoded messages cannot be told from constructed ones, and what errors name.
"""

from __future__ import annotations

import array
import dataclasses
import enum
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    ChatMessage,
    CorruptedMemoryError,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core.decoded_messages import freeze_attributes
from chatmemory.core.frozen import FrozenDict, FrozenList
from chatmemory.core.messages import MAX_ATTRIBUTE_DEPTH
from chatmemory.serialization import (
    dumps,
    dumps_message,
    loads,
    loads_message,
    message_from_dict,
    message_to_dict,
    native,
    native_schema,
)

from .golden_messages import PAYLOADS, RECORDS
from .strategies import json_values, message_lists, messages, texts

GOLDEN_V1 = Path(__file__).parent / "golden" / "v1"


def _refuse(*_: Any, **__: Any) -> None:
    raise AssertionError("a constructor ran on the decode path")


def test_decoding_builds_messages_without_running_their_constructors(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (UserMessage, AiMessage, ToolExecutionResultMessage, CustomMessage):
        monkeypatch.setattr(cls, "__init__", _refuse)
    for cls in (SystemMessage, TextContent, ImageContent, ToolExecutionRequest):
        monkeypatch.setattr(cls, "__post_init__", _refuse)
    for name, expected in PAYLOADS.items():
        assert loads((GOLDEN_V1 / f"{name}.json").read_bytes().strip()) == expected
    for name, expected in RECORDS.items():
        assert loads_message((GOLDEN_V1 / f"{name}.json").read_bytes().strip()) == expected


def _frozen_all_the_way(value: Any) -> bool:
    if isinstance(value, dict):
        return type(value) is FrozenDict and all(_frozen_all_the_way(item) for item in value.values())
    if isinstance(value, list):
        return type(value) is FrozenList and all(_frozen_all_the_way(item) for item in value)
    return True


@settings(max_examples=200, deadline=None)
@given(messages)
def test_decoded_messages_cannot_be_told_from_constructed_ones(message: ChatMessage) -> None:
    for decoded in (loads_message(dumps_message(message)), loads(dumps([message]))[0]):
        assert type(decoded) is type(message)
        assert repr(decoded) == repr(message)  # shows tuples vs lists, None vs "", every field
        assert hash(decoded) == hash(message)
        assert dataclasses.replace(decoded) == message
        for field in dataclasses.fields(decoded):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(decoded, field.name, None)
        if not isinstance(decoded, SystemMessage):
            assert _frozen_all_the_way(decoded.attributes)


# ------------------------------------------------------------------------------ how messages are built


class _Level(enum.IntEnum):
    LOW = 1


class _Key(str):
    """A str subclass: a key the constructors store as a plain str."""


_ATTRIBUTE_EDGES = st.sampled_from(
    [
        *(2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, True, False, None),
        *(0.5, -0.0, float("nan"), float("inf"), "x", _Level.LOW, [], {}, [[1]], {"a": {"b": 1}}, {1: 2}, object()),
    ]
)


def _outcome(freeze: Any, attributes: dict[Any, Any]) -> Any:
    try:
        frozen = freeze(attributes)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
    return type(frozen), repr(frozen), [(key, type(key), type(value)) for key, value in frozen.items()]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(texts | st.builds(_Key, texts), json_values | _ATTRIBUTE_EDGES, max_size=4))
def test_flat_attributes_are_frozen_as_the_constructors_freeze_them(attributes: dict[Any, Any]) -> None:
    # The decoder keeps flat scalar values as they are; anything else goes the constructors' way.
    assert _outcome(native_schema._attributes, attributes) == _outcome(freeze_attributes, attributes)


def test_attributes_a_decoder_sees_are_frozen_like_constructed_ones() -> None:
    attributes = {"n": 2**64 - 1, "b": True, "none": None, "s": "x", "level": _Level.LOW, _Key("k"): 1}
    record = {"type": "ai", "attributes": attributes}
    decoded = message_from_dict(record)
    assert repr(decoded) == repr(AiMessage(attributes=attributes))
    assert [type(key) for key in decoded.attributes] == [str] * 6  # type: ignore[union-attr]
    assert type(decoded.attributes["level"]) is int  # type: ignore[union-attr]
    with pytest.raises(CorruptedMemoryError, match="64-bit"):
        message_from_dict({"type": "ai", "attributes": {"n": 2**64}})


def test_a_message_class_with_its_own_setattr_gets_no_twin() -> None:
    # ImageContent derives from a frozen dataclass: a twin's attribute stores would be refused.
    with pytest.raises(TypeError, match="__setattr__"):
        native_schema._twin(ImageContent)


@pytest.mark.parametrize(
    "cls", [TextContent, SystemMessage, UserMessage, AiMessage, ToolExecutionRequest, ToolExecutionResultMessage]
)
def test_a_twin_is_laid_out_as_its_message_class(cls: type) -> None:
    twin = native_schema._twin(cls)
    assert twin.__slots__ == cls.__slots__ == tuple(field.name for field in dataclasses.fields(cls))
    assert twin.__bases__ == cls.__bases__


# ------------------------------------------------------------------------------------- what is refused

REFUSED_MESSAGES = [
    pytest.param({"type": "user", "contents": [{"type": "text", "text": "x"}], "attributes": None}, id="null-attrs"),
    pytest.param({"type": "ai", "tool_execution_requests": None}, id="null-requests"),
    pytest.param({"type": "ai", "text": None, "thinking": 1}, id="int-thinking"),
    pytest.param({"type": "ai", "attributes": {"n": 2**64}}, id="int-beyond-64-bits"),
    pytest.param({"type": "system", "text": "x", "v": 1}, id="record-key-in-a-list"),
    pytest.param({"type": "tool_result", "tool_name": "t", "text": "x", "is_error": None}, id="null-is-error"),
    pytest.param({"type": "user", "contents": [{"type": "video", "detail_level": "LOW", "url": "u"}]}, id="video"),
    pytest.param({"type": "user", "contents": [{"type": "pdf", "url": None, "base64_data": None}]}, id="no-data"),
]


@pytest.mark.parametrize("message", REFUSED_MESSAGES)
def test_a_bad_message_is_refused_naming_the_memory_and_its_position(message: dict[str, Any]) -> None:
    good = message_to_dict(SystemMessage("s"))
    # stdlib json: it writes integers of any size, which orjson refuses to.
    payload = json.dumps({"version": 1, "messages": [good, good, message]})
    with pytest.raises(CorruptedMemoryError, match=r"memory 'chat-7'.*message 2: ") as caught:
        loads(payload, memory_id="chat-7")
    assert caught.value.memory_id == "chat-7"
    if "v" not in message:  # as a record, that one is fine
        with pytest.raises(CorruptedMemoryError, match="'chat-7'"):
            loads_message(json.dumps({"v": 1, **message}), memory_id="chat-7")


@pytest.mark.parametrize(
    "message",
    [*REFUSED_MESSAGES, pytest.param({"type": "custom", "attributes": {"x": {"y": {1: 2}}}}, id="int-key")],
)
def test_message_from_dict_refuses_the_same(message: dict[str, Any]) -> None:
    with pytest.raises(CorruptedMemoryError):
        message_from_dict(message)


@pytest.mark.parametrize("literal", [b"NaN", b"-Infinity", b"Infinity", b"1e400", b"-1e999"])
def test_non_finite_numbers_are_refused(literal: bytes) -> None:
    payload = b'{"version":1,"messages":[{"type":"ai","attributes":{"x":' + literal + b"}}]}"
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        loads(payload, memory_id="m")
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        loads_message(b'{"v":1,"type":"ai","attributes":{"x":' + literal + b"}}", memory_id="m")


@pytest.mark.parametrize("version", [b"1.0", b"true", b'"1"', b"null", b"0", b"-1"])
def test_a_record_version_that_is_not_a_positive_int_is_refused(version: bytes) -> None:
    with pytest.raises(CorruptedMemoryError, match="format version"):
        loads_message(b'{"v":' + version + b',"type":"system","text":"x"}', memory_id="m")


def test_a_record_with_both_version_keys_is_refused() -> None:
    with pytest.raises(CorruptedMemoryError, match="version"):
        loads_message(b'{"v":1,"version":1,"type":"system","text":"x"}', memory_id="m")


# ---------------------------------------------------------------------- the two paths accept the same


def _checked(payload: bytes) -> list[ChatMessage]:
    # The checked path, as loads takes it for older versions and for anything the fast path refuses.
    return native._loads_checked(payload, "m")


_FIELD_NAMES = st.sampled_from(
    "type text contents name attributes thinking tool_execution_requests id tool_name is_error url base64_data "
    "mime_type detail_level arguments v extra".split()
)


@st.composite
def mutated_payloads(draw: st.DrawFn) -> bytes:
    """A valid payload with one field somewhere set to an arbitrary JSON value, or removed."""
    document = orjson.loads(dumps(draw(message_lists.filter(bool))))
    targets: list[dict[str, Any]] = []
    for message in document["messages"]:
        targets.append(message)
        targets.extend(part for part in message.get("contents", []) if isinstance(part, dict))
        targets.extend(message.get("tool_execution_requests", []))
    target = draw(st.sampled_from(targets))
    key = draw(st.sampled_from(sorted(target)) | _FIELD_NAMES)
    if draw(st.booleans()) and key in target:
        del target[key]
    else:
        target[key] = draw(json_values | texts)
    return orjson.dumps(document)


@settings(max_examples=300, deadline=None)
@given(mutated_payloads())
def test_the_fast_and_the_checked_path_agree(payload: bytes) -> None:
    try:
        fast: list[ChatMessage] | str = loads(payload, memory_id="m")
    except CorruptedMemoryError:
        fast = "refused"
    try:
        checked: list[ChatMessage] | str = _checked(payload)
    except CorruptedMemoryError:
        checked = "refused"
    assert fast == checked


# ---------------------------------------------------------------------------------------------- nesting


def _nested_json(depth: int) -> bytes:
    return b"[" * depth + b"1" + b"]" * depth


def test_attributes_at_the_depth_limit_round_trip() -> None:
    value: Any = 1
    for _ in range(MAX_ATTRIBUTE_DEPTH):
        value = [value]
    message = AiMessage("a", attributes={"deep": value})
    assert loads(dumps([message])) == [message]
    assert loads_message(dumps_message(message)) == message
    assert message_from_dict(message_to_dict(message)) == message


# 332 levels raised RecursionError before; orjson's parser stops at 1024, msgspec at the recursion limit.
@pytest.mark.parametrize("depth", [MAX_ATTRIBUTE_DEPTH + 1, 332, 1_000, 1_030, 5_000, 200_000])
def test_deeper_attributes_are_corruption_naming_the_memory_and_the_limit(depth: int) -> None:
    nested = _nested_json(depth)
    head = b'{"version":1,"messages":[{"type":"system","text":"s"},{"type":"ai","attributes":{"k":'
    payload = head + nested + b"}}]}"
    # Past orjson's 1024 levels the whole document is refused as JSON, before any message is looked at.
    where = "message 1: " if depth < 1_000 else ""
    with pytest.raises(CorruptedMemoryError, match=rf"'chat-3'.*{where}.*(levels deep|depth limit)"):
        loads(payload, memory_id="chat-3")
    record = b'{"v":1,"type":"custom","attributes":{"k":' + nested + b"}}"
    with pytest.raises(CorruptedMemoryError, match=r"'chat-3'.*(levels deep|depth limit)"):
        loads_message(record, memory_id="chat-3")


@pytest.mark.parametrize("depth", [MAX_ATTRIBUTE_DEPTH + 1, 332, 5_000])
def test_message_from_dict_refuses_deep_attributes(depth: int) -> None:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    with pytest.raises(CorruptedMemoryError, match=str(MAX_ATTRIBUTE_DEPTH)):
        message_from_dict({"type": "custom", "attributes": {"k": value}})


@pytest.mark.parametrize("depth", [332, 5_000, 200_000])
def test_deep_nesting_anywhere_else_is_corruption(depth: int) -> None:
    nested = _nested_json(depth)
    for payload in (
        b'{"version":1,"messages":' + nested + b"}",
        b'{"version":1,"messages":[{"type":"user","contents":' + nested + b"}]}",
        nested,
    ):
        with pytest.raises(CorruptedMemoryError, match="'m'"):
            loads(payload, memory_id="m")
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        loads_message(b'{"v":1,"type":"user","contents":' + nested + b"}", memory_id="m")


def test_a_low_recursion_limit_still_gives_corruption_not_recursion_error() -> None:
    record = b'{"v":1,"type":"custom","attributes":{"k":' + _nested_json(1_020) + b"}}"
    payload = b'{"version":1,"messages":[' + record.replace(b'"v":1,', b"") + b"]}"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 200)
    try:
        with pytest.raises(CorruptedMemoryError, match="levels deep"):
            loads_message(record, memory_id="m")
        with pytest.raises(CorruptedMemoryError, match="levels deep"):
            loads(payload, memory_id="m")
    finally:
        sys.setrecursionlimit(limit)


def test_other_buffers_are_not_payloads() -> None:
    record = array.array("B", dumps_message(SystemMessage("x")))
    with pytest.raises(CorruptedMemoryError, match="expected bytes or str, got array"):
        loads_message(record, memory_id="m")  # type: ignore[arg-type]
    with pytest.raises(CorruptedMemoryError, match="expected bytes or str, got array"):
        loads(array.array("B", dumps([SystemMessage("x")])), memory_id="m")  # type: ignore[arg-type]
