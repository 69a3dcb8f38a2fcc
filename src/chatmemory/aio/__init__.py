"""chatmemory on asyncio: the same memories, provider and stores, with coroutine methods."""

from __future__ import annotations
