"""Serialization: chatmemory's versioned JSON format and codecs for LangChain4j and OpenAI messages.

* :func:`dumps` / :func:`loads` — the native, versioned format (orjson).
* :mod:`chatmemory.serialization.langchain4j` — LangChain4j's ``ChatMessageSerializer`` JSON.
* :func:`to_openai` / :func:`from_openai` — OpenAI Chat Completions message dicts.
* :func:`to_responses` / :func:`from_responses` — OpenAI Responses API input items.
* :func:`to_anthropic` / :func:`from_anthropic` — Anthropic Messages API system text and messages.
"""

from __future__ import annotations

from chatmemory.serialization.anthropic import from_anthropic, to_anthropic
from chatmemory.serialization.native import (
    FORMAT_VERSION,
    dumps,
    dumps_message,
    loads,
    loads_message,
    message_from_dict,
    message_to_dict,
)
from chatmemory.serialization.openai import from_openai, to_openai
from chatmemory.serialization.responses import from_responses, to_responses

__all__ = [
    "FORMAT_VERSION",
    "dumps",
    "dumps_message",
    "from_anthropic",
    "from_openai",
    "from_responses",
    "loads",
    "loads_message",
    "message_from_dict",
    "message_to_dict",
    "to_anthropic",
    "to_openai",
    "to_responses",
]
