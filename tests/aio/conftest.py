"""Fixtures of the asyncio behaviour tests: a fresh memory id, and how far to scale the load tests."""

from __future__ import annotations

import uuid

import pytest

from support.backends import AsyncBackend

# How much of the load tests each backend runs, to stay within seconds on two shared cores: the full
# 2,000 memories and 100 x 20 adds without a server, half on Redis (the 200 tasks stay; the client's
# own work per turn is what takes the time), less on the SQL servers, least on the MongoDB-compatible
# test server (about 10 ms per write).
SCALES = {
    "memory": 1.0,
    "redis": 0.5,
    "redis_cluster": 0.5,
    "sqlite": 0.25,
    "sqlite_aiosqlite": 0.25,
    "postgres": 0.25,
    "mysql": 0.25,
}
DEFAULT_SCALE = 0.1


@pytest.fixture
def memory_id() -> str:
    """A memory id no other test uses."""
    return f"aio-{uuid.uuid4().hex}"


@pytest.fixture
def scale(async_backend: AsyncBackend) -> float:
    """The share of the full load tests the backend runs (see ``SCALES``)."""
    return SCALES.get(async_backend.name, DEFAULT_SCALE)
