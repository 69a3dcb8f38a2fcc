"""``SummarizingChatMemory``: a window memory that summarizes what leaves its window.

The decisions are in :mod:`chatmemory.core.summary` (shared with the asyncio twin,
:class:`chatmemory.aio.SummarizingChatMemory`); this module runs them with plain calls.
"""

from __future__ import annotations

from chatmemory.core.memory import _SyncWindowMemory
from chatmemory.core.memory_steps import run_steps
from chatmemory.core.store import ChatMemoryStore
from chatmemory.core.summary import SummarizingBase, summary_steps

__all__ = ["SummarizingChatMemory"]


class SummarizingChatMemory(_SyncWindowMemory, SummarizingBase[ChatMemoryStore]):
    """A window memory whose evicted messages are folded into a summary kept in the window.

    When messages leave the window, ``summarizer(previous_summary, evicted_messages)`` is called (the
    library calls no model: the function does, or does anything else) and its text is kept as one marked
    user message right after the system message (:func:`chatmemory.core.summary.summary_message`). The
    summary counts toward the limit, is stored with the window (so it survives restarts and is shared by
    every process), and is never popped or evicted. A tool call and its results are summarized together.
    See :mod:`chatmemory.core.summary` for the marker, the budget and concurrent writers::

        def summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
            return call_my_model(previous, evicted)

        memory = SummarizingChatMemory("user-42", max_tokens=2000, summarizer=summarize, store=store)

    :class:`chatmemory.SummarizingChatMemory` and its asyncio twin :class:`chatmemory.aio.SummarizingChatMemory`
    take the same arguments and behave alike; the asyncio one's methods are coroutines.

    Args:
        id: the memory id.
        summarizer: ``summarizer(previous_summary: str | None, evicted_messages: list[ChatMessage]) -> str``,
            a plain function (the asyncio memory also takes a coroutine function, and awaits it). It may be
            called more than once in one ``add`` (when a grown summary makes more messages leave, or on a
            retry after a conflict, with only the messages not yet summarized). An exception it raises
            propagates from ``add`` and nothing is written. A slow one holds the memory object's turn for
            ``add``: the other threads (or tasks) adding to the same object wait; an event loop never does.
        max_tokens: the token budget (or a callable returning it); give this or ``max_messages``.
        max_messages: the window size in messages (the summary counts as one).
        store: where the messages live: a store object of the memory's kind, sync or asyncio; a fresh
            in-memory store by default.
        token_count_estimator: counts a message's tokens (``max_tokens`` only); ``SimpleTokenCountEstimator``
            by default.
        always_keep_system_message_first: put a new system message at index 0 instead of the end.
        retry: how long to retry an ``add`` that conflicts with other writers (versioned stores).
        max_attempts: also give up after this many attempts.
        cache_size: how many distinct messages' token counts to keep.
        on_evict: ``on_evict(memory_id, evicted_messages)``, called once per write that evicted something,
            after the write (the messages are then in the summary). An asyncio memory also takes a
            coroutine function, and awaits what it returns when that is awaitable.
        on_oversized: ``"evict"`` (a message alone larger than the limit is summarized at once) or
            ``"raise"`` (:class:`~chatmemory.MessageTooLargeError`, nothing written).
        summary_prefix: the framing line sent before the summary text (``""``: none).
        headroom: when messages must leave, evict down to the limit less this much (in the limit's unit),
            so the summarizer runs once per batch rather than on every write, and the writes in between
            are plain appends (0: evict just enough). Below the limit.
        start_on: ``"user"`` evicts on (into the summary) until the first message after the summary is a
            user message, as Anthropic and Gemini want; ``"any"`` (the default) evicts only to fit the limit.

    Raises:
        TypeError: not exactly one of ``max_tokens``/``max_messages``, a summarizer that is not callable (or,
            for the sync memory, a coroutine function), or any argument a window memory refuses.
        ValueError: a limit or ``max_attempts`` below 1, an unknown ``on_oversized`` or ``start_on``, a
            ``headroom`` below 0 or not below the limit.
    """

    def summary(self) -> str | None:
        """The current summary text, ``None`` before anything left the window (one read)."""
        return run_steps(summary_steps(self._id), self._store)
