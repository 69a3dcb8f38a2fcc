"""Positional edits of one memory — insert at an index, remove at an index — atomic against other writers.

Window memories only append. Code that keeps a whole conversation in a store (LlamaIndex's chat stores,
an editor undoing a turn) also inserts a message at a position and removes the one at a position; done
as a read, a change in Python and a write, it loses whatever another writer wrote in between. An edit
here is a pure function of the stored list (:func:`insert_at`, :func:`remove_at`, or one of your own),
written only at the version it was decided on (:class:`~chatmemory.SupportsVersioning`): a conflict is
decided again on a fresh read, under the store's lock (:class:`~chatmemory.SupportsLockedUpdate`) where
it has one, else after a jittered backoff. Positions are those of the list the edit was decided on.

The steps (:func:`edit_steps`) are shared with the asyncio twin :mod:`chatmemory.aio.edits`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.memory_steps import Load, Modify, Save, Sleep, Step, Steps, run_steps
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.retry import RetryPolicy
from chatmemory.core.store import MemoryId, Snapshot, validate_memory_id

__all__ = [
    "Edit",
    "Edited",
    "apply_edit",
    "edit_steps",
    "insert_at",
    "insert_messages",
    "insertion",
    "prepare_edits",
    "remove_at",
    "remove_message",
    "removal",
]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Edited(Generic[R]):
    """What an edit decided: the new list (``None``: write nothing) and what the edit returns to its caller."""

    messages: list[ChatMessage] | None
    result: R


Edit = Callable[[list[ChatMessage]], Edited[R]]
"""A pure, short function of the stored messages (a fresh list; ``[]`` for an unknown memory).

