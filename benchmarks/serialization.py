"""Codecs on a realistic 20-message window, beside orjson on the same data as plain dicts.

    python benchmarks/serialization.py [--rounds 30] [--loops 200] [--runs 1]

The window is what a chat memory holds in practice: a system message, then user and assistant turns with
English and Chinese texts of 40-800 characters, a tool call (JSON arguments) every few turns followed by
its result, and a thought signature on some assistant turns. Each codec is timed for a round trip
(encode, then decode) and for decoding alone:

* orjson floor: ``orjson.dumps`` / ``orjson.loads`` of the native JSON as plain dicts and lists — no
  validation, no message objects; the floor every codec is compared with;
* stdlib json: ``json.dumps`` / ``json.loads`` of the same dicts;
* native list: :func:`chatmemory.serialization.dumps` / :func:`~chatmemory.serialization.loads`;
* native records: :func:`~chatmemory.serialization.dumps_message` /
  :func:`~chatmemory.serialization.loads_message` per message, which the stores use (Redis list items,
  SQL rows, MongoDB array items); its own floor, which its ``x floor`` figures compare it with, is orjson
  per message on the same dicts;
* LangChain4j: :mod:`chatmemory.serialization.langchain4j` ``dumps`` / ``loads``;
* OpenAI: :func:`~chatmemory.serialization.to_openai` + orjson, then orjson + ``from_openai``.

The cases take turns within every round, so load on the (shared) machine weighs on all of them alike;
the figure is the median over rounds of the per-operation time (with ``--runs N``, the least of N such
medians). Figures only, no assertions.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from chatmemory import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.serialization import (
    dumps,
    dumps_message,
    from_openai,
    langchain4j,
    loads,
    loads_message,
    message_to_dict,
    to_openai,
)

ENGLISH = (
    "Could you look at the quarterly numbers again and tell me whether the drop in March is seasonal or "
    "something we should worry about? The sales team says it is the usual post-holiday dip, but the "
    "support tickets went up at the same time, and I would like a second opinion before the board meeting. "
)
CHINESE = (
    "请帮我整理一下上周会议的要点，特别是关于新产品发布时间表的讨论。市场部希望提前两周上线，"  # noqa: RUF001 - real Chinese punctuation
    "但是研发团队认为测试还没有完成，风险比较大。我们需要在周五之前给出一个明确的决定，"  # noqa: RUF001
    "同时也要考虑到客户的反馈和竞争对手的动态。"
)


def _text(rng: random.Random, source: str, low: int = 40, high: int = 800) -> str:
    length = rng.randint(low, high)
    return (source * (high // len(source) + 2))[rng.randrange(len(source)) :][:length]


def window(seed: int = 7) -> list[ChatMessage]:
    """A 20-message window: a system message, user/assistant turns, two tool calls with their results."""
    rng = random.Random(seed)
    messages: list[ChatMessage] = [
        SystemMessage("You are a helpful assistant for a mid-sized company. Answer in the user's language.")
    ]
    turn = 0
    while len(messages) < 20:
        source = CHINESE if turn % 2 else ENGLISH
        messages.append(UserMessage(_text(rng, source)))
        if turn % 3 == 1 and len(messages) <= 16:
            call_id = f"call_{turn:04d}"
            arguments = orjson.dumps({"city": "北京" if turn % 2 else "Munich", "unit": "celsius", "days": 3}).decode()
            messages.append(
                AiMessage(
                    None,
                    [ToolExecutionRequest(call_id, "weather_forecast", arguments)],
                    attributes={"thought_signature": "c2lnLTEyMw" * 4},
                )
            )
            result = orjson.dumps({"forecast": [{"day": day, "high": 20 + day, "low": 11} for day in range(3)]})
            messages.append(ToolExecutionResultMessage(call_id, "weather_forecast", result.decode()))
        messages.append(AiMessage(_text(rng, source)))
        turn += 1
    return messages[:20]


def _median_micros(action: Callable[[], Any], loops: int) -> float:
    start = time.process_time_ns()
    for _ in range(loops):
        action()
    return (time.process_time_ns() - start) / 1000 / loops


def cases(messages: list[ChatMessage]) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """Each codec's (round trip, decode) actions on ``messages``."""
    plain = orjson.loads(orjson.dumps([message_to_dict(message) for message in messages]))
    plain_document = {"version": 1, "messages": plain}
    floor_bytes = orjson.dumps(plain_document)
    record_dicts = [{"v": 1, **item} for item in plain]
    record_floor_bytes = [orjson.dumps(item) for item in record_dicts]
    stdlib_text = json.dumps(plain_document, ensure_ascii=False)
    native = dumps(messages)
    records = [dumps_message(message) for message in messages]
    lc4j = langchain4j.dumps(messages)
    openai_bytes = orjson.dumps(to_openai(messages))
    return {
        "orjson floor (dicts)": (
            lambda: orjson.loads(orjson.dumps(plain_document)),
            lambda: orjson.loads(floor_bytes),
        ),
        "orjson per record (dicts)": (
            lambda: [orjson.loads(orjson.dumps(item)) for item in record_dicts],
            lambda: [orjson.loads(item) for item in record_floor_bytes],
        ),
        "stdlib json (dicts)": (
            lambda: json.loads(json.dumps(plain_document, ensure_ascii=False)),
            lambda: json.loads(stdlib_text),
        ),
        "native list (dumps/loads)": (lambda: loads(dumps(messages)), lambda: loads(native)),
        "native records (*_message)": (
            lambda: [loads_message(dumps_message(message)) for message in messages],
            lambda: [loads_message(item) for item in records],
        ),
        "LangChain4j codec": (lambda: langchain4j.loads(langchain4j.dumps(messages)), lambda: langchain4j.loads(lc4j)),
        "OpenAI codec (+ orjson)": (
            lambda: from_openai(orjson.loads(orjson.dumps(to_openai(messages)))),
            lambda: from_openai(orjson.loads(openai_bytes)),
        ),
    }


