"""The version rule: versions are microsecond timestamps that never repeat for a memory id.

A memory created again after a delete or an expiry must never repeat a version it had, yet its old
record is gone. Starting every write at the clock (or one above the previous version, whichever is
larger) keeps versions growing across incarnations: a memory would need a million writes a second,
sustained, to run ahead of the clock. Where the database has a clock, a backend reads it there (in the
same statement or script as the write) so that a client whose clock is wrong cannot lower versions; the
client clock below is for backends without one.
"""

from __future__ import annotations

import random
import time

__all__ = ["new_incarnation", "next_version", "version_clock"]


def version_clock() -> int:
    """The wall clock in microseconds."""
    return time.time_ns() // 1000


def next_version(previous: int = 0, *, clock: int | None = None) -> int:
    """The version to write after ``previous``: above it, and not below the clock (``clock`` µs if given)."""
    return max(previous + 1, version_clock() if clock is None else clock)


def new_incarnation() -> int:
    """A random 62-bit token naming one incarnation of a memory (checked by every diffed write)."""
    return random.getrandbits(62)
