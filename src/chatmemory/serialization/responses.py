"""OpenAI Responses API input items, to and from chat messages.

:func:`to_responses` builds the ``input`` list of a ``client.responses.create`` call; :func:`from_responses`
reads items back: a request's ``input``, or a response's output items as dicts
(``item.model_dump(exclude_unset=True)``). Items come back exactly: what an item holds beyond the message
fields is kept in the message's attributes under ``"openai_responses"``, and an item no message can hold
is kept whole in a ``CustomMessage`` (unless ``strict=True``), so ``to_responses(from_responses(items)) ==
items`` (an OpenAI Agents SDK session relies on it).

What maps to what, what is dropped and what raises: docs/converters.md, *OpenAI Responses*.
"""

from __future__ import annotations

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
from chatmemory.serialization.data_urls import data_url
from chatmemory.serialization.leftovers import RecordDoesNotFit, TextSlices, thaw
from chatmemory.serialization.responses_read import (
    ITEM_ATTRIBUTE,
    RECORD_ATTRIBUTE,
    THINKING_SEPARATOR,
    read_items,
)

if TYPE_CHECKING:
    # Only for the annotation: the SDK's own type when it is installed (a type checker reads Any when not).
    from openai.types.responses import ResponseInputItemParam


__all__ = ["ITEM_ATTRIBUTE", "RECORD_ATTRIBUTE", "from_responses", "to_responses"]

_DETAILS = {"LOW": "low", "HIGH": "high", "AUTO": "auto", "ORIGINAL": "original", "ULTRA_HIGH": "original"}


def _image_part(part: ImageContent) -> dict[str, Any]:
    if part.url is not None and part.base64_data is not None:
        raise SerializationError("an ImageContent with both a url and base64_data has no single Responses form")
    if part.url is not None:
        url = part.url
    elif part.mime_type is None:
        raise SerializationError("an ImageContent with base64_data needs a mime_type to form a data: URL")
    else:
        url = data_url(part.mime_type, part.base64_data or "")
    detail = _DETAILS.get((part.detail_level or "AUTO").upper())
    if detail is None:
        raise SerializationError(
            f"image detail level {part.detail_level!r} has no Responses value (LOW, HIGH, AUTO, ORIGINAL or ULTRA_HIGH)"
        )
    return {"type": "input_image", "image_url": url, "detail": detail}


def _user_part(part: Content, kept: dict[str, Any] | None, pdf_filename: str) -> dict[str, Any]:
    # kept is None for a part never read from an item: it gets the defaults (a PDF's filename).
    if isinstance(part, TextContent):
        written = {"type": "input_text", "text": part.text}
    elif isinstance(part, ImageContent):
        written = _image_part(part)
    elif isinstance(part, PdfFileContent):
        if part.url is not None and part.base64_data is not None:
            raise SerializationError("a PdfFileContent with both a url and base64_data has no single Responses form")
        if part.url is not None:
            written = {"type": "input_file", "file_url": part.url}
        else:
            file_data = data_url(part.mime_type or "application/pdf", part.base64_data or "")
            written = {"type": "input_file", "file_data": file_data}
            if kept is None:
                written["filename"] = pdf_filename
    else:
        raise SerializationError(f"the Responses API takes no {type(part).__name__} in a message")
    return {**written, **(kept or {})}


def _write_user(message: UserMessage, record: Mapping[str, Any], pdf_filename: str) -> dict[str, Any]:
    kept_parts = record.get("parts")
    if kept_parts is not None and len(kept_parts) != len(message.contents):
        kept_parts = None
    if kept_parts is None and message.has_single_text():
        content: Any = message.text
    else:
        kept = [thaw(extra) for extra in kept_parts] if kept_parts is not None else [None] * len(message.contents)
        content = [_user_part(part, extra, pdf_filename) for part, extra in zip(message.contents, kept, strict=True)]
    return {**thaw(record.get("item", {})), "role": "user", "content": content}


def _write_ai_from_record(message: AiMessage, entries: list[Any]) -> list[dict[str, Any]]:
    thinking = TextSlices(message.thinking, THINKING_SEPARATOR)
    text = TextSlices(message.text, "")
    requests = iter(message.tool_execution_requests)
    items: list[dict[str, Any]] = []
    for entry in entries:
        kind, item = entry["kind"], thaw(entry["item"])
        if kind == "reasoning":
            item["summary"] = [
                {**thaw(part["part"]), "text": thinking.take(part["chars"])} for part in entry["summary"]
            ]
        elif kind == "message":
            parts = entry.get("parts")
            if parts is None:
                item["content"] = text.take(entry["chars"])
            else:
                item["content"] = [
                    {**thaw(part["part"]), _text_key(part["part"]): text.take(part["chars"])} for part in parts
                ]
            item["role"] = "assistant"
        else:
            request = next(requests, None)
            if request is None or request.id is None:
                raise RecordDoesNotFit
            item.update(call_id=request.id, name=request.name, arguments=request.arguments)
        items.append(item)
    has_text = any(entry["kind"] == "message" for entry in entries)
    has_thinking = any(entry.get("summary") for entry in entries)
    if (
        next(requests, None) is not None
        or not (text.done() and thinking.done())
        or has_text != (message.text is not None)
        or has_thinking != (message.thinking is not None)
    ):
        raise RecordDoesNotFit
    return items