# The floor each case's "x floor" figures are relative to (the list floor unless named here).
_FLOORS = {"native records (*_message)": "orjson per record (dicts)"}


def _medians(table: dict[str, tuple[Callable[[], Any], Callable[[], Any]]], rounds: int, loops: int) -> dict[str, Any]:
    timings: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in table}
    gc.collect()
    for _ in range(rounds):
        for name, (round_trip, decode) in table.items():
            timings[name][0].append(_median_micros(round_trip, loops))
            timings[name][1].append(_median_micros(decode, loops))
    return {name: (statistics.median(rt), statistics.median(dec)) for name, (rt, dec) in timings.items()}


def main() -> None:
    """Time every codec and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole timing; print the least medians")
    args = parser.parse_args()

    messages = window()
    assert loads(dumps(messages)) == messages
    chars = [len(getattr(message, "text", None) or "") for message in messages]
    print(
        f"window: {len(messages)} messages, {len(dumps(messages))} bytes native, "
        f"texts {min(c for c in chars if c)}-{max(chars)} chars"
    )
    table = cases(messages)
    runs = [_medians(table, args.rounds, args.loops) for _ in range(args.runs)]
    best = {name: (min(run[name][0] for run in runs), min(run[name][1] for run in runs)) for name in table}
    print(f"{'codec':<28} {'round trip µs':>14} {'x floor':>8} {'decode µs':>10} {'x floor':>8}  floor")
    for name, (rt, dec) in best.items():
        floor = _FLOORS.get(name, "orjson floor (dicts)")
        floor_rt, floor_dec = best[floor]
        print(f"{name:<28} {rt:>14.1f} {rt / floor_rt:>7.2f}x {dec:>10.1f} {dec / floor_dec:>7.2f}x  {floor}")


if __name__ == "__main__":
    main()
