"""Anthropic Messages API ``system`` and ``messages``, to and from chat messages.

``system, messages = to_anthropic(memory.messages())`` gives what ``client.messages.create`` takes;
``from_anthropic(system, messages)`` reads it back (a request's, or a response added as
``{"role": "assistant", "content": [block.model_dump() for block in response.content]}``).
Thinking blocks keep their signatures (under the ``"anthropic"`` attribute), so a tool loop with extended
thinking replays; the API wants a user turn first, so build the memory with ``start_on="user"``.

What maps to what, what is dropped and what raises: docs/converters.md, *Anthropic Messages*.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

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
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.serialization.anthropic_read import RECORD_ATTRIBUTE, THINKING_SEPARATOR, read_messages
from chatmemory.serialization.leftovers import RecordDoesNotFit, TextSlices, thaw

if TYPE_CHECKING:
    # Only for the annotation: the SDK's own type when it is installed (a type checker reads Any when not).
    from anthropic.types import MessageParam


__all__ = ["RECORD_ATTRIBUTE", "from_anthropic", "to_anthropic"]

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_PDF = "application/pdf"


def _source(part: ImageContent | PdfFileContent, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
    if part.url is not None and part.base64_data is not None:
        raise SerializationError(f"{what} with both a url and base64_data has no single Anthropic form")
    if part.url is not None:
        return {"type": "url", "url": part.url}
    if part.mime_type not in allowed:
        raise SerializationError(f"{what} of type {part.mime_type!r} cannot be sent inline; Anthropic takes {allowed}")
    return {"type": "base64", "media_type": part.mime_type, "data": part.base64_data}


def _block(part: Content) -> dict[str, Any] | None:
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ImageContent):
        return {"type": "image", "source": _source(part, IMAGE_TYPES, "an ImageContent")}
    if isinstance(part, PdfFileContent):
        pdf = (
            part if part.mime_type is not None or part.url is not None else PdfFileContent(None, part.base64_data, _PDF)
        )
        return {"type": "document", "source": _source(pdf, (_PDF,), "a PdfFileContent")}
    raise SerializationError(f"Anthropic takes no {type(part).__name__} in a message")


def _input(arguments: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise SerializationError(f"the arguments of tool call {name!r} are not a JSON object, which Anthropic needs")
    return value


def _require_id(value: str | None, what: str) -> str:
    if value is None:
        raise SerializationError(f"{what} has no id, which Anthropic requires")
    return value


def _tool_use(request: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **thaw(extra),
        "type": "tool_use",
        "id": _require_id(request.id, f"tool call {request.name!r}"),
        "name": request.name,
        "input": _input(request.arguments, request.name),
    }


def _blocks_from_record(message: AiMessage, record: list[Any]) -> list[dict[str, Any]]:
    thinking = TextSlices(message.thinking, THINKING_SEPARATOR)
    text = TextSlices(message.text, "")
    requests = iter(message.tool_execution_requests)
    blocks: list[dict[str, Any]] = []
    for entry in record:
        kind = entry.get("type")
        if kind == "thinking":
            blocks.append({"type": kind, "thinking": thinking.take(entry["chars"]), "signature": entry["signature"]})
        elif kind == "text":
            extra = {key: value for key, value in entry.items() if key not in ("type", "chars")}
            blocks.append({**thaw(extra), "type": kind, "text": text.take(entry["chars"])})
        elif kind == "tool_use":
            request = next(requests, None)
            if request is None:
                raise RecordDoesNotFit
            blocks.append(_tool_use(request, {key: value for key, value in entry.items() if key != "type"}))
        else:
            blocks.append(thaw(entry))  # redacted_thinking: opaque, kept whole
    complete = thinking.done() and text.done()
    if next(requests, None) is not None or not complete:
        raise RecordDoesNotFit
    if (thinking.taken > 0) != (message.thinking is not None) or (text.taken > 0) != (message.text is not None):
        raise RecordDoesNotFit
    return blocks


def assistant_blocks(message: AiMessage) -> list[dict[str, Any]]:
    """The content blocks of an assistant message (see the module docs)."""
    record = message.attributes.get(RECORD_ATTRIBUTE)
    if isinstance(record, Mapping) and isinstance(record.get("blocks"), list):
        try:
            return _blocks_from_record(message, record["blocks"])
        except RecordDoesNotFit:
            pass  # the message changed since it was read: write what it holds now
    blocks: list[dict[str, Any]] = []
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    blocks.extend(_tool_use(request, {}) for request in message.tool_execution_requests)
    return blocks


def _tool_result(message: ToolExecutionResultMessage) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": _require_id(message.id, f"the result of tool {message.tool_name!r}"),
        "content": message.text,
    }
    if message.is_error:
        block["is_error"] = True
    return block


def to_anthropic(
    messages: Iterable[ChatMessage], *, skip_custom: bool = False
) -> tuple[str | None, list[MessageParam]]:
    """The ``system`` text and the ``messages`` of an Anthropic Messages request (see the module docs).

    Args:
        messages: the messages, e.g. ``memory.messages()``.
        skip_custom: leave ``CustomMessage`` entries out instead of raising.

    Returns:
        ``(system, messages)``: ``system`` is ``None`` when there is no system message (leave the
        ``system`` argument out then).

    Raises:
        SerializationError: a message or part Anthropic cannot carry, naming the message.
    """
    systems: list[str] = []
    converted: list[dict[str, Any]] = []
    results_open = False  # the last message written holds tool results only: a UserMessage may join it
    for position, message in enumerate(messages):
        try:
            if isinstance(message, SystemMessage):
                systems.append(message.text)
                continue
            if isinstance(message, ToolExecutionResultMessage):
                if not results_open:
                    converted.append({"role": "user", "content": []})
                converted[-1]["content"].append(_tool_result(message))
                results_open = True
                continue
            if isinstance(message, UserMessage):
                blocks = [block for block in map(_block, message.contents) if block is not None]
                if results_open:
                    converted[-1]["content"].extend(blocks)
                elif message.has_single_text() and message.text:
                    converted.append({"role": "user", "content": message.text})
                elif blocks:
                    converted.append({"role": "user", "content": blocks})
            elif isinstance(message, AiMessage):
                blocks = assistant_blocks(message)
                if blocks:
                    converted.append({"role": "assistant", "content": blocks})
            elif isinstance(message, CustomMessage):
                if not skip_custom:
                    raise SerializationError(
                        "a CustomMessage has no Anthropic form; pass skip_custom=True to leave it out"
                    )
            else:
                raise SerializationError(f"cannot convert a {type(message).__name__}: it is not a chat message")
        except SerializationError as exc:
            raise SerializationError(f"message {position} ({type(message).__name__}): {exc}") from None
        results_open = False
    return ("\n\n".join(systems) if systems else None), cast("list[MessageParam]", converted)


def from_anthropic(
    system: str | Iterable[Mapping[str, Any]] | None, messages: Iterable[Mapping[str, Any]]
) -> list[ChatMessage]:
    """Messages from an Anthropic request's ``system`` and ``messages`` (see the module docs).

    Args:
        system: the system text, a list of text blocks, or ``None``.
        messages: the message dicts, in conversation order.

    Raises:
        SerializationError: something that is not an Anthropic message chatmemory can hold, naming its position.
    """
    return read_messages(system, list(messages), write=assistant_blocks)
