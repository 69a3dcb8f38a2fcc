"""The session's operations as store steps (see :mod:`chatmemory.core.memory_steps`), without I/O.

Each operation reads the memory, decides the new list with :mod:`.items` and the window rules, and writes
it back conditionally on the version it read (on a versioned store). A write may start instead from the
state the session last read or wrote (:class:`Known`): the version names that state exactly (versions
never repeat for an id), so the conditional write either lands on it or conflicts, and a conflict then
reads afresh. When another writer got there first it queues on the store's lock
(:class:`~chatmemory.core.memory_steps.Modify`, on a store with a locked update), else retries from a
fresh read, as a window memory's ``add`` does. The session runs the steps with
:func:`chatmemory.aio.memory.run_steps_async`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.memory_steps import (
    DeleteMessages,
    GetMessages,
    Load,
    Modify,
    Save,
    Sleep,
    Step,
    Steps,
    UpdateMessages,
    WindowRules,
)
from chatmemory.core.messages import ChatMessage
from chatmemory.core.retry import RetryPolicy
from chatmemory.core.store import Snapshot
from chatmemory.core.window import WindowUpdate
from chatmemory.integrations.openai_agents.item_cache import ItemCache
from chatmemory.integrations.openai_agents.items import Popped, append_items, pop_last_item

__all__ = ["Known", "add_items_steps", "clear_steps", "get_items_steps", "pop_item_steps"]

T = TypeVar("T")

Change = Callable[[list[ChatMessage]], "tuple[list[ChatMessage] | None, T]"]
"""Given the stored list: the list to write (``None``: nothing to write) and the operation's result."""


class Known:
    """The latest state of the memory a session read or wrote: where its next write may start from.

    Only a hint: a write from it is conditional on its version, which names that state alone.
    """

    __slots__ = ("snapshot",)

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def remember(self, snapshot: Snapshot, *, newer_only: bool = False) -> None:
        """Keep ``snapshot``; with ``newer_only``, unless a later version is kept (a read racing a write)."""
        current = self.snapshot
        if newer_only and current is not None and current.version > snapshot.version:
            return
        self.snapshot = snapshot

    def forget(self) -> None:
        """Keep nothing: the next write reads first."""
        self.snapshot = None


def _read_modify_write(
    memory_id: str,
    change: Change[T],
    *,
    versioned: bool,
    locked: bool,
    retry: RetryPolicy,
    max_attempts: int | None,
    known: Known | None = None,
) -> Steps[Step, T]:
    if not versioned:
        stored: list[ChatMessage] = yield GetMessages(memory_id)
        new, result = change(stored)
        if new is not None:
            yield UpdateMessages(memory_id, new)
        return result
    attempts = retry.start("session.change")
    hint = known.snapshot if known is not None else None
    while True:
        if hint is not None:
            snapshot, hint, from_hint = hint, None, True
        else:
            snapshot = yield Load(memory_id)
            from_hint = False
            if known is not None:
                known.remember(snapshot)
        new, result = change(snapshot.messages)
        if new is None:
            return result
        try:
            version: int = yield Save(memory_id, new, snapshot.version)
        except ConcurrentUpdateError:
            if from_hint:
                continue  # the memory moved since this session last saw it: read it, as a first attempt does
            if known is not None:
                known.forget()
            spent = max_attempts is not None and attempts.count >= max_attempts
            if locked and not spent:
                # Queue behind the other writers instead of racing them again (see add_steps).
                return (yield from _change_locked(memory_id, change))
            delay = None if spent else attempts.backoff()
            if delay is None:
                raise ConcurrentUpdateError(memory_id, attempts=attempts.count) from None
            yield Sleep(delay)
            continue
        if known is not None:
            known.remember(Snapshot(new, version))
        return result


def _change_locked(memory_id: str, change: Change[T]) -> Steps[Step, T]:
    """``change`` applied under the store's lock: the result of the call whose list the store kept."""
    results: list[T] = []

    def locked_change(stored: list[ChatMessage]) -> list[ChatMessage] | None:
        # The store may call this more than once; its last call decides what is written.
        new, result = change(stored)
        results.append(result)
        return new

    yield Modify(memory_id, locked_change)
    if not results:  # pragma: no cover - a store that breaks its contract
        raise AssertionError(f"{memory_id!r}: the store's modify returned without calling the change")
    return results[-1]


def add_items_steps(
    memory_id: str,
    items: Sequence[Mapping[str, Any]],
    *,
    rules: WindowRules | None,
    system_role: str,
    versioned: bool,
    locked: bool = False,
    retry: RetryPolicy,
    max_attempts: int | None,
    known: Known | None = None,
) -> Steps[Step, None]:
    """Append ``items``; with ``rules``, evict down to the window (calls leave with their outputs).

    ``locked``: the store has a locked update of this I/O style, taken after a conflicting write.
    ``known``: the state the session last read or wrote, started from and kept up to date.
    """

    def change(stored: list[ChatMessage]) -> tuple[list[ChatMessage] | None, WindowUpdate | None]:
        appended = append_items(stored, items, system_role)
        if rules is None:
            return [*appended.kept, *appended.added], None
        update = rules.add(appended.kept, appended.added)
        return (update.messages if update.changed else None), update

    update = yield from _read_modify_write(
        memory_id, change, versioned=versioned, locked=locked, retry=retry, max_attempts=max_attempts, known=known
    )
    # Warned once, for the window written (not for each attempt, nor each call of a locked change).
    if rules is not None and update is not None:
        rules.report(update)


def pop_item_steps(
    memory_id: str,
    *,
    system_role: str,
    versioned: bool,
    locked: bool = False,
    retry: RetryPolicy,
    max_attempts: int | None,
    known: Known | None = None,
) -> Steps[Step, dict[str, Any] | None]:
    """Remove and return the most recent item (``None`` for an empty session)."""

    def change(stored: list[ChatMessage]) -> tuple[list[ChatMessage] | None, dict[str, Any] | None]:
        if not stored:
            return None, None
        popped: Popped = pop_last_item(stored, system_role)
        return popped.messages, popped.item

    return (
        yield from _read_modify_write(
            memory_id, change, versioned=versioned, locked=locked, retry=retry, max_attempts=max_attempts, known=known
        )
    )


def get_items_steps(
    memory_id: str,
    limit: int | None,
    *,
    rules: WindowRules | None,
    items: ItemCache,
    known: Known | None = None,
) -> Steps[Step, list[dict[str, Any]]]:
    """The latest ``limit`` items of the window, oldest first: one read.

    ``known`` (a versioned store): the session's state, updated with what the read found.
    """
    if known is None:
        stored: list[ChatMessage] = yield GetMessages(memory_id)
    else:
        snapshot: Snapshot = yield Load(memory_id)
        known.remember(snapshot, newer_only=True)
        stored = snapshot.messages
    window = rules.view(stored) if rules is not None else stored
    return items.last_items(window, limit)


def clear_steps(memory_id: str) -> Steps[Step, None]:
    """Delete the memory."""
    yield DeleteMessages(memory_id)
