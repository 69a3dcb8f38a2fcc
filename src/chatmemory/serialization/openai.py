"""OpenAI Chat Completions message dicts (placeholder until the codec lands)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from chatmemory.core.messages import ChatMessage

__all__ = ["from_openai", "to_openai"]


def to_openai(messages: Iterable[ChatMessage]) -> list[dict[str, Any]]:
    """Chat Completions message dicts for ``messages``."""
    raise NotImplementedError


def from_openai(messages: Iterable[Mapping[str, Any]]) -> list[ChatMessage]:
    """Messages from Chat Completions message dicts."""
    raise NotImplementedError