It may be called more than once (after a conflict, or by a store's locked update); only the call whose list
was written, or that decided to write nothing, gives the result.
"""


def _check_index(index: object) -> int:
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"a message position must be an int, not {type(index).__name__}")
    return index


def insert_at(messages: Sequence[ChatMessage], index: int | None, inserted: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with ``inserted`` placed before position ``index``, as ``list.insert`` places one item.

    ``None`` appends; a negative ``index`` counts from the end; one past either end clamps to it.
    """
    result = list(messages)
    if index is None:
        result.extend(inserted)
        return result
    start, _, _ = slice(index, None).indices(len(result))
    result[start:start] = inserted
    return result


def remove_at(messages: Sequence[ChatMessage], index: int) -> tuple[list[ChatMessage], ChatMessage] | None:
    """``messages`` without the one at ``index`` (negative counts from the end) and that message.

    ``None`` when no message is at ``index``.
    """
    if not -len(messages) <= index < len(messages):
        return None
    remaining = list(messages)
    removed = remaining.pop(index)
    return remaining, removed


def edit_steps(
    memory_id: str,
    edit: Edit[R],
    *,
    locked: bool,
    retry: RetryPolicy,
    max_attempts: int | None = None,
) -> Steps[Step, R]:
    """Apply ``edit`` to the stored messages: one read and at most one write, conditional on the version read.

    A conflicting write is decided again: with ``locked`` (the store supports
    :class:`~chatmemory.SupportsLockedUpdate`) once, under the store's lock, where it queues behind the other
    writers instead of racing them; otherwise from a fresh read, under ``retry``. ``max_attempts``, when set,
    also bounds the attempts (the locked one counts).

    Raises:
        ConcurrentUpdateError: other writers kept changing the memory until the budget was spent; nothing
            was written.
    """
    attempts = retry.start("memory.edit")
    while True:
        snapshot: Snapshot = yield Load(memory_id)
        edited = edit(snapshot.messages)
        if edited.messages is None:
            return edited.result
        try:
            yield Save(memory_id, edited.messages, snapshot.version)
        except ConcurrentUpdateError:
            spent = max_attempts is not None and attempts.count >= max_attempts
            if locked and not spent:
                return (yield from _edit_locked(memory_id, edit))
            delay = None if spent else attempts.backoff()
            if delay is None:
                raise ConcurrentUpdateError(memory_id, attempts=attempts.count) from None
            yield Sleep(delay)
            continue
        return edited.result


def _edit_locked(memory_id: str, edit: Edit[R]) -> Steps[Step, R]:
    """The locked attempt: the same edit, decided on what the store read under its lock."""
    decided: list[Edited[R]] = []

    def change(stored: list[ChatMessage]) -> list[ChatMessage] | None:
        # The store may call this more than once; the last call is the one whose result it wrote.
        edited = edit(stored)
        decided.append(edited)
        return edited.messages

    yield Modify(memory_id, change)
    if not decided:  # pragma: no cover - a store that breaks its contract
        raise AssertionError(f"{memory_id!r}: the store's modify returned without calling the change")
    return decided[-1].result


def prepare_edits(
    store: object, *, asyncio: bool, retry: RetryPolicy | None, max_attempts: int | None
) -> tuple[bool, RetryPolicy]:
    """Check that ``store`` can take atomic edits; return whether it has a locked update, and the retry policy.

    Raises:
        TypeError: a URL, a store of the other I/O style, a store without versioning, a wrong argument type.
        ValueError: ``max_attempts`` below 1.
    """
    package = "chatmemory.aio" if asyncio else "chatmemory"
    if isinstance(store, str):
        raise TypeError(
            f"positional edits take a store object, not a URL; open the store once and pass it: "
            f"store = {package}.open_store({store!r})"
        )
    load = getattr(store, "load", None)
    if not callable(load) or not callable(getattr(store, "save", None)):
        raise TypeError(
            "positional edits need a store with versioning (SupportsVersioning: load, and save at a version) to "
            f"stay atomic against other writers; {type(store).__name__} has none (every built-in store has it)"
        )
    is_async = inspect.iscoroutinefunction(load)
    if is_async != asyncio:
        other = "chatmemory.aio.edits" if is_async else "chatmemory.core.edits"
        style = "an asyncio" if is_async else "a sync"
        raise TypeError(f"{type(store).__name__} is {style} store: edit it with the functions of {other}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(f"retry takes a RetryPolicy (e.g. RetryPolicy(budget=10.0)), not {type(retry).__name__}")
    if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)):
        raise TypeError(f"max_attempts must be an int or None, not {type(max_attempts).__name__}")
    if max_attempts is not None and max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1 or None (retry for the whole budget), got {max_attempts}")
    modify = getattr(store, "modify", None)
    locked = callable(modify) and inspect.iscoroutinefunction(modify) == asyncio
    return locked, retry if retry is not None else RetryPolicy()


def insertion(index: int | None, messages: Iterable[ChatMessage]) -> Edit[None]:
    """The edit that inserts ``messages`` before ``index`` (``None``: at the end); nothing to insert writes nothing.

    Raises:
        TypeError: ``index`` is not an int or None, or a message is no chat message.
    """
    if index is not None:
        _check_index(index)
    inserted = checked_messages(messages)

    def edit(stored: list[ChatMessage]) -> Edited[None]:
        return Edited(insert_at(stored, index, inserted) if inserted else None, None)

    return edit


def removal(index: int) -> Edit[ChatMessage | None]:
    """The edit that removes the message at ``index`` and returns it (``None``, writing nothing, when there is none).

    Raises:
        TypeError: ``index`` is not an int.
    """
    _check_index(index)

    def edit(stored: list[ChatMessage]) -> Edited[ChatMessage | None]:
        removed = remove_at(stored, index)
        if removed is None:
            return Edited(None, None)
        return Edited(removed[0], removed[1])

    return edit


def apply_edit(
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
    locked, policy = prepare_edits(store, asyncio=False, retry=retry, max_attempts=max_attempts)
    return run_steps(edit_steps(memory_id, edit, locked=locked, retry=policy, max_attempts=max_attempts), store)


def insert_messages(
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
    apply_edit(store, memory_id, insertion(index, messages), retry=retry, max_attempts=max_attempts)


def remove_message(
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
    return apply_edit(store, memory_id, removal(index), retry=retry, max_attempts=max_attempts)
