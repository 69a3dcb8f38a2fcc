"""How a chat message is counted around its texts: the OpenAI Chat Completions framing rule.

Every estimator shares this rule (:class:`FramedEstimator`) and differs only in how it counts a piece of
text. The rule follows OpenAI's published recipe for chat models (the "How to count tokens with tiktoken"
cookbook) and, where the recipe is silent, the form in which the API renders a message to the model: each
message costs ``per_message`` plus its texts, a name ``per_name`` plus its tokens, a media part
``per_media``, a tool call ``per_tool_call`` plus its header and arguments, and the request
``reply_priming`` once. A token window keeps ``estimate_messages(window) <= max_tokens``.

Each rule and its figures: docs/window-memories.md#how-a-message-is-counted.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterable

from chatmemory.core.messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)

__all__ = ["FramedEstimator"]

TOOL_CALL_HEADER = " to=functions."


def _non_negative(owner: str, **values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{owner}: {name} must be an int, not {type(value).__name__}")
        if value < 0:
            raise ValueError(f"{owner}: {name} must be >= 0, got {value}")


class FramedEstimator(abc.ABC):
    """Counts messages by the framing rule of this module; a subclass says how many tokens a text takes.

    Counts are cached by message value (messages are immutable), so a message is counted once however
    often the window is weighed: :meth:`estimate_messages`, which a token window calls over the whole
    window on every add, costs a dictionary look-up per message after the first time. ``cache_hits`` and
    ``cache_misses`` count look-ups (exactly in one thread; a close count under concurrent use).

    Args:
        per_message: tokens each message adds for its markers and role.
        per_name: tokens a user name adds beside the name's own tokens.
        per_tool_call: tokens each tool call adds beside its header and arguments.
        per_media: tokens for each non-text content part.
        reply_priming: tokens a request adds once, for the primed reply.
        count_thinking: count an AI message's thinking (only if you send it back to the model).
        cache_size: how many distinct messages' counts to keep, oldest out first (0 keeps none).
    """

    def __init__(
        self,
        *,
        per_message: int,
        per_name: int,
        per_tool_call: int,
        per_media: int,
        reply_priming: int,
        count_thinking: bool,
        cache_size: int,
    ) -> None:
        _non_negative(
            type(self).__name__,
            per_message=per_message,
            per_name=per_name,
            per_tool_call=per_tool_call,
            per_media=per_media,
            reply_priming=reply_priming,
            cache_size=cache_size,
        )
        self.per_message = per_message
        self.per_name = per_name
        self.per_tool_call = per_tool_call
        self.per_media = per_media
        self.reply_priming = reply_priming
        self.count_thinking = count_thinking
        self.cache_size = cache_size
        self._cache: dict[ChatMessage, int] = {}
        self._cache_lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0

    @abc.abstractmethod
    def estimate_text(self, text: str) -> int:
        """Tokens in a piece of text."""

    def estimate_message(self, message: ChatMessage) -> int:
        """Tokens that ``message`` takes in a prompt, by the framing rule (cached by message value)."""
        # A hit is one dictionary look-up and takes no lock: hashing a message is the dominant cost of
        # weighing a window, so the cache forgets the oldest entry first instead of the least used one
        # (the same thing for a sliding window, without a second hash per hit to keep LRU order).
        cached = self._cache.get(message)
        if cached is not None:
            self.cache_hits += 1
            return cached
        tokens = self._count_message(message)
        if self.cache_size:
            with self._cache_lock:
                self.cache_misses += 1
                self._cache[message] = tokens
                if len(self._cache) > self.cache_size:
                    del self._cache[next(iter(self._cache))]
        return tokens

    def estimate_messages(self, messages: Iterable[ChatMessage]) -> int:
        """Tokens that a request holding ``messages`` takes: the messages plus the reply priming."""
        return self.reply_priming + sum(self.estimate_message(message) for message in messages)

    def _count_message(self, message: ChatMessage) -> int:
        text = self.estimate_text
        tokens = self.per_message
        if isinstance(message, (SystemMessage, ToolExecutionResultMessage)):
            tokens += text(message.text)
        elif isinstance(message, UserMessage):
            if message.name is not None:
                tokens += self.per_name + text(message.name)
            for part in message.contents:
                tokens += text(part.text) if isinstance(part, TextContent) else self.per_media
        elif isinstance(message, AiMessage):
            if message.text:
                tokens += text(message.text)
            if self.count_thinking and message.thinking:
                tokens += text(message.thinking)
            for request in message.tool_execution_requests:
                tokens += self.per_tool_call + text(TOOL_CALL_HEADER + request.name) + text(request.arguments)
        elif isinstance(message, CustomMessage):
            tokens += sum(text(f"{key} {value}") for key, value in message.attributes.items())
        return tokens
