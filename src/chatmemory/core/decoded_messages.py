"""Building messages from fields a decoder has already checked.

A decoder that checks every field itself (types, required and unknown fields) builds messages through these
functions instead of the constructors, which would check everything a second time: on a cold read of a
window that second check cost more than parsing the JSON. They set the slots directly. Attribute values are
the one thing still checked here, as they are frozen: the decoder only knows they form a dict. Not public
API: only a decoder that validates first may call them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from chatmemory.core.messages import (
    _EMPTY,
    AiMessage,
    Content,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    _copy_attributes,
    _MediaContent,
)

__all__ = [
    "EMPTY_ATTRIBUTES",
    "decoded_ai_message",
    "decoded_custom_message",
    "decoded_media_content",
    "decoded_system_message",
    "decoded_text_content",
    "decoded_tool_execution_request",
    "decoded_tool_result_message",
    "decoded_user_message",
    "freeze_attributes",
    "slot_setters",
]


def slot_setters(cls: type, *names: str) -> tuple[Callable[[object, Any], None], ...]:
    """Functions setting the named slots of ``cls`` instances directly (past a frozen ``__setattr__``).

    For a decoder's innermost loop, where even a call to the functions below is measurable; the
    instance comes from ``object.__new__(cls)`` and must get every slot set.
    """
    return tuple(cls.__dict__[name].__set__ for name in names)


_new = object.__new__
(_set_text_content,) = slot_setters(TextContent, "text")
_set_media = slot_setters(_MediaContent, "url", "base64_data", "mime_type")
(_set_detail_level,) = slot_setters(ImageContent, "detail_level")
_set_request = slot_setters(ToolExecutionRequest, "id", "name", "arguments")
(_set_system_text,) = slot_setters(SystemMessage, "text")
_set_user = slot_setters(UserMessage, "contents", "name", "attributes")
_set_ai = slot_setters(AiMessage, "text", "tool_execution_requests", "thinking", "attributes")
_set_tool_result = slot_setters(ToolExecutionResultMessage, "id", "tool_name", "text", "is_error", "attributes")
(_set_custom_attributes,) = slot_setters(CustomMessage, "attributes")

EMPTY_ATTRIBUTES = _EMPTY
"""The one shared empty attributes dict of messages without attributes."""

freeze_attributes = _copy_attributes
"""Check and deep-freeze an attributes mapping as the constructors do (``TypeError``/``ValueError`` if bad)."""


def decoded_text_content(text: str) -> TextContent:
    """A :class:`TextContent` from a checked str."""
    part = _new(TextContent)
    _set_text_content(part, text)
    return part


def decoded_media_content(
    cls: type[_MediaContent], url: str | None, base64_data: str | None, mime_type: str | None, detail_level: str | None
) -> Content:
    """A media part from checked fields; still refuses a part with neither url nor data (``ValueError``)."""
    if url is None and base64_data is None:
        raise ValueError(f"{cls.__name__} needs a url or base64_data")
    part = _new(cls)
    for setter, value in zip(_set_media, (url, base64_data, mime_type), strict=True):
        setter(part, value)
    if cls is ImageContent:
        _set_detail_level(part, detail_level)
    return part  # type: ignore[return-value]


def decoded_tool_execution_request(id: str | None, name: str, arguments: str) -> ToolExecutionRequest:
    """A :class:`ToolExecutionRequest` from checked fields."""
    request = _new(ToolExecutionRequest)
    set_id, set_name, set_arguments = _set_request
    set_id(request, id)
    set_name(request, name)
    set_arguments(request, arguments)
    return request


def decoded_system_message(text: str) -> SystemMessage:
    """A :class:`SystemMessage` from a checked str."""
    message = _new(SystemMessage)
    _set_system_text(message, text)
    return message


def decoded_user_message(
    contents: tuple[Content, ...], name: str | None, attributes: Mapping[str, Any] | None
) -> UserMessage:
    """A :class:`UserMessage` from checked, non-empty parts; ``attributes`` are checked as they are frozen."""
    message = _new(UserMessage)
    set_contents, set_name, set_attributes = _set_user
    set_contents(message, contents)
    set_name(message, name)
    set_attributes(message, _copy_attributes(attributes) if attributes else _EMPTY)
    return message


def decoded_ai_message(
    text: str | None,
    tool_execution_requests: tuple[ToolExecutionRequest, ...],
    thinking: str | None,
    attributes: Mapping[str, Any] | None,
) -> AiMessage:
    """An :class:`AiMessage` from checked fields; ``attributes`` are checked as they are frozen."""
    message = _new(AiMessage)
    set_text, set_requests, set_thinking, set_attributes = _set_ai
    set_text(message, text)
    set_requests(message, tool_execution_requests)
    set_thinking(message, thinking)
    set_attributes(message, _copy_attributes(attributes) if attributes else _EMPTY)
    return message


def decoded_tool_result_message(
    id: str | None, tool_name: str | None, text: str, is_error: bool, attributes: Mapping[str, Any] | None
) -> ToolExecutionResultMessage:
    """A :class:`ToolExecutionResultMessage` from checked fields; ``attributes`` are checked as they are frozen."""
    message = _new(ToolExecutionResultMessage)
    set_id, set_tool_name, set_text, set_is_error, set_attributes = _set_tool_result
    set_id(message, id)
    set_tool_name(message, tool_name)
    set_text(message, text)
    set_is_error(message, is_error)
    set_attributes(message, _copy_attributes(attributes) if attributes else _EMPTY)
    return message


def decoded_custom_message(attributes: Mapping[str, Any]) -> CustomMessage:
    """A :class:`CustomMessage` from a checked dict; its values are checked as they are frozen."""
    message = _new(CustomMessage)
    _set_custom_attributes(message, _copy_attributes(attributes))
    return message
