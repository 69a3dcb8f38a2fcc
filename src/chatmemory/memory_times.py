"""Per-memory write and expiry times: what operators' tools need beyond the core capabilities.

The core protocols (:mod:`chatmemory.core.store`) tell a store's *configured* ``ttl``, not when one memory
was last written or when it expires; the admin command needs both (``chatmemory ls`` shows them, ``export``
keeps a memory's expiry, ``import`` and ``copy`` carry it over). They are optional capabilities in the
usual shape: a store that conforms is used, one that does not is shown as "unknown" and the command says
why. Nothing here guesses a time from a version: versions are only promised to grow.

Sync stores implement them as plain methods, asyncio stores as coroutines (the twins in
:mod:`chatmemory.aio.store`); the admin command checks them with ``isinstance``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["MemoryTimes", "SupportsExpiryAt", "SupportsMemoryTimes"]


@dataclass(frozen=True, slots=True)
class MemoryTimes:
    """When a memory was last written and when it expires (aware UTC datetimes).

    Attributes:
        last_write: the time of the last write, or ``None`` when the store does not keep it.
        expires_at: when the memory expires, or ``None`` when it never does.
    """

    last_write: datetime.datetime | None
    expires_at: datetime.datetime | None


@runtime_checkable
class SupportsMemoryTimes(Protocol):
    """A store that tells one memory's last write time and expiry.

    * ``memory_times`` returns ``None`` for a memory that does not exist (or has expired).
    * Both times are timezone-aware UTC; the database's clock is used where it has one.
    """

    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """The last write time and the expiry of ``memory_id``; ``None`` when it does not exist."""
        ...


@runtime_checkable
class SupportsExpiryAt(Protocol):
    """A store that can set one memory's expiry to a given time (``import`` and ``copy`` keep expiries).

    * ``expire_at(memory_id, None)`` makes the memory never expire; a time in the past expires it at once.
    * The next write of the memory slides its expiry by the store's ``ttl`` as usual.
    * An unknown id is not an error and nothing is created.
    """

    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make ``memory_id`` expire at ``when`` (an aware datetime), or never with ``None``."""
        ...
