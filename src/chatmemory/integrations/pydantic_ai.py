"""PydanticAI message history (``ModelRequest`` / ``ModelResponse``), to and from chat messages, exactly.

Needs the ``pydantic-ai`` extra: ``pip install 'llm-window-memory[pydantic-ai]'``. Keep an agent's history in
a window memory and hand it back as ``message_history``::

    result = agent.run_sync(prompt, message_history=to_pydantic_ai(memory.messages()))
    memory.add(*from_pydantic_ai(result.new_messages()))

A ``ModelResponse`` is one ``AiMessage``; a request's parts are system, user and tool-result messages. What
the messages do not hold (timestamps, ids, signatures, usage, every part in its order) is kept in attributes
under ``"pydantic_ai"`` (:data:`RECORD_ATTRIBUTE`). The mapping and what raises:
docs/integration-pydantic-ai.md, *How messages map*.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
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

require("pydantic_ai", feature="chatmemory.integrations.pydantic_ai", extra="pydantic-ai")

from pydantic_ai import messages as pai  # noqa: E402 - imported once pydantic-ai is known to be installed

__all__ = ["RECORD_ATTRIBUTE", "from_pydantic_ai", "to_pydantic_ai"]

RECORD_ATTRIBUTE = "pydantic_ai"
"""The attribute under which a message keeps the PydanticAI fields its own fields do not hold."""

_SYSTEM_SEPARATOR = "\n\n"
_THINKING_SEPARATOR = "\n\n"
_PDF = "application/pdf"
_RECORD_KEYS = frozenset({"request", "system", "part", "response", "parts"})


class _Invalid(Exception):
    """Not something this module can convert."""


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ------------------------------------------------------------------------------------ PydanticAI <-> JSON


def _dump(message: pai.ModelMessage) -> dict[str, Any]:
    """PydanticAI's own JSON form of one message (bytes as base64)."""
    dumped: dict[str, Any] = orjson.loads(pai.ModelMessagesTypeAdapter.dump_json([message]))[0]
    return dumped


def _load(data: Mapping[str, Any]) -> pai.ModelMessage:
    return pai.ModelMessagesTypeAdapter.validate_json(orjson.dumps([thaw(data)]))[0]


def _envelope_defaults(kind: str) -> dict[str, Any]:
    empty = pai.ModelRequest(parts=[]) if kind == "request" else pai.ModelResponse(parts=[])
    return {key: value for key, value in _dump(empty).items() if key not in ("parts", "timestamp")}


_DEFAULTS = {kind: _envelope_defaults(kind) for kind in ("request", "response")}


def _envelope(dumped: Mapping[str, Any]) -> dict[str, Any]:
    """A message's own fields that differ from a fresh one's (a timestamp always: a fresh one's is now)."""
    defaults = _DEFAULTS[dumped["kind"]]
    return {
        key: value
        for key, value in dumped.items()
        if key != "parts"
        and (value is not None if key == "timestamp" else key not in defaults or defaults[key] != value)
    }


# ----------------------------------------------------------------------------------------- read (parts)


def _media(item: Any) -> Content | None:
    """The content part of one user-prompt item, or ``None`` when no content part holds it."""
    if isinstance(item, str):
        return TextContent(item)
    if isinstance(item, pai.TextContent) and type(item) is pai.TextContent:
        return TextContent(item.content)
    if isinstance(item, (pai.ImageUrl, pai.AudioUrl, pai.VideoUrl)):
        cls = {pai.ImageUrl: ImageContent, pai.AudioUrl: AudioContent, pai.VideoUrl: VideoContent}[type(item)]
        media: Content = cls(url=item.url)
        return media
    if isinstance(item, pai.DocumentUrl) and item.media_type == _PDF:
        return PdfFileContent(url=item.url)
    if isinstance(item, pai.BinaryContent):
        data = base64.b64encode(item.data).decode("ascii")
        if item.is_image:
            return ImageContent(base64_data=data, mime_type=item.media_type)
        if item.is_audio:
            return AudioContent(base64_data=data, mime_type=item.media_type)
        if item.is_video:
            return VideoContent(base64_data=data, mime_type=item.media_type)
        if item.media_type == _PDF:
            return PdfFileContent(base64_data=data, mime_type=_PDF)
    return None


