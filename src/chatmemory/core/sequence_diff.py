"""The sequence diff: how a stored list becomes the new list with the fewest writes.

A window memory changes its list in one shape almost every turn: some old messages are evicted (usually
from the head, or right after a system message kept first) and new ones are appended. Stores that keep a
row or element per message write only that difference: delete the evicted ones, append the new tail.
This module computes the plan; it does no I/O. :func:`window_shift` finds that common turn in a few
comparisons; :func:`diff_messages` tries it first and walks both lists only when it declines.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, count, islice
from operator import is_not

from chatmemory.core.messages import ChatMessage

__all__ = ["SequenceDiff", "diff_messages", "window_shift"]


@dataclass(frozen=True, slots=True)
class SequenceDiff:
    """The plan that turns ``old`` into ``new``: ``new == [old[i] for i in kept] + list(appended)``.

    Attributes:
        kept: positions in ``old`` that stay, ascending.
        deleted: positions in ``old`` that go, ascending.
        appended: the messages that follow the kept ones.
        old_length: ``len(old)``.
    """

    kept: tuple[int, ...]
    deleted: tuple[int, ...]
    appended: tuple[ChatMessage, ...]
    old_length: int

    @property
    def unchanged(self) -> bool:
        """Nothing to write."""
        return not self.deleted and not self.appended

    @property
    def is_rewrite(self) -> bool:
        """Nothing of ``old`` survives although there was something: write the new list whole."""
        return not self.kept and self.old_length > 0

    @property
    def head_trim(self) -> int | None:
        """How many messages go from the head, if exactly the first ``n`` go; else ``None``."""
        count = len(self.deleted)
        if count == 0 or self.deleted[-1] == count - 1:
            return count
        return None

    @property
    def deleted_span(self) -> int:
        """How many leading positions a store must touch to delete: ``max(deleted) + 1`` (0 if none)."""
        return self.deleted[-1] + 1 if self.deleted else 0


def _identical_run(left: Iterator[ChatMessage], right: Iterator[ChatMessage], longest: int) -> int:
    """How many leading elements of ``left`` and ``right`` are the same objects (at most ``longest``)."""
    mismatch = next(compress(count(), map(is_not, left, right)), None)
    return longest if mismatch is None else mismatch


def window_shift(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> tuple[int, int] | None:
    """The common turn of a window memory, found without a walk: ``(span, kept)`` or ``None``.

    When ``new`` starts with all of ``old`` but its first ``span`` messages (and then appends ``new[kept:]``),
    this is exactly the plan :func:`diff_messages` makes (delete the first ``span``, keep the rest in place,
    append the others), at the cost of an index lookup and one comparison of two slices (identical
    elements compare at C speed); ``None`` when the turn is of another shape.

    Why it is the same plan: the diff keeps the longest prefix of ``new`` that is a subsequence of ``old``,
    at the latest positions. That prefix is at least ``old[span:]`` (``kept`` messages, kept at the last
    positions); it would be longer only if ``old[span:]`` also fitted into ``old[:-1]``, starting at or
    after ``span`` (``span`` is where ``new[0]`` first occurs): ``kept`` messages in ``kept - 1`` places,
    impossible. Elements compare as in the diff (the same object, or equal).
    """
    if not old or not new:
        return None
    try:
        span = old.index(new[0])
    except ValueError:
        return None
    kept = len(old) - span
    if kept > len(new):
        return None
    stays, leads = old[span:], new[:kept]
    if type(stays) is not type(leads):  # a list never equals a tuple: compare as tuples
        stays, leads = tuple(stays), tuple(leads)
    return (span, kept) if stays == leads else None


def diff_messages(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> SequenceDiff:
    """Plan the writes that turn ``old`` into ``new``.

    The longest prefix of ``new`` that is a subsequence of ``old`` is kept in place (matched to the latest
    possible positions, so that evictions land at the head); everything after it is appended. When no
    prefix matches (a new system message put first, a wholly different list), ``kept`` is empty and the
    store rewrites the list.
    """
    shift = window_shift(old, new)
    if shift is not None:
        span, length = shift
        return SequenceDiff(tuple(range(span, len(old))), tuple(range(span)), tuple(new[length:]), len(old))
    # Earliest matching finds the longest prefix of `new` that is a subsequence of `old`. Messages read
    # from a store and handed back are the same objects, so a steady-state window is a few long runs of
    # identical elements: each run is consumed at C speed, with the same result as matching one by one
    # (greedy matching takes an identical element at once), in time flat in the window.
    old_length, new_length = len(old), len(new)
    position = prefix = 0
    while prefix < new_length:
        message = new[prefix]
        while position < old_length and old[position] is not message and old[position] != message:
            position += 1
        if position == old_length:
            break
        run = _identical_run(
            islice(new, prefix + 1, None),
            islice(old, position + 1, None),
            min(new_length - prefix, old_length - position) - 1,
        )
        position += 1 + run
        prefix += 1 + run
    # Latest matching of that prefix prefers deleting older messages, keeping deletions at the head.
    kept: list[int] = []
    skipped: list[int] = []
    position, index = old_length - 1, prefix - 1
    while index >= 0:
        message = new[index]
        while old[position] is not message and old[position] != message:
            skipped.append(position)
            position -= 1
        run = _identical_run(
            islice(reversed(new), new_length - index, None),
            islice(reversed(old), old_length - position, None),
            min(index, position),
        )
        kept.extend(range(position, position - run - 1, -1))
        position -= run + 1
        index -= run + 1
    kept.reverse()
    skipped.reverse()
    deleted = (*range(position + 1), *skipped)
    return SequenceDiff(tuple(kept), deleted, tuple(new[prefix:]), len(old))
