"""Fixtures that several store test modules share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.tcp_proxy import TcpProxy


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
