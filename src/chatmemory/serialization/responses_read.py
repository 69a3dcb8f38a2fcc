"""Reading OpenAI Responses API items into chat messages (see :mod:`chatmemory.serialization.responses`).

Every message read is checked by writing it back: an item (or a turn of items) becomes a message only if
the message gives exactly those items again; otherwise the item is kept whole in a ``CustomMessage``.
That check is what makes ``to_responses(from_responses(items)) == items`` hold for any items, not only
for the shapes this module was written for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from chatmemory.core.errors import SerializationError
from chatmemory.core.messages import (
    AiMessage,
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
)
from chatmemory.serialization.data_urls import parse_data_url
from chatmemory.serialization.leftovers import leftover, thaw

__all__ = ["ITEM_ATTRIBUTE", "RECORD_ATTRIBUTE", "THINKING_SEPARATOR", "read_items"]

RECORD_ATTRIBUTE = "openai_responses"
"""The attribute holding what a message's items had beyond its fields."""
ITEM_ATTRIBUTE = "openai_responses_item"
"""The attribute of a ``CustomMessage`` holding an item no message can hold field for field."""
THINKING_SEPARATOR = "\n\n"
"""What joins the reasoning summary texts of one turn in ``AiMessage.thinking``."""

_DETAIL_NAMES = {"low": "LOW", "high": "HIGH", "auto": "AUTO", "original": "ORIGINAL"}
_PDF = "application/pdf"

Write = Callable[[ChatMessage], "list[dict[str, Any]] | None"]


class _Unholdable(Exception):
    """No message holds this item field for field: it is kept whole (or refused when strict)."""


def _kind(data: Mapping[str, Any]) -> str:
    kind = data.get("type")
    role = data.get("role")
    if kind in (None, "message") and isinstance(role, str):
        return f"{role} message"
    if isinstance(kind, str):
        return kind
    raise SerializationError("it has neither a str type nor a role, so it is no Responses item")


def _answers(kind: str) -> bool:
    """Whether items of this kind are the model's answer, grouped into one AiMessage."""
    return kind in ("reasoning", "function_call", "assistant message")


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Unholdable(f"{what} is a {type(value).__name__}, not a dict")
    return value


def _str(data: Mapping[str, Any], key: str, what: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _Unholdable(f"{what} has no str {key!r}")
    return value


def _record(record: dict[str, Any]) -> dict[str, Any]:
    return {RECORD_ATTRIBUTE: {key: value for key, value in record.items() if value not in ({}, None)}}


# ------------------------------------------------------------------------------------------------ items


def _user_content(part: Mapping[str, Any]) -> tuple[Content, frozenset[str]]:
    kind = part.get("type")
    if kind == "input_text":
        return TextContent(_str(part, "text", "an input_text")), frozenset({"type", "text"})
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str):
            raise _Unholdable("an input_image without an image_url (an uploaded file_id) has no ImageContent form")
        detail = part.get("detail")
        level = _DETAIL_NAMES.get(detail) if isinstance(detail, str) else None
        parsed = parse_data_url(url)
        image = (
            ImageContent(url=url, detail_level=level)
            if parsed is None
            else ImageContent(base64_data=parsed[1], mime_type=parsed[0], detail_level=level)
        )
        return image, frozenset({"type", "image_url", "detail"})
    if kind == "input_file":
        url = part.get("file_url")
        if isinstance(url, str) and "file_data" not in part:
            return PdfFileContent(url=url), frozenset({"type", "file_url"})
        parsed = parse_data_url(part["file_data"]) if isinstance(part.get("file_data"), str) else None
        if parsed is None or parsed[0] != _PDF or "file_url" in part:
            raise _Unholdable("an input_file other than a PDF by file_url or data: URL has no PdfFileContent form")
        return PdfFileContent(base64_data=parsed[1], mime_type=_PDF), frozenset({"type", "file_data"})
    raise _Unholdable(f"a {kind!r} content part has no chatmemory content form")


def _user(data: Mapping[str, Any]) -> UserMessage:
    item = leftover(data, frozenset({"role", "content"}))
    content = data.get("content")
    if isinstance(content, str):
        return UserMessage(content, attributes=_record({"item": item}))
    if not isinstance(content, list) or not content:
        raise _Unholdable("a user message's content is neither a str nor a non-empty list")
    parts: list[Content] = []
    kept: list[dict[str, Any]] = []
    for value in content:
        part, converted = _user_content(_mapping(value, "a content part"))
        parts.append(part)
        kept.append(leftover(value, converted))
    return UserMessage(parts, attributes=_record({"item": item, "parts": kept}))


def _system(data: Mapping[str, Any], system_role: str) -> SystemMessage:
    if data.keys() != {"role", "content"} or data["role"] != system_role or not isinstance(data["content"], str):
        raise _Unholdable(f"only {{'role': {system_role!r}, 'content': <str>}} is a SystemMessage")
    return SystemMessage(data["content"])


def _tool_result(data: Mapping[str, Any], names: Mapping[str, str]) -> ToolExecutionResultMessage:
    call_id = _str(data, "call_id", "a function_call_output")
    output = _str(data, "output", "a function_call_output (a list output has no text form)")
    name = data.get("name")
    tool_name = name if isinstance(name, str) else names.get(call_id)
    item = leftover(data, frozenset({"type", "call_id", "output", "name"}))
    return ToolExecutionResultMessage(
        call_id, tool_name, output, attributes=_record({"item": item, "named": "name" in data or None})
    )


