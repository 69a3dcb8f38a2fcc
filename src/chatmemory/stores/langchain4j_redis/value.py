"""The stored value: LangChain4j's ``messagesToJson`` JSON, and what a store needs to give messages back exactly.

LangChain4j's format holds every chatmemory message but two content details, which its Java types fill
in: an image always has a detail level, named in upper case, and a PDF always has a MIME type. When a user
message has an image without a detail level (or with one in another spelling) or a PDF without a MIME
type, the values it really had are kept in one attribute of that message,
:data:`EXACT_CONTENT_ATTRIBUTE`, which LangChain4j keeps as it is; chatmemory reads it back into the parts
and drops it. A part that no longer has the value the attribute was written for (a Java service replaced
the message) is read as it is. An example value: *Exact messages* in ``docs/store-langchain4j.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from chatmemory import telemetry
from chatmemory.core.errors import SerializationError
from chatmemory.core.messages import ChatMessage, Content, ImageContent, PdfFileContent, UserMessage
from chatmemory.serialization import langchain4j

__all__ = ["EXACT_CONTENT_ATTRIBUTE", "decode", "encode"]

EXACT_CONTENT_ATTRIBUTE = "chatmemory.contentAsGiven"
"""The user-message attribute holding content values LangChain4j's types would fill in or respell."""

_PDF = "application/pdf"


def _as_written(part: Content) -> dict[str, Any]:
    """The fields of ``part`` that LangChain4j's form changes, with the values they had (empty: none)."""
    if isinstance(part, ImageContent) and langchain4j.detail_level_name(part.detail_level) != part.detail_level:
        return {"detail_level": part.detail_level}
    if isinstance(part, PdfFileContent) and part.mime_type is None:
        return {"mime_type": None}
    return {}


def _exact(message: ChatMessage) -> ChatMessage:
    if not isinstance(message, UserMessage):
        return message
    if EXACT_CONTENT_ATTRIBUTE in message.attributes:
        raise SerializationError(
            f"the attribute {EXACT_CONTENT_ATTRIBUTE!r} is reserved by the LangChain4j Redis store; "
            "rename it in your user message"
        )
    given = {str(index): kept for index, part in enumerate(message.contents) if (kept := _as_written(part))}
    if not given:
        return message
    return UserMessage(message.contents, message.name, {**message.attributes, EXACT_CONTENT_ATTRIBUTE: given})


def encode(messages: Iterable[ChatMessage]) -> bytes:
    """The stored value of ``messages``: ``ChatMessageSerializer.messagesToJson`` JSON, as UTF-8.

    Raises:
        SerializationError: a message LangChain4j's format cannot hold (an image detail level it has no
            name for, text JSON cannot carry), or a user message using the reserved attribute.
    """
    listed = [_exact(message) for message in messages]
    value = langchain4j.dumps(listed).encode("utf-8")
    telemetry.note_write(appended=len(listed), evicted=None, bytes=len(value))
    return value


def _restore(part: Content, kept: Any) -> Content:
    if not isinstance(kept, Mapping):
        return part
    if isinstance(part, ImageContent) and "detail_level" in kept:
        original = kept["detail_level"]
        if original is None or isinstance(original, str):
            try:
                written = langchain4j.detail_level_name(original)
            except SerializationError:
                return part
            if written == part.detail_level:
                return dataclasses.replace(part, detail_level=original)
    if isinstance(part, PdfFileContent) and kept.get("mime_type", _PDF) is None and part.mime_type == _PDF:
        return dataclasses.replace(part, mime_type=None)
    return part


def _read_back(message: ChatMessage) -> ChatMessage:
    if not isinstance(message, UserMessage) or EXACT_CONTENT_ATTRIBUTE not in message.attributes:
        return message
    given = message.attributes[EXACT_CONTENT_ATTRIBUTE]
    attributes = {key: value for key, value in message.attributes.items() if key != EXACT_CONTENT_ATTRIBUTE}
    contents = list(message.contents)
    if isinstance(given, Mapping):
        contents = [_restore(part, given.get(str(index))) for index, part in enumerate(contents)]
    return UserMessage(contents, message.name, attributes)


def decode(value: bytes | str, memory_id: str) -> list[ChatMessage]:
    """The messages a stored value holds.

    Raises:
        CorruptedMemoryError: the value is not LangChain4j chat messages JSON chatmemory can hold.
    """
    telemetry.note(bytes=len(value))
    return [_read_back(message) for message in langchain4j.loads(value, memory_id=memory_id)]
