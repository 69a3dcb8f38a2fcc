"""LangChain messages (langchain-core ``BaseMessage`` types), to and from chat messages, both ways exactly.

Needs the ``langchain`` extra: ``pip install 'llm-window-memory[langchain]'``.

:func:`to_langchain` writes ``SystemMessage``, ``HumanMessage``, ``AIMessage`` and ``ToolMessage``;
:func:`from_langchain` reads them back. ``attributes`` travel as ``response_metadata``. What a LangChain
message holds beyond chatmemory's fields (ids, ``additional_kwargs``, usage, content blocks, tool calls as
given) is kept in attributes under ``"langchain"`` (:data:`RECORD_ATTRIBUTE`) and written back while it
still agrees with the message; tool-call ``arguments`` strings come back byte for byte.

The mapping, the content blocks and what raises: docs/integration-langchain.md, *How messages map*.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from chatmemory.core.errors import SerializationError
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
from chatmemory.core.optional import require
from chatmemory.serialization.leftovers import thaw

require("langchain_core", feature="chatmemory.integrations.langchain", extra="langchain")

from langchain_core import messages as lc  # noqa: E402 - imported once langchain-core is known to be installed

__all__ = ["RECORD_ATTRIBUTE", "from_langchain", "to_langchain"]

RECORD_ATTRIBUTE = "langchain"
"""The attribute under which a message keeps the LangChain fields its own fields do not hold."""

_THINKING_SEPARATOR = "\n\n"
_PDF = "application/pdf"
_MEDIA_BLOCKS: dict[type, str] = {
    ImageContent: "image",
    AudioContent: "audio",
    VideoContent: "video",
    PdfFileContent: "file",
}
_MEDIA_CLASSES = {kind: cls for cls, kind in _MEDIA_BLOCKS.items()}
_SKIPPED_BLOCKS = frozenset({"tool_call", "invalid_tool_call", "tool_call_chunk"})  # read from tool_calls instead
# The fields a record may keep, per class, in the order they are written back.
_KEPT_FIELDS: dict[type[lc.BaseMessage], tuple[str, ...]] = {
    lc.SystemMessage: ("content", "additional_kwargs", "name", "id"),
    lc.HumanMessage: ("content", "additional_kwargs", "name", "id"),
    lc.AIMessage: (
        "content",
        "additional_kwargs",
        "tool_calls",
        "invalid_tool_calls",
        "usage_metadata",
        "name",
        "id",
    ),
    lc.ToolMessage: ("content", "additional_kwargs", "artifact", "status", "name", "id", "tool_call_id"),
}
_ANY_KEPT_FIELD = frozenset(name for names in _KEPT_FIELDS.values() for name in names)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Invalid(Exception):
    """Not a LangChain message chatmemory can hold."""


# ------------------------------------------------------------------------------------------- to_langchain


def _block(part: Content) -> dict[str, Any]:
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text}
    block: dict[str, Any] = {"type": _MEDIA_BLOCKS[type(part)]}
    if part.url is not None:
        block["url"] = part.url
    if part.base64_data is not None:
        block["base64"] = part.base64_data
    mime_type = part.mime_type
    if mime_type is None and isinstance(part, PdfFileContent):
        mime_type = _PDF
    if mime_type is not None:
        block["mime_type"] = mime_type
    if isinstance(part, ImageContent) and part.detail_level is not None:
        block["extras"] = {"detail": part.detail_level.lower()}
    return block


def _object_arguments(arguments: str) -> dict[str, Any] | None:
    """The JSON object ``arguments`` holds (``{}`` for blank), or ``None`` when it holds none."""
    if not arguments.strip():
        return {}
    try:
        args = json.loads(arguments)
    except ValueError:
        return None
    return args if isinstance(args, dict) else None


def _ai(message: AiMessage, response_metadata: dict[str, Any]) -> lc.AIMessage:
    content: str | list[str | dict[str, Any]]
    if message.thinking is None:
        content = message.text or ""
    else:
        content = [{"type": "reasoning", "reasoning": message.thinking}]
        if message.text:
            content.append({"type": "text", "text": message.text})
    valid: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    raw: list[dict[str, Any]] = []
    exact = True  # whether tool_calls, then invalid_tool_calls, give the requests back as they are
    for request in message.tool_execution_requests:
        raw.append(
            {"id": request.id, "type": "function", "function": {"name": request.name, "arguments": request.arguments}}
        )
        args = _object_arguments(request.arguments)
        if args is None:
            invalid.append(
                {
                    "type": "invalid_tool_call",
                    "id": request.id,
                    "name": request.name,
                    "args": request.arguments,
                    "error": "arguments are not a JSON object",
                }
            )
            continue
        exact = exact and not invalid and request.arguments == _compact(args)
        valid.append({"type": "tool_call", "id": request.id, "name": request.name, "args": args})
    # LangChain's own provider format keeps the strings, in order, when the calls alone would not give them back.
    additional_kwargs: dict[str, Any] = {} if exact else {"tool_calls": raw}
    return lc.AIMessage(
        content=content,
        tool_calls=valid,
        invalid_tool_calls=invalid,
        additional_kwargs=additional_kwargs,
        response_metadata=response_metadata,
    )


def _write_plain(message: ChatMessage, response_metadata: dict[str, Any]) -> lc.BaseMessage:
    """The LangChain message of ``message``'s own fields (no record applied)."""
    if isinstance(message, SystemMessage):
        return lc.SystemMessage(content=message.text)
    if isinstance(message, UserMessage):
        content: str | list[str | dict[str, Any]]
        content = message.text if message.has_single_text() else [_block(part) for part in message.contents]
        return lc.HumanMessage(content=content, name=message.name, response_metadata=response_metadata)
    if isinstance(message, AiMessage):
        return _ai(message, response_metadata)
    if isinstance(message, ToolExecutionResultMessage):
        if message.id is None:
            raise SerializationError("a tool result without an id has no ToolMessage form (tool_call_id is required)")
        return lc.ToolMessage(
            content=message.text,
            tool_call_id=message.id,
            name=message.tool_name,
            status="error" if message.is_error else "success",
            response_metadata=response_metadata,
        )
    raise SerializationError(f"cannot convert a {type(message).__name__}: it is not a chat message")


