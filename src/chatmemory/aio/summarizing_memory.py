"""The asyncio ``SummarizingChatMemory``: the decisions of :mod:`chatmemory.core.summary`, awaited."""

from __future__ import annotations

from chatmemory.aio.memory import _AsyncWindowMemory, run_steps_async
from chatmemory.aio.store import ChatMemoryStore
from chatmemory.core.summary import SummarizingBase, summary_steps

__all__ = ["SummarizingChatMemory"]


class SummarizingChatMemory(_AsyncWindowMemory, SummarizingBase[ChatMemoryStore]):
    """The asyncio twin of :class:`chatmemory.SummarizingChatMemory`: same arguments, awaited methods.

    ``summarizer`` may be a coroutine function (awaited) or a plain one; a slow one holds this memory
    object's turn for ``add`` (other tasks of the object wait, never the event loop).

    Args:
        id: the memory id.
        summarizer: ``summarizer(previous_summary, evicted_messages) -> str``, async or not.
        max_tokens: the token budget; give this or ``max_messages``.
        max_messages: the window size in messages (the summary counts as one).
        store: an asyncio store; a fresh in-memory one by default.
        token_count_estimator: counts a message's tokens (``max_tokens`` only).
        always_keep_system_message_first: put a new system message at index 0 instead of the end.
        retry: how long to retry an ``add`` that conflicts with other writers.
        max_attempts: also give up after this many attempts.
        cache_size: how many distinct messages' token counts to keep.
        on_evict: ``on_evict(memory_id, evicted_messages)``, async or not.
        on_oversized: ``"evict"`` or ``"raise"``.
        summary_prefix: the framing line sent before the summary text.
        headroom: when messages must leave, evict down to the limit less this much (summarize in batches).
        start_on: ``"user"`` evicts on (into the summary) until the first message after the summary is a
            user message, as Anthropic and Gemini want; ``"any"`` (the default) evicts only to fit the limit.

    Raises:
        TypeError: not exactly one of ``max_tokens``/``max_messages``, a summarizer that is not callable, or
            any argument a window memory refuses.
        ValueError: a limit or ``max_attempts`` below 1, an unknown ``on_oversized`` or ``start_on``, a bad
            ``headroom``.
    """

    async def summary(self) -> str | None:
        """The current summary text, ``None`` before anything left the window (one read)."""
        return await run_steps_async(summary_steps(self._id), self._store)
