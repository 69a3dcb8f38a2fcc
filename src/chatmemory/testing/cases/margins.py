"""Cases that wait on a clock: judged only inside the margins they need, and run again slower when late.

A case that writes with a lifetime and then checks that the data is still there can only say so if the
check came inside that lifetime. On a loaded machine a call can take longer than the margin: the case
measures its own calls (``time.monotonic()``), raises :class:`TooLate` where a check came too late to
judge, and :func:`with_slower_clock_when_late` runs it again with every time scaled up. What must be
gone after a wait can only be more so later, and is judged as it is.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest

__all__ = ["SCALES", "TooLate", "late", "with_slower_clock_when_late"]

SCALES = (1.0, 2.0, 4.0)
"""The time scales of the tries: the case's own times, then twice and four times as long."""


class TooLate(Exception):
    """A check meant to land inside a lifetime came after it: the margins did not hold on this machine."""


def late(started: float, lifetime: float) -> bool:
    """Whether ``lifetime`` seconds have passed since ``started`` (a ``time.monotonic()`` reading)."""
    return time.monotonic() - started >= lifetime


async def with_slower_clock_when_late(case: Callable[[float, int], Awaitable[None]], what: str) -> None:
    """Run ``case(scale, attempt)`` at each of :data:`SCALES` until one try is not :class:`TooLate`.

    Args:
        case: the case, its times multiplied by ``scale``; ``attempt`` (0, 1, 2) tells it to use fresh
            memory ids.
        what: what came too late, for the failure when every try did.
    """
    for attempt, scale in enumerate(SCALES):
        try:
            await case(scale, attempt)
        except TooLate:
            continue
        return
    pytest.fail(f"on each try, {what}: the machine is too slow for this case")
