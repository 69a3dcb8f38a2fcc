"""Fixtures that several store test modules share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.recipes import SHARED_BETWEEN_PROCESSES, Recipe, recipe
from support.tcp_proxy import TcpProxy

_MARKS = {"langchain4j_redis": "redis"}


@pytest.fixture(
    params=[pytest.param(n, id=n, marks=getattr(pytest.mark, _MARKS.get(n, n))) for n in SHARED_BETWEEN_PROCESSES]
)
def peer_recipe(request: pytest.FixtureRequest) -> Iterator[Recipe]:
    """A fresh namespace of each backend a peer can share (see ``support/peers.py``), its tables made."""
    made = recipe(request.param)
    made.open().close()
    yield made
    made.cleanup()


@pytest.fixture(scope="module")
def redis_direct() -> Iterator[object]:
    """A plain client straight to the test Redis server (for setting up and inspecting keys)."""
    from chatmemory.stores.redis import Redis
    from support.backends.redis import redis_url

    client = Redis.from_url(redis_url())
    yield client
    client.close()


@pytest.fixture
def redis_proxy(redis_direct: object) -> Iterator[TcpProxy]:
    """A loopback TCP proxy in front of the test Redis server that can cut connections at chosen points."""
    kwargs = redis_direct.connection_pool.connection_kwargs  # type: ignore[attr-defined]
    with TcpProxy(kwargs.get("host", "127.0.0.1"), kwargs.get("port", 6379)) as started:
        yield started
