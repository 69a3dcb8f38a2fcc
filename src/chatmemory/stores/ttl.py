"""The one rule for a store's ``ttl`` argument."""

from __future__ import annotations

import datetime
import math

__all__ = ["TTL", "ttl_seconds"]

TTL = float | datetime.timedelta | None
"""Seconds (or a ``timedelta``) a memory lives after its last write; ``None``: forever."""


def ttl_seconds(ttl: TTL) -> float | None:
    """``ttl`` in seconds.

    Raises:
        TypeError: ``ttl`` is not a number, a ``timedelta`` or ``None``.
        ValueError: ``ttl`` is not a finite number of seconds above zero.
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float, datetime.timedelta)):
        raise TypeError(f"ttl must be seconds (a number), a timedelta or None, not {type(ttl).__name__}")
    seconds = ttl.total_seconds() if isinstance(ttl, datetime.timedelta) else float(ttl)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"ttl must be a finite number of seconds above zero, or None; got {ttl!r}")
    return seconds
