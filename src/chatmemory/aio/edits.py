"""Positional edits of one memory in an asyncio store: the twin of :mod:`chatmemory.core.edits`.

The same edits and the same steps (one read, a write at the version read, a conflict decided again under
the store's lock or after a backoff), awaited. An edit stays a plain function, called synchronously.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from chatmemory.aio.memory import run_steps_async
from chatmemory.core.edits import Edit, edit_steps, insertion, prepare_edits, removal
from chatmemory.core.messages import ChatMessage
from chatmemory.core.retry import RetryPolicy
from chatmemory.core.store import MemoryId, validate_memory_id

__all__ = ["apply_edit", "insert_messages", "remove_message"]

R = TypeVar("R")


async def apply_edit(
    store: Any,
    memory_id: MemoryId,
    edit: Edit[R],
    *,
    retry: RetryPolicy | None = None,
    max_attempts: int | None = None,
) -> R:
    """Apply ``edit`` to the messages of ``memory_id`` atomically; return the result it decided.

    Args:
        store: a store with versioning (every built-in one), of the function's kind: sync for
            :mod:`chatmemory.core.edits`, asyncio for :mod:`chatmemory.aio.edits`.
        memory_id: the memory.
        edit: a pure function of the stored messages (see :data:`chatmemory.core.edits.Edit`), called
            synchronously by both.
        retry: how long to retry a conflict on a store without a locked update.
        max_attempts: also give up after this many attempts (``None``: the time budget alone).

    Raises:
        TypeError: a store without versioning, a store of the other kind (asyncio or sync), an argument of
            the wrong kind.
        ValueError: ``max_attempts`` below 1.
        ConcurrentUpdateError: other writers kept changing the memory for the whole budget; nothing written.
    """
    memory_id = validate_memory_id(memory_id)
    locked, policy = prepare_edits(store, asyncio=True, retry=retry, max_attempts=max_attempts)
    steps = edit_steps(memory_id, edit, locked=locked, retry=policy, max_attempts=max_attempts)
    return await run_steps_async(steps, store)


async def insert_messages(
    store: Any,
    memory_id: MemoryId,
    index: int | None,
    messages: Iterable[ChatMessage],
    *,
    retry: RetryPolicy | None = None,
    max_attempts: int | None = None,
) -> None:
    """Insert ``messages`` before position ``index`` of the memory (``list.insert`` positions; ``None`` appends).

    Every other writer's messages stay: the insertion is written at the version it was decided on.

    Raises:
        TypeError: a store without versioning, a store of the other kind (asyncio or sync), an index or
            message of the wrong kind.
        ConcurrentUpdateError: other writers kept changing the memory for the whole budget; nothing written.
    """
    await apply_edit(store, memory_id, insertion(index, messages), retry=retry, max_attempts=max_attempts)


async def remove_message(
    store: Any,
    memory_id: MemoryId,
    index: int,
    *,
    retry: RetryPolicy | None = None,
    max_attempts: int | None = None,
) -> ChatMessage | None:
    """Remove the message at ``index`` (negative counts from the end) and return it; ``None`` if there is none.

    Exactly that one message goes: the removal is written at the version it was decided on. Nothing is
    written when no message is at ``index`` (an unknown memory stays unknown).

    Raises:
        TypeError: a store without versioning, a store of the other kind (asyncio or sync), an index of the
            wrong kind.
        ConcurrentUpdateError: other writers kept changing the memory for the whole budget; nothing written.
    """
    return await apply_edit(store, memory_id, removal(index), retry=retry, max_attempts=max_attempts)
