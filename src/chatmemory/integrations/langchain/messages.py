"""LangChain messages (langchain-core ``BaseMessage`` types), to and from chat messages.

Needs the ``langchain`` extra: ``pip install 'llm-window-memory[langchain]'``.

==============================  =====================================================================
chatmemory                      langchain-core
==============================  =====================================================================
``SystemMessage``               ``SystemMessage(content=text)``
``UserMessage``                 ``HumanMessage(content, name=name)``: a string for a single text part, else
                                standard content blocks (below)
``AiMessage``                   ``AIMessage(content, tool_calls=[{"id", "name", "args"}])``; with thinking,
                                content is ``[{"type": "reasoning", "reasoning": thinking}, {"type": "text",
                                "text": text}]``
``ToolExecutionResultMessage``  ``ToolMessage(content=text, tool_call_id=id, name=tool_name,
                                status="error" if is_error else "success")``
==============================  =====================================================================

``attributes`` travel as ``response_metadata`` (never sent to a model by LangChain), both ways.

Content parts are LangChain's standard blocks: ``{"type": "text", "text"}``; ``{"type": "image" | "audio" |
"video" | "file", "url"}`` or ``{..., "base64", "mime_type"}`` (``PdfFileContent`` is a ``file`` block,
``application/pdf`` when it has no type); an image's ``detail_level`` is ``extras["detail"]`` in lower case
(read back in upper case), as LangChain's own converters put OpenAI's ``detail``. Reading goes through
``message.content_blocks``, so LangChain's older and provider formats (``image_url`` parts, ``source_type``
blocks, ...) are read too.

What does not carry over:

* **Dropped when reading:** a message's ``id``, ``additional_kwargs`` (except ``reasoning_content``, read as
  thinking when there are no reasoning blocks), ``usage_metadata``, an ``AIMessage``'s ``name``, a
  ``ToolMessage``'s ``artifact``; a reasoning block's extras (signatures); block ids and extras other than
  ``detail``. Empty text reads as ``None``.
* **Tool arguments** become ``args``, the JSON object they hold (``""`` is ``{}``); arguments that are not a
  JSON object go in ``invalid_tool_calls`` with the string as is. Valid ``args`` read back as compact JSON
  (``json.dumps(args, ensure_ascii=False, separators=(",", ":"))``), after the valid calls the invalid ones.
* **Raises** :class:`~chatmemory.SerializationError`, naming the message: a ``CustomMessage`` (unless
  ``skip_custom=True``); a tool result without an id (``ToolMessage`` needs one); on read, a message type
  other than the four above, a content block chatmemory cannot hold (``file_id`` references, server tool
  calls, ...), a tool call without a name, metadata that is not JSON-native.
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
from chatmemory.stores._optional import require

require("langchain_core", feature="chatmemory.integrations.langchain", extra="langchain")

from langchain_core import messages as lc  # noqa: E402 - imported once langchain-core is known to be installed

__all__ = ["from_langchain", "to_langchain"]

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


def _tool_call(request: ToolExecutionRequest) -> tuple[str, dict[str, Any]]:
    try:
        args = json.loads(request.arguments) if request.arguments.strip() else {}
    except ValueError:
        args = None
    if isinstance(args, dict):
        return "valid", {"type": "tool_call", "id": request.id, "name": request.name, "args": args}
    return "invalid", {
        "type": "invalid_tool_call",
        "id": request.id,
        "name": request.name,
        "args": request.arguments,
        "error": "arguments are not a JSON object",
    }


def _ai(message: AiMessage) -> lc.AIMessage:
    content: str | list[str | dict[str, Any]]
    if message.thinking is None:
        content = message.text or ""
    else:
        content = [{"type": "reasoning", "reasoning": message.thinking}]
        if message.text:
            content.append({"type": "text", "text": message.text})
    calls: dict[str, list[dict[str, Any]]] = {"valid": [], "invalid": []}
    for request in message.tool_execution_requests:
        kind, call = _tool_call(request)
        calls[kind].append(call)
    return lc.AIMessage(
        content=content,
        tool_calls=calls["valid"],
        invalid_tool_calls=calls["invalid"],
        response_metadata=dict(message.attributes),
    )


def _to_langchain(message: ChatMessage) -> lc.BaseMessage:
    if isinstance(message, SystemMessage):
        return lc.SystemMessage(content=message.text)
    if isinstance(message, UserMessage):
        content: str | list[str | dict[str, Any]]
        content = message.text if message.has_single_text() else [_block(part) for part in message.contents]
        return lc.HumanMessage(content=content, name=message.name, response_metadata=dict(message.attributes))
    if isinstance(message, AiMessage):
        return _ai(message)
    if isinstance(message, ToolExecutionResultMessage):
        if message.id is None:
            raise SerializationError("a tool result without an id has no ToolMessage form (tool_call_id is required)")
        return lc.ToolMessage(
            content=message.text,
            tool_call_id=message.id,
            name=message.tool_name,
            status="error" if message.is_error else "success",
            response_metadata=dict(message.attributes),
        )
    raise SerializationError(f"cannot convert a {type(message).__name__}: it is not a chat message")


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
            converted.append(_to_langchain(message))
        except SerializationError as exc:
            raise SerializationError(f"message {position} ({type(message).__name__}): {exc}") from None
    return converted


# ----------------------------------------------------------------------------------------- from_langchain


class _Invalid(Exception):
    """Not a LangChain message chatmemory can hold."""


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


def _requests(message: lc.AIMessage) -> list[ToolExecutionRequest]:
    requests = [
        ToolExecutionRequest(
            call["id"], call["name"], json.dumps(call["args"], ensure_ascii=False, separators=(",", ":"))
        )
        for call in message.tool_calls
    ]
    for call in message.invalid_tool_calls:
        name = call.get("name")
        if name is None:
            raise _Invalid("an invalid tool call without a name cannot be held")
        requests.append(ToolExecutionRequest(call.get("id"), name, call.get("args") or ""))
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


def _from_langchain(message: Any) -> ChatMessage:
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


def from_langchain(messages: Iterable[lc.BaseMessage]) -> list[ChatMessage]:
    """Chat messages from LangChain messages (see the module docs for what is read how).

    Raises:
        SerializationError: a message chatmemory cannot hold, naming its position.
    """
    converted: list[ChatMessage] = []
    for position, message in enumerate(messages):
        try:
            converted.append(_from_langchain(message))
        except (_Invalid, TypeError, ValueError, KeyError) as exc:  # noqa: PERF203 - each message is checked on its own
            raise SerializationError(f"LangChain message {position} ({type(message).__name__}): {exc}") from None
    return converted
