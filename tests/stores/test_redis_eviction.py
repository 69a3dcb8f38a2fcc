"""Eviction on a private server under maxmemory: a memory that lost one of its two keys is reported as
corrupted, never read as empty (operators should run ``maxmemory-policy noeviction``; see the README)."""

from __future__ import annotations

import pytest

from chatmemory import CorruptedMemoryError, UserMessage
from chatmemory.stores.redis import RedisChatMemoryStore
from support.backends.redis import private_server

pytestmark = pytest.mark.redis

MEMORIES = 3000


@pytest.mark.parametrize(("policy", "ttl"), [("allkeys-lru", None), ("volatile-lru", 3600)])
def test_a_half_evicted_memory_is_never_read_as_empty(policy: str, ttl: int | None) -> None:
    with private_server("--maxmemory", "3mb", "--maxmemory-policy", policy) as client:
        store = RedisChatMemoryStore(client, ttl=ttl, snapshot_cache_size=0)
        windows = {f"m{n}": [UserMessage(f"{n} {turn} " + "x" * 300) for turn in range(3)] for n in range(MEMORIES)}
        for memory_id, window in windows.items():
            store.update_messages(memory_id, window)
        counts = {"whole": 0, "gone": 0, "corrupted": 0}
        for memory_id, window in windows.items():
            try:
                stored = store.get_messages(memory_id)
            except CorruptedMemoryError:
                counts["corrupted"] += 1
                continue
            if stored == window:
                counts["whole"] += 1
            else:
                # Empty is only right when both keys went: the memory expired whole, as with a ttl.
                assert stored == [] and client.exists(*store.keys_of(memory_id)) == 0, memory_id
                counts["gone"] += 1
        print(policy, counts)
        assert counts["corrupted"] > 0 and counts["whole"] > 0, counts  # the run did split memories
