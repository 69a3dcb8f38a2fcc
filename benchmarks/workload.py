"""A realistic conversation for the store benchmarks: mixed English and Chinese texts, tool calls, results.

Every turn is a user question (40-800 characters, about a third of them in Chinese), then either an
assistant answer or, every fifth turn, an assistant tool call whose arguments are JSON, its result, and the
answer. The texts are drawn from a seeded generator, so every run and every backend writes the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import orjson

from chatmemory import AiMessage, ChatMessage, ToolExecutionRequest, ToolExecutionResultMessage, UserMessage

__all__ = ["conversation", "sliding_windows", "text"]

_ENGLISH = (
    "the weather in Munich is mild today with light rain in the afternoon and a cool breeze from the west "
    "could you summarize the quarterly report and list the three largest risks for the logistics team "
    "please book a table for four people near the station at seven and tell me if they serve vegetarian food "
    "our deployment failed because the database migration timed out while the index was being rebuilt"
).split()
_CHINESE = (
    "今天慕尼黑的天气温和，下午有小雨。请帮我总结一下季度报告，并列出物流团队面临的三大风险。"  # noqa: RUF001
    "我们的部署失败了，因为数据库迁移在重建索引时超时。请在车站附近预订一张四人桌，七点钟，告诉我他们是否提供素食。"  # noqa: RUF001
)


def text(rng: random.Random, low: int = 40, high: int = 800) -> str:
    """A text of ``low`` to ``high`` characters: English words, or (one time in three) Chinese."""
    length = rng.randint(low, high)
    if rng.random() < 1 / 3:
        start = rng.randrange(len(_CHINESE))
        doubled = _CHINESE * (length // len(_CHINESE) + 2)
        return doubled[start : start + length]
    words: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(_ENGLISH)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:length]


def conversation(turns: int, seed: int = 7) -> Iterator[list[ChatMessage]]:
    """``turns`` turns; each is the list of messages the turn adds (2, or 4 with a tool call)."""
    rng = random.Random(seed)
    for turn in range(turns):
        messages: list[ChatMessage] = [UserMessage(text(rng))]
        if turn % 5 == 4:
            call_id = f"call_{turn:06d}"
            arguments = orjson.dumps({"city": "Munich", "days": rng.randint(1, 7), "query": text(rng, 20, 80)})
            messages.append(
                AiMessage(tool_execution_requests=[ToolExecutionRequest(call_id, "forecast", arguments.decode())])
            )
            messages.append(ToolExecutionResultMessage(call_id, "forecast", text(rng, 80, 400)))
        messages.append(AiMessage(text(rng)))
        yield messages


def sliding_windows(turns: int, window: int, seed: int = 7) -> Iterator[tuple[list[ChatMessage], int, int]]:
    """Per turn: the whole window after it, how many messages it appended, how many it evicted.

    The window keeps the last ``window`` messages, never starting inside a tool call (a result or the
    call's answer follows its call out), as a window memory keeps it.
    """
    current: list[ChatMessage] = []
    for added in conversation(turns, seed):
        current = current + added
        evicted = 0
        while len(current) > window or (current and isinstance(current[0], ToolExecutionResultMessage)):
            current = current[1:]
            evicted += 1
        yield current, len(added), evicted
