"""The window algorithm: a pure function from (stored messages, added messages) to the new window.

No I/O happens here. Window memories, stores and tests all use the same functions. In short: at most one
system message, never evicted; the oldest other message leaves first while the window weighs more than the
limit; an AI message's tool results leave with it; the window holds no tool result whose request is not in
it; with ``start_on="user"`` it never opens with an assistant turn.

The rules in full: *Window rules* in docs/semantics.md.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from chatmemory.core.messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
    checked_messages,
    require_message,
)

__all__ = [
    "START_ON",
    "FixedOverhead",
    "StartOn",
    "WindowUpdate",
    "add_messages",
    "check_start_on",
    "count_one",
    "evict",
    "fit_window",
]

StartOn = Literal["any", "user"]
"""Which message a window may start with after its system message: any, or only a user message."""
START_ON: tuple[StartOn, ...] = ("any", "user")

MessageWeight = Callable[[ChatMessage], int]
TotalWeight = Callable[[Sequence[ChatMessage]], int]


def check_start_on(start_on: object) -> StartOn:
    """The ``start_on`` argument of a window memory, if it is one of :data:`START_ON`.

    Raises:
        ValueError: any other value, naming the ones there are.
    """
    for allowed in START_ON:
        if start_on == allowed and isinstance(start_on, str):
            return allowed
    raise ValueError(
        f'start_on must be {" or ".join(map(repr, START_ON))} ("user": the window always opens with a user '
        f"message, as Anthropic and Gemini want), got {start_on!r}"
    )


def count_one(message: ChatMessage) -> int:
    """The weight of every message in a message window: 1 (:func:`evict` knows it without asking)."""
    return 1


class FixedOverhead:
    """A request's weight as its messages' plus a fixed number of tokens, as a :data:`TotalWeight`.

    What an estimator counting each message by itself and adding a fixed priming once gives: knowing the
    overhead is fixed, :func:`evict` takes it as it is instead of weighing the whole window a second time.
    """

    __slots__ = ("tokens", "weight")

    def __init__(self, tokens: int, weight: MessageWeight) -> None:
        self.tokens = tokens
        self.weight = weight

    def __call__(self, window: Sequence[ChatMessage]) -> int:
        """The weight of a request holding ``window``."""
        return self.tokens + sum(map(self.weight, window))


@dataclass(frozen=True, slots=True)
class WindowUpdate:
    """The outcome of applying messages to a window.

    Attributes:
        messages: the new window.
        changed: whether the window differs from the stored one (``False``: no write is needed).
        evicted: the messages evicted to fit the limit, oldest first.
        oversized: messages that alone weigh more than the whole limit (evicted, or kept if system).
    """

    messages: list[ChatMessage]
    changed: bool
    evicted: list[ChatMessage]
    oversized: list[ChatMessage]


def _system_index(messages: Sequence[ChatMessage]) -> int | None:
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            return index
    return None


def _place_messages(
    current: Sequence[ChatMessage], added: Sequence[ChatMessage], always_keep_system_message_first: bool
) -> tuple[list[ChatMessage], bool]:
    window = list(current)
    changed = False
    for message in added:
        require_message(message)
        if isinstance(message, SystemMessage):
            held = _system_index(window)
            if held is not None:
                if window[held] == message:
                    continue
                del window[held]
            if always_keep_system_message_first:
                window.insert(0, message)
            else:
                window.append(message)
        else:
            window.append(message)
        changed = True
    return window, changed


SCAN_LIMIT = 64
"""How far past an evicted call :func:`evict` looks for its results before it indexes the window instead."""

_NEVER_RESULTS = frozenset({SystemMessage, UserMessage, AiMessage, CustomMessage})
"""Message types that are no tool result (exactly these: a subclass or a stand-in is looked at one by one)."""


class _Calls:
    """Where each tool call id is asked (by AI messages) and answered (by results) in a window.

    A result belongs to an evicted call until an AI message asks for its id again, however far after the
    call it stands; with ids that are never asked again (the usual case) every evicted call would look
    through the rest of the window. :func:`evict` builds this index instead, once, when a call's ids are not
    all asked again within :data:`SCAN_LIMIT` messages and the window goes on beyond that.
    """

    __slots__ = ("answered", "asked")

    def __init__(self, window: Sequence[ChatMessage]) -> None:
        self.asked: dict[str, list[int]] = {}
        self.answered: dict[str, list[int]] = {}
        for index, message in enumerate(window):
            if isinstance(message, AiMessage):
                for request in message.tool_execution_requests:
                    if request.id is not None:
                        positions = self.asked.setdefault(request.id, [])
                        if not positions or positions[-1] != index:
                            positions.append(index)
            elif isinstance(message, ToolExecutionResultMessage) and message.id is not None:
                self.answered.setdefault(message.id, []).append(index)

    def results(self, alive: list[bool], position: int, call_ids: set[str]) -> set[int]:
        """The live results after ``position`` of each of ``call_ids``, up to the next message asking it again."""
        found: set[int] = set()
        for call_id in call_ids:
            answers = self.answered.get(call_id)
            if not answers:
                continue
            asks = self.asked[call_id]
            later = bisect.bisect_right(asks, position)
            bound = asks[later] if later < len(asks) else len(alive)
            first, last = bisect.bisect_right(answers, position), bisect.bisect_left(answers, bound)
            found.update(index for index in answers[first:last] if alive[index])
        return found


def _results_of(
    window: Sequence[ChatMessage], alive: list[bool], position: int, ai: AiMessage, calls: list[_Calls]
) -> list[int]:
    """Indices of the tool results that belong to ``ai``, the window's message at ``position``.

    Only messages still ``alive`` (not evicted) count: those after ``position``, in order, are what stands
    after ``ai`` once the evicted ones are gone. ``calls`` holds the window's :class:`_Calls` once built
    (empty until then; built here when the call's ids are not all asked again within :data:`SCAN_LIMIT`).

    A result with an id belongs to the nearest earlier request with that id: some providers number calls
    per turn (``call_0`` every time), so a later AI message asking with the same id claims the results
    after it.
    """
    open_ids = {request.id for request in ai.tool_execution_requests if request.id is not None}
    doomed: set[int] = set()
    end = len(window)
    if open_ids and not calls:
        stop = min(end, position + 1 + SCAN_LIMIT)
        still_open = set(open_ids)  # ids no later AI message has asked again: their results are the call's
        for index in range(position + 1, stop):
            if not still_open:
                break
            if not alive[index]:
                continue
            message = window[index]
            if isinstance(message, AiMessage):
                still_open -= {request.id for request in message.tool_execution_requests}
            elif isinstance(message, ToolExecutionResultMessage) and message.id in still_open:
                doomed.add(index)
        if still_open and stop < end:
            calls.append(_Calls(window))
    if open_ids and calls:
        doomed = calls[0].results(alive, position, open_ids)
    if any(request.id is None for request in ai.tool_execution_requests):
        # Requests without ids can only be matched the way LangChain4j does: the results right after them.
        index = position + 1
        while index < end:
            if alive[index]:
                result = window[index]
                if not isinstance(result, ToolExecutionResultMessage):
                    break
                if result.id is None:
                    doomed.add(index)
            index += 1
    return sorted(doomed)


def _orphans(window: Sequence[ChatMessage]) -> list[int]:
    """Tool results whose request is not (or no longer) in the window.

    A result with an id is an orphan unless an earlier AI message in the window asked with that id. A
    result at the head of the window (system message aside) is an orphan whatever its id says: nothing
    before it can have asked for it. A result without an id can only be judged by position, so it is an
    orphan only at the head.
    """
    if set(map(type, window)) <= _NEVER_RESULTS:
        return []  # no tool result at all (a chat without tools): nothing to look at one by one
    requested: set[str] = set()
    orphans: list[int] = []
    at_head = True
    for index, message in enumerate(window):
        if isinstance(message, ToolExecutionResultMessage):
            if at_head or (message.id is not None and message.id not in requested):
                orphans.append(index)
        elif isinstance(message, AiMessage):
            at_head = False
            if message.tool_execution_requests:
                requested.update(request.id for request in message.tool_execution_requests if request.id is not None)
        elif not isinstance(message, SystemMessage):
            at_head = False
    return orphans


def evict(
    window: list[ChatMessage],
    limit: int,
    weight: MessageWeight,
    total: TotalWeight | None = None,
    start_on: StartOn = "any",
) -> tuple[list[ChatMessage], list[ChatMessage]]:
    """Evict from ``window`` (in place) until it weighs at most ``limit``.

    Tool results whose request is not in the window go too, whether or not anything else had to (a
    result arriving after its call was evicted): the window stays a valid prompt.

    Args:
        window: the messages, oldest first; changed in place.
        limit: the largest total weight allowed.
        weight: the weight of one message (1 for a message window, tokens for a token window).
        total: the weight of a whole window when it is not the sum of its messages (per-request overhead).
            It is called once: the overhead it adds to the sum of the messages is taken as fixed, so a
            ``total`` that re-counts every message costs one pass, not one per eviction.
        start_on: ``"user"``: then evict on until the oldest message that is not a system message is a
            user message (or there is none).

    Returns:
        The evicted messages (oldest first) and the window.

    One pass over the window, whatever is evicted: each eviction takes the oldest message that is not a
    system message, with its tool results; after it, only the head of the window can hold new orphans (a
    result further on with an id was asked for by a message that stays, or was one of the evicted
    message's own; one without an id is judged by its place, which only the head changes), so only the
    head is looked at again. Nothing is removed from ``window`` until the end.
    """
    weights = [1] * len(window) if weight is count_one else [weight(message) for message in window]
    if total is None:
        overhead = 0
    elif type(total) is FixedOverhead and total.weight == weight:  # the same function (a bound method: equal)
        overhead = total.tokens
    else:
        overhead = total(window) - sum(weights)
    alive = [True] * len(window)
    evicted: list[ChatMessage] = []
    weighed = sum(weights)
    # Ints are kept as a running total; any other weights (floats) are summed again after each eviction,
    # in order, so that rounding comes out as it would over the window itself.
    exact = weight is count_one or set(map(type, weights)) <= {int}

    def remove(indices: Iterable[int]) -> None:
        nonlocal weighed
        for index in indices:
            alive[index] = False
            weighed -= weights[index]
            evicted.append(window[index])
        if not exact:
            weighed = sum(kept for kept, live in zip(weights, alive, strict=True) if live)

    remove(_orphans(window))
    head = 0  # no message before it is alive and not a system message
    end = len(window)
    calls: list[_Calls] = []  # the window's calls and results, once a call's results are looked for far
    while True:
        while head < end and (not alive[head] or isinstance(window[head], SystemMessage)):
            head += 1
        if head == end:
            break
        message = window[head]
        if weighed + overhead <= limit and (start_on == "any" or isinstance(message, UserMessage)):
            break
        remove((head,))
        if isinstance(message, AiMessage) and message.tool_execution_requests:
            remove(_results_of(window, alive, head, message, calls))
        remove(_head_orphans(window, alive, head + 1))
    if evicted:
        window[:] = [message for message, kept in zip(window, alive, strict=True) if kept]
    return evicted, window


def _head_orphans(window: Sequence[ChatMessage], alive: list[bool], start: int) -> list[int]:
    """The tool results at the head of the window (from ``start``, system messages aside): orphans all."""
    orphans: list[int] = []
    for index in range(start, len(window)):
        if not alive[index]:
            continue
        message = window[index]
        if isinstance(message, ToolExecutionResultMessage):
            orphans.append(index)
        elif not isinstance(message, SystemMessage):
            break
    return orphans


def add_messages(
    current: Sequence[ChatMessage],
    added: Sequence[ChatMessage],
    *,
    limit: int,
    weight: MessageWeight,
    total: TotalWeight | None = None,
    always_keep_system_message_first: bool = False,
    start_on: StartOn = "any",
) -> WindowUpdate:
    """Apply ``added`` to the stored window ``current`` and evict down to ``limit``.

    Returns a :class:`WindowUpdate`; ``changed`` is ``False`` when nothing needs writing (for example an
    add of the system message already held, or of a result whose call is gone to an empty window).
    """
    window, placed = _place_messages(current, added, always_keep_system_message_first)
    if not placed:
        return WindowUpdate(list(current), False, [], [])
    added_ones = {id(message) for message in added}  # by identity: the objects added, not equal ones held
    oversized = [message for message in window if id(message) in added_ones and weight(message) > limit]
    evicted, window = evict(window, limit, weight, total, start_on)
    return WindowUpdate(window, window != list(current), evicted, oversized)


def fit_window(
    messages: Sequence[ChatMessage],
    *,
    limit: int,
    weight: MessageWeight,
    total: TotalWeight | None = None,
    always_keep_system_message_first: bool = False,
    start_on: StartOn = "any",
) -> WindowUpdate:
    """The window for a wholesale replacement (``set``): at most one system message, evicted to ``limit``.

    Raises:
        ValueError: if ``messages`` holds more than one system message.
    """
    checked_messages(messages)
    systems = [index for index, message in enumerate(messages) if isinstance(message, SystemMessage)]
    if len(systems) > 1:
        raise ValueError(f"a memory holds at most one system message; got {len(systems)} (at indices {systems})")
    window = list(messages)
    if systems and always_keep_system_message_first and systems[0] != 0:
        window.insert(0, window.pop(systems[0]))
    oversized = [message for message in window if weight(message) > limit]
    evicted, window = evict(window, limit, weight, total, start_on)
    return WindowUpdate(window, True, evicted, oversized)
