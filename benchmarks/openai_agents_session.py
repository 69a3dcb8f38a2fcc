"""ChatMemorySession against the SDK's SQLiteSession (in memory), per agent turn, same run.

    python benchmarks/openai_agents_session.py [--turns 300] [--windows 50 500]

A turn is what ``Runner.run`` does with a tool call: ``get_items()``, then ``add_items`` of the user input,
then of the model's reasoning and call, of the call's output, of the answer (four writes, one read). The
session runs on the asyncio in-memory store, so the figures are the cost of the item conversion and of
the window, not of a database; ``max_messages`` is the window (``SQLiteSession`` keeps everything).
Figures only, no assertions: this is not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from agents import SQLiteSession

from chatmemory.aio import InMemoryChatMemoryStore
from chatmemory.integrations.openai_agents import ChatMemorySession


def _turn_items(turn: int) -> list[list[dict[str, Any]]]:
    return [
        [{"role": "user", "content": f"question {turn}: how is the weather in city {turn}?"}],
        [
            {"type": "reasoning", "id": f"rs_{turn}", "summary": [], "encrypted_content": "gAAAA" + "x" * 400},
            {
                "type": "function_call",
                "id": f"fc_{turn}",
                "call_id": f"c{turn}",
                "name": "weather",
                "arguments": f'{{"city": "city {turn}"}}',
                "status": "completed",
            },
        ],
        [{"type": "function_call_output", "call_id": f"c{turn}", "output": f"sunny in city {turn}"}],
        [
            {
                "type": "message",
                "id": f"msg_{turn}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"answer {turn}", "annotations": []}],
            }
        ],
    ]


async def _time_turns(session: Any, turns: int) -> float:
    micros: list[float] = []
    for turn in range(turns):
        start = time.perf_counter_ns()
        await session.get_items()
        for batch in _turn_items(turn):
            await session.add_items(batch)
        micros.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(micros[turns // 2 :])  # the steady state: a full window


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--windows", type=int, nargs="+", default=[50, 500])
    args = parser.parse_args()
    reference = SQLiteSession("bench")
    sqlite = await _time_turns(reference, args.turns)
    reference.close()
    print(f"{'session':>34} {'turn µs':>9} {'vs SQLite':>10}")
    print(f"{'SQLiteSession(:memory:)':>34} {sqlite:>9.0f} {1:>10.2f}")
    for window in [None, *args.windows]:
        session = ChatMemorySession("bench", store=InMemoryChatMemoryStore(), max_messages=window)
        micros = await _time_turns(session, args.turns)
        name = f"ChatMemorySession(max_messages={window})"
        print(f"{name:>34} {micros:>9.0f} {micros / sqlite:>10.2f}")


if __name__ == "__main__":
    asyncio.run(main())
