"""LangChain4j's ``ChatMessageSerializer`` JSON, read and written.

:func:`dumps` writes what LangChain4j's Jackson codec writes (``ChatMessageSerializer.messagesToJson``): a
bare JSON array of message objects typed ``SYSTEM``, ``USER``, ``AI``, ``TOOL_EXECUTION_RESULT`` or
``CUSTOM``; :func:`loads` reads it back. Tool-call ``arguments`` pass through byte for byte; image detail
levels map to LangChain4j's ``DetailLevel`` (none is ``LOW``, ``ORIGINAL`` is ``ULTRA_HIGH``). Reading
ignores fields it does not know and raises on data it would lose. Errors are
:class:`~chatmemory.SerializationError`, or :class:`~chatmemory.CorruptedMemoryError` naming the memory
when ``loads`` is given a ``memory_id``.

The shape, the detail-level mapping and the reading rules: docs/converters.md, *LangChain4j JSON*.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from chatmemory.core.errors import CorruptedMemoryError, SerializationError
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

__all__ = ["DETAIL_LEVELS", "detail_level_name", "dumps", "loads", "message_from_dict", "message_to_dict"]

DETAIL_LEVELS = ("LOW", "MEDIUM", "HIGH", "AUTO", "ULTRA_HIGH")
"""LangChain4j's ``ImageContent.DetailLevel`` names, exactly."""
_DEFAULT_DETAIL_LEVEL = "LOW"
_FOREIGN_DETAIL_LEVELS = {"ORIGINAL": "ULTRA_HIGH"}
_DEFAULT_PDF_MIME_TYPE = "application/pdf"

# LangChain4j content type -> (our class, the key of the nested media object).
_MEDIA: dict[str, tuple[type[ImageContent | AudioContent | VideoContent | PdfFileContent], str]] = {
    "IMAGE": (ImageContent, "image"),
    "AUDIO": (AudioContent, "audio"),
    "VIDEO": (VideoContent, "video"),
    "PDF": (PdfFileContent, "pdfFile"),
}
_MEDIA_BY_CLASS = {cls: (kind, key) for kind, (cls, key) in _MEDIA.items()}


# ----------------------------------------------------------------------------------------------- encode


def detail_level_name(detail_level: str | None) -> str:
    """The LangChain4j ``DetailLevel`` name for a detail level (see the module docs for the mapping).

    Raises:
        SerializationError: ``detail_level`` names no LangChain4j level and has no mapping to one.
    """
    if detail_level is None:
        return _DEFAULT_DETAIL_LEVEL
    name = detail_level.upper()
    if name in DETAIL_LEVELS:
        return name
    mapped = _FOREIGN_DETAIL_LEVELS.get(name)
    if mapped is None:
        raise SerializationError(
            f"image detail level {detail_level!r} has no LangChain4j name; use one of {', '.join(DETAIL_LEVELS)} "
            "(or ORIGINAL, written as ULTRA_HIGH)"
        )
    return mapped


def _media_to_dict(part: ImageContent | AudioContent | VideoContent | PdfFileContent) -> dict[str, Any]:
    kind, key = _MEDIA_BY_CLASS[type(part)]
    media: dict[str, Any] = {}
    if part.url is not None:
        media["url"] = part.url
    if part.base64_data is not None:
        media["base64Data"] = part.base64_data
    if part.mime_type is not None:
        media["mimeType"] = part.mime_type
    elif isinstance(part, PdfFileContent):
        media["mimeType"] = _DEFAULT_PDF_MIME_TYPE  # what LangChain4j's PdfFile holds and writes
    data: dict[str, Any] = {key: media}
    if isinstance(part, ImageContent):
        data["detailLevel"] = detail_level_name(part.detail_level)
    data["type"] = kind
    return data


def _content_to_dict(part: Content) -> dict[str, Any]:
    if isinstance(part, TextContent):
        return {"text": part.text, "type": "TEXT"}
    return _media_to_dict(part)


