"""The window algorithm: a pure function from (stored messages, added messages) to the new window.

No I/O happens here. Window memories, stores and tests all use the same functions.

Rules (*Window rules* in docs/semantics.md):

* At most one system message is held. Adding one equal to the held one changes nothing; a different one
  replaces it, appended at the end or put first when ``always_keep_system_message_first``.
* While the window weighs more than the limit, the oldest message that is not the system message is
  evicted. The system message is never evicted, wherever it sits.
* Evicting an AI message with tool calls evicts the results of those calls too: by request id where ids
  are present, else the results directly after it.
* The window holds no tool result whose request is not in it: a result that arrives after its call was
  evicted, or that no earlier message asked for, is dropped, and the window never starts (after the
  system message) with a tool result. So the window is always a valid prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from chatmemory.core.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    checked_messages,
    require_message,
)

__all__ = ["WindowUpdate", "add_messages", "evict", "fit_window"]

MessageWeight = Callable[[ChatMessage], int]
TotalWeight = Callable[[Sequence[ChatMessage]], int]


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


def _results_of(window: Sequence[ChatMessage], position: int, ai: AiMessage) -> set[int]:
    """Indices of the tool results that belong to the AI message that stood just before ``position``.

    A result with an id belongs to the nearest earlier request with that id: some providers number calls
    per turn (``call_0`` every time), so a later AI message asking with the same id claims the results
    after it.
    """
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
        # Requests without ids can only be matched the way LangChain4j does: the results right after them.
        index = position
        while index < len(window) and isinstance(window[index], ToolExecutionResultMessage):
            result = window[index]
            assert isinstance(result, ToolExecutionResultMessage)
            if result.id is None:
                doomed.add(index)
            index += 1
    return doomed


def _orphans(window: Sequence[ChatMessage]) -> list[int]:
    """Tool results whose request is not (or no longer) in the window.

    A result with an id is an orphan unless an earlier AI message in the window asked with that id. A
    result at the head of the window (system message aside) is an orphan whatever its id says: nothing
    before it can have asked for it. A result without an id can only be judged by position, so it is an
    orphan only at the head.
    """
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


def evict(
    window: list[ChatMessage],
    limit: int,
    weight: MessageWeight,
    total: TotalWeight | None = None,
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

    Returns:
        The evicted messages (oldest first) and the window.
    """
    weights = [weight(message) for message in window]
    evicted: list[ChatMessage] = []

    def remove(indices: Iterable[int]) -> None:
        doomed = sorted(indices)
        evicted.extend(window[index] for index in doomed)
        for index in reversed(doomed):
            del window[index]
            del weights[index]

    overhead = total(window) - sum(weights) if total is not None else 0
    remove(_orphans(window))
    while sum(weights) + overhead > limit:
        victim = next((i for i, m in enumerate(window) if not isinstance(m, SystemMessage)), None)
        if victim is None:
            break
        doomed = {victim}
        message = window[victim]
        if isinstance(message, AiMessage) and message.tool_execution_requests:
            doomed |= _results_of(window, victim + 1, message)
        remove(doomed)
        remove(_orphans(window))
    return evicted, window


def add_messages(
    current: Sequence[ChatMessage],
    added: Sequence[ChatMessage],
    *,
    limit: int,
    weight: MessageWeight,
    total: TotalWeight | None = None,
    always_keep_system_message_first: bool = False,
) -> WindowUpdate:
    """Apply ``added`` to the stored window ``current`` and evict down to ``limit``.

    Returns a :class:`WindowUpdate`; ``changed`` is ``False`` when nothing needs writing (for example an
    add of the system message already held, or of a result whose call is gone to an empty window).
    """
    window, placed = _place_messages(current, added, always_keep_system_message_first)
    if not placed:
        return WindowUpdate(list(current), False, [], [])
    oversized = [message for message in window if any(message is new for new in added) and weight(message) > limit]
    evicted, window = evict(window, limit, weight, total)
    return WindowUpdate(window, window != list(current), evicted, oversized)


def fit_window(
    messages: Sequence[ChatMessage],
    *,
    limit: int,
    weight: MessageWeight,
    total: TotalWeight | None = None,
    always_keep_system_message_first: bool = False,
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
    evicted, window = evict(window, limit, weight, total)
    return WindowUpdate(window, True, evicted, oversized)
