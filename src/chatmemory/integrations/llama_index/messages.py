"""LlamaIndex messages (llama-index-core ``ChatMessage``), to and from chat messages, exactly.

Needs the ``llama-index`` extra: ``pip install 'llm-window-memory[llama-index]'``.

:func:`from_llama_index` reads ``system``, ``user``, ``assistant`` and ``tool`` messages as chatmemory's
message types (any other as a ``CustomMessage`` keeping it whole); :func:`to_llama_index` writes them back.
What a ``ChatMessage`` holds beyond those fields (thinking signatures, other block kinds,
``additional_kwargs``, its role) is kept in attributes under ``"llama_index"`` (:data:`RECORD_ATTRIBUTE`)
and written back while the message's fields still agree with it.

The mapping, the round-trip rules and what raises: docs/integration-llama-index.md, *How messages map*.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

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

require("llama_index.core", feature="chatmemory.integrations.llama_index", extra="llama-index")

# Imported once llama-index-core is known to be installed.
from llama_index.core.base.llms.types import (  # noqa: E402
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from llama_index.core.base.llms.types import ChatMessage as LlamaMessage  # noqa: E402

__all__ = ["RECORD_ATTRIBUTE", "from_llama_index", "to_llama_index"]

RECORD_ATTRIBUTE = "llama_index"
"""The attribute under which a message keeps the LlamaIndex fields its own fields do not hold."""

_FIELDS = ("role", "additional_kwargs", "blocks")
_TEXT_SEPARATOR = "\n"
_THINKING_SEPARATOR = "\n\n"
_PDF = "application/pdf"
_AI_ROLES = frozenset({MessageRole.ASSISTANT, MessageRole.MODEL, MessageRole.CHATBOT})
_TOOL_ROLES = frozenset({MessageRole.TOOL, MessageRole.FUNCTION})


class _Invalid(Exception):
    """Not something this module can convert."""


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _dump(message: LlamaMessage) -> dict[str, Any]:
    dumped: dict[str, Any] = message.model_dump(mode="json")
    return dumped


def _load(data: Mapping[str, Any]) -> LlamaMessage:
    return LlamaMessage.model_validate(thaw(data))


def _same(left: Any, right: Any) -> bool:
    """Equal as JSON text: ``1``, ``1.0`` and ``true`` differ, as do the orders of keys."""
    return orjson.dumps(left) == orjson.dumps(right)


# ------------------------------------------------------------------------------------------------ read


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _detail(detail: str | None) -> str | None:
    return detail.upper() if detail is not None else None


def _part(block: Any) -> Content | None:
    """The content part of one block of a user message, ``None`` when no content part holds it."""
    if isinstance(block, TextBlock):
        return TextContent(block.text)
    if getattr(block, "path", None) is not None:
        return None
    if isinstance(block, ImageBlock):
        data, mime_type = block.image, block.image_mimetype
        if isinstance(data, bytes):
            return ImageContent(
                base64_data=data.decode("ascii"), mime_type=mime_type, detail_level=_detail(block.detail)
            )
        if block.url is not None:
            return ImageContent(url=str(block.url), mime_type=mime_type, detail_level=_detail(block.detail))
        return None
    if isinstance(block, AudioBlock):
        mime_type = f"audio/{block.format}" if block.format else None
        if isinstance(block.audio, bytes):
            return AudioContent(base64_data=block.audio.decode("ascii"), mime_type=mime_type)
        return AudioContent(url=str(block.url), mime_type=mime_type) if block.url is not None else None
    if isinstance(block, VideoBlock):
        if isinstance(block.video, bytes):
            return VideoContent(base64_data=block.video.decode("ascii"), mime_type=block.video_mimetype)
        return VideoContent(url=str(block.url), mime_type=block.video_mimetype) if block.url is not None else None
    if isinstance(block, DocumentBlock) and block.document_mimetype == _PDF:
        if isinstance(block.data, bytes):
            return PdfFileContent(base64_data=block.data.decode("ascii"), mime_type=_PDF)
        return PdfFileContent(url=block.url, mime_type=_PDF) if block.url is not None else None
    return None


def _arguments(kwargs: Any) -> str:
    return kwargs if isinstance(kwargs, str) else _compact(kwargs)


def _kwargs_tool_call(call: Any) -> ToolExecutionRequest | None:
    """A tool call kept in ``additional_kwargs["tool_calls"]``: OpenAI's shape, or a ``ToolSelection``'s."""
    if not isinstance(call, Mapping):
        return None
    function = call.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        arguments = function.get("arguments")
        return ToolExecutionRequest(
            _string(call.get("id")), function["name"], arguments if isinstance(arguments, str) else _compact(arguments)
        )
    if isinstance(call.get("tool_name"), str) and "tool_kwargs" in call:
        return ToolExecutionRequest(_string(call.get("tool_id")), call["tool_name"], _arguments(call["tool_kwargs"]))
    return None


def _tool_calls(message: LlamaMessage) -> list[ToolExecutionRequest]:
    blocks = [block for block in message.blocks if isinstance(block, ToolCallBlock)]
    if blocks:
        return [ToolExecutionRequest(b.tool_call_id, b.tool_name, _arguments(b.tool_kwargs)) for b in blocks]
    calls = message.additional_kwargs.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [request for request in map(_kwargs_tool_call, calls) if request is not None]


def _read(message: LlamaMessage) -> ChatMessage | None:
    """The chat message of ``message``'s fields (no record); ``None`` when no message type holds it."""
    role = message.role
    kwargs = message.additional_kwargs
    texts = [block.text for block in message.blocks if isinstance(block, TextBlock)]
    if role == MessageRole.SYSTEM:
        return SystemMessage(_TEXT_SEPARATOR.join(texts))
    if role == MessageRole.USER:
        parts = [part for part in map(_part, message.blocks) if part is not None]
        return UserMessage(parts, _string(kwargs.get("name"))) if parts else None
    if role in _AI_ROLES:
        thoughts = [b.content for b in message.blocks if isinstance(b, ThinkingBlock) and b.content is not None]
        return AiMessage(
            _TEXT_SEPARATOR.join(texts) if texts else None,
            _tool_calls(message),
            _THINKING_SEPARATOR.join(thoughts) if thoughts else None,
        )
    if role in _TOOL_ROLES:
        return ToolExecutionResultMessage(
            _string(kwargs.get("tool_call_id")), _string(kwargs.get("name")), _TEXT_SEPARATOR.join(texts)
        )
    return None


