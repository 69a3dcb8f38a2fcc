"""Positional edits of one memory in an asyncio store: the twin of :mod:`chatmemory.core.edits`.

The same edits and the same steps (one read, a write at the version read, a conflict decided again under
the store's lock or after a backoff), awaited. An edit stays a plain function, called synchronously.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from chatmemory.aio.memory import run_steps_async
from chatmemory.core.edits import Edit, edit_steps, insertion, prepare_edits, removal
from chatmemory.core.memory_id import MemoryId, validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.base.retry import RetryPolicy

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
    """Apply ``edit`` to the messages of ``memory_id`` atomically (see :func:`chatmemory.core.edits.apply_edit`).

    Raises:
        TypeError: a store without versioning, a sync store, an argument of the wrong kind.
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
    """Insert ``messages`` before position ``index`` (see :func:`chatmemory.core.edits.insert_messages`)."""
    await apply_edit(store, memory_id, insertion(index, messages), retry=retry, max_attempts=max_attempts)


async def remove_message(
    store: Any,
    memory_id: MemoryId,
    index: int,
    *,
    retry: RetryPolicy | None = None,
    max_attempts: int | None = None,
) -> ChatMessage | None:
    """Remove the message at ``index`` and return it (see :func:`chatmemory.core.edits.remove_message`)."""
    return await apply_edit(store, memory_id, removal(index), retry=retry, max_attempts=max_attempts)
