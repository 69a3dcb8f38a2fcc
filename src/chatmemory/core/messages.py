"""Immutable chat message types.

Messages are frozen, slotted dataclasses that compare by value. Every mutable input (attribute dicts,
lists, content sequences) is copied when a message is built, so a message never changes afterwards.
Messages hash by value too (attribute dicts included), which lets token estimates be cached per
distinct message.

Attribute values are JSON values: str, int (64-bit), finite float, bool, None, and lists and dicts (str
keys) of them, nested at most :data:`MAX_ATTRIBUTE_DEPTH` (100) levels deep. A member of a str- or
int-derived enum (``StrEnum``, ``IntEnum``, ``class Color(str, Enum)``) is stored as its plain value and
reads back as that value; any other enum member is refused (store its ``.value``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Union

from chatmemory.core.frozen import FrozenDict, FrozenList

__all__ = [
    "AiMessage",
    "AudioContent",
    "ChatMessage",
    "Content",
    "CustomMessage",
    "ImageContent",
    "PdfFileContent",
    "SystemMessage",
    "TextContent",
    "ToolExecutionRequest",
    "ToolExecutionResultMessage",
    "UserMessage",
    "VideoContent",
]

JsonValue = Union[str, int, float, bool, None, list["JsonValue"], dict[str, "JsonValue"]]

_EMPTY = FrozenDict()

# orjson (and most JSON consumers) only represent 64-bit integers; anything wider would fail to persist.
_MIN_INT = -(2**63)
_MAX_INT = 2**64 - 1


MAX_ATTRIBUTE_DEPTH = 100
"""How deeply lists and dicts may nest inside one attribute value (``[[1]]`` is 2 deep).