def message_to_dict(message: ChatMessage) -> dict[str, Any]:
    """The LangChain4j JSON object of one message (keys in the order LangChain4j writes them).

    Raises:
        SerializationError: ``message`` is not a chat message, or holds an image detail level with no
            LangChain4j name.
    """
    if isinstance(message, SystemMessage):
        return {"text": message.text, "type": "SYSTEM"}
    if isinstance(message, UserMessage):
        # LangChain4j writes user messages with NON_EMPTY inclusion: no name, no empty attributes.
        data: dict[str, Any] = {}
        if message.name is not None:
            data["name"] = message.name
        data["contents"] = [_content_to_dict(part) for part in message.contents]
        if message.attributes:
            data["attributes"] = message.attributes
        data["type"] = "USER"
        return data
    if isinstance(message, AiMessage):
        data = {}
        if message.text is not None:
            data["text"] = message.text
        if message.thinking is not None:
            data["thinking"] = message.thinking
        data["toolExecutionRequests"] = [_request_to_dict(request) for request in message.tool_execution_requests]
        data["attributes"] = message.attributes
        data["type"] = "AI"
        return data
    if isinstance(message, ToolExecutionResultMessage):
        data = {}
        if message.id is not None:
            data["id"] = message.id
        if message.tool_name is not None:
            data["toolName"] = message.tool_name
        data["contents"] = [{"text": message.text, "type": "TEXT"}]
        if message.is_error:
            data["isError"] = True
        data["attributes"] = message.attributes
        data["type"] = "TOOL_EXECUTION_RESULT"
        return data
    if isinstance(message, CustomMessage):
        return {"attributes": message.attributes, "type": "CUSTOM"}
    raise SerializationError(f"cannot serialize a {type(message).__name__}: it is not a chat message")


def _request_to_dict(request: ToolExecutionRequest) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if request.id is not None:
        data["id"] = request.id
    data["name"] = request.name
    data["arguments"] = request.arguments
    return data


def dumps(messages: Iterable[ChatMessage]) -> str:
    """Encode messages as LangChain4j's ``ChatMessageSerializer.messagesToJson`` would.

    Raises:
        SerializationError: an item is not a message, holds an image detail level with no LangChain4j name,
            or holds text JSON cannot carry (a lone surrogate).
    """
    document = [message_to_dict(message) for message in messages]
    try:
        return orjson.dumps(document).decode("utf-8")
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise SerializationError(f"messages could not be encoded as JSON: {exc}") from exc


# ----------------------------------------------------------------------------------------------- decode


class _Invalid(Exception):
    """The JSON does not describe a message this library can hold."""


def _where(data: dict[str, Any]) -> str:
    kind = data.get("type")
    return f"a {kind} object" if isinstance(kind, str) else "an object"


def _refuse(data: dict[str, Any], unholdable: frozenset[str]) -> None:
    """Raise for LangChain4j fields chatmemory cannot hold; fields it does not know are left alone."""
    present = sorted(key for key in unholdable if data.get(key) is not None)
    if present:
        raise _Invalid(f"{_where(data)} has fields chatmemory cannot hold: {present}")


def _get(data: dict[str, Any], key: str, kind: type | tuple[type, ...], *, required: bool = False) -> Any:
    """``data[key]`` checked against ``kind``; an absent key and a JSON null both read as None."""
    value = data.get(key)
    if value is None:
        if required:
            raise _Invalid(f"{_where(data)} lacks the field {key!r}")
        return None
    if not isinstance(value, kind):
        raise _Invalid(f"field {key!r} of {_where(data)} holds a {type(value).__name__}")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(f"{what} is a {type(value).__name__}, not an object")
    return value


# Fields LangChain4j writes that chatmemory has no place for: reading them would lose data, so they raise.
_UNHOLDABLE_IMAGE_FIELDS = frozenset({"revisedPrompt"})
_NOTHING = frozenset[str]()


def _content_from_dict(value: Any) -> Content:
    data = _object(value, "a content part")
    kind = data.get("type")
    if kind == "TEXT":
        return TextContent(_get(data, "text", str, required=True))
    if not isinstance(kind, str) or kind not in _MEDIA:
        raise _Invalid(f"unknown content type {kind!r} (expected TEXT, IMAGE, AUDIO, VIDEO or PDF)")
    cls, key = _MEDIA[kind]
    media = _object(_get(data, key, dict, required=True), f"the {key!r} of a {kind} part")
    _refuse(media, _UNHOLDABLE_IMAGE_FIELDS if cls is ImageContent else _NOTHING)
    url = _get(media, "url", str)
    base64_data = _get(media, "base64Data", str)
    if base64_data is None and cls is AudioContent:
        # Jackson writes a byte[] as a base64 string, so binaryData is the same bytes, differently named.
        base64_data = _get(media, "binaryData", str)
    mime_type = _get(media, "mimeType", str)
    if url is None and base64_data is None:
        raise _Invalid(f"a {kind} part has neither a url nor base64Data")
    if cls is ImageContent:
        try:
            detail_level = detail_level_name(_get(data, "detailLevel", str))
        except SerializationError as exc:
            raise _Invalid(str(exc)) from None
        return ImageContent(url, base64_data, mime_type, detail_level=detail_level)
    if cls is PdfFileContent and mime_type is None:
        mime_type = _DEFAULT_PDF_MIME_TYPE
    return cls(url, base64_data, mime_type)


