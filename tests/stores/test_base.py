"""The pieces every store shares: the LRU, the snapshot cache, the version rule, retries, options."""

from __future__ import annotations

import dataclasses
import time

import pytest

from chatmemory.core.lru import LRU
from chatmemory.stores.base import (
    RetryPolicy,
    SnapshotCache,
    next_version,
    validate_prefix,
    validate_snapshot_cache_size,
    version_clock,
)


@dataclasses.dataclass(frozen=True)
class State:
    version: int
    incarnation: int


def test_lru_drops_the_least_recently_used() -> None:
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recent
    lru.put("c", 3)
    assert lru.get("b") is None
    assert (lru.get("a"), lru.get("c"), len(lru)) == (1, 3, 2)


def test_lru_of_size_zero_keeps_nothing_and_none_keeps_all() -> None:
    empty: LRU[str, int] = LRU(0)
    empty.put("a", 1)
    assert empty.get_or_create("b", lambda: 2) == 2
    assert len(empty) == 0
    unbounded: LRU[int, int] = LRU(None)
    for key in range(1000):
        unbounded.put(key, key)
    assert len(unbounded) == 1000


def test_lru_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        LRU(-1)
    with pytest.raises(TypeError):
        LRU(True)


def test_snapshot_cache_keeps_the_newest_state_of_an_incarnation() -> None:
    cache: SnapshotCache[State] = SnapshotCache(8)
    cache.put("m", State(5, 1))
    cache.put("m", State(3, 1))  # an older write of the same incarnation finishing late
    assert cache.get("m") == State(5, 1)
    cache.put("m", State(2, 9))  # another incarnation replaces whatever was there
    assert cache.get("m") == State(2, 9)
    cache.forget("m")
    assert cache.get("m") is None


def test_snapshot_cache_is_bounded_and_drops_the_least_recently_used() -> None:
    cache: SnapshotCache[State] = SnapshotCache(2)
    cache.put("a", State(1, 1))
    cache.put("b", State(1, 1))
    assert cache.get("a") == State(1, 1)  # "a" is now the most recent
    cache.put("c", State(1, 1))
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == (State(1, 1), None, State(1, 1), 2)
    nothing: SnapshotCache[State] = SnapshotCache(0)
    nothing.put("a", State(1, 1))
    assert (nothing.get("a"), len(nothing)) == (None, 0)


def test_snapshot_cache_size_is_validated_at_construction() -> None:
    with pytest.raises(ValueError, match="snapshot_cache_size must be >= 0"):
        SnapshotCache(-1)
    with pytest.raises(TypeError, match="snapshot_cache_size must be an int"):
        validate_snapshot_cache_size("8")  # type: ignore[arg-type]


def test_versions_grow_and_follow_the_clock() -> None:
    before = version_clock()
    assert next_version(0) >= before
    far_ahead = before + 10**12
    assert next_version(far_ahead) == far_ahead + 1
    assert next_version(0, clock=42) == 42


def test_retry_policy_backs_off_within_its_budget() -> None:
    attempts = RetryPolicy(budget=0.05, base_delay=0.001, max_delay=0.004).start()
    started = time.monotonic()
    delays = []
    while (delay := attempts.backoff()) is not None:
        assert 0 <= delay <= 0.004
        delays.append(delay)
        time.sleep(delay)
    assert time.monotonic() - started < 0.5
    assert attempts.count == len(delays) + 1 > 1


@pytest.mark.parametrize("field", ["budget", "base_delay", "max_delay"])
@pytest.mark.parametrize("value", [0, -1, float("inf"), float("nan"), True])
def test_retry_policy_refuses_bad_values(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**{field: value})


def test_prefixes_must_be_text() -> None:
    assert validate_prefix("key_prefix", "") == ""
    with pytest.raises(TypeError, match="key_prefix must be a str"):
        validate_prefix("key_prefix", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="surrogate"):
        validate_prefix("table_prefix", "\ud800")
