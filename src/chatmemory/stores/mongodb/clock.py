"""The server's clock as a MongoDB store sees it: learned from write replies, used for expiry times.

Expiry decisions are the server's: every conditional write checks ``expires_at`` against ``$$NOW``. What a
client needs the server's clock for besides is *writing* an expiry (``now + ttl``) without a pipeline, and
judging a read without sending an expression. Every pipeline write's reply carries ``written_at``, the
time the server applied it; the offset to the local clock (taken at the middle of the round trip) gives
the server's time within a round trip, whatever the local clock says. An estimate older than
:data:`MAX_AGE` is not used: the next write goes as a pipeline, whose reply renews it (so a local clock
that is stepped is followed within a minute). No I/O here, and no driver import.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MAX_AGE", "ServerClock", "expired"]

MAX_AGE: Final = 60.0
"""Seconds an offset learned from a reply is used for."""


class ServerClock:
    """The offset between the server's clock and the local one, from the last write reply that told it."""

    def __init__(self) -> None:
        self._offset: datetime.timedelta | None = None
        self._learned = 0.0

    @staticmethod
    def local() -> datetime.datetime:
        """The local wall clock (aware UTC)."""
        return datetime.datetime.now(datetime.timezone.utc)

    def observe(
        self, sent: datetime.datetime, received: datetime.datetime, server_time: datetime.datetime | None
    ) -> None:
        """Learn from a write sent at ``sent`` and answered at ``received`` (local times) at ``server_time``."""
        if server_time is not None:
            self._offset = server_time - (sent + (received - sent) / 2)
            self._learned = time.monotonic()

    def now(self) -> datetime.datetime | None:
        """The server's time now, or ``None`` when no reply told it in the last :data:`MAX_AGE` seconds."""
        if self._offset is None or time.monotonic() - self._learned > MAX_AGE:
            return None
        return self.local() + self._offset


def expired(document: Mapping[str, Any], server_now: datetime.datetime, field: str = "expires_at") -> bool:
    """Whether ``document`` has expired at ``server_now`` (a ``field`` that is not a date never does)."""
    expires_at = document.get(field)
    return isinstance(expires_at, datetime.datetime) and expires_at <= server_now