def _request_from_dict(value: Any) -> ToolExecutionRequest:
    data = _object(value, "a tool execution request")
    return ToolExecutionRequest(
        id=_get(data, "id", str),
        name=_get(data, "name", str, required=True),
        arguments=_get(data, "arguments", str, required=True),
    )


def _tool_result_text(data: dict[str, Any]) -> str:
    text = _get(data, "text", str)
    contents = _get(data, "contents", list)
    if text is not None and contents:
        raise _Invalid("a TOOL_EXECUTION_RESULT has both text and contents")
    if text is not None:
        return text  # type: ignore[no-any-return]
    if not contents:
        raise _Invalid("a TOOL_EXECUTION_RESULT has neither text nor contents")
    parts = [_content_from_dict(part) for part in contents]
    if len(parts) != 1 or not isinstance(parts[0], TextContent):
        raise _Invalid(
            "a TOOL_EXECUTION_RESULT holds contents other than one TEXT part; chatmemory keeps tool "
            "results as text only"
        )
    return parts[0].text


_MESSAGE_TYPES = ("SYSTEM", "USER", "AI", "TOOL_EXECUTION_RESULT", "CUSTOM")


def _message_from_dict(value: Any) -> ChatMessage:
    data = _object(value, "a message")
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _MESSAGE_TYPES:
        raise _Invalid(f"unknown message type {kind!r} (expected one of {', '.join(_MESSAGE_TYPES)})")
    attributes = _get(data, "attributes", dict)
    if kind == "SYSTEM":
        return SystemMessage(_get(data, "text", str, required=True))
    if kind == "USER":
        contents = _get(data, "contents", list, required=True)
        return UserMessage(
            [_content_from_dict(part) for part in contents], name=_get(data, "name", str), attributes=attributes
        )
    if kind == "AI":
        requests = _get(data, "toolExecutionRequests", list) or ()
        return AiMessage(
            text=_get(data, "text", str),
            tool_execution_requests=[_request_from_dict(request) for request in requests],
            thinking=_get(data, "thinking", str),
            attributes=attributes,
        )
    if kind == "TOOL_EXECUTION_RESULT":
        return ToolExecutionResultMessage(
            id=_get(data, "id", str),
            tool_name=_get(data, "toolName", str),
            text=_tool_result_text(data),
            is_error=bool(_get(data, "isError", bool)),
            attributes=attributes,
        )
    return CustomMessage(_get(data, "attributes", dict, required=True))


def _message_at(position: int, data: Any) -> ChatMessage:
    try:
        return _message_from_dict(data)
    except (_Invalid, TypeError, ValueError) as exc:
        raise _Invalid(f"message {position}: {exc}") from None


def message_from_dict(data: Any) -> ChatMessage:
    """Build a message from one LangChain4j JSON object.

    Raises:
        SerializationError: the object is not a message this library can hold.
    """
    try:
        return _message_from_dict(data)
    except (_Invalid, TypeError, ValueError) as exc:
        raise SerializationError(f"not a LangChain4j chat message: {exc}") from None


def loads(data: str | bytes | bytearray | memoryview, *, memory_id: str | None = None) -> list[ChatMessage]:
    """Decode what LangChain4j's ``ChatMessageSerializer.messagesToJson`` wrote.

    Args:
        data: the JSON text (str or UTF-8 bytes).
        memory_id: when the JSON was read from a store, the memory it belongs to; errors then are
            :class:`~chatmemory.CorruptedMemoryError` naming it.

    Raises:
        SerializationError: ``data`` is not a JSON array of LangChain4j messages this library can hold
            (:class:`~chatmemory.CorruptedMemoryError` when ``memory_id`` is given).
    """

    def fail(reason: str) -> SerializationError:
        if memory_id is not None:
            return CorruptedMemoryError(memory_id, f"not LangChain4j chat messages: {reason}")
        return SerializationError(f"not LangChain4j chat messages: {reason}")

    if not isinstance(data, (str, bytes, bytearray, memoryview)):
        raise fail(f"expected str or bytes, got {type(data).__name__}")
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise fail(f"not valid JSON ({exc})") from None
    if document is None:
        return []  # LangChain4j's messagesFromJson reads "null" as an empty list
    if not isinstance(document, list):
        raise fail(f"expected a JSON array, got {type(document).__name__}")
    try:
        return [_message_at(position, item) for position, item in enumerate(document)]
    except _Invalid as exc:
        raise fail(str(exc)) from None
