"""The native format's current version as a typed schema, and the messages built from it.

The schema is written once, as msgspec structs, and checked in C: msgspec decodes a payload straight into
them (``msgspec.json``), or checks objects that an upgrader produced (``msgspec.convert``). Either way it
refuses what the format does not allow: a field of the wrong type (no coercion: ``1`` is not a bool, ``1.0``
not an int), a missing required field, an unknown field or message type, an empty ``contents`` list, and
(JSON itself) ``NaN``/``Infinity`` and numbers out of range. Messages are then built through
:mod:`chatmemory.core.decoded_messages`, without the constructors checking everything again; attribute
values are the one thing checked in Python, as they are frozen (JSON types, 64-bit integers and
:data:`~chatmemory.core.messages.MAX_ATTRIBUTE_DEPTH`).

A record (``{"v": 1, <message fields>}``) is the same message struct with a ``v`` field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Union

import msgspec

from chatmemory.core.decoded_messages import (
    EMPTY_ATTRIBUTES,
    decoded_custom_message,
    decoded_media_content,
    decoded_system_message,
    decoded_text_content,
    decoded_tool_result_message,
    freeze_attributes,
    slot_setters,
)
from chatmemory.core.messages import (
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    ImageContent,
    PdfFileContent,
    TextContent,
    ToolExecutionRequest,
    UserMessage,
    VideoContent,
)

__all__ = ["BUILDERS", "Message", "Payload", "Record", "build_message"]


# UNSET, not an empty default: an absent field then costs no allocation, while an explicit null is still
# refused (UNSET is falsy, so the builders treat it as "none").
_Attributes = Union[dict[str, Any], msgspec.UnsetType]


class _Tagged(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, gc=False):
    """An object whose ``"type"`` says which struct it is."""


class _Text(_Tagged, tag="text"):
    text: str


class _Media(_Tagged):
    url: str | None = None
    base64_data: str | None = None
    mime_type: str | None = None


class _Image(_Media, tag="image"):
    detail_level: str | None = None


class _Audio(_Media, tag="audio"):
    pass


class _Video(_Media, tag="video"):
    pass


class _Pdf(_Media, tag="pdf"):
    pass


_Part = Union[_Text, _Image, _Audio, _Video, _Pdf]


class _Request(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    name: str
    arguments: str
    id: str | None = None


class _System(_Tagged, tag="system"):
    text: str


class _User(_Tagged, tag="user"):
    contents: Annotated[list[_Part], msgspec.Meta(min_length=1)]
    name: str | None = None
    attributes: _Attributes = msgspec.UNSET


class _Ai(_Tagged, tag="ai"):
    text: str | None = None
    thinking: str | None = None
    tool_execution_requests: Union[list[_Request], msgspec.UnsetType] = msgspec.UNSET
    attributes: _Attributes = msgspec.UNSET


class _ToolResult(_Tagged, tag="tool_result"):
    # Always written, null when the result names no tool (ToolExecutionResultMessage.tool_name may be None).
    tool_name: str | None
    text: str
    id: str | None = None
    is_error: bool = False
    attributes: _Attributes = msgspec.UNSET


class _Custom(_Tagged, tag="custom"):
    attributes: dict[str, Any]


Message = Union[_System, _User, _Ai, _ToolResult, _Custom]
"""One message object of the current format."""


class Payload(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A list payload: ``{"version": n, "messages": [...]}``."""

    version: int
    messages: list[Message]


def _record_of(struct: type[_Tagged], tag: str) -> Any:
    # kw_only lets the required "v" follow the message's optional fields; the tag is repeated because a
    # subclass does not inherit its parent's tag value.
    return msgspec.defstruct(f"{struct.__name__}Record", [("v", int)], bases=(struct,), tag=tag, kw_only=True)


