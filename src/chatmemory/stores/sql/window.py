"""Which message rows form a memory's window, as the head row says it: a pure decision, no I/O.

The window is read with one range query, so the head row describes it as ranges of sequence numbers
(a :class:`WindowCover`): every row from ``window_start`` on, plus the rows from ``pin_start`` to
``pin_end`` (a run kept before the rest, such as a system message or a summary), except rows marked
``evicted``. A store with history keeps the rows a write evicts: evicting from the head moves
``window_start``, evicting right after a kept first run pins that run, and any other eviction marks the
evicted rows inside the new ranges. The rule that keeps the cover exact is: **the new ranges lie inside
the old ones** (rows outside them may be unmarked history rows); within it :func:`cover_window` picks the
ranges that enclose the fewest rows outside the window. Step by step: *The window's rows* in
``docs/store-sql.md``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["WindowCover", "cover_window"]


@dataclass(frozen=True, slots=True)
class WindowCover:
    """The ranges of sequence numbers holding a window: ``[pin_start, pin_end]`` (if any) and ``[start, ∞)``.

    Attributes:
        start: the first sequence number of the open range (past every row when the window ends in the pin).
        pin: ``(pin_start, pin_end)``, both inclusive, or ``None``.
    """

    start: int
    pin: tuple[int, int] | None = None

    def covers(self, seq: int) -> bool:
        """Whether ``seq`` lies in one of the ranges (a row there is in the window unless marked evicted)."""
        if seq >= self.start:
            return True
        return self.pin is not None and self.pin[0] <= seq <= self.pin[1]

    def parameters(self) -> dict[str, Any]:
        """The head row's ``window_start``, ``pin_start`` and ``pin_end`` as statement parameters."""
        pin_start, pin_end = self.pin if self.pin is not None else (None, None)
        return {"p_window_start": self.start, "p_pin_start": pin_start, "p_pin_end": pin_end}


def cover_window(seqs: Sequence[int], old_start: int, next_seq: int) -> WindowCover:
    """The cover of a window after a write.

    Args:
        seqs: the sequence numbers of the new window's rows, ascending (kept rows, then new ones).
        old_start: the ``window_start`` before the write (kept rows below it lie in the old pinned run);
            for a write that replaces the whole window, the first new sequence number.
        next_seq: the sequence number the next new row will get (past every row of the memory).

    Returns:
        The ranges inside the old ones that hold ``seqs`` and the fewest other sequence numbers.
    """
    count = len(seqs)
    if not count:
        return WindowCover(next_seq)
    first, last = seqs[0], seqs[-1]
    pinned = bisect_left(seqs, old_start) if first < old_start else 0
    if pinned:
        # Rows below the old start were the old pin: they stay the pin, and the rest is the open range
        # (it must not reach down into the gap between the old pin and the old start).
        if pinned == count:
            return WindowCover(next_seq, (first, last))
        return WindowCover(seqs[pinned], (first, seqs[pinned - 1]))
    if last - first + 1 == count:
        return WindowCover(first)  # contiguous: the steady state
    # Both ranges lie in the old open range: split at the widest gap, which then is scanned by no read.
    split = max(range(1, count), key=lambda index: seqs[index] - seqs[index - 1])
    return WindowCover(seqs[split], (first, seqs[split - 1]))