def _answer(group: list[Mapping[str, Any]]) -> AiMessage:
    entries: list[dict[str, Any]] = []
    texts: list[str] = []
    summaries: list[str] = []
    requests: list[ToolExecutionRequest] = []
    for data in group:
        kind = _kind(data)
        if kind == "reasoning":
            summary = data.get("summary")
            if not isinstance(summary, list):
                raise _Unholdable("a reasoning item without a summary list")
            kept = []
            for value in summary:
                part = _mapping(value, "a reasoning summary part")
                summaries.append(_str(part, "text", "a reasoning summary part"))
                kept.append({"part": leftover(part, frozenset({"text"})), "chars": len(summaries[-1])})
            entries.append({"kind": kind, "item": leftover(data, frozenset({"summary"})), "summary": kept})
        elif kind == "function_call":
            call = ToolExecutionRequest(
                _str(data, "call_id", "a function_call"),
                _str(data, "name", "a function_call"),
                _str(data, "arguments", "a function_call"),
            )
            requests.append(call)
            entries.append({"kind": kind, "item": leftover(data, frozenset({"call_id", "name", "arguments"}))})
        else:
            entries.append(_answer_message(data, texts))
    thinking = THINKING_SEPARATOR.join(summaries) if summaries else None
    text = "".join(texts) if any(entry["kind"] == "message" for entry in entries) else None
    return AiMessage(text, requests, thinking=thinking, attributes={RECORD_ATTRIBUTE: {"items": entries}})


def _answer_message(data: Mapping[str, Any], texts: list[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": "message", "item": leftover(data, frozenset({"role", "content"}))}
    content = data.get("content")
    if isinstance(content, str):
        texts.append(content)
        entry["chars"] = len(content)
        return entry
    if not isinstance(content, list):
        raise _Unholdable("an assistant message's content is neither a str nor a list")
    entry["parts"] = []
    for value in content:
        part = _mapping(value, "an assistant content part")
        key = {"output_text": "text", "refusal": "refusal"}.get(part.get("type"))  # type: ignore[arg-type]
        if key is None:
            raise _Unholdable(f"an assistant {part.get('type')!r} part has no text form")
        texts.append(_str(part, key, f"a {part.get('type')} part"))
        entry["parts"].append({"part": leftover(part, frozenset({key})), "chars": len(texts[-1])})
    return entry


# ------------------------------------------------------------------------------------------------- read


def _without_record(message: ChatMessage) -> ChatMessage:
    if not isinstance(message, (UserMessage, AiMessage, ToolExecutionResultMessage)):
        return message
    attributes = {key: value for key, value in message.attributes.items() if key != RECORD_ATTRIBUTE}
    if isinstance(message, UserMessage):
        return UserMessage(message.contents, message.name, attributes)
    if isinstance(message, AiMessage):
        return AiMessage(message.text, message.tool_execution_requests, message.thinking, attributes)
    return ToolExecutionResultMessage(message.id, message.tool_name, message.text, message.is_error, attributes)


def _held(build: Callable[[], ChatMessage], items: list[Mapping[str, Any]], write: Write) -> ChatMessage:
    """The message ``build`` makes, with the least record that writes ``items`` back; else _Unholdable."""
    try:
        message = build()
        for candidate in (_without_record(message), message):
            if write(candidate) == items:
                return candidate
    except (SerializationError, TypeError, ValueError) as exc:
        raise _Unholdable(str(exc)) from None
    raise _Unholdable("no message gives this item back unchanged")


def _kept_whole(item: Mapping[str, Any], position: int, reason: str, strict: bool) -> CustomMessage:
    if strict:
        raise SerializationError(f"Responses item {position}: {reason}")
    try:
        return CustomMessage({ITEM_ATTRIBUTE: thaw(item)})
    except TypeError as exc:
        raise SerializationError(f"Responses item {position} cannot be kept: {exc}") from None


def read_items(items: list[Any], *, system_role: str, strict: bool, write: Write) -> list[ChatMessage]:
    """The messages holding ``items`` (see :func:`chatmemory.serialization.from_responses`)."""
    messages: list[ChatMessage] = []
    names: dict[str, str] = {}
    turn: list[tuple[int, Mapping[str, Any]]] = []

    def end_turn() -> None:
        if not turn:
            return
        group = [item for _, item in turn]
        try:
            messages.append(_held(partial(_answer, group), group, write))
        except _Unholdable:
            # The turn as a whole does not come back unchanged: each item on its own may.
            for position, item in turn:
                try:
                    messages.append(_held(partial(_answer, [item]), [item], write))
                except _Unholdable as exc:  # noqa: PERF203 - each item is tried on its own
                    messages.append(_kept_whole(item, position, str(exc), strict))
        turn.clear()

    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise SerializationError(f"Responses item {position} is a {type(item).__name__}, not a dict")
        try:
            kind = _kind(item)
        except SerializationError as exc:
            raise SerializationError(f"Responses item {position}: {exc}") from None
        if _answers(kind):
            if kind == "function_call" and isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str):
                names[item["call_id"]] = item["name"]
            turn.append((position, item))
            continue
        end_turn()
        build: Callable[[], ChatMessage]
        if kind == "user message":
            build = partial(_user, item)
        elif kind in ("system message", "developer message"):
            build = partial(_system, item, system_role)
        elif kind == "function_call_output":
            build = partial(_tool_result, item, names)
        else:
            messages.append(_kept_whole(item, position, f"a {kind!r} item has no chat message form", strict))
            continue
        try:
            messages.append(_held(build, [item], write))
        except _Unholdable as exc:
            messages.append(_kept_whole(item, position, str(exc), strict))
    end_turn()
    return messages
