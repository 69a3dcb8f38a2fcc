"""OpenAI Chat Completions message dicts, to and from chat messages.

:func:`to_openai` builds the ``messages`` list of a Chat Completions request; :func:`from_openai` reads one
back (a request's ``messages``, or response messages as dicts, e.g. ``message.model_dump()``). Tool-call
``arguments`` pass through byte for byte; thinking travels only under ``thinking_field``.

Dropped by design, always: ``attributes`` (never sent to a model); a tool result's ``tool_name`` and
``is_error``; an image's ``mime_type`` when the image is given by URL. What the API cannot carry at all
(custom messages, video, audio other than WAV or MP3, ...) raises :class:`~chatmemory.SerializationError`.

What maps to what, and every rule: docs/converters.md, *OpenAI Chat Completions*.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

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
from chatmemory.serialization.data_urls import data_url, parse_data_url

if TYPE_CHECKING:
    # Only for the annotation: the SDK's own type when it is installed (a type checker reads Any when not).
    from openai.types.chat import ChatCompletionMessageParam


__all__ = ["from_openai", "to_openai"]

# detail_level (upper case) -> the API's value; the API's values read back as their upper-case names.
_DETAILS = {"LOW": "low", "HIGH": "high", "AUTO": "auto", "ORIGINAL": "original", "ULTRA_HIGH": "original"}
_DETAIL_NAMES = {"low": "LOW", "high": "HIGH", "auto": "AUTO", "original": "ORIGINAL"}
_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
_AUDIO_MIME_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_DEFAULT_PDF_MIME_TYPE = "application/pdf"


# --------------------------------------------------------------------------------------------- to_openai


def _inline_only(part: AudioContent | PdfFileContent, kind: str) -> str:
    if part.url is not None:
        raise SerializationError(f"Chat Completions takes {kind} as inline base64 data only, not by URL ({part.url!r})")
    assert part.base64_data is not None  # a media part has a url or base64 data
    return part.base64_data


def _image_part(part: ImageContent) -> dict[str, Any]:
    if part.url is not None and part.base64_data is not None:
        raise SerializationError("an ImageContent with both a url and base64_data has no single OpenAI form")
    if part.url is not None:
        url = part.url
    else:
        if part.mime_type is None:
            raise SerializationError("an ImageContent with base64_data needs a mime_type to form a data: URL")
        url = data_url(part.mime_type, part.base64_data or "")
    image_url: dict[str, Any] = {"url": url}
    if part.detail_level is not None:
        detail = _DETAILS.get(part.detail_level.upper())
        if detail is None:
            raise SerializationError(
                f"image detail level {part.detail_level!r} has no Chat Completions value "
                "(LOW, HIGH, AUTO, ORIGINAL or ULTRA_HIGH can be sent)"
            )
        image_url["detail"] = detail
    return {"type": "image_url", "image_url": image_url}


def _content_part(part: Content, pdf_filename: str) -> dict[str, Any]:
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImageContent):
        return _image_part(part)
    if isinstance(part, AudioContent):
        data = _inline_only(part, "audio")
        if part.mime_type is None:
            raise SerializationError("an AudioContent needs a mime_type (e.g. audio/wav) to name its format")
        audio_format = _AUDIO_FORMATS.get(part.mime_type.lower())
        if audio_format is None:
            raise SerializationError(
                f"audio of type {part.mime_type!r} cannot be sent: Chat Completions takes wav (audio/wav) and "
                "mp3 (audio/mpeg) only; convert the audio first"
            )
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    if isinstance(part, PdfFileContent):
        data = _inline_only(part, "PDF files")
        file_data = data_url(part.mime_type or _DEFAULT_PDF_MIME_TYPE, data)
        return {"type": "file", "file": {"file_data": file_data, "filename": pdf_filename}}
    assert isinstance(part, VideoContent)
    raise SerializationError("Chat Completions has no video content part; a VideoContent cannot be sent")


def _require_id(value: str | None, what: str) -> str:
    if value is None:
        raise SerializationError(f"{what} has no id, which Chat Completions requires")
    return value


def _message_to_openai(message: ChatMessage, thinking_field: str | None, pdf_filename: str) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.text}
    if isinstance(message, UserMessage):
        data: dict[str, Any] = {"role": "user"}
        if message.has_single_text():
            data["content"] = message.text
        else:
            data["content"] = [_content_part(part, pdf_filename) for part in message.contents]
        if message.name is not None:
            data["name"] = message.name
        return data
    if isinstance(message, AiMessage):
        data = {"role": "assistant", "content": message.text}
        if message.tool_execution_requests:
            data["tool_calls"] = [
                {
                    "id": _require_id(request.id, f"tool call {request.name!r}"),
                    "type": "function",
                    "function": {"name": request.name, "arguments": request.arguments},
                }
                for request in message.tool_execution_requests
            ]
        if thinking_field is not None and message.thinking is not None:
            data[thinking_field] = message.thinking
        return data
    if isinstance(message, ToolExecutionResultMessage):
        return {
            "role": "tool",
            "tool_call_id": _require_id(message.id, f"the result of tool {message.tool_name!r}"),
            "content": message.text,
        }
    raise SerializationError(f"cannot convert a {type(message).__name__}: it is not a chat message")


def to_openai(
    messages: Iterable[ChatMessage],
    *,
    skip_custom: bool = False,
    thinking_field: str | None = None,
    pdf_filename: str = "document.pdf",
) -> list[ChatCompletionMessageParam]:
    """Chat Completions message dicts for ``messages`` (see the module docs for what is dropped).

    Args:
        messages: the messages, e.g. ``memory.messages()``.
        skip_custom: leave ``CustomMessage`` entries out instead of raising.
        thinking_field: the key to write an ``AiMessage``'s thinking under (e.g. ``"reasoning_content"``);
            ``None`` (the default) leaves thinking out, as the OpenAI API takes none.
        pdf_filename: the ``filename`` sent with inline PDF data (the API requires one).

    Raises:
        SerializationError: a message or part that Chat Completions cannot carry (see the module docs).
    """
    converted: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        if isinstance(message, CustomMessage):
            if skip_custom:
                continue
            raise SerializationError(
                f"message {position}: a CustomMessage has no Chat Completions form; pass skip_custom=True to "
                "leave custom messages out"
            )
        try:
            converted.append(_message_to_openai(message, thinking_field, pdf_filename))
        except SerializationError as exc:
            raise SerializationError(f"message {position} ({type(message).__name__}): {exc}") from None
    return cast("list[ChatCompletionMessageParam]", converted)


# ------------------------------------------------------------------------------------------- from_openai


class _Invalid(Exception):
    """The dict is not a Chat Completions message this library can hold."""


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Invalid(f"{what} is a {type(value).__name__}, not a dict")
    return value


def _str(data: Mapping[str, Any], key: str, what: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Invalid(f"{what} needs a str {key!r}, not {type(value).__name__}")
    return value


def _only(data: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    # Response dicts carry optional fields as null or empty (refusal, audio, annotations, ...): harmless.
    extra = sorted(key for key, value in data.items() if key not in allowed and value not in (None, "", [], {}))
    if extra:
        raise _Invalid(f"{what} has fields chatmemory cannot hold: {extra}")


def _text_of(content: Any, what: str) -> str:
    """A string content, or the concatenated text of a list of text parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _Invalid(f"the content of {what} is a {type(content).__name__}, not a str or a list of parts")
    texts: list[str] = []
    for value in content:
        part = _mapping(value, f"a content part of {what}")
        if part.get("type") != "text":
            raise _Invalid(f"{what} holds a {part.get('type')!r} part; only text parts are accepted there")
        _only(part, frozenset({"type", "text"}), f"a text part of {what}")
        texts.append(_str(part, "text", "a text part"))
    return "".join(texts)


