"""The retry policy of stores and memories; it lives in :mod:`chatmemory.core.retry`."""

from __future__ import annotations

from chatmemory.core.retry import Attempts, RetryPolicy

__all__ = ["Attempts", "RetryPolicy"]
