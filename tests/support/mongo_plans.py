"""The MongoDB store's planner asked for a write, as the plan tests without a server ask it."""

from __future__ import annotations

import datetime
from typing import Any

from chatmemory.stores.mongodb.layout import HistoryConfig, MemoryState
from chatmemory.stores.mongodb.outcomes import WritePlan
from chatmemory.stores.mongodb.plan import MongoPlanner


def plan_save(
    memory_id: str,
    messages: list[Any],
    expected_version: int,
    cached: MemoryState | None,
    ttl: float | None,
    *,
    server_now: datetime.datetime | None = None,
    history: HistoryConfig | None = None,
    refreshed: datetime.datetime | None = None,
) -> WritePlan:
    """A store's planner (``ttl``, ``history``) asked for a save."""
    planner = MongoPlanner(ttl, history)
    return planner.save(memory_id, messages, expected_version, cached, server_now=server_now, refreshed=refreshed)