def _user_part(value: Any) -> Content:
    part = _mapping(value, "a user content part")
    kind = part.get("type")
    if kind == "text":
        _only(part, frozenset({"type", "text"}), "a text part")
        return TextContent(_str(part, "text", "a text part"))
    if kind == "image_url":
        _only(part, frozenset({"type", "image_url"}), "an image_url part")
        image = _mapping(part.get("image_url"), "the image_url of an image part")
        _only(image, frozenset({"url", "detail"}), "an image_url")
        url = _str(image, "url", "an image_url")
        detail = _str(image, "detail", "an image_url", optional=True)
        detail_level = None if detail is None else _DETAIL_NAMES.get(detail)
        if detail is not None and detail_level is None:
            raise _Invalid(f"image detail {detail!r} is not one of {', '.join(_DETAIL_NAMES)}")
        parsed = parse_data_url(url)
        if parsed is not None:
            return ImageContent(base64_data=parsed[1], mime_type=parsed[0], detail_level=detail_level)
        return ImageContent(url=url, detail_level=detail_level)
    if kind == "input_audio":
        _only(part, frozenset({"type", "input_audio"}), "an input_audio part")
        audio = _mapping(part.get("input_audio"), "the input_audio of an audio part")
        _only(audio, frozenset({"data", "format"}), "an input_audio")
        audio_format = _str(audio, "format", "an input_audio")
        if audio_format not in _AUDIO_MIME_TYPES:
            raise _Invalid(f"input_audio format {audio_format!r} is not one the API takes (wav, mp3)")
        return AudioContent(
            base64_data=_str(audio, "data", "an input_audio"), mime_type=_AUDIO_MIME_TYPES[audio_format]
        )
    if kind == "file":
        _only(part, frozenset({"type", "file"}), "a file part")
        file = _mapping(part.get("file"), "the file of a file part")
        _only(file, frozenset({"file_data", "filename"}), "a file (an uploaded file_id cannot be held)")
        file_data = _str(file, "file_data", "a file")
        parsed = parse_data_url(file_data)
        if parsed is not None:
            return PdfFileContent(base64_data=parsed[1], mime_type=parsed[0])
        return PdfFileContent(base64_data=file_data)
    raise _Invalid(f"unknown user content part type {kind!r}")