def _split_record(message: ChatMessage) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """``message``'s attributes without the record, and the record (empty when it keeps none)."""
    attributes = getattr(message, "attributes", {})
    if RECORD_ATTRIBUTE not in attributes:
        return dict(attributes), {}
    record = attributes[RECORD_ATTRIBUTE]
    if not isinstance(record, Mapping) or not set(record) <= _ANY_KEPT_FIELD:
        raise SerializationError(
            f"its attribute {RECORD_ATTRIBUTE!r} is reserved for the LangChain fields this module keeps, and this "
            f"one is no such record; rename the attribute"
        )
    return {key: value for key, value in attributes.items() if key != RECORD_ATTRIBUTE}, record


def _with(written: lc.BaseMessage, fields: Mapping[str, Any]) -> lc.BaseMessage:
    return written.model_copy(update={name: thaw(value) for name, value in fields.items()})


def _write(message: ChatMessage) -> lc.BaseMessage:
    attributes, record = _split_record(message)
    written = _write_plain(message, attributes)
    if not record:
        return written
    bare = _without_record(message, attributes)

    def fits(candidate: lc.BaseMessage) -> bool:
        try:
            return _read_plain(candidate) == bare
        except (_Invalid, TypeError, ValueError, KeyError):
            return False

    whole = _with(written, record)
    if fits(whole):
        return whole
    # The message changed since it was read: keep what still agrees with its fields, one field at a time.
    for name in _KEPT_FIELDS[type(written)]:
        if name in record:
            candidate = _with(written, {name: record[name]})
            if fits(candidate):
                written = candidate
    return written


def to_langchain(messages: Iterable[ChatMessage], *, skip_custom: bool = False) -> list[lc.BaseMessage]:
    """LangChain messages for ``messages`` (see the module docs for what is carried how).

    Args:
        messages: the messages, e.g. ``memory.messages()``.
        skip_custom: leave ``CustomMessage`` entries out instead of raising.

    Raises:
        SerializationError: a message LangChain cannot carry, naming its position.
    """
    converted: list[lc.BaseMessage] = []
    for position, message in enumerate(messages):
        try:
            if isinstance(message, CustomMessage):
                if skip_custom:
                    continue
                raise SerializationError("a CustomMessage has no LangChain form; pass skip_custom=True to leave it out")
            converted.append(_write(message))
        except SerializationError as exc:
            raise SerializationError(f"message {position} ({type(message).__name__}): {exc}") from None
    return converted


