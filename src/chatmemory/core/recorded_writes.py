"""Writes that record more than the window appends: messages evicted within the add that wrote them.

A store with history records what a write appends to the window. An ``add`` of more messages than the
window holds, or of a message larger than the whole token budget, evicts some of its own messages before
they ever reach the window; they were still said, so the history holds them. The window memory knows
them (:func:`evicted_within`) and hands them to a store that can record them
(:class:`SupportsRecordedWrites`), which writes them to the history before the window's appended
messages, in the same atomic step as the window: a write that loses a conflict records nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from chatmemory.core.messages import ChatMessage

__all__ = ["RecordedWindow", "SupportsRecordedWrites", "evicted_within", "recorded_parts"]


@dataclass(frozen=True, slots=True)
class RecordedWindow:
    """What a ``modify`` change returns to write ``messages`` and record ``also_recorded`` before them.

    It iterates as ``messages``, so a store that does not know it writes the window and records nothing
    more; a :class:`SupportsRecordedWrites` store records ``also_recorded`` too.

    Attributes:
        messages: the new window.
        also_recorded: history-only messages, recorded (oldest first) before what the window appends.
    """

    messages: list[ChatMessage]
    also_recorded: tuple[ChatMessage, ...]

    def __iter__(self) -> Iterator[ChatMessage]:
        return iter(self.messages)


def recorded_parts(
    new: Iterable[ChatMessage] | None,
) -> tuple[Iterable[ChatMessage] | None, tuple[ChatMessage, ...]]:
    """``(window, also_recorded)`` of a ``modify`` change's result: a list, ``None`` or a :class:`RecordedWindow`."""
    if isinstance(new, RecordedWindow):
        return new.messages, new.also_recorded
    return new, ()


def evicted_within(added: Sequence[ChatMessage], evicted: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The messages of ``evicted`` that are among ``added`` (the very objects): evicted by their own add."""
    ids = {id(message) for message in added}
    return tuple(message for message in evicted if id(message) in ids)


@runtime_checkable
class SupportsRecordedWrites(Protocol):
    """A store with history that records messages a write evicts before they reach the window.

    * ``save_recorded(id, messages, expected_version, also_recorded)`` is ``save`` that records
      ``also_recorded`` in the history, oldest first, right before the messages the write appends to the
      window, with consecutive sequence numbers and the write's ``written_at``; all in the write's atomic
      step (a conflict records nothing). It writes even when ``messages`` equals the stored window. A
      store built without history writes the window only.
    * ``modify`` (where the store has it) honours a change that returns a :class:`RecordedWindow` the same way.

    :class:`chatmemory.core.recorded_writes.SupportsRecordedWrites` and its asyncio twin
    :class:`chatmemory.aio.store.SupportsRecordedWrites` hold the same rules; the asyncio one's calls are
    awaited.
    """

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        ...

    def save_recorded(
        self,
        memory_id: str,
        messages: Sequence[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` that records ``also_recorded`` before what the write appends; return the new version."""
        ...