Deep enough for any real metadata, and shallow enough that every recursive walk over attributes (copying,
hashing, equality, JSON encoding and decoding) stays far from Python's recursion limit, so a hostile or
broken value fails with a named error instead of ``RecursionError``.
"""


def _too_deep(key: str) -> ValueError:
    return ValueError(
        f"attribute {key!r} nests lists and dicts more than {MAX_ATTRIBUTE_DEPTH} levels deep "
        f"(the limit is chatmemory.core.messages.MAX_ATTRIBUTE_DEPTH); flatten the value"
    )


def _copy_json(value: Any, key: str, depth: int = 0) -> Any:
    """Deep-copy a JSON-native value, rejecting anything that would not survive persistence.

    ``depth`` counts the containers around ``value``; the recursion stops at :data:`MAX_ATTRIBUTE_DEPTH`
    (a frame or two per level), so it never comes near the interpreter's recursion limit.
    """
    if value is None or isinstance(value, bool):
        return value
    # str.__str__ / int.__int__ / float.__float__ take the plain value of a subclass, so a str- or int-Enum
    # member is stored as its value ("red"), never as what its __str__ says ("Color.RED").
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        if not _MIN_INT <= value <= _MAX_INT:
            raise TypeError(f"attribute {key!r} holds an integer outside the 64-bit range: {value}")
        return int.__int__(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"attribute {key!r} holds a non-finite float ({value}), which JSON cannot hold")
        return float.__float__(value)
    if isinstance(value, (list, dict)):
        if depth >= MAX_ATTRIBUTE_DEPTH:
            raise _too_deep(key)
        if isinstance(value, list):
            return FrozenList([_copy_json(item, key, depth + 1) for item in value])
        copied: dict[str, Any] = {}
        for inner_key, inner_value in value.items():
            if not isinstance(inner_key, str):
                raise TypeError(f"attribute {key!r} holds a dict with a non-str key {inner_key!r}")
            copied[str.__str__(inner_key)] = _copy_json(inner_value, key, depth + 1)
        return FrozenDict(copied)
    if isinstance(value, Enum):
        raise TypeError(
            f"attribute {key!r} holds the enum member {value}, which is not a JSON value; store {value}.value, "
            "or derive the enum from str or int (StrEnum, IntEnum): such members are stored as their value"
        )
    raise TypeError(
        f"attribute {key!r} holds a {type(value).__name__}; attributes accept JSON-native values only "
        "(str, int, float, bool, None, list, dict with str keys)"
    )


def _copy_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    if attributes is None:
        return _EMPTY
    if not isinstance(attributes, Mapping):
        raise TypeError(f"attributes must be a dict, not {type(attributes).__name__}")
    copied: dict[str, Any] = {}
    for key, value in attributes.items():
        if not isinstance(key, str):
            raise TypeError(f"attribute key {key!r} is not a str")
        copied[str.__str__(key)] = _copy_json(value, key)
    return FrozenDict(copied) if copied else _EMPTY


def _freeze(value: Any) -> Any:
    """A hashable image of a JSON-native value, consistent with ``==`` on the original."""
    if isinstance(value, dict):
        return frozenset((key, _freeze(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value


class _KeepsItsHash:
    """The base of the message classes that hash more than a string: a slot keeping the hash once computed.

    A message never changes, so neither does its hash; computing it hashes every part and a frozen image of
    the attributes, and a token window weighs every message of its window by a cache keyed on the message
    (several look-ups per message per add). The slot is no dataclass field: it is not compared, shown or
    pickled (a frozen dataclass with slots pickles its fields alone), so a message unpickled in another
    process, whose strings hash differently, computes its own.
    """

    __slots__ = ("_hash",)
    _hash: int


def _keep_hash(message: _KeepsItsHash, image: tuple[Any, ...]) -> int:
    """Hash ``image`` (what ``message`` is equal by) and keep the hash in the message."""
    value = hash(image)
    object.__setattr__(message, "_hash", value)
    return value


def _json_equal(left: Any, right: Any) -> bool:
    """Equality of copied attribute values as JSON sees them: ``1``, ``1.0`` and ``true`` differ.

    Python's ``==`` calls them equal, but they persist differently, and stores that diff by equality
    would otherwise keep the old value when a different one was written.
    """
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_json_equal(item, right[key]) for key, item in left.items())
    if isinstance(left, list):
        return len(left) == len(right) and all(_json_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, float):
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    return bool(left == right)


def _require_str(owner: str, name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        expected = "a str or None" if optional else "a str"
        raise TypeError(f"{owner}.{name} must be {expected}, not {type(value).__name__}")


# --------------------------------------------------------------------------------------------- contents


@dataclass(frozen=True, slots=True)
class TextContent:
    """A text part of a user message."""

    text: str

    def __post_init__(self) -> None:
        _require_str("TextContent", "text", self.text)


@dataclass(frozen=True, slots=True)
class _MediaContent:
    url: str | None = None
    base64_data: str | None = None
    mime_type: str | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        _require_str(owner, "url", self.url, optional=True)
        _require_str(owner, "base64_data", self.base64_data, optional=True)
        _require_str(owner, "mime_type", self.mime_type, optional=True)
        if self.url is None and self.base64_data is None:
            raise ValueError(f"{owner} needs a url or base64_data")


@dataclass(frozen=True, slots=True)
class ImageContent(_MediaContent):
    """An image part, by URL or inline base64 data; ``detail_level`` is e.g. ``"LOW"``/``"HIGH"``/``"AUTO"``."""

    detail_level: str | None = None

    def __post_init__(self) -> None:
        _MediaContent.__post_init__(self)
        _require_str("ImageContent", "detail_level", self.detail_level, optional=True)


@dataclass(frozen=True, slots=True)
class AudioContent(_MediaContent):
    """An audio part, by URL or inline base64 data."""


@dataclass(frozen=True, slots=True)
class VideoContent(_MediaContent):
    """A video part, by URL or inline base64 data."""


@dataclass(frozen=True, slots=True)
class PdfFileContent(_MediaContent):
    """A PDF file part, by URL or inline base64 data."""


Content = Union[TextContent, ImageContent, AudioContent, VideoContent, PdfFileContent]
_CONTENT_TYPES = (TextContent, ImageContent, AudioContent, VideoContent, PdfFileContent)


# --------------------------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """Instructions for the model; a window memory holds at most one and never evicts it."""

    text: str

    def __post_init__(self) -> None:
        _require_str("SystemMessage", "text", self.text)


@dataclass(frozen=True, slots=True, init=False)
class UserMessage(_KeepsItsHash):
    """What the user said: one or more content parts, an optional name and attributes.

    ``UserMessage("hi")`` builds a single text part; so does ``UserMessage.from_text("hi")``.
    """

    contents: tuple[Content, ...]
    name: str | None
    attributes: dict[str, Any] = field(hash=False)

    def __init__(
        self,
        contents: str | Content | Iterable[str | Content],
        name: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        parts: list[Content] = []
        items: Iterable[str | Content]
        items = [contents] if isinstance(contents, (str, *_CONTENT_TYPES)) else contents
        # A mapping or bytes is iterable but never a list of parts: iterating would turn keys or ints into text.
        # (A list or tuple, the common case, skips the ABC checks.)
        if (
            type(items) is not list
            and type(items) is not tuple
            and (not isinstance(items, Iterable) or isinstance(items, (Mapping, bytes, bytearray)))
        ):
            raise TypeError(
                f"UserMessage.contents must be a str, a content part or an iterable of them, "
                f"not {type(contents).__name__}"
            )
        for item in items:
            if isinstance(item, str):
                parts.append(TextContent(item))
            elif isinstance(item, _CONTENT_TYPES):
                parts.append(item)
            else:
                raise TypeError(f"UserMessage content parts must be str or content objects, not {type(item).__name__}")
        if not parts:
            raise ValueError("UserMessage needs at least one content part")
        _require_str("UserMessage", "name", name, optional=True)
        object.__setattr__(self, "contents", tuple(parts))
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "attributes", _copy_attributes(attributes))

    @classmethod
    def from_text(cls, text: str, name: str | None = None) -> UserMessage:
        """A user message with a single text part."""
        return cls(TextContent(text), name=name)

    @property
    def text(self) -> str:
        """The text, when every part is text: the parts joined by a newline (one part: its text).

        A summarizing memory's summary message (a framing line and the summary) reads as both lines.

        Raises:
            ValueError: a part is an image, audio, video or a file; read :attr:`contents` instead.
        """
        if len(self.contents) == 1 and isinstance(self.contents[0], TextContent):
            return self.contents[0].text
        texts = [part.text for part in self.contents if isinstance(part, TextContent)]
        if len(texts) == len(self.contents):
            return "\n".join(texts)
        media = next(type(part).__name__ for part in self.contents if not isinstance(part, TextContent))
        raise ValueError(f"UserMessage.text needs text parts only; this message also holds {media}: read .contents")

    def has_single_text(self) -> bool:
        """Whether the message is one text part (what converters send as a plain string)."""
        return len(self.contents) == 1 and isinstance(self.contents[0], TextContent)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, UserMessage)
        return (
            self.contents == other.contents
            and self.name == other.name
            and _json_equal(self.attributes, other.attributes)
        )

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            return _keep_hash(self, (UserMessage, self.contents, self.name, _freeze(self.attributes)))


@dataclass(frozen=True, slots=True)
class ToolExecutionRequest:
    """A tool call the model asked for; ``arguments`` is the model's raw JSON string, kept byte for byte."""

    id: str | None
    name: str
    arguments: str

    def __post_init__(self) -> None:
        _require_str("ToolExecutionRequest", "id", self.id, optional=True)
        _require_str("ToolExecutionRequest", "name", self.name)
        _require_str("ToolExecutionRequest", "arguments", self.arguments)