def _with_record(message: ChatMessage, record: dict[str, Any]) -> ChatMessage:
    attributes = {RECORD_ATTRIBUTE: record}
    if isinstance(message, UserMessage):
        return UserMessage(message.contents, message.name, attributes)
    if isinstance(message, AiMessage):
        return AiMessage(message.text, message.tool_execution_requests, message.thinking, attributes)
    if isinstance(message, ToolExecutionResultMessage):
        return ToolExecutionResultMessage(message.id, message.tool_name, message.text, message.is_error, attributes)
    return CustomMessage(attributes)  # a SystemMessage keeps no attributes: the whole message is kept


def from_llama_index(messages: Iterable[LlamaMessage]) -> list[ChatMessage]:
    """Chat messages from LlamaIndex messages, one each, such that :func:`to_llama_index` gives them back.

    Raises:
        SerializationError: an entry that is not a ``ChatMessage``, or whose ``additional_kwargs`` JSON cannot
            hold, naming its position.
    """
    converted: list[ChatMessage] = []
    for position, message in enumerate(messages):
        try:
            if not isinstance(message, LlamaMessage):
                raise _Invalid(f"a {type(message).__name__} is not a LlamaIndex ChatMessage")
            dumped = _dump(message)
            fields = _read(_load(dumped))  # read as it loads back from JSON (objects in kwargs as their dumps)
            if fields is None:
                converted.append(CustomMessage({RECORD_ATTRIBUTE: {name: dumped[name] for name in _FIELDS}}))
                continue
            plain = _dump(_write(fields))
            record = {name: dumped[name] for name in _FIELDS if not _same(dumped[name], plain[name])}
            if not record:
                converted.append(fields)
            elif isinstance(fields, SystemMessage):
                converted.append(CustomMessage({RECORD_ATTRIBUTE: {name: dumped[name] for name in _FIELDS}}))
            else:
                converted.append(_with_record(fields, record))
        except (_Invalid, TypeError, ValueError) as exc:
            raise SerializationError(f"LlamaIndex message {position} ({type(message).__name__}): {exc}") from None
    return converted


# ----------------------------------------------------------------------------------------------- write


