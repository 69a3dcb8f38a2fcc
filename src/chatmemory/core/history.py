"""History: every message ever added to a memory, beside the bounded window.

A store built with ``history=True`` keeps, per memory id, an append-only log of the messages its writes
added, evicted ones included; the window behaves exactly as without history. Each write records the
messages it appends after the kept ones (the sequence diff of :mod:`chatmemory.core.window`), with
strictly increasing sequence numbers and one ``written_at`` on the store's clock; nothing in the history is
ever changed. This module holds its types and protocols: :class:`SupportsHistory` (reading, paged by
sequence; trimming) and :class:`SupportsHistoryRestore` (putting entries back as they were).

The rules every store holds (the contract suite's history cases check them): docs/history.md.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from chatmemory.core.errors import ChatMemoryError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.window import diff_messages

__all__ = [
    "DEFAULT_HISTORY_PAGE",
    "MAX_HISTORY_PAGE",
    "HistoryEntry",
    "HistoryPage",
    "HistoryQuery",
    "SupportsHistory",
    "SupportsHistoryRestore",
    "UnrestorableHistoryError",
    "checked_restore",
    "history_appends",
    "history_query",
    "trim_cutoff",
]

DEFAULT_HISTORY_PAGE = 100
"""How many entries :meth:`SupportsHistory.history` returns when no ``limit`` is given."""
MAX_HISTORY_PAGE = 10_000
"""The largest ``limit`` a history read accepts (page through longer histories with ``after``)."""


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One message of a memory's history.

    Attributes:
        sequence: its position in the history; strictly increasing in the order messages were written.
        message: the message, as it was written.
        written_at: when the write that added it happened (aware, UTC, on the store's clock).
    """

    sequence: int
    message: ChatMessage
    written_at: datetime.datetime


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """One page of a history read.

    Attributes:
        entries: the entries, oldest first (newest first for ``reverse=True``).
        next_after: the ``after`` to pass for the next page, or ``None`` when this page reached the end.
    """

    entries: list[HistoryEntry]
    next_after: int | None

    @property
    def messages(self) -> list[ChatMessage]:
        """The messages of :attr:`entries`, in the same order."""
        return [entry.message for entry in self.entries]


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """A validated history read: see :func:`history_query`."""

    after: int | None
    limit: int
    reverse: bool

    def includes(self, sequence: int) -> bool:
        """Whether ``sequence`` lies beyond :attr:`after` in the reading direction."""
        if self.after is None:
            return True
        return sequence < self.after if self.reverse else sequence > self.after

    def page(self, entries: Sequence[HistoryEntry]) -> HistoryPage:
        """The page made of ``entries``: at most ``limit + 1`` entries read in the query's order.

        Stores read one entry more than asked; its presence is what tells whether a next page exists.
        """
        if len(entries) > self.limit:
            kept = list(entries[: self.limit])
            return HistoryPage(kept, kept[-1].sequence)
        return HistoryPage(list(entries), None)


def history_query(after: int | None, limit: int, reverse: bool) -> HistoryQuery:
    """Check the arguments of a history read.

    Raises:
        TypeError: ``after`` is not an int or ``None``, ``limit`` not an int, ``reverse`` not a bool.
        ValueError: ``after`` is negative, or ``limit`` is not between 1 and :data:`MAX_HISTORY_PAGE`.
    """
    if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
        raise TypeError(f"after must be a sequence number (an int) or None, not {type(after).__name__}")
    if after is not None and after < 0:
        raise ValueError(f"after must be >= 0, got {after!r}")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_HISTORY_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_HISTORY_PAGE}, got {limit!r}; page with `after`")
    if not isinstance(reverse, bool):
        raise TypeError(f"reverse must be a bool, not {type(reverse).__name__}")
    return HistoryQuery(after, limit, reverse)


