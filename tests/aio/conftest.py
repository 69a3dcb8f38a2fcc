"""Fixtures of the asyncio behaviour tests: a fresh memory id, and how far to scale the load tests."""

from __future__ import annotations

import uuid

import pytest

from support.backends import AsyncBackend

# Backends fast enough for the full load tests on two shared cores; the others run a quarter of them.
FULL_SCALE = {"memory", "redis", "redis_cluster"}


@pytest.fixture
def memory_id() -> str:
    """A memory id no other test uses."""
    return f"aio-{uuid.uuid4().hex}"


@pytest.fixture
def scale(async_backend: AsyncBackend) -> float:
    """1.0 for backends that run the full load tests, 0.25 for the slower ones."""
    return 1.0 if async_backend.name in FULL_SCALE else 0.25