def _read_user(part: Any) -> UserMessage | None:
    if isinstance(part.content, str):
        return UserMessage(part.content)
    contents = [content for content in map(_media, part.content) if content is not None]
    return UserMessage(contents) if contents else None


def _read_part(part: Any) -> ChatMessage | None:
    """The chat message of one request part's fields (no record), ``None`` for a part no message holds."""
    kind = part.part_kind
    if kind == "user-prompt":
        return _read_user(part)
    if kind == "tool-return":
        text = part.content if isinstance(part.content, str) else part.model_response_str()
        return ToolExecutionResultMessage(part.tool_call_id, part.tool_name, text, is_error=part.outcome != "success")
    if kind == "retry-prompt":
        if part.tool_name is not None:
            return ToolExecutionResultMessage(part.tool_call_id, part.tool_name, part.model_response(), is_error=True)
        return UserMessage(part.model_response())
    if kind == "retry-feedback":
        return UserMessage(part.model_response())
    return None


def _read_response(response: pai.ModelResponse) -> AiMessage:
    texts: list[str] = []
    thoughts: list[str] = []
    requests: list[ToolExecutionRequest] = []
    for part in response.parts:
        if part.part_kind == "text":
            texts.append(part.content)
        elif part.part_kind == "thinking":
            thoughts.append(part.content)
        elif part.part_kind == "tool-call":
            args = part.args
            arguments = args if isinstance(args, str) else "" if args is None else _compact(args)
            requests.append(ToolExecutionRequest(part.tool_call_id, part.tool_name, arguments))
    return AiMessage(
        "".join(texts) or None,
        requests,
        thinking=_THINKING_SEPARATOR.join(thoughts) if thoughts else None,
    )


def _with_record(message: ChatMessage, record: dict[str, Any]) -> ChatMessage:
    if not record:
        return message
    attributes = {RECORD_ATTRIBUTE: record}
    if isinstance(message, UserMessage):
        return UserMessage(message.contents, message.name, attributes)
    if isinstance(message, AiMessage):
        return AiMessage(message.text, message.tool_execution_requests, message.thinking, attributes)
    if isinstance(message, ToolExecutionResultMessage):
        return ToolExecutionResultMessage(message.id, message.tool_name, message.text, message.is_error, attributes)
    return CustomMessage(attributes)


def _read_request(request: pai.ModelRequest, dumped: Mapping[str, Any]) -> list[ChatMessage]:
    """The messages of one request: its leading system prompts as one SystemMessage, then one per part.

    The request's own fields and its system prompts are kept on the first message after them (a
    ``CustomMessage`` when there is none); a system prompt after other parts is kept as a part of its own.
    """
    messages: list[ChatMessage] = []
    boundary: dict[str, Any] | None = {"request": _envelope(dumped)}
    leading = 0
    while leading < len(request.parts) and request.parts[leading].part_kind == "system-prompt":
        leading += 1
    if leading:
        systems = dumped["parts"][:leading]
        texts = [part.content for part in request.parts[:leading] if isinstance(part, pai.SystemPromptPart)]
        messages.append(SystemMessage(_SYSTEM_SEPARATOR.join(texts)))
        boundary = {**(boundary or {}), "system": systems}
    for part, part_dump in zip(request.parts[leading:], dumped["parts"][leading:], strict=True):
        message = _read_part(part)
        record = {**(boundary or {}), "part": part_dump}
        boundary = None
        messages.append(
            _with_record(message, record) if message is not None else CustomMessage({RECORD_ATTRIBUTE: record})
        )
    if boundary is not None:
        messages.append(CustomMessage({RECORD_ATTRIBUTE: boundary}))
    return messages


