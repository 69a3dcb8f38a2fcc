"""Importing optional drivers; it lives in :mod:`chatmemory.core.optional`."""

from __future__ import annotations

from chatmemory.core.optional import require

__all__ = ["require"]
