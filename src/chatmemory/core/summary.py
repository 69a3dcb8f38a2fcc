"""The summarizing memory's decisions, written once as steps for the sync and the async memory.

Messages leaving the window go to the application's ``summarizer(previous_summary, evicted_messages)``;
the text it returns is kept as one marked user message right after the system message, counted toward
the limit (``headroom=n`` batches the summarizer calls). The window rules apply after the summary, so a
tool call is summarized with its results. A conflicting write is retried from a fresh read, never under
the store's lock (a slow summarizer must not hold one); summaries made are remembered for the whole
``add``, so a retry summarizes only what is new. The rules: docs/semantics.md, *Summarizing memory*.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import TypeVar

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.lru import LRU
from chatmemory.core.memory_steps import (
    EvictHook,
    GetMessages,
    Load,
    OversizedPolicy,
    Save,
    Sleep,
    Step,
    Steps,
    Summarize,
    Summarizer,
    UpdateMessages,
    WindowRules,
    pop_steps,
)
from chatmemory.core.messages import ChatMessage, SystemMessage, TextContent, UserMessage
from chatmemory.core.retry import RetryPolicy
from chatmemory.core.store import MemoryId, Snapshot
from chatmemory.core.token_estimators import SimpleTokenCountEstimator, TokenCountEstimator
from chatmemory.core.window import MessageWeight, StartOn, TotalWeight, WindowUpdate, count_one, evict
from chatmemory.core.window_memory import (
    Limit,
    WindowMemoryBase,
    check_callback,
    counted_weight,
    request_total,
    window_estimator,
)

__all__ = [
    "DEFAULT_SUMMARY_PREFIX",
    "SUMMARY_ATTRIBUTE",
    "SummarizingBase",
    "SummaryRules",
    "is_summary",
    "split_summary",
    "summarizing_add_steps",
    "summarizing_messages_steps",
    "summarizing_set_steps",
    "summary_message",
    "summary_steps",
    "summary_text",
]

StoreT = TypeVar("StoreT")

logger = logging.getLogger("chatmemory")

SUMMARY_ATTRIBUTE = "chatmemory_summary"
"""The attribute that marks the summary message (its value is the marker's format version, 1)."""
DEFAULT_SUMMARY_PREFIX = "Summary of the earlier conversation, whose messages are no longer shown:"
"""The framing line sent before the summary text."""

_Cache = dict[tuple[str | None, tuple[ChatMessage, ...]], str]


def summary_message(text: str, prefix: str = DEFAULT_SUMMARY_PREFIX) -> UserMessage:
    """The marked message holding the summary ``text`` (see the module docs)."""
    parts = [TextContent(prefix), TextContent(text)] if prefix else [TextContent(text)]
    return UserMessage(parts, attributes={SUMMARY_ATTRIBUTE: 1})


def is_summary(message: ChatMessage) -> bool:
    """Whether ``message`` is a summarizing memory's summary (a user message with the marker attribute)."""
    return (
        isinstance(message, UserMessage)
        and message.attributes.get(SUMMARY_ATTRIBUTE) is not None
        and isinstance(message.contents[-1], TextContent)
    )


def summary_text(message: UserMessage) -> str:
    """The summary held by a summary message (its last text part, without the framing line)."""
    last = message.contents[-1]
    assert isinstance(last, TextContent)
    return last.text


def split_summary(window: Sequence[ChatMessage]) -> tuple[list[ChatMessage], UserMessage | None]:
    """The conversation without its summary, and the summary message (the first one, if several)."""
    conversation: list[ChatMessage] = []
    summary: UserMessage | None = None
    for message in window:
        if is_summary(message):
            if summary is None:
                assert isinstance(message, UserMessage)
                summary = message
            continue
        conversation.append(message)
    return conversation, summary


def _place(conversation: Sequence[ChatMessage], summary: UserMessage | None) -> list[ChatMessage]:
    """The window: the summary right after a leading system message, else first."""
    if summary is None:
        return list(conversation)
    at = 1 if conversation and isinstance(conversation[0], SystemMessage) else 0
    return [*conversation[:at], summary, *conversation[at:]]


@dataclasses.dataclass(frozen=True, slots=True)
class SummaryRules:
    """A summarizing memory at one moment: its window rules, summarizer, framing line and headroom."""

    window: WindowRules
    summarizer: Summarizer
    prefix: str = DEFAULT_SUMMARY_PREFIX
    headroom: int = 0

    def room(self, summary: UserMessage | None, *, headroom: bool = False) -> WindowRules:
        """The window rules of the conversation after ``summary``: the limit less the summary's weight.

        With ``headroom``, also less :attr:`headroom`: the target when messages must leave anyway.
        """
        spent = self.window.weight(summary) if summary is not None else 0
        slack = self.headroom if headroom else 0
        return dataclasses.replace(self.window, limit=self.window.limit - spent - slack)

    def fits(self, conversation: Sequence[ChatMessage], summary: UserMessage | None) -> bool:
        """Whether ``conversation`` fits the limit beside ``summary``."""
        rules = self.room(summary)
        weight = rules.total(conversation) if rules.total is not None else sum(map(rules.weight, conversation))
        return weight <= rules.limit

    def target(self, summary: UserMessage | None) -> WindowRules | None:
        """The rules to evict by once messages must leave, if they differ from the plain room of ``summary``.

        A first summary is about to appear (make room for it at once, rather than in a second round), and
        the headroom is freed.
        """
        if summary is None:
            return self.room(summary_message("", self.prefix), headroom=True)
        return self.room(summary, headroom=True) if self.headroom else None

    def fold(
        self,
        conversation: list[ChatMessage],
        summary: UserMessage | None,
        evicted: list[ChatMessage],
        cache: _Cache,
    ) -> Steps[Step, tuple[list[ChatMessage], UserMessage | None, list[ChatMessage]]]:
        """Summarize ``evicted`` into ``summary``, evicting more while the new summary does not fit.

        Returns the conversation left, the summary and everything evicted. ``cache`` remembers the
        summaries made (see the module docs), so a retry does not summarize the same messages again.
        """
        everything = list(evicted)
        pending = list(evicted)
        while pending:
            previous = summary_text(summary) if summary is not None else None
            # The longest run of pending messages already summarized from this previous summary.
            for size in range(len(pending), 0, -1):
                known = cache.get((previous, tuple(pending[:size])))
                if known is not None:
                    summary, pending = summary_message(known, self.prefix), pending[size:]
                    break
            else:
                text = yield Summarize(self.summarizer, self.window.memory_id, previous, pending)
                if not isinstance(text, str):
                    raise TypeError(
                        f"the summarizer of memory {self.window.memory_id!r} returned a {type(text).__name__}, "
                        "not a str; nothing was written"
                    )
                cache[(previous, tuple(pending))] = text
                summary, pending = summary_message(text, self.prefix), []
            if pending or self.fits(conversation, summary):
                continue
            rules = self.room(summary, headroom=True)
            pending, conversation = evict(list(conversation), rules.limit, rules.weight, rules.total, rules.start_on)
            everything.extend(pending)
        if summary is not None:
            system = sum(self.window.weight(m) for m in conversation if isinstance(m, SystemMessage))
            size = self.window.weight(summary)
            if size + system > self.window.limit:
                logger.warning(
                    "memory %r: the summary (%d %s) leaves no room for the conversation in the %s of %d; "
                    "make the summarizer write shorter summaries",
                    self.window.memory_id,
                    size,
                    self.window.unit,
                    self.window.limit_name,
                    self.window.limit,
                )
        return conversation, summary, everything

    def add(
        self, stored: Sequence[ChatMessage], added: Sequence[ChatMessage], cache: _Cache
    ) -> Steps[Step, WindowUpdate]:
        """The window after appending ``added`` to ``stored``, with what left it summarized."""
        conversation, summary = split_summary(stored)
        update = self.room(summary).add(conversation, added)
        target = self.target(summary) if update.evicted else None
        if target is not None:
            update = target.add(conversation, added)
        if not update.changed and not update.evicted:
            return WindowUpdate(list(stored), False, [], [])
        kept, summary, evicted = yield from self.fold(update.messages, summary, list(update.evicted), cache)
        window = _place(kept, summary)
        return WindowUpdate(window, window != list(stored), evicted, self.oversized(added))

    def oversized(self, messages: Iterable[ChatMessage]) -> list[ChatMessage]:
        """The messages that alone outweigh the whole limit."""
        return [m for m in messages if self.window.weight(m) > self.window.limit]


def summarizing_add_steps(
    rules: SummaryRules,
    added: Sequence[ChatMessage],
    *,
    versioned: bool,
    retry: RetryPolicy,
    max_attempts: int | None = None,
) -> Steps[Step, WindowUpdate]:
    """Append ``added``; summarize what leaves the window: one read and at most one write per attempt.

    A conflicting write is retried from a fresh read under ``retry`` (and ``max_attempts``), reusing the
    summaries already made (see the module docs).

    Raises:
        ConcurrentUpdateError: the memory kept changing under other writers until the budget was spent.
        MessageTooLargeError: ``on_oversized="raise"`` and a message alone outweighs the limit; nothing
            was read or written.
        TypeError: the summarizer returned something other than a str; nothing was written.
    """
    memory_id = rules.window.memory_id
    rules.window.refuse_oversized(added)
    cache: _Cache = {}
    attempts = retry.start("memory.add")
    while True:
        if not versioned:
            stored: list[ChatMessage] = yield GetMessages(memory_id)
            update = yield from rules.add(stored, added, cache)
            if update.changed:
                yield UpdateMessages(memory_id, update.messages)
            break
        snapshot: Snapshot = yield Load(memory_id)
        update = yield from rules.add(snapshot.messages, added, cache)
        if update.changed:
            try:
                yield Save(memory_id, update.messages, snapshot.version)
            except ConcurrentUpdateError:
                spent = max_attempts is not None and attempts.count >= max_attempts
                delay = None if spent else attempts.backoff()
                if delay is None:
                    raise ConcurrentUpdateError(memory_id, attempts=attempts.count) from None
                yield Sleep(delay)
                continue
        break
    rules.window.report(update)
    return update


def summarizing_messages_steps(rules: SummaryRules) -> Steps[Step, list[ChatMessage]]:
    """The current window: one read, no write, no summarizer call.

    If the limit shrank since the last write, the oldest messages after the summary are left out of what
    is returned; the next write summarizes them.
    """
    stored: list[ChatMessage] = yield GetMessages(rules.window.memory_id)
    conversation, summary = split_summary(stored)
    return _place(rules.room(summary).view(conversation), summary)


def summarizing_set_steps(rules: SummaryRules, messages: Iterable[ChatMessage]) -> Steps[Step, WindowUpdate]:
    """Replace the window with ``messages``: what does not fit is summarized; one write, no read.

    A summary message among ``messages`` (see :func:`is_summary`) is taken as the previous summary.

    Raises:
        ValueError: ``messages`` holds more than one system message, or more than one summary.
        MessageTooLargeError: ``on_oversized="raise"`` and a message alone outweighs the limit.
    """
    given = list(messages)
    summaries = [message for message in given if is_summary(message)]
    if len(summaries) > 1:
        raise ValueError(f"a summarizing memory holds one summary message; got {len(summaries)}")
    conversation, summary = split_summary(given)
    rules.window.refuse_oversized(conversation)
    fitted = rules.room(summary).fit(conversation)
    target = rules.target(summary) if fitted.evicted else None
    if target is not None:
        fitted = target.fit(conversation)
    kept, summary, evicted = yield from rules.fold(fitted.messages, summary, list(fitted.evicted), {})
    update = WindowUpdate(_place(kept, summary), True, evicted, rules.oversized(conversation))
    rules.window.report(update)
    yield UpdateMessages(rules.window.memory_id, update.messages)
    yield from rules.window.notify(update)
    return update


def summary_steps(memory_id: str) -> Steps[Step, str | None]:
    """The current summary text (``None`` before anything was summarized): one read."""
    stored: list[ChatMessage] = yield GetMessages(memory_id)
    _, summary = split_summary(stored)
    return summary_text(summary) if summary is not None else None


class SummarizingBase(WindowMemoryBase[StoreT]):
    """The summarizing memory's options, validated once; the sync and async classes add the I/O.

    See :class:`chatmemory.SummarizingChatMemory` for the arguments.
    """

    def __init__(
        self,
        id: MemoryId = "default",
        *,
        summarizer: Summarizer,
        max_tokens: Limit | None = None,
        max_messages: Limit | None = None,
        store: StoreT | None = None,
        token_count_estimator: TokenCountEstimator | None = None,
        always_keep_system_message_first: bool = False,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        cache_size: int = 4096,
        on_evict: EvictHook | None = None,
        on_oversized: OversizedPolicy = "evict",
        summary_prefix: str = DEFAULT_SUMMARY_PREFIX,
        headroom: int = 0,
        start_on: StartOn = "any",
    ) -> None:
        name = type(self).__name__
        if (max_tokens is None) == (max_messages is None):
            raise TypeError(f"{name} takes exactly one of max_tokens or max_messages")
        if max_messages is not None and token_count_estimator is not None:
            raise TypeError(f"{name}(token_count_estimator=...) counts tokens: pass max_tokens, not max_messages")
        check_callback(summarizer, "summarizer", asyncio=self._asyncio, memory_class=name)
        if not isinstance(summary_prefix, str):
            raise TypeError(f"summary_prefix must be a str, not {type(summary_prefix).__name__}")
        if isinstance(headroom, bool) or not isinstance(headroom, int):
            raise TypeError(f"headroom must be an int, not {type(headroom).__name__}")
        self._limit_name = "max_tokens" if max_tokens is not None else "max_messages"
        limit = max_tokens if max_tokens is not None else max_messages
        assert limit is not None
        self._setup(
            id, store, limit, always_keep_system_message_first, retry, max_attempts, on_evict, on_oversized, start_on
        )
        if headroom < 0 or (isinstance(limit, int) and headroom >= limit):
            raise ValueError(
                f"headroom must be >= 0 and below the limit ({limit!r}), got {headroom}: it is how much of "
                "the window is freed each time messages must leave"
            )
        self.summarizer = summarizer
        self.summary_prefix = summary_prefix
        self.headroom = headroom
        self._counts: LRU[ChatMessage, int] = LRU(cache_size)
        self.token_count_estimator: TokenCountEstimator | None = None
        self._own_estimator: SimpleTokenCountEstimator | None = None
        if max_tokens is not None:
            self.token_count_estimator, self._own_estimator = window_estimator(token_count_estimator, cache_size)

    def _estimate(self, message: ChatMessage) -> int:
        tokens = self._counts.get(message)
        if tokens is None:
            assert self.token_count_estimator is not None
            tokens = self.token_count_estimator.estimate_message(message)
            self._counts.put(message, tokens)
        return tokens

    def _weight(self) -> MessageWeight:
        if self.token_count_estimator is None:
            return count_one
        return counted_weight(self.token_count_estimator, self._own_estimator, self._estimate)

    def _total(self) -> TotalWeight | None:
        if self.token_count_estimator is None:
            return None
        return request_total(self.token_count_estimator, self._weight())

    def _summary_rules(self, rules: WindowRules) -> SummaryRules:
        return SummaryRules(rules, self.summarizer, self.summary_prefix, self.headroom)

    def _add_steps(self, rules: WindowRules, messages: Sequence[ChatMessage]) -> Steps[Step, WindowUpdate]:
        return summarizing_add_steps(
            self._summary_rules(rules),
            messages,
            versioned=self._versioned,
            retry=self.retry,
            max_attempts=self.max_attempts,
        )

    def _messages_steps(self, rules: WindowRules) -> Steps[Step, list[ChatMessage]]:
        return summarizing_messages_steps(self._summary_rules(rules))

    def _set_steps(self, rules: WindowRules, messages: Iterable[ChatMessage]) -> Steps[Step, WindowUpdate]:
        return summarizing_set_steps(self._summary_rules(rules), messages)

    def _pop_steps(self, rules: WindowRules) -> Steps[Step, list[ChatMessage]]:
        return pop_steps(rules, versioned=self._versioned, keep=is_summary)