def from_pydantic_ai(model_messages: Iterable[pai.ModelMessage]) -> list[ChatMessage]:
    """Chat messages from PydanticAI messages, such that :func:`to_pydantic_ai` gives them back.

    Raises:
        SerializationError: an entry that is not a ``ModelRequest`` or ``ModelResponse``, naming its position.
    """
    converted: list[ChatMessage] = []
    for position, message in enumerate(model_messages):
        try:
            if not isinstance(message, (pai.ModelRequest, pai.ModelResponse)):
                raise _Invalid(f"a {type(message).__name__} is not a ModelRequest or a ModelResponse")
            # Read as PydanticAI loads it back (a deprecated RetryPromptPart is the part it stands for).
            loaded = _load(_dump(message))
            dumped = _dump(loaded)
            if isinstance(loaded, pai.ModelResponse):
                record = {"response": _envelope(dumped), "parts": dumped["parts"]}
                converted.append(_with_record(_read_response(loaded), record))
            else:
                converted.extend(_read_request(loaded, dumped))
        except (_Invalid, TypeError, ValueError) as exc:  # noqa: PERF203 - each message is checked on its own
            raise SerializationError(f"PydanticAI message {position} ({type(message).__name__}): {exc}") from None
    return converted


# ----------------------------------------------------------------------------------------------- write


