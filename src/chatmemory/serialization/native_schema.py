"""The native format's current version as a typed schema, and the messages built from it.

The schema is written once, as msgspec structs, and checked in C: msgspec decodes a payload straight into
them (``msgspec.json``), or checks objects that an upgrader produced (``msgspec.convert``). Either way it
refuses what the format does not allow: a field of the wrong type (no coercion: ``1`` is not a bool, ``1.0``
not an int), a missing required field, an unknown field or message type, an empty ``contents`` list, and
(JSON itself) ``NaN``/``Infinity`` and numbers out of range. Messages are then built without their
constructors checking everything again (see "build" below, and :mod:`chatmemory.core.decoded_messages`);
attribute values are the one thing checked in Python, as they are frozen (JSON types, 64-bit integers and
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
    freeze_attributes,
)
from chatmemory.core.frozen import FrozenDict
from chatmemory.core.messages import (
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
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
#
# Messages are built without their constructors, which would check every field again. The message classes
# built here (and text parts and tool calls) each have a plain twin with the same bases and slots: a twin
# instance takes the fields as ordinary attribute stores, then becomes the message by ``__class__``
# assignment, which Python allows between classes of one layout. That builds a window in a third less time
# than ``object.__new__`` and a slot descriptor call per field did. Every slot must be set: a message with
# one unset fails when the slot is read (the round-trip tests compare reprs, which read them all).


def _twin(cls: type) -> Any:
    """A plain class laid out exactly as ``cls`` (same bases, same slots), whose instances may become ``cls``.

    Raises:
        TypeError: at import, if an instance could not become ``cls`` (a message class changed shape).
    """
    twin: Any = type(f"_{cls.__name__}Fields", cls.__bases__, {"__slots__": cls.__dict__["__slots__"]})
    if twin.__setattr__ is not object.__setattr__:
        raise TypeError(f"{cls.__name__} derives from a class with its own __setattr__")
    probe = twin()
    probe.__class__ = cls  # raises TypeError if the layouts differ
    return twin


_TextFields = _twin(TextContent)
_SystemFields = _twin(SystemMessage)
_UserFields = _twin(UserMessage)
_AiFields = _twin(AiMessage)
_RequestFields = _twin(ToolExecutionRequest)
_ToolResultFields = _twin(ToolExecutionResultMessage)


def _text(part: _Text) -> Content:
    text = _TextFields()
    text.text = part.text
    text.__class__ = TextContent
    return text  # type: ignore[no-any-return]


def _media(cls: type[ImageContent | AudioContent | VideoContent | PdfFileContent]) -> Callable[[Any], Content]:
    return lambda part: decoded_media_content(
        cls, part.url, part.base64_data, part.mime_type, getattr(part, "detail_level", None)
    )


_PART_BUILDERS: dict[type, Callable[[Any], Content]] = {
    _Text: _text,
    _Image: _media(ImageContent),
    _Audio: _media(AudioContent),
    _Video: _media(VideoContent),
    _Pdf: _media(PdfFileContent),
}

# -(2**63) .. 2**64 - 1: what the constructors accept (see chatmemory.core.messages).
_MIN_INT = -(2**63)
_MAX_INT = 2**64 - 1


def _attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` frozen; what ``freeze_attributes`` returns, without its walk for flat scalar values.

    Attributes are mostly a few strings (a thought signature, a finish reason): a value that is a str,
    bool, None or an in-range int of its exact type is kept as it is, so such a dict is frozen as it
    stands. Anything else (a container, a float, a subclass, a key that is not exactly a str) takes
    ``freeze_attributes``, which checks it and names what is wrong.
    """
    for key, value in attributes.items():
        cls = type(value)
        if type(key) is not str or not (
            cls is str or value is None or cls is bool or (cls is int and _MIN_INT <= value <= _MAX_INT)
        ):
            return freeze_attributes(attributes)
    return FrozenDict(attributes)


def _user(message: _User) -> ChatMessage:
    contents = message.contents
    user = _UserFields()
    if len(contents) == 1 and type(contents[0]) is _Text:  # by far the most common user message
        text = _TextFields()
        text.text = contents[0].text
        text.__class__ = TextContent
        user.contents = (text,)
    else:
        user.contents = tuple([_PART_BUILDERS[type(part)](part) for part in contents])
    user.name = message.name
    attributes = message.attributes
    user.attributes = _attributes(attributes) if attributes else EMPTY_ATTRIBUTES
    user.__class__ = UserMessage
    return user  # type: ignore[no-any-return]


def _ai(message: _Ai) -> ChatMessage:
    ai = _AiFields()
    ai.text = message.text
    fields = message.tool_execution_requests
    if fields:
        requests = []
        for field in fields:
            request = _RequestFields()
            request.id = field.id
            request.name = field.name
            request.arguments = field.arguments
            request.__class__ = ToolExecutionRequest
            requests.append(request)
        ai.tool_execution_requests = tuple(requests)
    else:
        ai.tool_execution_requests = ()
    ai.thinking = message.thinking
    attributes = message.attributes
    ai.attributes = _attributes(attributes) if attributes else EMPTY_ATTRIBUTES
    ai.__class__ = AiMessage
    return ai  # type: ignore[no-any-return]


def _tool_result(message: _ToolResult) -> ChatMessage:
    result = _ToolResultFields()
    result.id = message.id
    result.tool_name = message.tool_name
    result.text = message.text
    result.is_error = message.is_error
    attributes = message.attributes
    result.attributes = _attributes(attributes) if attributes else EMPTY_ATTRIBUTES
    result.__class__ = ToolExecutionResultMessage
    return result  # type: ignore[no-any-return]


def _system(message: _System) -> ChatMessage:
    system = _SystemFields()
    system.text = message.text
    system.__class__ = SystemMessage
    return system  # type: ignore[no-any-return]


_BUILDERS: dict[type, Callable[[Any], ChatMessage]] = {
    _System: _system,
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
