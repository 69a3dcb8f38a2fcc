"""Bytes on the wire per steady-state turn do not grow with the window (counted by a loopback redis_proxy).

A turn of a window memory is a load and a save. With the store's snapshot cache both are constant-size
in the window: the load sends the cached version and gets "unchanged" back, the save sends the new
message and how many elements to drop. The same count without the cache shows the test can fail.
"""

from __future__ import annotations

import pytest

from chatmemory import MessageWindowChatMemory, SystemMessage, UserMessage
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.redis import Redis, RedisChatMemoryStore
from support.backends.redis import drop_prefix, fresh_prefix
from support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.redis

TURNS = 40


def _per_turn(
    redis_proxy: TcpProxy, redis_direct: Redis, window: int, *, system_first: bool, snapshot_cache_size: int
) -> tuple[int, int]:
    """Mean bytes (client -> server, server -> client) per add once the window is full."""
    prefix = fresh_prefix()
    database = redis_direct.connection_pool.connection_kwargs.get("db", 0)
    client = Redis(host=redis_proxy.host, port=redis_proxy.port, db=database)
    store = RedisChatMemoryStore(client, key_prefix=prefix, snapshot_cache_size=snapshot_cache_size)
    memory = MessageWindowChatMemory(
        "m", store=store, max_messages=window, always_keep_system_message_first=system_first
    )
    try:
        if system_first:
            memory.add(SystemMessage("You are terse."))
        for turn in range(window + 5):
            memory.add(UserMessage(f"warm-up turn {turn:06d}"))
        redis_proxy.reset_counters()
        for turn in range(TURNS):
            memory.add(UserMessage(f"steady turn {turn:06d}"))
        assert len(memory.messages()) == window
        if system_first:
            assert memory.messages()[0] == SystemMessage("You are terse.")
        return redis_proxy.bytes_up // TURNS, redis_proxy.bytes_down // TURNS
    finally:
        client.close()
        drop_prefix(redis_direct, prefix)


@pytest.mark.parametrize("system_first", [False, True], ids=["head-trim", "behind-system-message"])
def test_bytes_per_turn_are_flat_in_the_window(redis_proxy: TcpProxy, redis_direct: Redis, system_first: bool) -> None:
    up_20, down_20 = _per_turn(redis_proxy, redis_direct, 20, system_first=system_first, snapshot_cache_size=1024)
    up_200, down_200 = _per_turn(redis_proxy, redis_direct, 200, system_first=system_first, snapshot_cache_size=1024)
    # Only the digits of a few counts (old length, span) may differ between the two windows.
    assert up_200 - up_20 <= 8, (up_20, up_200)
    assert down_200 - down_20 <= 8, (down_20, down_200)
    # And a turn (two commands, with their keys and script hash) sends less than even the small window.
    window_20 = 20 * len(dumps_message(UserMessage("steady turn 000000")))
    assert up_20 < window_20 / 2, (up_20, window_20)


def test_without_the_snapshot_cache_bytes_grow_with_the_window(redis_proxy: TcpProxy, redis_direct: Redis) -> None:
    up_20, down_20 = _per_turn(redis_proxy, redis_direct, 20, system_first=False, snapshot_cache_size=0)
    up_200, down_200 = _per_turn(redis_proxy, redis_direct, 200, system_first=False, snapshot_cache_size=0)
    assert up_200 > 5 * up_20 and down_200 > 5 * down_20