def _record(message: ChatMessage) -> Mapping[str, Any]:
    attributes = getattr(message, "attributes", {})
    record = attributes.get(RECORD_ATTRIBUTE)
    if record is None:
        return {}
    if not isinstance(record, Mapping) or not set(record) <= _RECORD_KEYS:
        raise _Invalid(
            f"its attribute {RECORD_ATTRIBUTE!r} is reserved for the PydanticAI fields this module keeps, and this "
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
        return ToolExecutionResultMessage(message.id, message.tool_name, message.text, message.is_error)
    return message


def _plain_item(part: Content) -> Any:
    if isinstance(part, TextContent):
        return part.text
    if part.base64_data is not None:
        media_type = part.mime_type or (_PDF if isinstance(part, PdfFileContent) else None)
        if media_type is None:
            raise _Invalid(f"inline {type(part).__name__} data without a MIME type has no BinaryContent form")
        return pai.BinaryContent(base64.b64decode(part.base64_data), media_type=media_type)
    assert part.url is not None
    cls = {ImageContent: pai.ImageUrl, AudioContent: pai.AudioUrl, VideoContent: pai.VideoUrl}.get(type(part))
    return cls(url=part.url) if cls is not None else pai.DocumentUrl(url=part.url, media_type=_PDF)


def _plain_part(message: ChatMessage) -> Any:
    if isinstance(message, UserMessage):
        if message.has_single_text():
            return pai.UserPromptPart(message.text)
        return pai.UserPromptPart([_plain_item(part) for part in message.contents])
    assert isinstance(message, ToolExecutionResultMessage)
    if message.id is None or message.tool_name is None:
        raise _Invalid("a tool result without an id or a tool name has no ToolReturnPart form")
    if message.is_error:
        return pai.ToolReturnPart(message.tool_name, message.text, tool_call_id=message.id, outcome="failed")
    return pai.ToolReturnPart(message.tool_name, message.text, tool_call_id=message.id)


def _kept_part(record: Mapping[str, Any], message: ChatMessage | None) -> Any:
    """The part ``record`` keeps, if it still agrees with ``message`` (``None``: a part no message holds)."""
    part_dump = record.get("part")
    if part_dump is None:
        return None
    try:
        [part] = _load({"kind": "request", "parts": [part_dump]}).parts
    except ValueError:
        return None
    if message is None:
        return part
    read = _read_part(part)
    return part if read is not None and _bare(read) == _bare(message) else None


def _system_parts(message: SystemMessage, record: Mapping[str, Any]) -> list[Any]:
    kept = record.get("system")
    if isinstance(kept, Sequence) and kept:
        try:
            parts = list(_load({"kind": "request", "parts": list(kept)}).parts)
        except ValueError:
            parts = []
        systems = [part for part in parts if isinstance(part, pai.SystemPromptPart)]
        if parts and len(systems) == len(parts) and _SYSTEM_SEPARATOR.join(p.content for p in systems) == message.text:
            return parts
    return [pai.SystemPromptPart(message.text)]


def _response(message: AiMessage, record: Mapping[str, Any]) -> pai.ModelResponse:
    envelope = dict(record.get("response") or {})
    kept = record.get("parts")
    if isinstance(kept, Sequence):
        try:
            response = _load({**envelope, "kind": "response", "parts": list(kept)})
        except ValueError:
            response = None
        if isinstance(response, pai.ModelResponse) and _read_response(response) == _bare(message):
            return response
    parts: list[Any] = []
    if message.thinking is not None:
        parts.append(pai.ThinkingPart(message.thinking))
    if message.text:
        parts.append(pai.TextPart(message.text))
    for request in message.tool_execution_requests:
        if request.id is None:
            parts.append(pai.ToolCallPart(request.name, request.arguments))
        else:
            parts.append(pai.ToolCallPart(request.name, request.arguments, tool_call_id=request.id))
    plain = pai.ModelResponse(parts=parts)
    if not envelope:
        return plain
    written = _load({**_dump(plain), **envelope, "parts": _dump(plain)["parts"]})
    assert isinstance(written, pai.ModelResponse)
    return written


class _Request:
    """A ``ModelRequest`` being gathered from consecutive messages."""

    def __init__(self, envelope: Mapping[str, Any] | None) -> None:
        self.envelope = dict(envelope or {})
        self.parts: list[Any] = []

    def build(self) -> pai.ModelRequest:
        if not self.envelope:
            return pai.ModelRequest(parts=self.parts)
        built = _load({**self.envelope, "kind": "request", "parts": []})
        assert isinstance(built, pai.ModelRequest)
        built.parts = self.parts
        return built


def _write(messages: Iterable[ChatMessage], skip_custom: bool) -> list[pai.ModelMessage]:
    written: list[pai.ModelMessage] = []
    request: _Request | None = None
    pending_system: SystemMessage | None = None

    def close() -> None:
        nonlocal request, pending_system
        if pending_system is not None:
            request = _Request(None) if request is None else request
            request.parts.extend(_system_parts(pending_system, {}))
            pending_system = None
        if request is not None:
            written.append(request.build())
            request = None

    for position, message in enumerate(messages):
        try:
            if isinstance(message, SystemMessage):
                close()
                pending_system = message
                continue
            record = _record(message)
            if isinstance(message, AiMessage):
                close()
                written.append(_response(message, record))
                continue
            if isinstance(message, CustomMessage) and not record:
                if skip_custom:
                    continue
                raise _Invalid("a CustomMessage keeping no PydanticAI part has no form; pass skip_custom=True")
            if "request" in record or request is None:
                systems = pending_system
                if request is not None and (systems is not None or "request" in record):
                    written.append(request.build())
                    request = None
                if request is None:
                    request = _Request(record.get("request"))
                if systems is not None:
                    request.parts.extend(_system_parts(systems, record))
                    pending_system = None
            elif pending_system is not None:
                request.parts.extend(_system_parts(pending_system, record))
                pending_system = None
            if isinstance(message, CustomMessage):
                part = _kept_part(record, None)
                if part is not None:
                    request.parts.append(part)
                continue
            part = _kept_part(record, message)
            request.parts.append(part if part is not None else _plain_part(message))
        except (_Invalid, TypeError, ValueError) as exc:
            raise SerializationError(f"message {position} ({type(message).__name__}): {exc}") from None
    close()
    return written


def to_pydantic_ai(messages: Iterable[ChatMessage], *, skip_custom: bool = False) -> list[pai.ModelMessage]:
    """PydanticAI messages for ``messages``, e.g. an agent's ``message_history=`` (see the module docs).

    Args:
        messages: the messages, e.g. ``memory.messages()``.
        skip_custom: leave out custom messages that keep no PydanticAI part instead of raising.

    Raises:
        SerializationError: a message PydanticAI cannot carry, naming its position.
    """
    return _write(messages, skip_custom)