@dataclass(frozen=True, slots=True, init=False)
class AiMessage(_KeepsItsHash):
    """What the model answered: text, tool calls, its thinking, attributes (e.g. a thought signature)."""

    text: str | None
    tool_execution_requests: tuple[ToolExecutionRequest, ...]
    thinking: str | None
    attributes: dict[str, Any] = field(hash=False)

    def __init__(
        self,
        text: str | None = None,
        tool_execution_requests: Iterable[ToolExecutionRequest] | None = (),
        thinking: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        _require_str("AiMessage", "text", text, optional=True)
        _require_str("AiMessage", "thinking", thinking, optional=True)
        # None means "no tool calls", as it does for every other optional field.
        if tool_execution_requests is None:
            requests: tuple[ToolExecutionRequest, ...] = ()
        elif isinstance(tool_execution_requests, (tuple, list)):  # the common case, without ABC checks
            requests = tuple(tool_execution_requests)
        elif isinstance(tool_execution_requests, Iterable) and not isinstance(
            tool_execution_requests, (str, bytes, bytearray, Mapping)
        ):
            requests = tuple(tool_execution_requests)
        else:
            raise TypeError(
                "AiMessage.tool_execution_requests must be an iterable of ToolExecutionRequest (or None for none), "
                f"not {type(tool_execution_requests).__name__}"
            )
        for request in requests:
            if not isinstance(request, ToolExecutionRequest):
                raise TypeError(
                    f"AiMessage.tool_execution_requests holds a {type(request).__name__}, not a ToolExecutionRequest"
                )
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "tool_execution_requests", requests)
        object.__setattr__(self, "thinking", thinking)
        object.__setattr__(self, "attributes", _copy_attributes(attributes))

    def has_tool_execution_requests(self) -> bool:
        """Whether the model asked for at least one tool call."""
        return bool(self.tool_execution_requests)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, AiMessage)
        return (
            self.text == other.text
            and self.tool_execution_requests == other.tool_execution_requests
            and self.thinking == other.thinking
            and _json_equal(self.attributes, other.attributes)
        )

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            image = (AiMessage, self.text, self.tool_execution_requests, self.thinking, _freeze(self.attributes))
            return _keep_hash(self, image)


