"""``evict`` against the rules read literally: after every eviction, look at the whole window again.

:func:`chatmemory.core.window.evict` passes over a window once, however much it evicts, and looks at the
head again after each eviction (the only place new orphans can appear). The oracle below is the direct
reading of the rules (*Window rules* in docs/semantics.md), which rescans every message after every
eviction. Both must evict the same messages in the same order and leave the same window, for windows the
memories never build too: system messages anywhere, results without ids anywhere, ids reused, calls never
answered, weights that differ, a per-request overhead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from unittest.mock import Mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core import window as window_module
from chatmemory.core.window import FixedOverhead, count_one, evict

IDS = st.sampled_from(["a", "b", "c"]) | st.none()


def _oracle_results_of(window: Sequence[ChatMessage], position: int, ai: AiMessage) -> set[int]:
    open_ids = {request.id for request in ai.tool_execution_requests if request.id is not None}
    doomed: set[int] = set()
    for index in range(position, len(window)):
        if not open_ids:
            break
        message = window[index]
        if isinstance(message, AiMessage):
            open_ids -= {request.id for request in message.tool_execution_requests}
        elif isinstance(message, ToolExecutionResultMessage) and message.id in open_ids:
            doomed.add(index)
    if any(request.id is None for request in ai.tool_execution_requests):
        index = position
        while index < len(window) and isinstance(window[index], ToolExecutionResultMessage):
            result = window[index]
            assert isinstance(result, ToolExecutionResultMessage)
            if result.id is None:
                doomed.add(index)
            index += 1
    return doomed


def _oracle_orphans(window: Sequence[ChatMessage]) -> list[int]:
    requested: set[str] = set()
    orphans: list[int] = []
    at_head = True
    for index, message in enumerate(window):
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, ToolExecutionResultMessage):
            if at_head or (message.id is not None and message.id not in requested):
                orphans.append(index)
            continue
        at_head = False
        if isinstance(message, AiMessage):
            requested.update(request.id for request in message.tool_execution_requests if request.id is not None)
    return orphans


def oracle_evict(
    window: list[ChatMessage],
    limit: int,
    weight: Callable[[ChatMessage], int],
    total: Callable[[Sequence[ChatMessage]], int] | None = None,
) -> tuple[list[ChatMessage], list[ChatMessage]]:
    """Evict the oldest message that is not a system message (with its results) while over ``limit``,
    dropping every orphan after each step, the whole window looked at again each time."""
    weights = [weight(message) for message in window]
    evicted: list[ChatMessage] = []

    def remove(indices: set[int] | list[int]) -> None:
        doomed = sorted(indices)
        evicted.extend(window[index] for index in doomed)
        for index in reversed(doomed):
            del window[index]
            del weights[index]

    overhead = total(window) - sum(weights) if total is not None else 0
    remove(_oracle_orphans(window))
    while sum(weights) + overhead > limit:
        victim = next((i for i, m in enumerate(window) if not isinstance(m, SystemMessage)), None)
        if victim is None:
            break
        doomed = {victim}
        message = window[victim]
        if isinstance(message, AiMessage) and message.tool_execution_requests:
            doomed |= _oracle_results_of(window, victim + 1, message)
        remove(doomed)
        remove(_oracle_orphans(window))
    return evicted, window


@st.composite
def windows(draw: st.DrawFn) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for number in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "ai", "call", "call", "result", "result", "result", "system", "custom"]))
        text = f"m{number}" + "x" * draw(st.integers(0, 9))
        if kind == "user":
            messages.append(UserMessage(text))
        elif kind == "ai":
            messages.append(AiMessage(text))
        elif kind == "call":
            ids = draw(st.lists(IDS, min_size=1, max_size=3))
            requests = [ToolExecutionRequest(call_id, "tool", "{}") for call_id in ids]
            messages.append(AiMessage(draw(st.none() | st.just(text)), requests))
        elif kind == "result":
            messages.append(ToolExecutionResultMessage(draw(IDS), "tool", text))
        elif kind == "system":
            messages.append(SystemMessage(text))
        else:
            messages.append(CustomMessage({"n": number}))
    return messages


def _weight(message: ChatMessage) -> int:
    if isinstance(message, CustomMessage):
        return 2
    text = getattr(message, "text", None) or ""
    return 1 + len(text) % 4


def _float_weight(message: ChatMessage) -> float:
    """Weights whose sums round: the same sum in another order can differ in its last bit."""
    return (0.1, 0.2, 0.7, 0.3)[_weight(message) - 1] if not isinstance(message, CustomMessage) else 0.6


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    windows(),
    st.integers(0, 30),
    st.sampled_from(["none", "function", "fixed"]),
    st.sampled_from([0, 1, 3, window_module.SCAN_LIMIT]),
    st.sampled_from([_weight, count_one, _float_weight]),
)
def test_evict_takes_what_the_rules_read_literally_take_in_the_same_order(
    window: list[ChatMessage], limit: int, overhead: str, scan_limit: int, weight: Callable[[ChatMessage], Any]
) -> None:
    # overhead: none, a total weight that weighs the window again, or one known to add a fixed number.
    # scan_limit: how far results are looked for before the window is indexed (0: indexed at once).
    # weight: one that differs by message, a message window's (every message 1), or floats.
    total: Callable[[Sequence[ChatMessage]], int] | None = None
    if overhead == "function":
        total = lambda messages: 3 + sum(map(weight, messages))  # noqa: E731
    elif overhead == "fixed":
        total = FixedOverhead(3, weight)
    if weight is _float_weight:
        limit = limit / 10  # type: ignore[assignment]
    expected_evicted, expected_window = oracle_evict(list(window), limit, weight, total)
    given_window = list(window)
    default = window_module.SCAN_LIMIT
    window_module.SCAN_LIMIT = scan_limit
    try:
        evicted, kept = evict(given_window, limit, weight, total)
    finally:
        window_module.SCAN_LIMIT = default
    assert evicted == expected_evicted
    assert kept == expected_window
    assert given_window == expected_window  # changed in place, as documented


def test_a_long_window_evicted_down_to_a_few_turns_keeps_the_last_whole_turns() -> None:
    # Calls answered at once and calls never answered (their results looked for beyond SCAN_LIMIT).
    window: list[ChatMessage] = []
    for number in range(5000):
        window.append(UserMessage(f"question {number}"))
        window.append(AiMessage(None, [ToolExecutionRequest(f"call_{number}", "tool", "{}")]))
        if number % 2:
            window.append(ToolExecutionResultMessage(f"call_{number}", "tool", "done"))
        window.append(AiMessage(f"answer {number}"))
    last_turns = window[-18:]
    evicted, kept = evict(window, 18, lambda _: 1)
    assert len(evicted) == 17_500 - 18
    assert kept == last_turns and kept[0] == UserMessage("question 4995")


def test_a_fixed_overhead_over_another_weight_is_weighed_as_a_total() -> None:
    # Only a FixedOverhead over evict's own weight is taken as a constant; any other is called.
    window: list[ChatMessage] = [UserMessage(str(number)) for number in range(5)]
    expected = oracle_evict(list(window), 5, count_one, FixedOverhead(0, lambda _: 2))

    class Doubled(FixedOverhead):
        def __call__(self, messages: Sequence[ChatMessage]) -> int:
            return 2 * super().__call__(messages)

    assert evict(list(window), 5, count_one, FixedOverhead(0, lambda _: 2)) == expected
    assert evict(list(window), 5, count_one, Doubled(0, count_one)) == oracle_evict(
        list(window), 5, count_one, Doubled(0, count_one)
    )
    assert expected[1] == []


def test_a_stand_in_for_a_tool_result_is_judged_as_one() -> None:
    stray = Mock(spec=ToolExecutionResultMessage)
    stray.id = "x"
    evicted, kept = evict([stray, UserMessage("u")], 10, lambda _: 1)
    assert evicted == [stray] and kept == [UserMessage("u")]
