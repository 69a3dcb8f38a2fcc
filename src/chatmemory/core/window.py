"""The window algorithm: a pure function from (stored messages, added messages) to the new window.

No I/O happens here. Window memories, stores and tests all use the same functions. In short: at most one
system message, never evicted; the oldest other message leaves first while the window weighs more than the
limit; an AI message's tool results leave with it; the window holds no tool result whose request is not in
it; with ``start_on="user"`` it never opens with an assistant turn.

The rules in full: *Window rules* in docs/semantics.md.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, count, islice
from operator import is_not
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
    "FixedOverhead",
    "START_ON",
    "SequenceDiff",
    "StartOn",
    "WindowUpdate",
    "add_messages",
    "check_start_on",
    "count_one",
    "diff_messages",
    "evict",
    "fit_window",
    "window_shift",
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


@dataclass(frozen=True, slots=True)
class SequenceDiff:
    """The plan that turns ``old`` into ``new``: ``new == [old[i] for i in kept] + list(appended)``.

    Attributes:
        kept: positions in ``old`` that stay, ascending.
        deleted: positions in ``old`` that go, ascending.
        appended: the messages that follow the kept ones.
        old_length: ``len(old)``.
    """

    kept: tuple[int, ...]
    deleted: tuple[int, ...]
    appended: tuple[ChatMessage, ...]
    old_length: int

    @property
    def unchanged(self) -> bool:
        """Nothing to write."""
        return not self.deleted and not self.appended

    @property
    def is_rewrite(self) -> bool:
        """Nothing of ``old`` survives although there was something: write the new list whole."""
        return not self.kept and self.old_length > 0

    @property
    def head_trim(self) -> int | None:
        """How many messages go from the head, if exactly the first ``n`` go; else ``None``."""
        count = len(self.deleted)
        if count == 0 or self.deleted[-1] == count - 1:
            return count
        return None

    @property
    def deleted_span(self) -> int:
        """How many leading positions a store must touch to delete: ``max(deleted) + 1`` (0 if none)."""
        return self.deleted[-1] + 1 if self.deleted else 0


def _identical_run(left: Iterator[ChatMessage], right: Iterator[ChatMessage], longest: int) -> int:
    """How many leading elements of ``left`` and ``right`` are the same objects (at most ``longest``)."""
    mismatch = next(compress(count(), map(is_not, left, right)), None)
    return longest if mismatch is None else mismatch


def window_shift(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> tuple[int, int] | None:
    """The common turn of a window memory, found without a walk: ``(span, kept)`` or ``None``.

    When ``new`` starts with all of ``old`` but its first ``span`` messages (and then appends ``new[kept:]``),
    this is exactly the plan :func:`diff_messages` makes (delete the first ``span``, keep the rest in place,
    append the others), at the cost of an index lookup and one comparison of two slices (identical
    elements compare at C speed); ``None`` when the turn is of another shape.

    Why it is the same plan: the diff keeps the longest prefix of ``new`` that is a subsequence of ``old``,
    at the latest positions. That prefix is at least ``old[span:]`` (``kept`` messages, kept at the last
    positions); it would be longer only if ``old[span:]`` also fitted into ``old[:-1]``, starting at or
    after ``span`` (``span`` is where ``new[0]`` first occurs): ``kept`` messages in ``kept - 1`` places,
    impossible. Elements compare as in the diff (the same object, or equal).
    """
    if not old or not new:
        return None
    try:
        span = old.index(new[0])
    except ValueError:
        return None
    kept = len(old) - span
    if kept > len(new):
        return None
    stays, leads = old[span:], new[:kept]
    if type(stays) is not type(leads):  # a list never equals a tuple: compare as tuples
        stays, leads = tuple(stays), tuple(leads)
    return (span, kept) if stays == leads else None


def diff_messages(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> SequenceDiff:
    """Plan the writes that turn ``old`` into ``new``.

    The longest prefix of ``new`` that is a subsequence of ``old`` is kept in place (matched to the latest
    possible positions, so that evictions land at the head); everything after it is appended. When no
    prefix matches (a new system message put first, a wholly different list), ``kept`` is empty and the
    store rewrites the list.
    """
    shift = window_shift(old, new)
    if shift is not None:
        span, length = shift
        return SequenceDiff(tuple(range(span, len(old))), tuple(range(span)), tuple(new[length:]), len(old))
    # Earliest matching finds the longest prefix of `new` that is a subsequence of `old`. Messages read
    # from a store and handed back are the same objects, so a steady-state window is a few long runs of
    # identical elements: each run is consumed at C speed, with the same result as matching one by one
    # (greedy matching takes an identical element at once), in time flat in the window.
    old_length, new_length = len(old), len(new)
    position = prefix = 0
    while prefix < new_length:
        message = new[prefix]
        while position < old_length and old[position] is not message and old[position] != message:
            position += 1
        if position == old_length:
            break
        run = _identical_run(
            islice(new, prefix + 1, None),
            islice(old, position + 1, None),
            min(new_length - prefix, old_length - position) - 1,
        )
        position += 1 + run
        prefix += 1 + run
    # Latest matching of that prefix prefers deleting older messages, keeping deletions at the head.
    kept: list[int] = []
    skipped: list[int] = []
    position, index = old_length - 1, prefix - 1
    while index >= 0:
        message = new[index]
        while old[position] is not message and old[position] != message:
            skipped.append(position)
            position -= 1
        run = _identical_run(
            islice(reversed(new), new_length - index, None),
            islice(reversed(old), old_length - position, None),
            min(index, position),
        )
        kept.extend(range(position, position - run - 1, -1))
        position -= run + 1
        index -= run + 1
    kept.reverse()
    skipped.reverse()
    deleted = (*range(position + 1), *skipped)
    return SequenceDiff(tuple(kept), deleted, tuple(new[prefix:]), len(old))
