"""Conversations with tool calls built from the corpus, and their token count as the API renders them.

:func:`api_prompt_tokens` is the reference for the framing rule of :mod:`chatmemory.core.tokens.framing`,
written from the request itself: it counts the dicts :func:`~chatmemory.serialization.to_openai` sends, not
chatmemory's messages, so a message part the estimators forget (or count but the API never receives)
shows up as a difference.
"""

from __future__ import annotations

import json
import random
from typing import Any

from chatmemory import (
    AiMessage,
    ChatMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.serialization import to_openai
from core.tokens.corpus import held_out_by_script, held_out_tool_calls, sentences

__all__ = ["api_prompt_tokens", "conversation", "held_out_messages", "turn"]

PER_MESSAGE_MARKERS = 3  # <|im_start|>, the separator, <|im_end|>
REPLY_PRIMING = 3
PER_NAME = 1
PER_TOOL_CALL_MARKERS = 3
PER_MEDIA = 85


def api_prompt_tokens(encoding: Any, messages: list[ChatMessage]) -> int:
    """Prompt tokens of a Chat Completions request holding ``messages``, by the documented rule."""

    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    total = REPLY_PRIMING
    for data in to_openai(messages):
        total += PER_MESSAGE_MARKERS + count(data["role"])
        content = data.get("content")
        if isinstance(content, str):
            total += count(content)
        elif isinstance(content, list):
            total += sum(count(part["text"]) if part["type"] == "text" else PER_MEDIA for part in content)
        if "name" in data:
            total += PER_NAME + count(data["name"])
        for call in data.get("tool_calls", ()):
            function = call["function"]
            total += PER_TOOL_CALL_MARKERS + count(" to=functions." + function["name"]) + count(function["arguments"])
    return total


def turn(index: int, rng: random.Random) -> list[ChatMessage]:
    """One turn: a user message in some script, sometimes named or with an image; sometimes tool calls."""
    texts = sentences()
    script = rng.choice(("latin", "cjk", "kana", "cyrillic", "emoji", "digits", "latin", "latin"))
    text = rng.choice(texts[script])
    if index % 7 == 3:
        question: ChatMessage = UserMessage([TextContent(text), ImageContent(url=f"https://example.com/{index}.png")])
    else:
        question = UserMessage(text, name=rng.choice((None, None, "alice", "Bob_2")))
    if index % 3:
        return [question, AiMessage(rng.choice(texts[rng.choice(("latin", "cjk", "code", "cyrillic"))]))]
    calls = [
        ToolExecutionRequest(
            f"call_{index}_{n}",
            rng.choice(("get_weather", "search", "lookupOrder", "run_sql")),
            json.dumps({"query": rng.choice(texts["latin"]), "limit": rng.randint(1, 500)}, ensure_ascii=False),
        )
        for n in range(rng.choice((1, 1, 2)))
    ]
    results = [
        ToolExecutionResultMessage(call.id, call.name, rng.choice(texts[rng.choice(("code", "digits", "cjk"))]))
        for call in calls
    ]
    return [question, AiMessage(tool_execution_requests=calls), *results, AiMessage(rng.choice(texts["latin"]))]


def conversation(turns: int, seed: int = 7) -> list[ChatMessage]:
    """A system message and ``turns`` turns."""
    rng = random.Random(seed)
    messages: list[ChatMessage] = [SystemMessage("You are a helpful assistant. Answer in the user's language.")]
    for index in range(turns):
        messages.extend(turn(index, rng))
    return messages


def held_out_messages() -> list[tuple[str, ChatMessage]]:
    """``(kind, message)`` for every held-out text and tool call: each text as a user message, each tool
    call as an assistant message calling it (kind ``tool call``) and its result (kind ``tool result``)."""
    messages: list[tuple[str, ChatMessage]] = [
        (script, UserMessage(text)) for script, texts in held_out_by_script().items() for text in texts
    ]
    for index, (name, arguments, result) in enumerate(held_out_tool_calls()):
        call = ToolExecutionRequest(f"call_{index}", name, json.dumps(arguments, ensure_ascii=False))
        messages.append(("tool call", AiMessage(tool_execution_requests=[call])))
        messages.append(("tool result", ToolExecutionResultMessage(call.id, name, result)))
    return messages
