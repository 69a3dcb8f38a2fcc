"""Reading Anthropic Messages into chat messages (see :mod:`chatmemory.serialization.anthropic`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from chatmemory.core.errors import SerializationError
from chatmemory.core.messages import (
    AiMessage,
    ChatMessage,
    Content,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.serialization.leftovers import thaw

__all__ = ["RECORD_ATTRIBUTE", "THINKING_SEPARATOR", "read_messages"]

RECORD_ATTRIBUTE = "anthropic"
"""The attribute of an ``AiMessage`` keeping its blocks' signatures, order and extras."""
THINKING_SEPARATOR = "\n\n"
"""What joins the thinking blocks of one message in ``AiMessage.thinking``."""

# Per block type: the fields read into the message, those kept in the record, and those dropped.
_READ = {
    "text": frozenset({"type", "text"}),
    "image": frozenset({"type", "source"}),
    "document": frozenset({"type", "source"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}
_KEPT = {"text": frozenset({"citations"}), "tool_use": frozenset({"caller", "toolset_name"})}
_DROPPED = frozenset({"cache_control"})


class _Invalid(Exception):
    """Not an Anthropic message chatmemory can hold."""


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Invalid(f"{what} is a {type(value).__name__}, not a dict")
    return value


def _str(data: Mapping[str, Any], key: str, what: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _Invalid(f"{what} needs a str {key!r}, not {type(value).__name__}")
    return value


def _block(value: Any) -> tuple[str, Mapping[str, Any], dict[str, Any]]:
    """``(type, block, kept extras)``; raises for a type or a field chatmemory cannot hold."""
    block = _mapping(value, "a content block")
    kind = block.get("type")
    if not isinstance(kind, str) or kind not in _READ:
        raise _Invalid(f"a {kind!r} block cannot be held (chatmemory reads {', '.join(_READ)})")
    kept_keys = _KEPT.get(kind, frozenset())
    unknown = sorted(
        key for key, item in block.items() if item is not None and key not in _READ[kind] | kept_keys | _DROPPED
    )
    if unknown:
        raise _Invalid(f"a {kind} block has fields chatmemory cannot hold: {unknown}")
    return kind, block, {key: thaw(block[key]) for key in kept_keys if block.get(key) is not None}


def _media(block: Mapping[str, Any], kind: str) -> Content:
    source = _mapping(block.get("source"), f"the source of a {kind} block")
    if source.get("type") == "url":
        url = _str(source, "url", "a url source")
        return ImageContent(url=url) if kind == "image" else PdfFileContent(url=url)
    if source.get("type") == "base64":
        data, media_type = _str(source, "data", "a base64 source"), _str(source, "media_type", "a base64 source")
        if kind == "image":
            return ImageContent(base64_data=data, mime_type=media_type)
        return PdfFileContent(base64_data=data, mime_type=media_type)
    raise _Invalid(f"a {kind} source of type {source.get('type')!r} cannot be held (url and base64 can)")


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _Invalid(f"a tool_result's content is a {type(content).__name__}, not a str or a list")
    texts = []
    for value in content:
        kind, block, _ = _block(value)
        if kind != "text":
            raise _Invalid(f"a tool_result holds a {kind} block; chatmemory keeps tool results as text")
        texts.append(_str(block, "text", "a text block"))
    return "".join(texts)


def _user(content: Any, names: Mapping[str, str]) -> list[ChatMessage]:
    if isinstance(content, str):
        return [UserMessage(content)]
    if not isinstance(content, list):
        raise _Invalid(f"a user message's content is a {type(content).__name__}, not a str or a list")
    read: list[ChatMessage] = []
    parts: list[Content] = []
    for value in content:
        kind, block, _ = _block(value)
        if kind == "tool_result":
            call_id = _str(block, "tool_use_id", "a tool_result")
            is_error = block.get("is_error")
            if is_error is not None and not isinstance(is_error, bool):
                raise _Invalid(f"a tool_result's is_error is a {type(is_error).__name__}, not a bool")
            read.append(
                ToolExecutionResultMessage(
                    call_id, names.get(call_id), _result_text(block.get("content")), bool(is_error)
                )
            )
        elif kind == "text":
            parts.append(TextContent(_str(block, "text", "a text block")))
        elif kind in ("image", "document"):
            parts.append(_media(block, kind))
        else:
            raise _Invalid(f"a user message holds a {kind} block")
    return [*read, UserMessage(parts)] if parts else read


def _assistant(content: Any, names: dict[str, str], write: Callable[[AiMessage], list[dict[str, Any]]]) -> AiMessage:
    if isinstance(content, str):
        return AiMessage(content)
    if not isinstance(content, list):
        raise _Invalid(f"an assistant message's content is a {type(content).__name__}, not a str or a list")
    record: list[dict[str, Any]] = []
    texts: list[str] = []
    thoughts: list[str] = []
    requests: list[ToolExecutionRequest] = []
    for value in content:
        kind, block, kept = _block(value)
        if kind == "text":
            texts.append(_str(block, "text", "a text block"))
            record.append({"type": kind, "chars": len(texts[-1]), **kept})
        elif kind == "thinking":
            thoughts.append(_str(block, "thinking", "a thinking block"))
            signature = _str(block, "signature", "a thinking block")
            record.append({"type": kind, "chars": len(thoughts[-1]), "signature": signature})
        elif kind == "redacted_thinking":
            record.append({"type": kind, "data": _str(block, "data", "a redacted_thinking block")})
        elif kind == "tool_use":
            arguments = block.get("input")
            if not isinstance(arguments, Mapping):
                raise _Invalid("a tool_use block's input is not a JSON object")
            request = ToolExecutionRequest(
                _str(block, "id", "a tool_use block"),
                _str(block, "name", "a tool_use block"),
                json.dumps(arguments, ensure_ascii=False, separators=(",", ":")),
            )
            names[request.id or ""] = request.name
            requests.append(request)
            record.append({"type": kind, **kept})
        else:
            raise _Invalid(f"an assistant message holds a {kind} block")
    text = "".join(texts) if texts else None
    thinking = THINKING_SEPARATOR.join(thoughts) if thoughts else None
    bare = AiMessage(text, requests, thinking=thinking)
    kept_record = AiMessage(text, requests, thinking=thinking, attributes={RECORD_ATTRIBUTE: {"blocks": record}})
    # The record is only worth keeping when writing the message without it would give other blocks.
    return bare if write(bare) == write(kept_record) else kept_record


def _system(system: str | Iterable[Mapping[str, Any]]) -> SystemMessage:
    if isinstance(system, str):
        return SystemMessage(system)
    texts = []
    for value in system:
        kind, block, _ = _block(value)
        if kind != "text":
            raise _Invalid(f"the system prompt holds a {kind} block; only text blocks can be held")
        texts.append(_str(block, "text", "a system text block"))
    return SystemMessage("".join(texts))


def read_messages(
    system: str | Iterable[Mapping[str, Any]] | None,
    messages: list[Any],
    *,
    write: Callable[[AiMessage], list[dict[str, Any]]],
) -> list[ChatMessage]:
    """The messages ``system`` and ``messages`` hold (see :func:`chatmemory.serialization.from_anthropic`)."""
    read: list[ChatMessage] = []
    if system is not None:
        try:
            read.append(_system(system))
        except (_Invalid, TypeError, ValueError) as exc:
            raise SerializationError(f"Anthropic system prompt: {exc}") from None
    names: dict[str, str] = {}
    for position, value in enumerate(messages):
        try:
            message = _mapping(value, "a message")
            unknown = sorted(key for key in message if key not in ("role", "content"))
            if unknown:
                raise _Invalid(f"a message has fields chatmemory cannot hold: {unknown}")
            role = message.get("role")
            if role == "user":
                read.extend(_user(message.get("content"), names))
            elif role == "assistant":
                read.append(_assistant(message.get("content"), names, write))
            else:
                raise _Invalid(f"unknown role {role!r} (expected user or assistant)")
        except (_Invalid, TypeError, ValueError, SerializationError) as exc:  # noqa: PERF203 - named per message
            raise SerializationError(f"Anthropic message {position}: {exc}") from None
    return read
