"""What the store benchmarks share: the conversation they write and how they time one operation."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TypeVar

from chatmemory import AiMessage, ChatMessage, UserMessage

T = TypeVar("T")


def message(turn: int) -> ChatMessage:
    """A turn of a plausible conversation (~300 bytes encoded): user and assistant take turns."""
    text = f"turn {turn}: " + "the quick brown fox jumps over the lazy dog " * 6
    return UserMessage(text) if turn % 2 == 0 else AiMessage(text)


class Timings:
    """Microseconds and bytes sent of one kind of operation.

    Args:
        bytes_sent: a running count of bytes sent to the server (read before and after each operation).
    """

    def __init__(self, bytes_sent: Callable[[], int]) -> None:
        self.bytes_sent = bytes_sent
        self.micros: list[float] = []
        self.sent: list[int] = []

    def measure(self, action: Callable[[], T]) -> T:
        """Run ``action`` once, recording its time and the bytes it sent."""
        before_bytes = self.bytes_sent()
        start = time.perf_counter_ns()
        result = action()
        self.micros.append((time.perf_counter_ns() - start) / 1000)
        self.sent.append(self.bytes_sent() - before_bytes)
        return result

    def median(self) -> float:
        return statistics.median(self.micros)

    def p99(self) -> float:
        return statistics.quantiles(self.micros, n=100)[98]

    def bytes(self) -> float:
        return statistics.mean(self.sent)