def history_appends(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The messages a write of ``new`` over the stored ``old`` adds to the history, in order."""
    return diff_messages(old, new).appended


class UnrestorableHistoryError(ChatMemoryError):
    """History entries a store cannot put back with their sequence numbers; nothing was written."""

    def __init__(self, memory_id: str, reason: str) -> None:
        self.memory_id = memory_id
        self.reason = reason
        super().__init__(f"the history of {memory_id!r} cannot be restored here: {reason}; nothing was written")


def checked_restore(memory_id: str, entries: Sequence[HistoryEntry]) -> tuple[HistoryEntry, ...]:
    """The ``entries`` of a :meth:`SupportsHistoryRestore.restore_history` call, checked.

    Raises:
        TypeError: an item is not a :class:`HistoryEntry`.
        ValueError: a sequence number is not a positive int, sequences do not strictly increase, or a
            ``written_at`` is not an aware datetime; the message names the memory.
    """
    checked = tuple(entries)
    previous = 0
    for entry in checked:
        if not isinstance(entry, HistoryEntry):
            raise TypeError(f"history of {memory_id!r}: expected HistoryEntry items, not {type(entry).__name__}")
        if isinstance(entry.sequence, bool) or not isinstance(entry.sequence, int) or entry.sequence < 1:
            raise ValueError(f"history of {memory_id!r}: sequence {entry.sequence!r} is not a positive int")
        if entry.sequence <= previous:
            raise ValueError(
                f"history of {memory_id!r}: sequences must strictly increase, got {entry.sequence} after {previous}"
            )
        written_at = entry.written_at
        if not isinstance(written_at, datetime.datetime) or written_at.utcoffset() is None:
            raise ValueError(f"history of {memory_id!r}: written_at {written_at!r} is not an aware datetime")
        previous = entry.sequence
    return checked


def trim_cutoff(older_than: datetime.datetime | datetime.timedelta, now: datetime.datetime) -> datetime.datetime:
    """The aware UTC instant before which ``trim_history(older_than=...)`` removes entries.

    ``older_than`` is an aware datetime, or a ``timedelta`` counted back from ``now``.

    Raises:
        TypeError: ``older_than`` is neither.
        ValueError: ``older_than`` is a naive datetime or a negative timedelta.
    """
    if isinstance(older_than, datetime.timedelta):
        if older_than < datetime.timedelta(0):
            raise ValueError(f"older_than must not be a negative timedelta, got {older_than!r}")
        return now.astimezone(datetime.timezone.utc) - older_than
    if isinstance(older_than, datetime.datetime):
        if older_than.tzinfo is None or older_than.utcoffset() is None:
            raise ValueError("older_than must be an aware datetime (e.g. datetime.now(UTC) - timedelta(days=30))")
        return older_than.astimezone(datetime.timezone.utc)
    raise TypeError(f"older_than must be an aware datetime or a timedelta, not {type(older_than).__name__}")


@runtime_checkable
class SupportsHistory(Protocol):
    """A store that keeps every message ever added to a memory (built with ``history=True``).

    See :mod:`chatmemory.core.history` for what is recorded. A store built without history raises
    :class:`~chatmemory.HistoryNotEnabledError` from these methods. :class:`chatmemory.SupportsHistory` and
    its asyncio twin :class:`chatmemory.aio.SupportsHistory` hold the same rules; the asyncio one's calls are
    awaited.
    """

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        ...

    def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id``.

        Args:
            memory_id: the memory.
            after: an exclusive bound: only entries with a greater sequence (a smaller one with
                ``reverse=True``); ``None`` starts at the oldest (newest) entry.
            limit: the most entries to return (1 to :data:`MAX_HISTORY_PAGE`).
            reverse: newest first.

        Returns:
            The page; an unknown memory, or one whose history expired, gives an empty page.
        """
        ...

    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        The window is never changed. Entries of messages still in the window may be kept (a store may
        share their storage with the window); every other entry written before the cutoff is removed.
        Returns how many entries were removed.
        """
        ...


@runtime_checkable
class SupportsHistoryRestore(Protocol):
    """A store with history that can put history entries back as they were (what ``chatmemory import`` uses).

    :class:`chatmemory.core.history.SupportsHistoryRestore` and its asyncio twin
    :class:`chatmemory.aio.store.SupportsHistoryRestore` hold the same rules; the asyncio one's calls are
    awaited.
    """

    def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the ``entries`` whose sequence number the history of ``memory_id`` lacks, as they are.

        Each entry keeps its sequence number, ``written_at`` and message. An entry whose sequence the
        history holds already is left as it is (never changed, never doubled), so a call repeated after
        an interrupted import adds only what is missing. One call is atomic: all its missing entries are
        added, or none. Writes after it number their entries after the greatest sequence restored.

        Args:
            memory_id: the memory.
            entries: the entries, in strictly increasing sequence order.
            window: when given and ``memory_id`` has no window, the window is written in the same atomic
                step, recording nothing in the history (its messages are among the restored entries); a
                memory that has a window keeps it (write windows with ``save``). Without ``ttl`` the
                window lives as any memory of the store does.

        Returns:
            How many entries were added.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
            TypeError, ValueError: an entry is not a :class:`HistoryEntry`, or sequences do not strictly increase.
        """
        ...
