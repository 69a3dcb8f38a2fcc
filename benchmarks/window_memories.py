"""The window memories' own Python, on the in-memory store, beside a list that keeps the same window.

    python benchmarks/window_memories.py [--turns 2000] [--windows 20 200] [--tokens 4000 40000]

Every turn of the realistic conversation of ``workload.py`` is one ``add`` of the turn's messages (2, or 4
with a tool call), then one ``messages()``, on a ``MessageWindowChatMemory`` of each ``--windows`` size
and a ``TokenWindowChatMemory`` (its own estimator) of each ``--tokens`` budget, both over
``InMemoryChatMemoryStore``: no I/O, so what is timed is the memory's work (the window rules, weighing,
the optimistic load and save) and the store's copy of the list. The floor is a Python list that keeps the
same number of messages: ``extend``, then drop from the front down to the size (no tool-call rules, no
system message, no versions); for the token window, the counts of the estimator the memory uses, summed.
Printed: median µs per add and per ``messages()``, and the window's length at the end. Figures only, no
assertions: not run in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
sys.path.append(_HERE)

from workload import conversation  # noqa: E402

from chatmemory import (  # noqa: E402
    ChatMessage,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SimpleTokenCountEstimator,
    TokenWindowChatMemory,
)

WARM_TURNS = 300


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    action()
    return (time.perf_counter_ns() - start) / 1000


def run_memory(memory: MessageWindowChatMemory | TokenWindowChatMemory, turns: int) -> tuple[float, float, int]:
    adds: list[float] = []
    reads: list[float] = []
    for turn, added in enumerate(conversation(turns + WARM_TURNS)):
        add = timed(lambda added=added: memory.add(*added))
        read = timed(memory.messages)
        if turn >= WARM_TURNS:
            adds.append(add)
            reads.append(read)
    return statistics.median(adds), statistics.median(reads), len(memory.messages())


def run_floor(turns: int, fits: Callable[[list[ChatMessage]], bool]) -> tuple[float, float, int]:
    window: list[ChatMessage] = []

    def add(added: list[ChatMessage]) -> None:
        window.extend(added)
        while not fits(window):
            del window[0]

    adds: list[float] = []
    reads: list[float] = []
    for turn, added in enumerate(conversation(turns + WARM_TURNS)):
        add_time = timed(lambda added=added: add(added))
        read = timed(lambda: list(window))
        if turn >= WARM_TURNS:
            adds.append(add_time)
            reads.append(read)
    return statistics.median(adds), statistics.median(reads), len(window)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--tokens", type=int, nargs="+", default=[4000, 40000])
    args = parser.parse_args()
    print(f"{args.turns} turns, median µs")
    print(f"{'':34}{'add':>10}{'messages()':>12}{'length':>8}")
    for size in args.windows:
        rows = {
            f"message window {size}": run_memory(
                MessageWindowChatMemory("m", max_messages=size, store=InMemoryChatMemoryStore()), args.turns
            ),
            f"  floor (list of {size})": run_floor(args.turns, lambda window, size=size: len(window) <= size),
        }
        for name, (add, read, length) in rows.items():
            print(f"{name:34}{add:10.1f}{read:12.1f}{length:8}")
    for budget in args.tokens:
        memory = TokenWindowChatMemory("m", max_tokens=budget, store=InMemoryChatMemoryStore())
        counts = SimpleTokenCountEstimator()

        def fits(window: list[ChatMessage], budget: int = budget, counts: SimpleTokenCountEstimator = counts) -> bool:
            return counts.estimate_messages(window) <= budget

        rows = {
            f"token window {budget}": run_memory(memory, args.turns),
            f"  floor (counts summed, {budget})": run_floor(args.turns, fits),
        }
        for name, (add, read, length) in rows.items():
            print(f"{name:34}{add:10.1f}{read:12.1f}{length:8}")


if __name__ == "__main__":
    main()
