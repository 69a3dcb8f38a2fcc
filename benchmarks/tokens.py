"""Token estimators: how close the default comes to the real counts, and what an exact count costs.

Prints, offline:

1. per script, estimate / real for :class:`SimpleTokenCountEstimator` on the corpus shipped with the
   tests (median, p5, min, max), for ``o200k_base`` and ``cl100k_base``; the real count is tiktoken's
   own BPE over the vocabulary bundled in the ``bpe-openai`` wheel (``tests/core/tokens/reference.py``);
2. microseconds to count one 500-character message, uncached, with each estimator;
3. a 2,000-turn run through a ``TokenWindowChatMemory`` with the exact estimator: how many texts were
   tokenized against how many distinct messages, and the estimator's cache hit rate.

Run: ``python benchmarks/tokens.py`` (needs the ``openai-tokens`` and ``tiktoken`` extras).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from chatmemory import (
    AiMessage,
    ChatMessage,
    OpenAITokenCountEstimator,
    SimpleTokenCountEstimator,
    TiktokenTokenCountEstimator,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core.tokens.framing import FramedEstimator
from core.tokens.corpus import held_out, samples
from core.tokens.reference import ENCODINGS, reference_encoding

ENGLISH_500 = (
    "When the committee met on Tuesday, nobody expected the discussion to last until midnight. The proposal "
    "was simple enough: move the weekly market from the square to the riverside, where there would be more "
    "room for stalls and less traffic. But every shopkeeper on the square had an opinion, and most of them "
    "wanted to share it at length. By the time the vote was taken, the coffee had run out twice, the mayor "
    "had left, and the only person still taking notes was the clerk, who had stopped listening an hour ago."
)[:500]
MIXED_500 = (
    "When the committee met on Tuesday, nobody expected the discussion to last until midnight. The proposal "
    "was simple enough: move the weekly market from the square to the riverside, where there would be more "
    "room for stalls and less traffic. 会议在星期二举行\uff0c没有人想到讨论会持续到半夜。 Привет, мир! "
    "def f(x): return x ** 2  # 12345678 🙂 But every shopkeeper on the square had an opinion, and most "
    "of them wanted to share it at length. By the time the vote was taken, the coffee had run out twice. "
    "Then everyone went home, tired but satisfied."
)[:500]


def ratio_table(encoding: str) -> dict[str, list[float]]:
    """estimate / real per corpus sample, by script (and ``all``)."""
    reference = reference_encoding(encoding)
    estimator = SimpleTokenCountEstimator(encoding)
    ratios: dict[str, list[float]] = defaultdict(list)
    for script, text in samples():
        real = len(reference.encode_ordinary(text))
        if real:
            ratio = estimator.estimate_text(text) / real
            ratios[script].append(ratio)
            ratios["all"].append(ratio)
    return ratios


def print_ratio_tables() -> None:
    """The fit per script on the corpus, then how it carries over to the held-out sentences."""
    for encoding in ENCODINGS:
        print(f"\nSimpleTokenCountEstimator({encoding!r}) estimate / real {encoding}, per corpus text")
        print(f"{'script':<11} {'texts':>5} {'median':>7} {'p5':>6} {'min':>6} {'max':>6}")
        for script, values in sorted(ratio_table(encoding).items(), key=lambda item: item[0] == "all"):
            p5 = statistics.quantiles(values, n=20)[0]
            print(
                f"{script:<11} {len(values):>5} {statistics.median(values):>7.3f} {p5:>6.3f} "
                f"{min(values):>6.3f} {max(values):>6.3f}"
            )
        reference, estimator = reference_encoding(encoding), SimpleTokenCountEstimator(encoding)
        held = [estimator.estimate_text(text) / len(reference.encode_ordinary(text)) for text in held_out()]
        below = sorted(ratio for ratio in held if ratio < 1)
        print(
            f"{'held-out':<11} {len(held):>5} {statistics.median(held):>7.3f} "
            f"{statistics.quantiles(held, n=20)[0]:>6.3f} {min(held):>6.3f} {max(held):>6.3f}"
            f"   (not fitted on; {len(below)} below 1: {', '.join(f'{ratio:.2f}' for ratio in below) or 'none'})"
        )


def micros_per_count(estimator: FramedEstimator, message: ChatMessage, rounds: int = 2000) -> tuple[float, float]:
    """Microseconds to count ``message`` once (the estimator caches nothing): CPU time and wall time.

    Each is the best of 7 batches. CPU time (``time.thread_time``) leaves out the time the thread waited
    for a core, which on a shared machine is most of the wall time.
    """
    cpu, wall = [], []
    for _ in range(7):
        cpu_start, wall_start = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(rounds):
            estimator.estimate_message(message)
        cpu.append((time.thread_time_ns() - cpu_start) / rounds / 1000)
        wall.append((time.perf_counter_ns() - wall_start) / rounds / 1000)
    return min(cpu), min(wall)


def print_speed() -> None:
    print("\nmicroseconds to count one 500-character user message, framing included, no cache: CPU (wall)")
    for label, text in (("English", ENGLISH_500), ("mixed", MIXED_500)):
        assert len(text) == 500, len(text)
        message = UserMessage(text)
        for encoding in ENCODINGS:
            rows = [
                ("OpenAITokenCountEstimator", OpenAITokenCountEstimator(encoding, cache_size=0), 2000),
                (
                    "TiktokenTokenCountEstimator",
                    TiktokenTokenCountEstimator(encoding=reference_encoding(encoding), cache_size=0),
                    1000,
                ),
                ("SimpleTokenCountEstimator", SimpleTokenCountEstimator(encoding, cache_size=0), 300),
            ]
            figures = "   ".join(
                f"{name} {cpu:5.1f} ({wall:5.1f})"
                for name, estimator, rounds in rows
                for cpu, wall in [micros_per_count(estimator, message, rounds)]
            )
            print(f"{label:<8} {encoding:<12} {figures}")


def turn(index: int) -> list[ChatMessage]:
    """One turn of a chat: a question, sometimes a tool call and its result, an answer."""
    question = UserMessage(f"Question {index}: what is the weather in city number {index}? " + MIXED_500[:200])
    if index % 3:
        return [question, AiMessage(f"Answer {index}: " + ENGLISH_500[: 100 + index % 300])]
    call_id = f"call_{index}"
    return [
        question,
        AiMessage(tool_execution_requests=[ToolExecutionRequest(call_id, "weather", f'{{"city": {index}}}')]),
        ToolExecutionResultMessage(call_id, "weather", f"sunny, {index % 35} degrees"),
        AiMessage(f"It is sunny in city {index}."),
    ]


def print_window_run(turns: int, *, cache_size: int = 4096, max_tokens: int = 4000) -> None:
    """Run ``turns`` turns through a token window; print how often texts were tokenized, and the time."""
    estimator = OpenAITokenCountEstimator("o200k_base", cache_size=cache_size)
    count = estimator._count_text
    tokenized = 0

    def counting(text: str) -> int:
        nonlocal tokenized
        tokenized += 1
        return count(text)

    estimator._count_text = counting
    memory = TokenWindowChatMemory("bench", max_tokens=max_tokens, token_count_estimator=estimator)
    conversation = [message for index in range(turns) for message in turn(index)]
    start = time.thread_time()
    for message in conversation:
        memory.add(message)
    elapsed = time.thread_time() - start
    window = memory.messages()

    # How many texts counting each distinct message once takes: the least any window could tokenize.
    once = OpenAITokenCountEstimator("o200k_base", cache_size=0)
    once_count = once._count_text
    needed = 0

    def needed_counting(text: str) -> int:
        nonlocal needed
        needed += 1
        return once_count(text)

    once._count_text = needed_counting
    distinct = set(conversation)
    for message in distinct:
        once.estimate_message(message)
    lookups = estimator.cache_hits + estimator.cache_misses
    hit_rate = f"{estimator.cache_hits / lookups:.1%} of {lookups} look-ups" if lookups else "no cache"
    print(
        f"\n{turns}-turn run, TokenWindowChatMemory(max_tokens={max_tokens}) with "
        f"OpenAITokenCountEstimator(cache_size={cache_size}): {len(conversation)} messages added, "
        f"{len(distinct)} distinct; {tokenized} texts tokenized where counting each message once takes "
        f"{needed} ({tokenized / needed:.2f}x); estimator cache hit rate {hit_rate}; the window ends with "
        f"{len(window)} messages, {estimator.estimate_messages(window)} tokens; "
        f"{elapsed / len(conversation) * 1e6:.0f} µs of CPU per add"
    )


if __name__ == "__main__":
    print_ratio_tables()
    print_speed()
    print_window_run(2000)
    # Without the estimator's own cache: the window weighs itself whole on every add (see the report).
    print_window_run(200, cache_size=0)