# ----------------------------------------------------------------------------------------- from_langchain


def _media(block: Mapping[str, Any]) -> Content:
    cls = _MEDIA_CLASSES[block["type"]]
    url, base64_data, mime_type = block.get("url"), block.get("base64"), block.get("mime_type")
    if url is None and base64_data is None:
        raise _Invalid(f"a {block['type']} block without url or base64 (a file_id reference) cannot be held")
    if cls is ImageContent:
        detail = (block.get("extras") or {}).get("detail")
        return ImageContent(
            url, base64_data, mime_type, detail_level=detail.upper() if isinstance(detail, str) else None
        )
    media: Content = cls(url, base64_data, mime_type)
    return media


def _user_content(message: lc.BaseMessage) -> list[Content]:
    if isinstance(message.content, str):
        return [TextContent(message.content)]
    parts: list[Content] = []
    for block in message.content_blocks:
        if block["type"] == "text":
            parts.append(TextContent(block["text"]))
        elif block["type"] in _MEDIA_CLASSES:
            parts.append(_media(block))
        else:
            raise _Invalid(f"a {block['type']!r} content block cannot be held in a user message")
    return parts


def _text(message: lc.BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    texts = []
    for block in message.content_blocks:
        if block["type"] != "text":
            raise _Invalid(f"a {block['type']!r} block cannot be held where chatmemory keeps text only")
        texts.append(block["text"])
    return "".join(texts)


def _kept_call(entry: Any) -> tuple[Any, Any, str] | None:
    """The ``(id, name, arguments)`` of one entry of ``additional_kwargs["tool_calls"]``, if it is one."""
    function = entry.get("function") if isinstance(entry, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("arguments"), str):
        return None
    return entry.get("id"), function.get("name"), function["arguments"]


def _agrees(arguments: str, args: Any) -> bool:
    try:
        return _compact(json.loads(arguments) if arguments.strip() else {}) == _compact(args)
    except ValueError:
        return False


def _requests(message: lc.AIMessage) -> list[ToolExecutionRequest]:
    """The tool calls, in the order and with the argument strings the provider format keeps, when it fits them."""
    valid = list(message.tool_calls)
    invalid = list(message.invalid_tool_calls)
    for call in invalid:
        if call.get("name") is None:
            raise _Invalid("an invalid tool call without a name cannot be held")
    kept = message.additional_kwargs.get("tool_calls")
    entries = [_kept_call(entry) for entry in kept] if isinstance(kept, list) else []
    if entries and None not in entries and len(entries) == len(valid) + len(invalid):
        ordered: list[ToolExecutionRequest] = []
        for entry in entries:
            assert entry is not None
            call_id, name, arguments = entry
            match = next(
                (c for c in valid if c["id"] == call_id and c["name"] == name and _agrees(arguments, c["args"])), None
            )
            if match is not None:
                valid.remove(match)
            else:
                broken = next(
                    (c for c in invalid if c.get("id") == call_id and c["name"] == name and c["args"] == arguments),
                    None,
                )
                if broken is None:
                    break
                invalid.remove(broken)
            ordered.append(ToolExecutionRequest(call_id, name, arguments))
        else:
            return ordered
        valid, invalid = list(message.tool_calls), list(message.invalid_tool_calls)
    requests = [ToolExecutionRequest(call["id"], call["name"], _compact(call["args"])) for call in valid]
    requests.extend(
        ToolExecutionRequest(call.get("id"), call["name"] or "", call.get("args") or "") for call in invalid
    )
    return requests


def _from_ai(message: lc.AIMessage) -> AiMessage:
    texts: list[str] = []
    thoughts: list[str] = []
    for block in message.content_blocks:
        if block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "reasoning":
            thoughts.append(block.get("reasoning", ""))
        elif block["type"] not in _SKIPPED_BLOCKS:
            raise _Invalid(f"a {block['type']!r} content block cannot be held in an AiMessage")
    reasoning_content = message.additional_kwargs.get("reasoning_content")
    if not thoughts and isinstance(reasoning_content, str):
        thoughts.append(reasoning_content)
    return AiMessage(
        "".join(texts) or None,
        _requests(message),
        thinking=_THINKING_SEPARATOR.join(thoughts) if thoughts else None,
        attributes=message.response_metadata,
    )


def _read_plain(message: Any) -> ChatMessage:
    """The chat message of ``message``'s fields; its attributes are the ``response_metadata``."""
    if isinstance(message, lc.SystemMessage):
        return SystemMessage(_text(message))
    if isinstance(message, lc.HumanMessage):
        return UserMessage(_user_content(message), name=message.name, attributes=message.response_metadata)
    if isinstance(message, lc.AIMessage):
        return _from_ai(message)
    if isinstance(message, lc.ToolMessage):
        return ToolExecutionResultMessage(
            message.tool_call_id,
            message.name,
            _text(message),
            is_error=message.status == "error",
            attributes=message.response_metadata,
        )
    raise _Invalid(
        f"a {type(message).__name__} cannot be held (SystemMessage, HumanMessage, AIMessage and ToolMessage can)"
    )


def _without_record(message: ChatMessage, attributes: dict[str, Any]) -> ChatMessage:
    """``message`` with ``attributes`` (its own, the record left out)."""
    if isinstance(message, UserMessage):
        return UserMessage(message.contents, message.name, attributes)
    if isinstance(message, AiMessage):
        return AiMessage(message.text, message.tool_execution_requests, message.thinking, attributes)
    if isinstance(message, ToolExecutionResultMessage):
        return ToolExecutionResultMessage(message.id, message.tool_name, message.text, message.is_error, attributes)
    return message


def _written_class(message: lc.BaseMessage) -> type[lc.BaseMessage]:
    for cls in _KEPT_FIELDS:
        if isinstance(message, cls):
            return cls
    raise _Invalid(f"a {type(message).__name__} cannot be held")  # pragma: no cover - _read_plain refused it


def _read(message: Any) -> ChatMessage:
    plain = _read_plain(message)
    if RECORD_ATTRIBUTE in message.response_metadata:
        raise _Invalid(
            f"its response_metadata key {RECORD_ATTRIBUTE!r} is where chatmemory keeps the LangChain fields; "
            "rename the key"
        )
    written = _write_plain(plain, dict(message.response_metadata))
    differing = [
        name
        for name in _KEPT_FIELDS[_written_class(message)]
        if getattr(message, name) != getattr(written, name)
        or type(getattr(message, name)) is not type(getattr(written, name))
    ]
    if isinstance(plain, SystemMessage) and message.response_metadata:
        differing.append("response_metadata")
    if not differing:
        return plain
    if isinstance(plain, SystemMessage):
        # chatmemory's SystemMessage is its text alone: nothing else could be kept.
        raise _Invalid(
            f"a SystemMessage with {', '.join(differing)} beyond a string content cannot be held (chatmemory's "
            "SystemMessage keeps its text alone); leave them out"
        )
    record = {name: _json_field(message, name) for name in differing}
    attributes = {**dict(message.response_metadata), RECORD_ATTRIBUTE: record}
    return _without_record(plain, attributes)


def _json_field(message: lc.BaseMessage, name: str) -> Any:
    value = message.model_dump(include={name})[name]
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise _Invalid(
            f"its {name} ({type(getattr(message, name)).__name__}) is not JSON-native and cannot be kept; "
            f"leave it out before storing the message"
        ) from None
    return value


def from_langchain(messages: Iterable[lc.BaseMessage]) -> list[ChatMessage]:
    """Chat messages from LangChain messages, such that :func:`to_langchain` gives the same messages back.

    Raises:
        SerializationError: a message chatmemory cannot hold, naming its position.
    """
    converted: list[ChatMessage] = []
    for position, message in enumerate(messages):
        try:
            converted.append(_read(message))
        except (_Invalid, SerializationError, TypeError, ValueError, KeyError) as exc:  # noqa: PERF203 - each on its own
            raise SerializationError(f"LangChain message {position} ({type(message).__name__}): {exc}") from None
    return converted
