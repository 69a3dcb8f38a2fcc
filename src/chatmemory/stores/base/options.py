"""Constructor options every store validates the same way, with the same wording."""

from __future__ import annotations

import datetime
import math

__all__ = [
    "MAX_TTL_SECONDS",
    "TTL",
    "history_ttl_seconds",
    "ttl_seconds",
    "validate_prefix",
    "validate_snapshot_cache_size",
]

TTL = float | datetime.timedelta | None
"""Seconds (or a ``timedelta``) a memory lives after its last write; ``None``: forever."""

MAX_TTL_SECONDS = 100 * 366 * 86_400
"""The longest ttl a store accepts (about a century): every backend can hold the expiry time it gives."""


def ttl_seconds(ttl: TTL) -> float | None:
    """``ttl`` in seconds.

    Raises:
        TypeError: ``ttl`` is not a number, a ``timedelta`` or ``None``.
        ValueError: ``ttl`` is not a finite number of seconds above zero and at most
            :data:`MAX_TTL_SECONDS`.
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float, datetime.timedelta)):
        raise TypeError(f"ttl must be seconds (a number), a timedelta or None, not {type(ttl).__name__}")
    seconds = ttl.total_seconds() if isinstance(ttl, datetime.timedelta) else float(ttl)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"ttl must be a finite number of seconds above zero, or None; got {ttl!r}")
    if seconds > MAX_TTL_SECONDS:
        raise ValueError(
            f"ttl must be at most {MAX_TTL_SECONDS} seconds (about a century), got {ttl!r}; "
            "use ttl=None for memories that never expire"
        )
    return seconds


def validate_snapshot_cache_size(size: int) -> int:
    """``size`` if it is a valid ``snapshot_cache_size`` (an int >= 0).

    Raises:
        TypeError: ``size`` is not an int.
        ValueError: ``size`` is negative.
    """
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"snapshot_cache_size must be an int, not {type(size).__name__}")
    if size < 0:
        raise ValueError(f"snapshot_cache_size must be >= 0, got {size!r}")
    return size


def validate_prefix(name: str, prefix: str) -> str:
    """``prefix`` if it is a valid key, table or collection prefix named ``name`` (a ``str``).

    Raises:
        TypeError: ``prefix`` is not a ``str`` (e.g. ``None``: pass ``""`` for no prefix).
        ValueError: ``prefix`` holds a lone surrogate or a NUL character.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"{name} must be a str (use '' for no prefix), not {type(prefix).__name__}")
    if "\x00" in prefix:
        raise ValueError(f"{name} must not contain a NUL character, got {prefix!r}")
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} must be valid Unicode text (it holds a lone surrogate), got {prefix!r}") from None
    return prefix


def history_ttl_seconds(history: bool, history_ttl: TTL, ttl: float | None) -> float | None:
    """Check the history options of a store; return ``history_ttl`` in seconds (``None``: as the window).

    Args:
        history: whether the store keeps history.
        history_ttl: how long a history lives after the memory's last write, or ``None`` for as long as
            the window (``ttl``).
        ttl: the window's ttl, already checked, in seconds.

    Raises:
        TypeError: ``history`` is not a bool, or ``history_ttl`` is not a number, timedelta or ``None``.
        ValueError: ``history_ttl`` is given without ``history=True``, is out of range, or is shorter
            than ``ttl`` (the history of a live window would be gone).
    """
    if not isinstance(history, bool):
        raise TypeError(f"history must be a bool, not {type(history).__name__}")
    if history_ttl is None:
        return None
    if not history:
        raise ValueError("history_ttl needs history=True: pass both to keep a history")
    seconds = ttl_seconds(history_ttl)
    assert seconds is not None
    if ttl is not None and seconds < ttl:
        raise ValueError(f"history_ttl must be at least ttl ({ttl:g} s), got {history_ttl!r}")
    return seconds