def _text_key(part: Mapping[str, Any]) -> str:
    return "refusal" if part.get("type") == "refusal" else "text"


def _require_id(value: str | None, what: str) -> str:
    if value is None:
        raise SerializationError(f"{what} has no id, which the Responses API requires (call_id)")
    return value


def _write_ai(message: AiMessage, record: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries = record.get("items")
    if entries is not None:
        try:
            return _write_ai_from_record(message, list(entries))
        except RecordDoesNotFit:
            pass  # the message changed since it was read: write what it holds now
    items: list[dict[str, Any]] = []
    if message.text is not None:
        items.append({"role": "assistant", "content": message.text})
    items.extend(
        {
            "type": "function_call",
            "call_id": _require_id(request.id, f"tool call {request.name!r}"),
            "name": request.name,
            "arguments": request.arguments,
        }
        for request in message.tool_execution_requests
    )
    return items


def _write_tool_result(message: ToolExecutionResultMessage, record: Mapping[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {
        **thaw(record.get("item", {})),
        "type": "function_call_output",
        "call_id": _require_id(message.id, f"the result of tool {message.tool_name!r}"),
        "output": message.text,
    }
    if record.get("named"):
        item["name"] = message.tool_name
    return item


def write_message(
    message: ChatMessage, *, system_role: str, skip_custom: bool, pdf_filename: str
) -> list[dict[str, Any]]:
    """The items of one message (see the module docs); raises SerializationError without naming it."""
    if isinstance(message, SystemMessage):
        return [{"role": system_role, "content": message.text}]
    if isinstance(message, CustomMessage):
        if ITEM_ATTRIBUTE in message.attributes:
            return [thaw(message.attributes[ITEM_ATTRIBUTE])]
        if skip_custom:
            return []
        raise SerializationError(
            "a CustomMessage has no Responses form unless it keeps an item; pass skip_custom=True to leave it out"
        )
    if not isinstance(message, (UserMessage, AiMessage, ToolExecutionResultMessage)):
        raise SerializationError(f"cannot convert a {type(message).__name__}: it is not a chat message")
    record = message.attributes.get(RECORD_ATTRIBUTE)
    if not isinstance(record, Mapping):
        record = {}
    if isinstance(message, UserMessage):
        return [_write_user(message, record, pdf_filename)]
    if isinstance(message, AiMessage):
        return _write_ai(message, record)
    return [_write_tool_result(message, record)]


def to_responses(
    messages: Iterable[ChatMessage],
    *,
    system_role: str = "system",
    skip_custom: bool = False,
    pdf_filename: str = "document.pdf",
) -> list[ResponseInputItemParam]:
    """Responses API input items for ``messages`` (see the module docs for what is kept and dropped).

    Args:
        messages: the messages, e.g. ``memory.messages()``.
        system_role: the role a ``SystemMessage`` is written with, ``"system"`` or ``"developer"``.
        skip_custom: leave out custom messages that keep no item instead of raising.
        pdf_filename: the ``filename`` sent with inline PDF data.

    Raises:
        SerializationError: a message or part the Responses API cannot carry, naming the message.
    """
    items: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        try:
            items.extend(
                write_message(message, system_role=system_role, skip_custom=skip_custom, pdf_filename=pdf_filename)
            )
        except SerializationError as exc:  # noqa: PERF203 - each message is checked on its own
            raise SerializationError(f"message {position} ({type(message).__name__}): {exc}") from None
    return cast("list[ResponseInputItemParam]", items)


def from_responses(
    items: Iterable[Mapping[str, Any]], *, system_role: str = "system", strict: bool = False
) -> list[ChatMessage]:
    """Messages from Responses API items, such that :func:`to_responses` gives the same items back.

    Args:
        items: the items, in conversation order (dicts, e.g. ``item.model_dump(exclude_unset=True)``).
        system_role: the role read as a ``SystemMessage`` (as in :func:`to_responses`).
        strict: raise for an item no message holds field for field instead of keeping it whole in a
            ``CustomMessage``.

    Raises:
        SerializationError: an entry that is not a Responses item (not a dict, no ``type`` and no ``role``),
            or, with ``strict=True``, one no message can hold; the error names its position.
    """

    def write(message: ChatMessage) -> list[dict[str, Any]] | None:
        # A message whose items depend on to_responses' pdf_filename is no exact copy of any item.
        first, second = (
            write_message(message, system_role=system_role, skip_custom=False, pdf_filename=name)
            for name in ("a.pdf", "b.pdf")
        )
        return first if first == second else None

    return read_items(list(items), system_role=system_role, strict=strict, write=write)
