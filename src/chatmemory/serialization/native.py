"""chatmemory's own JSON format, versioned.

Two payload shapes, both JSON written by orjson:

* a list of messages: ``{"version": 1, "messages": [<message>, ...]}`` — :func:`dumps` / :func:`loads`;
* one message (what stores that keep a row or list element per message persist):
  ``{"v": 1, <message fields>}`` — :func:`dumps_message` / :func:`loads_message`.

A ``<message>`` is an object with a ``"type"`` (``system``, ``user``, ``ai``, ``tool_result``, ``custom``)
and the message's fields; fields at their default value are left out. Every string is kept exactly,
tool-call ``arguments`` byte for byte. Readers upgrade older format versions (see
:mod:`chatmemory.serialization.upgrades`); writers write only :data:`FORMAT_VERSION`; a newer version
raises :class:`~chatmemory.UnsupportedFormatVersionError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from chatmemory.core.errors import CorruptedMemoryError, SerializationError, UnsupportedFormatVersionError
from chatmemory.core.messages import (
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from chatmemory.serialization import upgrades
from chatmemory.serialization.upgrades import FORMAT_VERSION, upgrade_message

__all__ = [
    "FORMAT_VERSION",
    "dumps",
    "dumps_message",
    "loads",
    "loads_message",
    "message_from_dict",
    "message_to_dict",
]

_MEDIA_TYPES: dict[str, type[ImageContent | AudioContent | VideoContent | PdfFileContent]] = {
    "image": ImageContent,
    "audio": AudioContent,
    "video": VideoContent,
    "pdf": PdfFileContent,
}
_MEDIA_NAMES = {cls: name for name, cls in _MEDIA_TYPES.items()}


# ----------------------------------------------------------------------------------------------- encode


def _content_to_dict(part: Content) -> dict[str, Any]:
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text}
    data: dict[str, Any] = {"type": _MEDIA_NAMES[type(part)]}
    if part.url is not None:
        data["url"] = part.url
    if part.base64_data is not None:
        data["base64_data"] = part.base64_data
    if part.mime_type is not None:
        data["mime_type"] = part.mime_type
    if isinstance(part, ImageContent) and part.detail_level is not None:
        data["detail_level"] = part.detail_level
    return data


def message_to_dict(message: ChatMessage) -> dict[str, Any]:
    """The JSON object of ``message`` in the current format (without a version key)."""
    data: dict[str, Any]
    if isinstance(message, UserMessage):
        data = {"type": "user", "contents": [_content_to_dict(part) for part in message.contents]}
        if message.name is not None:
            data["name"] = message.name
    elif isinstance(message, AiMessage):
        data = {"type": "ai"}
        if message.text is not None:
            data["text"] = message.text
        if message.thinking is not None:
            data["thinking"] = message.thinking
        if message.tool_execution_requests:
            data["tool_execution_requests"] = [
                {"id": request.id, "name": request.name, "arguments": request.arguments}
                for request in message.tool_execution_requests
            ]
    elif isinstance(message, ToolExecutionResultMessage):
        data = {"type": "tool_result", "id": message.id, "tool_name": message.tool_name, "text": message.text}
        if message.is_error:
            data["is_error"] = True
    elif isinstance(message, SystemMessage):
        return {"type": "system", "text": message.text}
    elif isinstance(message, CustomMessage):
        return {"type": "custom", "attributes": message.attributes}
    else:
        raise SerializationError(f"cannot serialize a {type(message).__name__}: it is not a chat message")
    if message.attributes:
        data["attributes"] = message.attributes
    return data


def _encode(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise SerializationError(f"messages could not be encoded as JSON: {exc}") from exc


def dumps(messages: Iterable[ChatMessage]) -> bytes:
    """Encode a list of messages as a versioned JSON payload."""
    return _encode({"version": upgrades.FORMAT_VERSION, "messages": [message_to_dict(message) for message in messages]})


def dumps_message(message: ChatMessage) -> bytes:
    """Encode one message as a versioned JSON payload (``{"v": 1, ...}``)."""
    return _encode({"v": upgrades.FORMAT_VERSION, **message_to_dict(message)})


# ----------------------------------------------------------------------------------------------- decode


class _Invalid(Exception):
    """A payload field is missing or of the wrong type (turned into CorruptedMemoryError by the caller)."""


def _field(data: dict[str, Any], key: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
    if key not in data:
        if required:
            raise _Invalid(f"{data.get('type', 'message')!s} lacks the field {key!r}")
        return None
    value = data[key]
    if not isinstance(value, kind):
        raise _Invalid(f"field {key!r} of a {data.get('type', 'message')!s} message holds a {type(value).__name__}")
    return value


def _only(data: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = data.keys() - allowed
    if unknown:
        raise _Invalid(f"{data.get('type')!s} message has unknown fields {sorted(unknown)}")


_STR_OR_NONE = (str, type(None))
_CONTENT_KEYS = {
    "text": frozenset({"type", "text"}),
    "image": frozenset({"type", "url", "base64_data", "mime_type", "detail_level"}),
}
_MEDIA_KEYS = frozenset({"type", "url", "base64_data", "mime_type"})
_MESSAGE_KEYS = {
    "system": frozenset({"type", "text"}),
    "user": frozenset({"type", "contents", "name", "attributes"}),
    "ai": frozenset({"type", "text", "thinking", "tool_execution_requests", "attributes"}),
    "tool_result": frozenset({"type", "id", "tool_name", "text", "is_error", "attributes"}),
    "custom": frozenset({"type", "attributes"}),
}


def _content_from_dict(data: Any) -> Content:
    if not isinstance(data, dict):
        raise _Invalid(f"a content part is a {type(data).__name__}, not an object")
    kind = data.get("type")
    if kind == "text":
        _only(data, _CONTENT_KEYS["text"])
        return TextContent(_field(data, "text", str))
    media = _MEDIA_TYPES.get(kind) if isinstance(kind, str) else None
    if media is None:
        raise _Invalid(f"unknown content type {kind!r}")
    _only(data, _CONTENT_KEYS["image"] if media is ImageContent else _MEDIA_KEYS)
    fields = {key: _field(data, key, _STR_OR_NONE, required=False) for key in ("url", "base64_data", "mime_type")}
    if media is ImageContent:
        return ImageContent(**fields, detail_level=_field(data, "detail_level", _STR_OR_NONE, required=False))
    return media(**fields)


def message_from_dict(data: Any) -> ChatMessage:
    """Build a message from its JSON object in the current format.

    Raises:
        CorruptedMemoryError: the object is not a valid message.
    """
    try:
        return _message_from_dict(data)
    except (_Invalid, TypeError, ValueError) as exc:
        raise CorruptedMemoryError(None, str(exc)) from None


def _message_from_dict(data: Any) -> ChatMessage:
    if not isinstance(data, dict):
        raise _Invalid(f"a message is a {type(data).__name__}, not an object")
    kind = data.get("type")
    allowed = _MESSAGE_KEYS.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        raise _Invalid(f"unknown message type {kind!r}")
    _only(data, allowed)
    attributes = _field(data, "attributes", dict, required=False)
    if kind == "system":
        return SystemMessage(_field(data, "text", str))
    if kind == "user":
        contents = _field(data, "contents", list)
        return UserMessage(
            [_content_from_dict(part) for part in contents],
            name=_field(data, "name", _STR_OR_NONE, required=False),
            attributes=attributes,
        )
    if kind == "ai":
        requests = []
        for request in _field(data, "tool_execution_requests", list, required=False) or ():
            if not isinstance(request, dict):
                raise _Invalid(f"a tool execution request is a {type(request).__name__}, not an object")
            _only(request, frozenset({"id", "name", "arguments"}))
            requests.append(
                ToolExecutionRequest(
                    id=_field(request, "id", _STR_OR_NONE, required=False),
                    name=_field(request, "name", str),
                    arguments=_field(request, "arguments", str),
                )
            )
        return AiMessage(
            text=_field(data, "text", _STR_OR_NONE, required=False),
            tool_execution_requests=requests,
            thinking=_field(data, "thinking", _STR_OR_NONE, required=False),
            attributes=attributes,
        )
    if kind == "tool_result":
        return ToolExecutionResultMessage(
            id=_field(data, "id", _STR_OR_NONE, required=False),
            tool_name=_field(data, "tool_name", _STR_OR_NONE),
            text=_field(data, "text", str),
            is_error=bool(_field(data, "is_error", bool, required=False)),
            attributes=attributes,
        )
    return CustomMessage(_field(data, "attributes", dict))


def _parse(data: bytes | bytearray | memoryview | str, memory_id: str | None) -> Any:
    if not isinstance(data, (bytes, bytearray, memoryview, str)):
        raise CorruptedMemoryError(memory_id, f"expected bytes or str, got {type(data).__name__}")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptedMemoryError(memory_id, f"not valid JSON ({exc})") from None


def _check_version(version: Any, memory_id: str | None) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CorruptedMemoryError(memory_id, f"the format version is {version!r}, not a positive integer")
    # Looked up on the module at call time, so the one definition in upgrades.py is the only one.
    if version > upgrades.FORMAT_VERSION:
        raise UnsupportedFormatVersionError(memory_id, version, upgrades.FORMAT_VERSION)
    return version


def _decode(data: Any, version: int, memory_id: str | None, position: int | None = None) -> ChatMessage:
    try:
        return _message_from_dict(upgrade_message(data, version))
    # An upgrader reads a message object that may itself be broken; whatever it trips over is corruption.
    except (_Invalid, TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        where = f"message {position}: " if position is not None else ""
        raise CorruptedMemoryError(memory_id, f"{where}{exc}") from None


def loads(data: bytes | bytearray | memoryview | str, *, memory_id: str | None = None) -> list[ChatMessage]:
    """Decode a payload written by :func:`dumps` (of this or an older format version).

    Args:
        data: the payload.
        memory_id: named in errors, so the operator knows which memory to look at.

    Raises:
        CorruptedMemoryError: the payload is not valid.
        UnsupportedFormatVersionError: the payload was written by a newer format version.
    """
    document = _parse(data, memory_id)
    if not isinstance(document, dict) or document.keys() != {"version", "messages"}:
        raise CorruptedMemoryError(
            memory_id, "not a chatmemory payload (expected an object with exactly the keys version and messages)"
        )
    version = _check_version(document["version"], memory_id)
    messages = document["messages"]
    if not isinstance(messages, list):
        raise CorruptedMemoryError(memory_id, "'messages' is not a list")
    return [_decode(item, version, memory_id, position) for position, item in enumerate(messages)]


def loads_message(data: bytes | bytearray | memoryview | str, *, memory_id: str | None = None) -> ChatMessage:
    """Decode one message written by :func:`dumps_message` (of this or an older format version).

    Raises:
        CorruptedMemoryError: the payload is not valid.
        UnsupportedFormatVersionError: the payload was written by a newer format version.
    """
    document = _parse(data, memory_id)
    if not isinstance(document, dict) or "v" not in document:
        raise CorruptedMemoryError(memory_id, "not a chatmemory message payload (expected an object with 'v')")
    version = _check_version(document.pop("v"), memory_id)
    return _decode(document, version, memory_id)
