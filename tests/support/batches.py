"""What the batch read and create tests build and compare: a window of ``n`` turns, expiries alike to a tolerance."""

from __future__ import annotations

import datetime
from typing import Any

from chatmemory import AiMessage, SystemMessage, UserMessage

TOLERANCE = datetime.timedelta(seconds=2)
"""How far an expiry read back may be from the one asked for (a server's clock, rounding)."""


def window(n: int) -> list[Any]:
    """A system message, then ``n`` user and AI messages in turn."""
    return [SystemMessage("be brief"), *(UserMessage(f"q{i}") if i % 2 else AiMessage(f"a{i}") for i in range(n))]


def close_to(found: datetime.datetime | None, wanted: datetime.datetime | None) -> bool:
    """Whether ``found`` is ``wanted`` within :data:`TOLERANCE` (both ``None``: never expires)."""
    if wanted is None or found is None:
        return found is wanted
    return abs(found - wanted) < TOLERANCE
