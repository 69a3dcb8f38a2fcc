"""Token estimators: how close the default comes to the real counts, and what an exact count costs.

Prints, offline:

1. per script, estimate / real for :class:`SimpleTokenCountEstimator` (median, p5, min, max), for
   ``o200k_base`` and ``cl100k_base``: on the held-out chat messages and tool calls, framing included, then
   on the calibration corpus shipped with the tests; the real count is tiktoken's own BPE over the
   vocabulary bundled in the ``bpe-openai`` wheel (``tests/core/tokens/reference.py``);
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
from core.tokens.conversation import REPLY_PRIMING, api_prompt_tokens, held_out_messages
from core.tokens.corpus import samples
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

CHINESE_500 = (
    2
    * (
        "会议在星期二举行，没有人想到讨论会持续到半夜。提案本身很简单：把每周的集市从广场搬到河边，那里有更多的摊位空间，"  # noqa: RUF001
        "交通也不那么拥挤。但是广场上的每个店主都有自己的看法，而且大多数人都想详细地说出来。等到投票的时候，咖啡已经喝完了两次，"  # noqa: RUF001
        "市长已经离开了，唯一还在做记录的人是书记员，他在一个小时前就已经不再听了。第二天早上，市政府发布了一份简短的声明，"  # noqa: RUF001
        "说集市将在下个月搬到河边，并感谢所有参加会议的市民提出的宝贵意见。店主们对这个结果并不完全满意，但大多数人都表示愿意试一试。"  # noqa: RUF001
        "有人说河边的风景更好，游客可能会更多；也有人担心下雨天的时候，河边的路会变得很滑，老人和孩子走路不安全。"  # noqa: RUF001
        "市政府答应在河边修建一条有顶棚的走廊，并增加路灯和长椅。几个月以后，新的集市开张了，来的人比以前多了很多，"  # noqa: RUF001
        "连附近城市的居民也专门开车过来买新鲜的蔬菜和水果。店主们终于承认，搬家是一个正确的决定。"  # noqa: RUF001
    )
)[:500]


def _quantiles(values: list[float]) -> str:
    p5 = statistics.quantiles(values, n=20)[0] if len(values) > 1 else values[0]
    return f"{statistics.median(values):>7.3f} {p5:>6.3f} {min(values):>6.3f} {max(values):>6.3f}"


def _print_rows(title: str, ratios: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    print(f"{'script':<12} {'texts':>5} {'median':>7} {'p5':>6} {'min':>6} {'max':>6}")
    everything = [ratio for values in ratios.values() for ratio in values]
    for script, values in [*ratios.items(), ("all", everything)]:
        print(f"{script:<12} {len(values):>5} {_quantiles(values)}")


def calibration_ratios(encoding: str) -> dict[str, list[float]]:
    """estimate / real per text of the calibration corpus, by script."""
    reference = reference_encoding(encoding)
    estimator = SimpleTokenCountEstimator(encoding)
    ratios: dict[str, list[float]] = defaultdict(list)
    for script, text in samples():
        real = len(reference.encode_ordinary(text))
        if real:
            ratios[script].append(estimator.estimate_text(text) / real)
    return ratios


def held_out_ratios(encoding: str) -> dict[str, list[float]]:
    """estimate / real per held-out message, framing included (the real count as the API renders it)."""
    reference = reference_encoding(encoding)
    estimator = SimpleTokenCountEstimator(encoding, cache_size=0)
    ratios: dict[str, list[float]] = defaultdict(list)
    for kind, message in held_out_messages():
        real = api_prompt_tokens(reference, [message]) - REPLY_PRIMING
        ratios[kind].append(estimator.estimate_message(message) / real)
    return ratios


def print_ratio_tables() -> None:
    """How the default carries over to held-out messages; then the fit on the calibration corpus."""
    for encoding in ENCODINGS:
        _print_rows(
            f"SimpleTokenCountEstimator({encoding!r}) estimate / real {encoding}: HELD-OUT messages, "
            "framing included (not fitted on)",
            held_out_ratios(encoding),
        )
        _print_rows(
            f"SimpleTokenCountEstimator({encoding!r}) estimate / real {encoding}: calibration corpus, text only",
            calibration_ratios(encoding),
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
    for label, text in (("English", ENGLISH_500), ("mixed", MIXED_500), ("Chinese", CHINESE_500)):
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
    print(
        "\nSimpleTokenCountEstimator, microseconds for a 500-character message it has not seen (no word or run "
        "price remembered): CPU (wall)"
    )
    for label, text in (("English", ENGLISH_500), ("mixed", MIXED_500), ("Chinese", CHINESE_500)):
        message = UserMessage(text)
        figures = "   ".join(
            f"{encoding} {cpu:5.1f} ({wall:5.1f})"
            for encoding in ENCODINGS
            for cpu, wall in [micros_first_sight(SimpleTokenCountEstimator(encoding, cache_size=0), message)]
        )
        print(f"{label:<8} {figures}")


def micros_first_sight(
    estimator: SimpleTokenCountEstimator, message: ChatMessage, rounds: int = 300
) -> tuple[float, float]:
    """Microseconds to count ``message`` with the estimator's remembered prices forgotten before each count."""
    cpu, wall = [], []
    for _ in range(7):
        spent_cpu = spent_wall = 0
        for _ in range(rounds):
            estimator._word_costs.clear()
            cpu_start, wall_start = time.thread_time_ns(), time.perf_counter_ns()
            estimator.estimate_message(message)
            spent_cpu += time.thread_time_ns() - cpu_start
            spent_wall += time.perf_counter_ns() - wall_start
        cpu.append(spent_cpu / rounds / 1000)
        wall.append(spent_wall / rounds / 1000)
    return min(cpu), min(wall)


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