@dataclass(frozen=True, slots=True, init=False)
class ToolExecutionResultMessage(_KeepsItsHash):
    """The result of one tool call, linked to its request by ``id``.

    ``tool_name`` may be ``None``: LangChain4j and some providers write results that name no tool.
    """

    id: str | None
    tool_name: str | None
    text: str
    is_error: bool
    attributes: dict[str, Any] = field(hash=False)

    def __init__(
        self,
        id: str | None,
        tool_name: str | None,
        text: str,
        is_error: bool = False,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        _require_str("ToolExecutionResultMessage", "id", id, optional=True)
        _require_str("ToolExecutionResultMessage", "tool_name", tool_name, optional=True)
        _require_str("ToolExecutionResultMessage", "text", text)
        if not isinstance(is_error, bool):
            raise TypeError(f"ToolExecutionResultMessage.is_error must be a bool, not {type(is_error).__name__}")
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "tool_name", tool_name)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "is_error", is_error)
        object.__setattr__(self, "attributes", _copy_attributes(attributes))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, ToolExecutionResultMessage)
        return (
            self.id == other.id
            and self.tool_name == other.tool_name
            and self.text == other.text
            and self.is_error == other.is_error
            and _json_equal(self.attributes, other.attributes)
        )

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            image = (
                ToolExecutionResultMessage,
                self.id,
                self.tool_name,
                self.text,
                self.is_error,
                _freeze(self.attributes),
            )
            return _keep_hash(self, image)


@dataclass(frozen=True, slots=True, init=False)
class CustomMessage(_KeepsItsHash):
    """An application-specific entry; never treated as a system message or a tool message."""

    attributes: dict[str, Any] = field(hash=False)

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        object.__setattr__(self, "attributes", _copy_attributes(attributes))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, CustomMessage)
        return _json_equal(self.attributes, other.attributes)

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            return _keep_hash(self, (CustomMessage, _freeze(self.attributes)))


ChatMessage = Union[SystemMessage, UserMessage, AiMessage, ToolExecutionResultMessage, CustomMessage]
MESSAGE_TYPES: tuple[type, ...] = (SystemMessage, UserMessage, AiMessage, ToolExecutionResultMessage, CustomMessage)


def require_message(value: object) -> None:
    """Raise ``TypeError`` unless ``value`` is one of the chat message types."""
    if not isinstance(value, MESSAGE_TYPES):
        raise TypeError(
            f"expected a chat message (SystemMessage, UserMessage, AiMessage, "
            f"ToolExecutionResultMessage, CustomMessage), got {type(value).__name__}"
        )


_EXACT_MESSAGE_TYPES = frozenset(MESSAGE_TYPES)


def checked_messages(messages: Iterable[object]) -> tuple[ChatMessage, ...]:
    """``messages`` as a tuple, each checked to be a chat message; any iterable is consumed exactly once.

    What a store does with the list a write hands it, on every turn: when every element is of a message
    type itself (the common case), one set comparison in C checks them all; a subclass, or anything else,
    takes the check one by one.

    Raises:
        TypeError: an element is not a chat message (named by its type).
    """
    taken = tuple(messages)
    if not _EXACT_MESSAGE_TYPES.issuperset(map(type, taken)):
        for message in taken:
            require_message(message)
    return taken  # type: ignore[return-value]  # every element was checked above