def _user(data: Mapping[str, Any]) -> UserMessage:
    _only(data, frozenset({"role", "content", "name"}), "a user message")
    content = data.get("content")
    name = _str(data, "name", "a user message", optional=True)
    if isinstance(content, str):
        return UserMessage(content, name=name)
    if not isinstance(content, list):
        raise _Invalid(f"the content of a user message is a {type(content).__name__}, not a str or a list")
    return UserMessage([_user_part(part) for part in content], name=name)


def _assistant(data: Mapping[str, Any], thinking_field: str | None, names: dict[str, str]) -> AiMessage:
    # "parsed" is what client.chat.completions.parse() derives from content: a copy, dropped.
    allowed = {"role", "content", "tool_calls", "parsed"} | ({thinking_field} if thinking_field else set())
    _only(data, frozenset(allowed), "an assistant message")
    content = data.get("content")
    text = None if content is None else _text_of(content, "an assistant message")
    requests: list[ToolExecutionRequest] = []
    tool_calls = data.get("tool_calls")
    if tool_calls is None:
        tool_calls = []
    if not isinstance(tool_calls, list):
        raise _Invalid(f"tool_calls is a {type(tool_calls).__name__}, not a list")
    for value in tool_calls:
        call = _mapping(value, "a tool call")
        _only(call, frozenset({"id", "type", "function", "index"}), "a tool call")
        if call.get("type", "function") != "function":
            raise _Invalid(f"a tool call of type {call.get('type')!r} cannot be held; only function calls can")
        function = _mapping(call.get("function"), "the function of a tool call")
        # parsed_arguments is the parse() helpers' copy of arguments, derived data: dropped.
        _only(function, frozenset({"name", "arguments", "parsed_arguments"}), "a tool call's function")
        request = ToolExecutionRequest(
            id=_str(call, "id", "a tool call"),
            name=_str(function, "name", "a tool call's function"),
            arguments=_str(function, "arguments", "a tool call's function"),
        )
        names[request.id or ""] = request.name
        requests.append(request)
    thinking = _str(data, thinking_field, "an assistant message", optional=True) if thinking_field else None
    return AiMessage(text=text, tool_execution_requests=requests, thinking=thinking)


def _tool(data: Mapping[str, Any], names: dict[str, str]) -> ToolExecutionResultMessage:
    _only(data, frozenset({"role", "content", "tool_call_id", "name"}), "a tool message")
    call_id = _str(data, "tool_call_id", "a tool message")
    # LangChain's convert_to_openai_messages writes the tool's name; otherwise the call it answers names it.
    tool_name = _str(data, "name", "a tool message", optional=True)
    if tool_name is None:
        tool_name = names.get(call_id)
    return ToolExecutionResultMessage(call_id, tool_name, _text_of(data.get("content"), "a tool message"))


def _from_openai(data: Mapping[str, Any], thinking_field: str | None, names: dict[str, str]) -> ChatMessage:
    role = data.get("role")
    if role in ("system", "developer"):
        _only(data, frozenset({"role", "content"}), f"a {role} message")
        return SystemMessage(_text_of(data.get("content"), f"a {role} message"))
    if role == "user":
        return _user(data)
    if role == "assistant":
        return _assistant(data, thinking_field, names)
    if role == "tool":
        return _tool(data, names)
    raise _Invalid(f"unknown role {role!r} (expected system, developer, user, assistant or tool)")


def from_openai(messages: Iterable[Mapping[str, Any]], *, thinking_field: str | None = None) -> list[ChatMessage]:
    """Messages from Chat Completions message dicts (see the module docs for what is read how).

    Args:
        messages: the dicts, in conversation order (a tool message's tool name comes from the earlier
            assistant message that made the call).
        thinking_field: the key an assistant message's thinking is under, if any (as in :func:`to_openai`).

    Raises:
        SerializationError: a dict that is not a Chat Completions message this library can hold.
    """
    names: dict[str, str] = {}
    converted: list[ChatMessage] = []
    for position, item in enumerate(messages):
        try:
            converted.append(_from_openai(_mapping(item, "a message"), thinking_field, names))
        except (_Invalid, TypeError, ValueError) as exc:  # noqa: PERF203 - each message is checked on its own
            raise SerializationError(f"OpenAI message {position}: {exc}") from None
    return converted