_TAGS: dict[type[_Tagged], str] = {
    _System: "system",
    _User: "user",
    _Ai: "ai",
    _ToolResult: "tool_result",
    _Custom: "custom",
}
_RECORDS = {cls: _record_of(cls, tag) for cls, tag in _TAGS.items()}
Record = Union[tuple(_RECORDS.values())]  # type: ignore[valid-type]
"""A one-message record: a :data:`Message` with a ``"v"`` field."""


# ----------------------------------------------------------------------------------------------- build


def _media(cls: type[ImageContent | AudioContent | VideoContent | PdfFileContent]) -> Callable[[Any], Content]:
    return lambda part: decoded_media_content(
        cls, part.url, part.base64_data, part.mime_type, getattr(part, "detail_level", None)
    )


_PART_BUILDERS: dict[type, Callable[[Any], Content]] = {
    _Text: lambda part: decoded_text_content(part.text),
    _Image: _media(ImageContent),
    _Audio: _media(AudioContent),
    _Video: _media(VideoContent),
    _Pdf: _media(PdfFileContent),
}


# The three message types of nearly every window are built here in one step each, setting slots directly:
# a call per part or field was a fifth of a window's decoding time.
_new = object.__new__
(_set_text,) = slot_setters(TextContent, "text")
_set_user = slot_setters(UserMessage, "contents", "name", "attributes")
_set_ai = slot_setters(AiMessage, "text", "tool_execution_requests", "thinking", "attributes")
_set_request = slot_setters(ToolExecutionRequest, "id", "name", "arguments")


def _user(message: _User) -> ChatMessage:
    contents = message.contents
    if len(contents) == 1 and type(contents[0]) is _Text:  # by far the most common user message
        text = _new(TextContent)
        _set_text(text, contents[0].text)
        parts: tuple[Content, ...] = (text,)
    else:
        parts = tuple([_PART_BUILDERS[type(part)](part) for part in contents])
    user = _new(UserMessage)
    set_contents, set_name, set_attributes = _set_user
    set_contents(user, parts)
    set_name(user, message.name)
    set_attributes(user, freeze_attributes(message.attributes) if message.attributes else EMPTY_ATTRIBUTES)
    return user


def _ai(message: _Ai) -> ChatMessage:
    ai = _new(AiMessage)
    set_text, set_requests, set_thinking, set_attributes = _set_ai
    set_text(ai, message.text)
    if message.tool_execution_requests:
        set_id, set_name, set_arguments = _set_request
        requests = []
        for fields in message.tool_execution_requests:
            request = _new(ToolExecutionRequest)
            set_id(request, fields.id)
            set_name(request, fields.name)
            set_arguments(request, fields.arguments)
            requests.append(request)
        set_requests(ai, tuple(requests))
    else:
        set_requests(ai, ())
    set_thinking(ai, message.thinking)
    set_attributes(ai, freeze_attributes(message.attributes) if message.attributes else EMPTY_ATTRIBUTES)
    return ai


def _tool_result(message: _ToolResult) -> ChatMessage:
    return decoded_tool_result_message(
        message.id, message.tool_name, message.text, message.is_error, message.attributes or None
    )


_BUILDERS: dict[type, Callable[[Any], ChatMessage]] = {
    _System: lambda message: decoded_system_message(message.text),
    _User: _user,
    _Ai: _ai,
    _ToolResult: _tool_result,
    _Custom: lambda message: decoded_custom_message(message.attributes),
}
_BUILDERS.update({record: _BUILDERS[message] for message, record in _RECORDS.items()})


def build_message(struct: Message) -> ChatMessage:
    """The message a checked struct (or record struct) describes.

    Raises:
        ValueError: a media part has neither a url nor data, or an attribute value nests too deeply.
        TypeError: an attribute value is not JSON-native (e.g. an integer beyond 64 bits).
    """
    return _BUILDERS[type(struct)](struct)


BUILDERS = _BUILDERS
"""``type(struct) -> builder``, for loops that look the builder up themselves."""