def _block(part: Content) -> Any:
    if isinstance(part, TextContent):
        return TextBlock(text=part.text)
    data = part.base64_data.encode("ascii") if part.base64_data is not None else None
    if isinstance(part, ImageContent):
        detail = part.detail_level.lower() if part.detail_level is not None else None
        return ImageBlock(image=data, url=part.url, image_mimetype=part.mime_type, detail=detail)
    if isinstance(part, AudioContent):
        mime_type = part.mime_type or ""
        audio_format = mime_type.removeprefix("audio/") if mime_type.startswith("audio/") else None
        return AudioBlock(audio=data, url=part.url, format=audio_format)
    if isinstance(part, VideoContent):
        return VideoBlock(video=data, url=part.url, video_mimetype=part.mime_type)
    return DocumentBlock(data=data, url=part.url, document_mimetype=_PDF)


def _tool_kwargs(arguments: str) -> dict[str, Any] | str:
    """The dict ``arguments`` holds when it is that dict's compact JSON (so it reads back the same), else itself."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) and _compact(value) == arguments else arguments


def _write(message: ChatMessage) -> LlamaMessage:
    """The LlamaIndex message of ``message``'s fields alone."""
    if isinstance(message, SystemMessage):
        return LlamaMessage(role=MessageRole.SYSTEM, blocks=[TextBlock(text=message.text)])
    if isinstance(message, UserMessage):
        kwargs = {"name": message.name} if message.name is not None else {}
        return LlamaMessage(
            role=MessageRole.USER, blocks=[_block(p) for p in message.contents], additional_kwargs=kwargs
        )
    if isinstance(message, AiMessage):
        blocks: list[Any] = []
        if message.thinking is not None:
            blocks.append(ThinkingBlock(content=message.thinking))
        if message.text is not None:
            blocks.append(TextBlock(text=message.text))
        blocks.extend(
            ToolCallBlock(tool_call_id=call.id, tool_name=call.name, tool_kwargs=_tool_kwargs(call.arguments))
            for call in message.tool_execution_requests
        )
        return LlamaMessage(role=MessageRole.ASSISTANT, blocks=blocks)
    if isinstance(message, ToolExecutionResultMessage):
        kwargs = {"tool_call_id": message.id} if message.id is not None else {}
        if message.tool_name is not None:
            kwargs["name"] = message.tool_name
        return LlamaMessage(role=MessageRole.TOOL, blocks=[TextBlock(text=message.text)], additional_kwargs=kwargs)
    raise _Invalid("a CustomMessage keeping no LlamaIndex message has no LlamaIndex form")


def _record(message: ChatMessage) -> Mapping[str, Any]:
    attributes = getattr(message, "attributes", {})
    record = attributes.get(RECORD_ATTRIBUTE)
    if record is None:
        return {}
    if not isinstance(record, Mapping) or not set(record) <= set(_FIELDS):
        raise _Invalid(
            f"its attribute {RECORD_ATTRIBUTE!r} is reserved for the LlamaIndex fields this module keeps, and this "
            "one is no such record; rename the attribute"
        )
    return record


def _bare(message: ChatMessage) -> ChatMessage:
    """``message`` without attributes: what the fields alone say, for comparing."""
    if isinstance(message, UserMessage):
        return UserMessage(message.contents, message.name)
    if isinstance(message, AiMessage):
        return AiMessage(message.text, message.tool_execution_requests, message.thinking)
    if isinstance(message, ToolExecutionResultMessage):
        return ToolExecutionResultMessage(message.id, message.tool_name, message.text)
    return message


def _to_llama(message: ChatMessage) -> LlamaMessage:
    record = _record(message)
    if isinstance(message, CustomMessage):
        if set(record) != set(_FIELDS):
            raise _Invalid("a CustomMessage keeping no LlamaIndex message has no LlamaIndex form")
        try:
            return _load(record)
        except ValueError as exc:
            raise _Invalid(f"the LlamaIndex message it keeps no longer loads: {exc}") from None
    plain = _write(message)
    if not record:
        return plain
    try:
        kept = _load({**_dump(plain), **record})
    except ValueError:
        return plain
    read = _read(kept)
    return kept if read is not None and _bare(read) == _bare(message) else plain


def to_llama_index(messages: Iterable[ChatMessage]) -> list[LlamaMessage]:
    """LlamaIndex messages for ``messages``, one each (see the module docs).

    Raises:
        SerializationError: a message LlamaIndex cannot carry, naming its position.
    """
    converted: list[LlamaMessage] = []
    for position, message in enumerate(messages):
        try:
            converted.append(_to_llama(message))
        except (_Invalid, TypeError, ValueError) as exc:  # noqa: PERF203 - each message is checked on its own
            raise SerializationError(f"message {position} ({type(message).__name__}): {exc}") from None
    return converted
