"""One memory's write and expiry times in the SQL store: the values sent and read back, per dialect.

The head row's ``updated_at`` and ``expires_at`` are written from the database's clock (see
:mod:`chatmemory.stores.sql.clock`); this module turns them into :class:`~chatmemory.memory_times.MemoryTimes`
and turns a caller's expiry into the value the ``expires_at`` column takes (see
:mod:`chatmemory.memory_times` for the capabilities).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from chatmemory.memory_times import MemoryTimes

__all__ = ["aware", "expiry_parameter", "stamp_parameter", "times_of"]

_FLOOR = datetime.datetime(1970, 1, 2, tzinfo=datetime.timezone.utc)
"""The earliest expiry sent: every column type holds it, and any earlier time expires the memory just as well."""


def aware(value: Any) -> datetime.datetime | None:
    """A timestamp column's value as an aware UTC datetime (``None`` for anything else)."""
    # PostgreSQL returns aware datetimes; SQLite and MySQL DATETIME return naive ones, which the store
    # always writes in UTC (the server clock expressions and expiry_parameter below).
    if not isinstance(value, datetime.datetime):
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def times_of(row: Sequence[Any] | None) -> MemoryTimes | None:
    """The times of a live head row ``(updated_at, expires_at)``; ``None`` when there is none."""
    if row is None:
        return None
    return MemoryTimes(aware(row[0]), aware(row[1]))


def expiry_parameter(when: datetime.datetime | None, dialect: str) -> datetime.datetime | None:
    """The ``expires_at`` value for ``when`` on ``dialect`` (a family: postgresql, sqlite, mysql).

    PostgreSQL's ``timestamptz`` takes the aware time; SQLite and MySQL keep naive UTC, as the server's
    clock writes them, so the value is compared with that clock's text or ``DATETIME`` as they are.

    Raises:
        ValueError: ``when`` is not an aware datetime.
    """
    if when is None:
        return None
    if not isinstance(when, datetime.datetime) or when.utcoffset() is None:
        raise ValueError(f"expire_at takes an aware datetime (e.g. in UTC) or None, not {when!r}")
    at = max(when.astimezone(datetime.timezone.utc), _FLOOR)
    return at if dialect == "postgresql" else at.replace(tzinfo=None)


def stamp_parameter(when: datetime.datetime, dialect: str) -> datetime.datetime:
    """An aware time as a parameter compared with a timestamp column on ``dialect`` (see :func:`expiry_parameter`)."""
    at = max(when.astimezone(datetime.timezone.utc), _FLOOR)
    return at if dialect == "postgresql" else at.replace(tzinfo=None)
