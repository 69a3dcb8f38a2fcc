"""Token count estimators for :class:`~chatmemory.TokenWindowChatMemory`.

:class:`SimpleTokenCountEstimator` needs no dependency and is sensible for English and CJK text;
:class:`TiktokenTokenCountEstimator` (``pip install 'chatmemory[tiktoken]'``) counts with OpenAI's BPE.
"""

from __future__ import annotations

import math
import re
from typing import Any, Protocol, runtime_checkable

from chatmemory.core.messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolExecutionResultMessage,
    UserMessage,
)

__all__ = ["SimpleTokenCountEstimator", "TiktokenTokenCountEstimator", "TokenCountEstimator"]


@runtime_checkable
class TokenCountEstimator(Protocol):
    """Estimates how many tokens a message takes in a prompt.

    An estimator may also define ``estimate_messages(messages) -> int`` to count a whole window when it
    is not the sum of its messages (for a per-request overhead); the token window then uses it for the
    total. ``estimate_message`` is called once per distinct message: the window caches the counts.
    """

    def estimate_message(self, message: ChatMessage) -> int:
        """Tokens that ``message`` takes in a prompt."""
        ...


# Scripts written without spaces between words: about one token per character in current BPE vocabularies.
_DENSE_SCRIPTS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi
    "\u3000-\u303f"  # CJK punctuation
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u31ff"  # Bopomofo, Hangul compatibility Jamo
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef"  # full-width forms
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
_PIECES = re.compile(
    rf"(?P<dense>[{_DENSE_SCRIPTS}])"
    r"|(?P<word>[^\W\d_]+)"
    r"|(?P<digits>\d+)"
    r"|(?P<space>\s+)"
    r"|(?P<other>.)",
    re.DOTALL,
)


class _FramedEstimator:
    """Counts a message as its texts plus fixed framing; subclasses say how many tokens a text takes."""

    per_message: int
    per_tool_call: int
    per_media: int

    def estimate_text(self, text: str) -> int:
        raise NotImplementedError

    def estimate_message(self, message: ChatMessage) -> int:
        """Tokens that ``message`` takes in a prompt."""
        tokens = self.per_message
        if isinstance(message, SystemMessage):
            tokens += self.estimate_text(message.text)
        elif isinstance(message, UserMessage):
            if message.name:
                tokens += 1 + self.estimate_text(message.name)
            for part in message.contents:
                tokens += self.estimate_text(part.text) if isinstance(part, TextContent) else self.per_media
        elif isinstance(message, AiMessage):
            if message.text:
                tokens += self.estimate_text(message.text)
            if message.thinking:
                tokens += self.estimate_text(message.thinking)
            for request in message.tool_execution_requests:
                tokens += self.per_tool_call + self.estimate_text(request.name) + self.estimate_text(request.arguments)
        elif isinstance(message, ToolExecutionResultMessage):
            tokens += self.estimate_text(message.text)
        elif isinstance(message, CustomMessage):
            tokens += sum(self.estimate_text(f"{key} {value}") for key, value in message.attributes.items())
        return tokens


class SimpleTokenCountEstimator(_FramedEstimator):
    """A dependency-free estimate, close to GPT-style BPE counts for English and CJK text.

    Words count one token per ``chars_per_token`` characters (at least one), digits one per three, CJK,
    kana and Hangul one per character, other symbols one each; whitespace is folded into words. Each
    message adds ``per_message`` tokens for its role and framing, each tool call ``per_tool_call``, and each
    non-text content part (image, audio, video, PDF) ``per_media`` tokens.
    """

    def __init__(
        self,
        *,
        chars_per_token: float = 4.0,
        per_message: int = 4,
        per_tool_call: int = 8,
        per_media: int = 85,
    ) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be > 0")
        self.chars_per_token = chars_per_token
        self.per_message = per_message
        self.per_tool_call = per_tool_call
        self.per_media = per_media

    def estimate_text(self, text: str) -> int:
        """Tokens in a piece of text."""
        tokens = 0
        for match in _PIECES.finditer(text):
            kind = match.lastgroup
            if kind == "word":
                tokens += max(1, math.ceil(len(match.group()) / self.chars_per_token))
            elif kind == "digits":
                tokens += math.ceil(len(match.group()) / 3)
            elif kind == "space":
                # A single space merges into the next word; runs of whitespace (indentation) cost tokens.
                if len(match.group()) > 1:
                    tokens += 1
            elif kind == "other":
                # Emoji and rare symbols take several byte-level tokens.
                tokens += max(1, math.ceil(len(match.group().encode("utf-8")) / 2))
            else:
                tokens += 1
        return tokens


class TiktokenTokenCountEstimator(_FramedEstimator):
    """Counts with a tiktoken encoding, framed the way OpenAI's Chat Completions API counts messages.

    Args:
        model: a model name tiktoken knows (``"gpt-4o"``); ignored when ``encoding`` is given.
        encoding: a ``tiktoken.Encoding`` (or an encoding name such as ``"o200k_base"``).
        per_message: tokens each message adds for its role and framing (3 for current OpenAI models).
        per_tool_call: tokens each tool call adds beside its name and arguments.
        per_media: tokens for each non-text content part.
    """

    def __init__(
        self,
        model: str | None = "gpt-4o",
        *,
        encoding: Any = None,
        per_message: int = 3,
        per_tool_call: int = 3,
        per_media: int = 85,
    ) -> None:
        from chatmemory.stores._optional import require

        tiktoken = require("tiktoken", feature="TiktokenTokenCountEstimator", extra="tiktoken")
        if encoding is None and model is None:
            raise ValueError("pass a model name or an encoding")
        if encoding is None or isinstance(encoding, str):
            name = encoding or model
            try:
                encoding = tiktoken.get_encoding(encoding) if encoding else tiktoken.encoding_for_model(model)
            except (KeyError, ValueError) as exc:
                raise ValueError(f"tiktoken knows no model or encoding {name!r} ({exc})") from None
            except Exception as exc:
                # tiktoken downloads an encoding's vocabulary on first use; offline that fails deep inside
                # an HTTP client. Say what to do instead.
                raise RuntimeError(
                    f"tiktoken could not load the vocabulary for {name!r} ({type(exc).__name__}: {exc}). Without "
                    "network access, point TIKTOKEN_CACHE_DIR at a directory holding the cached file, or pass "
                    "encoding= a tiktoken.Encoding you built"
                ) from exc
        self.encoding = encoding
        self.per_message = per_message
        self.per_tool_call = per_tool_call
        self.per_media = per_media

    def estimate_text(self, text: str) -> int:
        """Tokens in a piece of text, special-token look-alikes counted as plain text."""
        return len(self.encoding.encode(text, disallowed_special=()))
