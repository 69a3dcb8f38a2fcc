"""chatmemory's own JSON format, versioned.

Two payload shapes: a list of messages, ``{"version": 1, "messages": [<message>, ...]}``
(:func:`dumps` / :func:`loads`), and one message, ``{"v": 1, <message fields>}`` (:func:`dumps_message` /
:func:`loads_message`, what stores that keep a row or list element per message persist). Readers upgrade
older format versions (:mod:`chatmemory.serialization.upgrades`); writers write only
:data:`FORMAT_VERSION`; a newer version raises :class:`~chatmemory.UnsupportedFormatVersionError`. Reading
is strict (:mod:`chatmemory.serialization.native_schema`): an unknown field, a wrong type, ``NaN``, an
integer beyond 64 bits or attributes nested too deep raise :class:`~chatmemory.CorruptedMemoryError`.

The message fields and the reading rules: docs/converters.md, *Native JSON*.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import orjson

from chatmemory.core.errors import CorruptedMemoryError, SerializationError, UnsupportedFormatVersionError
from chatmemory.core.messages import (
    MAX_ATTRIBUTE_DEPTH,
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from chatmemory.serialization import upgrades
from chatmemory.serialization.native_schema import BUILDERS, Message, Payload, Record, build_message
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


# One function per message type, found by exact type: a window is encoded on every write, and walking an
# isinstance chain per message cost a third of the encoding. Subclasses take the isinstance route below.


def _user_to_dict(message: UserMessage, data: dict[str, Any]) -> dict[str, Any]:
    contents = message.contents
    data["type"] = "user"
    if len(contents) == 1 and type(contents[0]) is TextContent:
        data["contents"] = [{"type": "text", "text": contents[0].text}]
    else:
        data["contents"] = [_content_to_dict(part) for part in contents]
    if message.name is not None:
        data["name"] = message.name
    if message.attributes:
        data["attributes"] = message.attributes
    return data


def _ai_to_dict(message: AiMessage, data: dict[str, Any]) -> dict[str, Any]:
    data["type"] = "ai"
    if message.text is not None:
        data["text"] = message.text
    if message.thinking is not None:
        data["thinking"] = message.thinking
    if message.tool_execution_requests:
        data["tool_execution_requests"] = [
            {"id": request.id, "name": request.name, "arguments": request.arguments}
            for request in message.tool_execution_requests
        ]
    if message.attributes:
        data["attributes"] = message.attributes
    return data


def _tool_result_to_dict(message: ToolExecutionResultMessage, data: dict[str, Any]) -> dict[str, Any]:
    data["type"] = "tool_result"
    data["id"] = message.id
    data["tool_name"] = message.tool_name
    data["text"] = message.text
    if message.is_error:
        data["is_error"] = True
    if message.attributes:
        data["attributes"] = message.attributes
    return data


def _system_to_dict(message: SystemMessage, data: dict[str, Any]) -> dict[str, Any]:
    data["type"] = "system"
    data["text"] = message.text
    return data


def _custom_to_dict(message: CustomMessage, data: dict[str, Any]) -> dict[str, Any]:
    data["type"] = "custom"
    data["attributes"] = message.attributes
    return data


_ToDict = Callable[[Any, dict[str, Any]], dict[str, Any]]


def _fill_subclass(message: Any, data: dict[str, Any]) -> dict[str, Any]:
    for cls, to_dict in _EXACT_TO_DICT.items():
        if isinstance(message, cls):
            return to_dict(message, data)
    raise SerializationError(f"cannot serialize a {type(message).__name__}: it is not a chat message")


class _ToDictByType(dict[type, _ToDict]):
    """``type(message) -> function``; a type not listed (a subclass, or not a message) gets the slow route."""

    def __missing__(self, cls: type) -> _ToDict:
        return _fill_subclass


_EXACT_TO_DICT: dict[type, _ToDict] = {
    UserMessage: _user_to_dict,
    AiMessage: _ai_to_dict,
    ToolExecutionResultMessage: _tool_result_to_dict,
    SystemMessage: _system_to_dict,
    CustomMessage: _custom_to_dict,
}
_TO_DICT = _ToDictByType(_EXACT_TO_DICT)


def message_to_dict(message: ChatMessage) -> dict[str, Any]:
    """The JSON object of ``message`` in the current format (without a version key).

    Raises:
        SerializationError: ``message`` is not a chat message.
    """
    return _TO_DICT[type(message)](message, {})


def _encode(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise SerializationError(f"messages could not be encoded as JSON: {exc}") from exc


def dumps(messages: Iterable[ChatMessage]) -> bytes:
    """Encode a list of messages as a versioned JSON payload."""
    to_dict = _TO_DICT
    items: list[dict[str, Any]] = []
    append = items.append
    message: Any  # a message, told apart by its exact type
    for message in messages:
        # The plain user and assistant messages that make up most of a window are written inline (what
        # _user_to_dict and _ai_to_dict write for them), every other message by its function.
        cls = type(message)
        if cls is UserMessage:
            contents = message.contents
            if (
                len(contents) == 1
                and type(contents[0]) is TextContent
                and message.name is None
                and not message.attributes
            ):
                append({"type": "user", "contents": [{"type": "text", "text": contents[0].text}]})
                continue
        elif (
            cls is AiMessage
            and message.thinking is None
            and not message.tool_execution_requests
            and not message.attributes
        ):
            text = message.text
            append({"type": "ai"} if text is None else {"type": "ai", "text": text})
            continue
        append(to_dict[cls](message, {}))
    return _encode({"version": upgrades.FORMAT_VERSION, "messages": items})


def dumps_message(message: ChatMessage) -> bytes:
    """Encode one message as a versioned JSON payload (``{"v": 1, ...}``)."""
    version = upgrades.FORMAT_VERSION
    item: Any = message  # told apart by its exact type
    cls = type(item)
    # As in dumps: a plain user or assistant message inline, every other message by its function.
    if (
        cls is UserMessage
        and len(item.contents) == 1
        and type(item.contents[0]) is TextContent
        and item.name is None
        and not item.attributes
    ):
        data = {"v": version, "type": "user", "contents": [{"type": "text", "text": item.contents[0].text}]}
    elif cls is AiMessage and item.thinking is None and not item.tool_execution_requests and not item.attributes:
        text = item.text
        data = {"v": version, "type": "ai"} if text is None else {"v": version, "type": "ai", "text": text}
    else:
        data = _TO_DICT[cls](item, {"v": version})
    try:
        return orjson.dumps(data)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise SerializationError(f"messages could not be encoded as JSON: {exc}") from exc


# ----------------------------------------------------------------------------------------------- decode
#
# Reading the current version is one pass: msgspec decodes the JSON straight into the schema's structs,
# checking every field in C, and messages are built from them without being checked again. Anything else —
# an older version to upgrade, a newer one, or a payload the schema refuses — takes the checked path below,
# which parses generically, checks the version, upgrades, checks each message against the same schema and
# names what is wrong and where. Both paths check against the one schema, so they accept the same payloads
# (a property test holds them to it); they differ only in speed and in how they report what they refuse.

_INPUT_TYPES = (bytes, bytearray, memoryview, str)
# UnicodeError: a str holding a lone surrogate cannot even be turned into the UTF-8 msgspec reads.
# RecursionError: JSON nested deeper than the interpreter allows (the checked path names it).
_FAST_PATH_FAILURES = (msgspec.DecodeError, RecursionError, UnicodeError)
_PAYLOAD_DECODER = msgspec.json.Decoder(Payload)
_RECORD_DECODER = msgspec.json.Decoder(Record)


def _corrupted(memory_id: str | None, position: int | None, exc: BaseException) -> CorruptedMemoryError:
    where = f"message {position}: " if position is not None else ""
    if isinstance(exc, RecursionError):
        reason = f"JSON nested too deeply (attribute values may nest at most {MAX_ATTRIBUTE_DEPTH} levels deep)"
    else:
        reason = str(exc)
    return CorruptedMemoryError(memory_id, f"{where}{reason}")


def _build_all(structs: list[Message], memory_id: str | None) -> list[ChatMessage]:
    try:
        return [BUILDERS[type(struct)](struct) for struct in structs]
    except (TypeError, ValueError):
        pass
    # Rare: an attribute value or media part the schema could not judge; find which message it is.
    messages = []
    for position, struct in enumerate(structs):
        try:
            messages.append(build_message(struct))
        except (TypeError, ValueError) as exc:  # noqa: PERF203 - only on the error path
            raise _corrupted(memory_id, position, exc) from None
    return messages


def message_from_dict(data: Any) -> ChatMessage:
    """Build a message from its JSON object in the current format.

    Raises:
        CorruptedMemoryError: the object is not a valid message.
    """
    try:
        return build_message(msgspec.convert(data, Message))
    except (msgspec.ValidationError, TypeError, ValueError, RecursionError) as exc:
        raise _corrupted(None, None, exc) from None


def _parse(data: bytes | bytearray | memoryview | str, memory_id: str | None) -> Any:
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
        return build_message(msgspec.convert(upgrade_message(data, version), Message))
    # An upgrader reads a message object that may itself be broken; whatever it trips over is corruption.
    except (
        msgspec.ValidationError,
        TypeError,
        ValueError,
        KeyError,
        IndexError,
        AttributeError,
        RecursionError,
    ) as exc:
        raise _corrupted(memory_id, position, exc) from None


def _loads_checked(data: bytes | bytearray | memoryview | str, memory_id: str | None) -> list[ChatMessage]:
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


def loads(data: bytes | bytearray | memoryview | str, *, memory_id: str | None = None) -> list[ChatMessage]:
    """Decode a payload written by :func:`dumps` (of this or an older format version).

    Args:
        data: the payload.
        memory_id: named in errors, so the operator knows which memory to look at.

    Raises:
        CorruptedMemoryError: the payload is not valid.
        UnsupportedFormatVersionError: the payload was written by a newer format version.
    """
    if not isinstance(data, _INPUT_TYPES):
        raise CorruptedMemoryError(memory_id, f"expected bytes or str, got {type(data).__name__}")
    try:
        payload = _PAYLOAD_DECODER.decode(data)
    except _FAST_PATH_FAILURES:
        return _loads_checked(data, memory_id)
    if payload.version != upgrades.FORMAT_VERSION:
        return _loads_checked(data, memory_id)
    return _build_all(payload.messages, memory_id)


def _loads_message_checked(data: bytes | bytearray | memoryview | str, memory_id: str | None) -> ChatMessage:
    document = _parse(data, memory_id)
    if not isinstance(document, dict) or "v" not in document:
        raise CorruptedMemoryError(memory_id, "not a chatmemory message payload (expected an object with 'v')")
    version = _check_version(document.pop("v"), memory_id)
    return _decode(document, version, memory_id)


def loads_message(data: bytes | bytearray | memoryview | str, *, memory_id: str | None = None) -> ChatMessage:
    """Decode one message written by :func:`dumps_message` (of this or an older format version).

    Raises:
        CorruptedMemoryError: the payload is not valid.
        UnsupportedFormatVersionError: the payload was written by a newer format version.
    """
    # msgspec would also read other buffers (array.array, ...); the format is bytes or str.
    if type(data) is not bytes and not isinstance(data, _INPUT_TYPES):
        raise CorruptedMemoryError(memory_id, f"expected bytes or str, got {type(data).__name__}")
    try:
        record = _RECORD_DECODER.decode(data)
    except _FAST_PATH_FAILURES:
        return _loads_message_checked(data, memory_id)
    if record.v != upgrades.FORMAT_VERSION:
        return _loads_message_checked(data, memory_id)
    try:
        return BUILDERS[type(record)](record)
    except (TypeError, ValueError) as exc:
        raise _corrupted(memory_id, None, exc) from None
